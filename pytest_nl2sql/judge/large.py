"""Comparing results too big to hold in memory (issue 11): both results are read as streams,
as often as needed, and compared through strong hashes, in memory that does not grow with the
row count. The verdict is the one `compare.compare_results` gives (the property tests hold it
to that), and the `Comparison` it returns is the same type, so failure texts and reports work
unchanged.

Every value is read through `equality.normalise_value` (with `case_sensitive` and
`strip_whitespace`), encoded canonically and hashed with blake2b (128 bits; never Python's
`hash()`, salted per process). A row's hash is the blake2b of its values' hashes in the order
a column pairing gives. Then:

* Pass 1, each side: row count; per column a multiset fingerprint (count and sum of its value
  hashes), a vector digest (all its value hashes in order) and a sketch (its 64 smallest
  distinct value hashes: how alike two columns are, for the diff's pairing); the rows' multiset
  fingerprint (count and sum mod 2**128 of the row hashes, in 4096 buckets); the first rows, to
  show. The predicted side's row hashes are taken with its columns as they come (the usual
  pairing), so a right prediction needs this one pass per side.
* Column pairing: a gold column may pair with a predicted column of the same multiset
  fingerprint; predicted columns of equal vectors are interchangeable (only one pairing of them
  is tried), and so are gold columns of equal vectors. Pairings are tried, up to
  `PAIRINGS_PER_PASS` per pass over the prediction, until one gives the gold's row multiset, or
  `PAIRING_WORK` row-pairings are spent (then the mismatch says the search gave up, as
  `compare.py`'s does on constructed worst cases). In order: a pairing of equal column vectors
  is the match, with no further pass.
* A mismatch: the buckets whose count or sum differ hold every differing row. A pass over each
  side counts the row hashes of those buckets (at most `ROUND_ROWS` rows); what is left on each
  side are the missing and extra rows (multiset difference, exact), of which the first
  `DIFF_CAP` are collected with their values. When the differing buckets hold more rows than
  that, the buckets that fit are compared exactly and the counts of the others estimated from
  them (the `detail` says so). In order, the first differing position is found by narrowing:
  each pass splits the window into `FANOUT` chunk digests, until a window of `LEAF` rows is
  compared row by row.

Unsupported (`unsupported()` says which, `compare_large` raises `Unsupported`): tolerances
(`abs_tol`, `rel_tol`: values within a tolerance do not hash alike), and the modes ``set`` (the
distinct rows of a result cannot be found in bounded memory), ``subset``, ``columns`` and
``spider`` (Python equality over raw values). The caller compares such a case in memory or
reports it as an error.

Streams are opened one at a time, never two at once (a SQLite or DuckDB worker serves one query
at a time): an "opener" is a callable that runs the query again and returns a context manager
giving a `base.BatchStream` (`lambda: engine.stream(sql, limits)`).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pytest_nl2sql.engines.base import (
    BatchStream,
    ConnectionLost,
    EngineError,
    Limits,
    QueryResult,
)
from pytest_nl2sql.judge.compare import DEFAULT_OPTIONS, DIFF_CAP, CompareOptions, Comparison, Mode, greedy_pairing
from pytest_nl2sql.judge.equality import NAN, normalise_value
from pytest_nl2sql.vocab import Reason, Verdict

if TYPE_CHECKING:
    from pytest_nl2sql.engines.base import StreamingEngine
    from pytest_nl2sql.judge.execute import Judgement

Opener = Callable[[], AbstractContextManager[BatchStream]]

ROW_BUCKETS = 4096  # buckets of row hashes: a mismatch re-reads only the rows of differing ones
SKETCH = 64  # smallest distinct value hashes kept per column: how alike two columns are, for a diff
ROUND_ROWS = 50_000  # rows of differing buckets compared exactly (a Counter of their hashes)
PAIRINGS_PER_PASS = 16  # column pairings tested in one pass over the prediction
PAIRING_WORK = 20_000_000  # rows x pairings the pairing search may test (at least MIN_PAIRINGS)
MIN_PAIRINGS = 64
FANOUT = 1024  # chunks per narrowing pass of the ordered first-difference search
LEAF = 1024  # a window this small is compared row by row
SAMPLE_ROWS = DIFF_CAP  # first rows kept of each side, to show
VALUE_CACHE = 1 << 16  # value hashes remembered (repeated values cost a lookup), then forgotten
CACHED_LENGTH = 64  # longer strings and blobs are hashed every time, never kept

_DIGEST = 16
_MASK = (1 << 128) - 1


class Unsupported(ValueError):
    """These comparison options cannot be applied to streamed results; `str()` says which."""


def unsupported(options: CompareOptions) -> str | None:
    """Why `options` cannot be compared streamed, or None when they can."""
    if options.mode is not Mode.EXEC:
        return (f"compare mode {options.mode.value!r} is not supported for results too large to hold in"
                " memory (only 'exec' is)")
    if options.has_tolerance:
        return ("abs_tol / rel_tol are not supported for results too large to hold in memory (values"
                " within a tolerance do not hash alike)")
    return None


@dataclass(frozen=True)
class ResultSummary:
    """One side of a large comparison: its columns, row count, and first rows (to show)."""

    columns: tuple[str, ...]
    rows: int
    sample: tuple[tuple[Any, ...], ...]
    seconds: float  # wall time of its first pass (query and hashing)


@dataclass(frozen=True)
class LargeComparison:
    """`comparison` as `compare_results` would give it, and what else a report may show."""

    comparison: Comparison
    gold: ResultSummary
    predicted: ResultSummary
    passes: int  # streams read, both sides together
    first_difference_rows: tuple[tuple[Any, ...] | None, tuple[Any, ...] | None] | None = None
    """In order: (gold row, predicted row in gold column order) at `first_order_difference`."""


# ----------------------------------------------------------------------------- hashing

def _encode(value: Any) -> bytes:
    """A normalised value as bytes: equal exactly for the values `normalise_value` makes equal."""
    kind = type(value)
    if kind is str:
        return b"s" + value.encode("utf-8", "surrogatepass")
    if kind is int:
        return b"i" + value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    if value is None:
        return b"N"
    if kind is float:
        return b"f" + struct.pack("<d", value)
    if kind is bytes:
        return b"b" + value
    if value is NAN:
        return b"n"
    if isinstance(value, tuple):
        return b"t" + b"".join(len(part).to_bytes(8, "little") + part for part in map(_encode, value))
    if isinstance(value, bool):
        return _encode(int(value))
    if isinstance(value, int):
        return _encode(int(value))
    if isinstance(value, str):
        return _encode(str(value))
    return b"o" + repr(value).encode("utf-8", "surrogatepass")


class _Hasher:
    """Value hashes under one comparison's options. A column of one type (and NULLs) is looked
    up in that type's cache in one C-level `map`; values are cached by type, since 2**60 ==
    float(2**60) yet they normalise apart. Caches are cleared when full, long strings never kept."""

    def __init__(self, options: CompareOptions) -> None:
        self.case_sensitive = options.case_sensitive
        self.strip = options.strip_whitespace
        self._caches: dict[type, dict[Any, bytes]] = {}

    def digest(self, value: Any) -> bytes:
        normalised = normalise_value(value, self.case_sensitive, self.strip)
        return hashlib.blake2b(_encode(normalised), digest_size=_DIGEST).digest()

    def columns(self, batch: Sequence[Sequence[Any]]) -> list[list[bytes]]:
        """The value hashes of a batch, column by column."""
        return [self._column(values) for values in zip(*batch)]

    def _column(self, values: tuple[Any, ...]) -> list[bytes]:
        kinds = set(map(type, values))
        if kinds == {int}:  # the commonest column: normalised as it is, hashed without a lookup
            blake = hashlib.blake2b
            return [blake(b"i" + v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True),
                          digest_size=_DIGEST).digest() for v in values]
        kinds.discard(type(None))
        if len(kinds) > 1:
            return [self._cached(value) for value in values]
        kind = kinds.pop() if kinds else type(None)
        cache = self._cache(kind)
        found = list(map(cache.get, values))
        if None in found:
            digest, keep = self.digest, kind is not str and kind is not bytes
            for index, known in enumerate(found):
                if known is None:
                    value = values[index]
                    found[index] = computed = digest(value)
                    if keep or len(value) <= CACHED_LENGTH:
                        if len(cache) >= VALUE_CACHE:
                            cache.clear()
                            cache[None] = self.digest(None)
                        cache[value] = computed
        return found

    def _cache(self, kind: type) -> dict[Any, bytes]:
        cache = self._caches.get(kind)
        if cache is None:
            cache = self._caches[kind] = {None: self.digest(None)}  # NULL equals no value of any type
        return cache

    def _cached(self, value: Any) -> bytes:
        kind = type(value)
        cache = self._cache(kind)
        digest = cache.get(value)
        if digest is None:
            digest = self.digest(value)
            if (kind is not str and kind is not bytes) or len(value) <= CACHED_LENGTH:
                if len(cache) >= VALUE_CACHE:
                    cache.clear()
                    cache[None] = self.digest(None)
                cache[value] = digest
        return digest


_EMPTY_ROW = hashlib.blake2b(b"", digest_size=_DIGEST).digest()


def _row_hashes(columns: list[list[bytes]], pairing: Sequence[int] | None, count: int) -> list[bytes]:
    """Each row's hash: blake2b of its value hashes in `pairing` order (None: as they come)."""
    if not columns:
        return [_EMPTY_ROW] * count
    chosen = columns if pairing is None else [columns[j] for j in pairing]
    blake, join = hashlib.blake2b, b"".join
    return [blake(join(row), digest_size=_DIGEST).digest() for row in zip(*chosen)]


_as_int = partial(int.from_bytes, byteorder="little")  # a digest as a number (a C call, no frame)


# ----------------------------------------------------------------------------- one pass

class _RowStats:
    """The rows' multiset fingerprint under one pairing: count and sum per bucket."""

    def __init__(self) -> None:
        self.counts = [0] * ROW_BUCKETS
        self.sums = [0] * ROW_BUCKETS

    def add_all(self, hashes: list[bytes]) -> None:
        counts, sums, low = self.counts, self.sums, ROW_BUCKETS - 1
        for value in map(_as_int, hashes):
            counts[value & low] += 1
            sums[value & low] += value

    def key(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return tuple(self.counts), tuple(s & _MASK for s in self.sums)

    def differing(self, other: "_RowStats") -> list[int]:
        return [b for b in range(ROW_BUCKETS)
                if self.counts[b] != other.counts[b] or (self.sums[b] - other.sums[b]) & _MASK]


@dataclass(frozen=True)
class _Pass1:
    columns: tuple[str, ...]
    rows: int
    column_sums: tuple[int, ...]  # per column: sum of its value hashes mod 2**128 (with `rows`, its multiset)
    vectors: tuple[bytes, ...]  # per column: digest of its value hashes in order
    sketches: tuple[frozenset[bytes], ...]  # per column: its `SKETCH` smallest distinct value hashes
    row_stats: _RowStats  # under the identity pairing
    sample: tuple[tuple[Any, ...], ...]
    seconds: float

    def column_key(self, column: int) -> tuple[int, int]:
        return self.rows, self.column_sums[column]


class _Reader:
    """Runs the passes over the two sides and counts them."""

    def __init__(self, gold: Opener, pred: Opener, options: CompareOptions) -> None:
        self.gold, self.pred = gold, pred
        self.hasher = _Hasher(options)
        self.passes = 0

    @contextmanager
    def _open(self, opener: Opener) -> Iterator[BatchStream]:
        self.passes += 1
        with opener() as stream:
            yield stream

    def first_pass(self, opener: Opener) -> _Pass1:
        started = time.perf_counter()
        hasher = self.hasher
        with self._open(opener) as stream:
            columns = stream.columns
            width = len(columns)
            sums = [0] * width
            vectors = [hashlib.blake2b(digest_size=_DIGEST) for _ in range(width)]
            sketches: list[list[bytes]] = [[] for _ in range(width)]
            stats = _RowStats()
            sample: list[tuple[Any, ...]] = []
            rows = 0
            for batch in stream:
                if len(sample) < SAMPLE_ROWS:
                    sample.extend(tuple(row) for row in batch[: SAMPLE_ROWS - len(sample)])
                rows += len(batch)
                digests = hasher.columns(batch)
                stats.add_all(_row_hashes(digests, None, len(batch)))
                for column, column_digests in enumerate(digests):
                    vectors[column].update(b"".join(column_digests))
                    sums[column] += sum(map(_as_int, column_digests))
                    sketches[column] = heapq.nsmallest(SKETCH, set(column_digests).union(sketches[column]))
        return _Pass1(
            columns, rows, tuple(s & _MASK for s in sums), tuple(v.digest() for v in vectors),
            tuple(frozenset(k) for k in sketches), stats, tuple(sample), time.perf_counter() - started,
        )

    def row_stats(self, opener: Opener, pairings: Sequence[Sequence[int] | None]) -> list[_RowStats]:
        """The rows' multiset fingerprints under each pairing (None: the columns as they come)."""
        stats = [_RowStats() for _ in pairings]
        with self._open(opener) as stream:
            for batch in stream:
                digests = self.hasher.columns(batch)
                for pairing, acc in zip(pairings, stats):
                    acc.add_all(_row_hashes(digests, pairing, len(batch)))
        return stats

    def rows_in_buckets(self, opener: Opener, pairing: Sequence[int] | None, buckets: frozenset[int]
                        ) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """(row hash, row in pairing order) of every row whose hash falls in `buckets`."""
        low = ROW_BUCKETS - 1
        with self._open(opener) as stream:
            for batch in stream:
                hashes = map(_as_int, _row_hashes(self.hasher.columns(batch), pairing, len(batch)))
                for value, row in zip(hashes, batch):
                    if value & low in buckets:
                        yield value, (tuple(row) if pairing is None else tuple(row[j] for j in pairing))

    def chunk_digests(self, opener: Opener, pairing: Sequence[int] | None, lo: int, hi: int, size: int
                      ) -> list[bytes]:
        """Digests of the rows [lo, hi) in chunks of `size` rows (the stream is closed at `hi`)."""
        chunks: list[bytes] = []
        current = hashlib.blake2b(digest_size=_DIGEST)
        filled = 0
        for row_hash, _ in self.window(opener, pairing, lo, hi):  # the generator returns (and closes) at `hi`
            current.update(row_hash)
            filled += 1
            if filled == size:
                chunks.append(current.digest())
                current, filled = hashlib.blake2b(digest_size=_DIGEST), 0
        if filled:
            chunks.append(current.digest())
        return chunks

    def window(self, opener: Opener, pairing: Sequence[int] | None, lo: int, hi: int
               ) -> Iterator[tuple[bytes, tuple[Any, ...]]]:
        """(row hash, row in pairing order) of the rows [lo, hi); the stream is closed at `hi`."""
        position = 0
        with self._open(opener) as stream:
            for batch in stream:
                end = position + len(batch)
                if end > lo:
                    part = batch[max(lo, position) - position : min(hi, end) - position]
                    hashes = _row_hashes(self.hasher.columns(part), pairing, len(part))
                    for row_hash, row in zip(hashes, part):
                        yield row_hash, (tuple(row) if pairing is None else tuple(row[j] for j in pairing))
                position = end
                if position >= hi:
                    return


# ----------------------------------------------------------------------------- the comparison

def compare_large(gold: Opener, pred: Opener, *, order_matters: bool, options: CompareOptions | None = None
                  ) -> LargeComparison:
    """Compare two results given as re-runnable streams, in bounded memory (module docstring).

    Raises `Unsupported` for options that cannot be hashed (`unsupported`), and whatever the
    streams raise (`EngineError`s of either side)."""
    opts = options or DEFAULT_OPTIONS
    why = unsupported(opts)
    if why is not None:
        raise Unsupported(why)
    reader = _Reader(gold, pred, opts)
    g = reader.first_pass(gold)
    p = reader.first_pass(pred)
    comparison, first_rows = _Judge(reader, g, p, order_matters).run()
    return LargeComparison(
        comparison,
        ResultSummary(g.columns, g.rows, g.sample, g.seconds),
        ResultSummary(p.columns, p.rows, p.sample, p.seconds),
        reader.passes,
        first_rows,
    )


def _mismatch(reason: Reason, detail: str, **fields: Any) -> Comparison:
    return Comparison(match=False, reason=reason.value, detail=detail, **fields)


class _Judge:
    """The rules of `compare_results` (exec mode), in its order, over the first passes."""

    def __init__(self, reader: _Reader, gold: _Pass1, pred: _Pass1, order_matters: bool) -> None:
        self.reader, self.g, self.p = reader, gold, pred
        self.ordered = order_matters
        self.width = len(gold.columns)
        self.first_rows: tuple[Any, Any] | None = None

    def run(self) -> tuple[Comparison, tuple[Any, Any] | None]:
        return self._run(), self.first_rows

    def _run(self) -> Comparison:
        g, p = self.g, self.p
        gold_width, pred_width = len(g.columns), len(p.columns)
        if not g.rows and not p.rows:
            if gold_width != pred_width:
                return _mismatch(Reason.COLUMN_COUNT, f"both results are empty, but with {gold_width} and {pred_width} columns")
            return Comparison(match=True)
        if g.rows != p.rows:
            return self._with_diff(_mismatch(Reason.ROW_COUNT, f"expected {g.rows} rows, got {p.rows}"))
        if gold_width != pred_width:
            return _mismatch(Reason.COLUMN_COUNT, f"expected {gold_width} columns, got {pred_width}")
        if self.ordered:
            pairing = self._vector_pairing()
            if pairing is not None:
                return Comparison(match=True, pairing=pairing)
        pairing, gave_up = self._search_pairing()
        if pairing is not None and not self.ordered:
            return Comparison(match=True, pairing=pairing)
        if pairing is not None:
            first = self._first_difference(pairing)
            return Comparison(match=False, reason=Reason.ORDER.value, pairing=pairing, first_order_difference=first,
                              detail=f"same rows in another order (first difference at row {first})")
        detail = "no column pairing makes the rows equal"
        if gave_up:
            detail = "the column-permutation search gave up (too many columns holding the same values)"
        return self._with_diff(_mismatch(Reason.VALUES, detail))

    # -- pairing -----------------------------------------------------------------------------------
    def _vector_pairing(self) -> tuple[int, ...] | None:
        """In order: each gold column paired with a predicted column of the same vector."""
        free: dict[bytes, list[int]] = {}
        for j, vector in enumerate(self.p.vectors):
            free.setdefault(vector, []).append(j)
        pairing = []
        for vector in self.g.vectors:
            left = free.get(vector)
            if not left:
                return None
            pairing.append(left.pop(0))
        return tuple(pairing)

    def _candidate_pairings(self) -> Iterator[tuple[int, ...]]:
        """Pairings whose columns have equal multisets, one per class of interchangeable columns
        (equal vectors on either side), the identity first when it is one."""
        g, p, width = self.g, self.p, self.width
        keys = [p.column_key(j) for j in range(width)]
        candidates = [[j for j in range(width) if keys[j] == g.column_key(i)] for i in range(width)]
        if any(not c for c in candidates):
            return
        if all(i in candidates[i] for i in range(width)):
            yield tuple(range(width))
        # a predicted column may be chosen only if no earlier column of its vector is unused;
        # gold columns of one vector take their partners in increasing order
        earlier_same_pred = [[k for k in range(j) if p.vectors[k] == p.vectors[j]] for j in range(width)]
        earlier_same_gold = [max((k for k in range(i) if g.vectors[k] == g.vectors[i]), default=-1) for i in range(width)]
        assignment = [-1] * width
        used = [False] * width

        def extend(i: int) -> Iterator[tuple[int, ...]]:
            if i == width:
                if assignment != list(range(width)):
                    yield tuple(assignment)
                return
            floor = assignment[earlier_same_gold[i]] if earlier_same_gold[i] >= 0 else -1
            for j in candidates[i]:
                if used[j] or j <= floor or any(not used[k] for k in earlier_same_pred[j]):
                    continue
                used[j], assignment[i] = True, j
                yield from extend(i + 1)
                used[j], assignment[i] = False, -1

        yield from extend(0)

    def _search_pairing(self) -> tuple[tuple[int, ...] | None, bool]:
        """The first candidate pairing under which the predicted rows have the gold's multiset."""
        target = self.g.row_stats.key()
        budget = max(MIN_PAIRINGS, PAIRING_WORK // max(self.g.rows, 1))
        pending: list[tuple[int, ...]] = []
        identity = tuple(range(self.width))
        for pairing in self._candidate_pairings():
            if pairing == identity:
                if self.p.row_stats.key() == target:
                    return pairing, False
                continue
            budget -= 1
            if budget < 0:
                return None, True
            pending.append(pairing)
            if len(pending) == PAIRINGS_PER_PASS:
                found = self._test(pending, target)
                if found is not None:
                    return found, False
                pending = []
        if pending:
            return self._test(pending, target), False
        return None, False

    def _test(self, pairings: list[tuple[int, ...]], target: Any) -> tuple[int, ...] | None:
        stats = self.reader.row_stats(self.reader.pred, pairings)
        return next((pairing for pairing, acc in zip(pairings, stats) if acc.key() == target), None)

    def _best_effort_pairing(self) -> list[int]:
        """Pair columns greedily by how many of their value buckets agree (the reader's pairing)."""
        g, p, width = self.g, self.p, self.width
        def score(i: int, j: int) -> int:  # equal multisets first, then the estimated share of common values
            if g.column_key(i) == p.column_key(j):
                return SKETCH + 1
            union = heapq.nsmallest(SKETCH, g.sketches[i] | p.sketches[j])
            return sum(1 for digest in union if digest in g.sketches[i] and digest in p.sketches[j])
        return greedy_pairing(((-score(i, j), i, j) for i in range(width) for j in range(width)), width)

    # -- diff --------------------------------------------------------------------------------------
    def _with_diff(self, base: Comparison) -> Comparison:
        g, p = self.g, self.p
        if not g.rows or not p.rows:  # one side is empty: everything on the other differs
            return Comparison(match=False, reason=base.reason, missing=g.sample[:DIFF_CAP], extra=p.sample[:DIFF_CAP],
                              missing_count=g.rows, extra_count=p.rows, detail=base.detail)
        if len(g.columns) != len(p.columns):
            return base
        pairing = self._best_effort_pairing()
        identity = pairing == list(range(self.width))
        pred_pairing = None if identity else pairing
        pred_stats = p.row_stats if identity else self.reader.row_stats(self.reader.pred, [pairing])[0]
        missing, extra, missing_count, extra_count, note = self._difference(pred_stats, pred_pairing)
        first = None
        if self.ordered:
            first = self._first_difference(tuple(pairing))
        detail = base.detail or ""
        if missing_count or extra_count:
            detail += f" ({missing_count} gold rows missing, {extra_count} unexpected rows{note})"
        return Comparison(
            match=False, reason=base.reason, pairing=tuple(pairing), missing=tuple(missing), extra=tuple(extra),
            missing_count=missing_count, extra_count=extra_count, first_order_difference=first, detail=detail,
        )

    def _difference(self, pred_stats: _RowStats, pairing: list[int] | None
                    ) -> tuple[list[tuple], list[tuple], int, int, str]:
        """Missing and extra rows (the first DIFF_CAP of each) and their counts, from the rows of
        the buckets that differ; exact for the buckets that fit in `ROUND_ROWS` rows."""
        gold_stats = self.g.row_stats
        differing = gold_stats.differing(pred_stats)
        chosen: list[int] = []
        held = 0
        for bucket in differing:
            size = max(gold_stats.counts[bucket], pred_stats.counts[bucket])
            if chosen and held + size > ROUND_ROWS:
                break
            chosen.append(bucket)
            held += size
        buckets = frozenset(chosen)
        reader = self.reader
        left: Counter[int] = Counter(h for h, _ in reader.rows_in_buckets(reader.gold, None, buckets))
        extra: list[tuple] = []
        extra_count = 0
        for value, row in reader.rows_in_buckets(reader.pred, pairing, buckets):
            if left[value] > 0:
                left[value] -= 1
            else:
                extra_count += 1
                if len(extra) < DIFF_CAP:
                    extra.append(row)
        missing_count = sum(n for n in left.values() if n > 0)
        missing: list[tuple] = []
        if missing_count:
            wanted = +left
            with closing(reader.rows_in_buckets(reader.gold, None, buckets)) as rows:  # closed at the break
                for value, row in rows:
                    if wanted[value] > 0:
                        wanted[value] -= 1
                        missing.append(row)
                        if len(missing) >= DIFF_CAP:
                            break
        rest = [b for b in differing if b not in buckets]
        if not rest:
            return missing, extra, missing_count, extra_count, ""
        # the buckets left out hold a random share of the differing rows (buckets are by hash):
        # extrapolate from the ones compared, within what their counts allow
        gold_seen = sum(gold_stats.counts[b] for b in chosen) or 1
        pred_seen = sum(pred_stats.counts[b] for b in chosen) or 1
        gold_rest = sum(gold_stats.counts[b] for b in rest)
        pred_rest = sum(pred_stats.counts[b] for b in rest)
        low_missing = sum(max(0, gold_stats.counts[b] - pred_stats.counts[b]) for b in rest)
        low_extra = sum(max(0, pred_stats.counts[b] - gold_stats.counts[b]) for b in rest)
        missing_count += min(gold_rest, max(low_missing, round(missing_count / gold_seen * gold_rest)))
        extra_count += min(pred_rest, max(low_extra, round(extra_count / pred_seen * pred_rest)))
        note = (f"; counts estimated: {len(chosen)} of {len(differing)} differing row buckets compared exactly,"
                " the rest extrapolated")
        return missing, extra, missing_count, extra_count, note

    # -- order -------------------------------------------------------------------------------------
    def _first_difference(self, pairing: tuple[int, ...]) -> int | None:
        """The first position where the rows differ under `pairing` (or where the shorter ends)."""
        reader = self.reader
        pred_pairing = None if pairing == tuple(range(self.width)) else pairing
        common = min(self.g.rows, self.p.rows)
        end = None if self.g.rows == self.p.rows else common
        lo, hi = 0, common
        while hi - lo > LEAF:
            size = math.ceil((hi - lo) / FANOUT)
            gold_chunks = reader.chunk_digests(reader.gold, None, lo, hi, size)
            pred_chunks = reader.chunk_digests(reader.pred, pred_pairing, lo, hi, size)
            chunk = next((k for k, (a, b) in enumerate(zip(gold_chunks, pred_chunks)) if a != b), None)
            if chunk is None:
                return end
            lo, hi = lo + chunk * size, min(hi, lo + (chunk + 1) * size)
        if lo >= hi:
            return end
        gold_rows = list(reader.window(reader.gold, None, lo, hi))
        pred_rows = list(reader.window(reader.pred, pred_pairing, lo, hi))
        for offset, ((a, gold_row), (b, pred_row)) in enumerate(zip(gold_rows, pred_rows)):
            if a != b:
                self.first_rows = (gold_row, pred_row)
                return lo + offset
        return end


# ----------------------------------------------------------------------------- judging

def judge_large(predicted_sql: str, gold_sql: str, engine: "StreamingEngine", limits: Limits, *,
                order_matters: bool, options: CompareOptions, in_engine: bool = True) -> "Judgement":
    """Judge a prediction against one gold query: inside the engine where it can
    (`in_engine.judge_in_engine`, unless `in_engine` is False), else by streaming both
    (`compare_large`).

    SQL as the engine runs it (transpiled, compat-rewritten by the caller). A failing gold raises
    `GoldError`; a failing prediction is its verdict (timeout, too many rows, error), as in
    `execute.judge`; `ConnectionLost` propagates; `Unsupported` options raise `Unsupported`.
    `result` is the prediction's first rows (`SAMPLE_ROWS`), `fingerprint` None."""
    from pytest_nl2sql.judge.execute import Judgement, gold_error, prediction_failed  # execute.py imports this module

    if in_engine:
        from pytest_nl2sql.judge.in_engine import judge_in_engine  # it imports this module

        judged = judge_in_engine(predicted_sql, gold_sql, engine, limits, order_matters=order_matters, options=options)
        if judged is not None:
            return judged

    @contextmanager
    def gold() -> Iterator[BatchStream]:
        try:
            with engine.stream(gold_sql, limits, trusted=True) as stream:
                yield stream
        except ConnectionLost:
            raise
        except EngineError as e:
            raise gold_error("gold query", e) from e

    @contextmanager
    def pred() -> Iterator[BatchStream]:
        try:
            with engine.stream(predicted_sql, limits) as stream:
                yield stream
        except ConnectionLost:
            raise
        except EngineError as e:
            raise _PredictionFailed(e) from e

    try:
        large = compare_large(gold, pred, order_matters=order_matters, options=options)
    except _PredictionFailed as failed:
        return prediction_failed(failed.error, predicted_sql)
    comparison = large.comparison
    shown = QueryResult(large.predicted.columns, list(large.predicted.sample), large.predicted.seconds)
    verdict = Verdict.PASS if comparison.match else Verdict.MISMATCH
    return Judgement(verdict, comparison.reason, comparison, 0, shown, None, predicted_sql)


class _PredictionFailed(Exception):
    """The prediction's stream failed (carried past the comparison to become its verdict)."""

    def __init__(self, error: EngineError) -> None:
        super().__init__(str(error))
        self.error = error
