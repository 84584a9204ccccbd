"""Result comparison: does the predicted result hold the same answer as the gold one?

`compare_results(gold_rows, pred_rows, order_matters, options)` returns a frozen `Comparison` that is
truthy iff the results match, says which rule failed first (`reason`, a `verdict.Reason` value), how
the columns were paired, and which rows are missing or unexpected, so a failure can be explained.

Modes (`CompareOptions.mode`):

* ``exec`` (default) — execution match, the contract's rules: same row count and column count; one
  column permutation for all rows (column names are never looked at); rows compared as multisets
  (duplicates count) unless `order_matters`, then in sequence; NULL equals only NULL; values are
  normalised first (`normalise_value`): numbers are equal across int / float / decimal / numeric
  string (`1 == 1.0 == "1"`, `"1.50" == 1.5`, but `"abc"` stays a string), floats are compared to
  15 significant digits (so sums taken in another order still match), booleans are the numbers 0
  and 1 (SQLite has no booleans, PostgreSQL does: `count(*) > 0` must compare the same), bytes are
  bytes (never equal to text), dates and times compare as their ISO text (as SQLite stores them).
  `abs_tol` / `rel_tol` compare numbers within a tolerance (`math.isclose`), `case_sensitive=False`
  folds the case of strings, `strip_whitespace=True` strips them.
  Two empty results match, unless both column counts are known (`gold_columns` / `pred_columns`)
  and differ: `SELECT a, b` is not the answer to `SELECT a` just because no row qualifies today.
* ``spider`` — the official test-suite-sql-eval `result_eq`, for leaderboard-comparable numbers:
  values compared with Python equality (`1 == 1.0`, `"1" != 1`), the official quick-rejection test
  (`compat.official_quick_reject`), two empty results equal whatever their columns. The other
  options (tolerances, case, whitespace) are ignored. The SQL rewrites are in `compat.py`.
* ``set`` — like ``exec``, but duplicate rows are ignored (rows compared as sets; order ignored).
* ``subset`` — every gold row must appear in the prediction (as a multiset: a gold row twice needs
  two predicted copies); extra predicted rows are allowed; same column count, columns permuted;
  order ignored.
* ``columns`` — Spider 2.0's idea, with rows kept together: the gold's chosen columns (all of them,
  or those named in `condition_cols`: zero-based indexes and/or column names, matched without
  regard to case, mixed freely) must be found among the predicted columns *jointly*: for some
  choice of predicted columns (extra predicted columns are allowed; two gold columns may be found
  in the same predicted column), the predicted rows projected onto that choice equal the gold rows
  projected onto the chosen columns — as multisets, or in sequence when `order_matters` and not
  `ignore_order`. Row counts must be equal. Spider 2.0's checker matches each gold column on its
  own (sorted), so rows scrambled across columns pass it; here they do not. (Spider 2.0 uses
  `abs_tol=0.01`; set it to reproduce its tolerance.) Names need the gold's column names
  (`gold_names`); a name the gold result does not have is a `ValueError`.

Ties (`ties`, a `ties.TieGroups` of the gold, from its ORDER BY keys): in an ordered comparison
(``exec``, and ``columns`` without `ignore_order`) rows that tie on every ORDER BY key may come in
any order, so the gold's groups of tied rows are compared in sequence, each as a multiset; rows
tied with a group but cut away by the gold's LIMIT (`TieGroups.spare`) may stand in for the
group's own rows. It is the same column-permutation search, with each row labelled by its group
(a predicted row by its position) and, where a cut left spare rows, the predicted rows of a group
required to be a sub-multiset of the group's rows and spares. ``spider`` mode never uses ties.

The column permutation is found by a search that stays fast on wide and repetitive results:
per-column value multisets ("signatures") restrict each gold column's candidates; predicted columns
that are identical vectors are interchangeable, so only one of them is ever tried; and every partial
pairing must already give equal multisets of the projected rows, which rejects a wrong branch at
the first column that contradicts it. The search has a work budget: beyond it (never seen outside
constructed worst cases) the result is a mismatch whose `detail` says the search gave up.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pytest_nl2sql.judge.compat import official_quick_reject
from pytest_nl2sql.judge.equality import NAN, normalise_value
from pytest_nl2sql.judge.ties import TieGroups
from pytest_nl2sql.vocab import Reason

DIFF_CAP = 1000  # rows kept in each of `missing` / `extra`; the counts are always exact
_SEARCH_WORK = 20_000_000  # row-steps the permutation search may spend before giving up
_MIN_SEARCH_NODES = 1000  # ... but it may always try this many partial pairings
_MATCHING_CAP = 300  # largest group of rows matched pairwise when tolerances are in play


def greedy_pairing(scored: Iterable[tuple[Any, int, int]], width: int) -> list[int]:
    """Gold column i -> prediction column j, taking (score, i, j) best (lowest) score first, each
    column once: the pairing a reader would expect when no exact one exists."""
    pairing = [-1] * width
    used: set[int] = set()
    for _, i, j in sorted(scored):
        if pairing[i] == -1 and j not in used:
            pairing[i] = j
            used.add(j)
    return pairing


class Mode(str, Enum):
    EXEC = "exec"
    SPIDER = "spider"
    SET = "set"
    SUBSET = "subset"
    COLUMNS = "columns"


# `compare:` keys that belong to term-selection cases; accepted (and ignored) by `from_mapping`.
TERM_SELECTION_KEYS = frozenset({"min_precision", "min_recall"})
# `compare:` keys of the soft scores (`metrics/soft.py` reads them); accepted by `from_mapping`.
SOFT_SCORE_KEYS = frozenset({"synonyms"})


@dataclass(frozen=True)
class CompareOptions:
    """How to compare two results; the `compare:` case key. See the module docstring for modes."""

    mode: Mode = Mode.EXEC
    abs_tol: float = 0.0
    rel_tol: float = 0.0
    case_sensitive: bool = True
    strip_whitespace: bool = False
    condition_cols: tuple[int | str, ...] | None = None  # columns mode: indexes and/or names
    ignore_order: bool = False

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", Mode(self.mode))
        except ValueError:
            raise ValueError(
                f"compare option 'mode' must be one of {', '.join(m.value for m in Mode)}, not {self.mode!r}"
            ) from None
        for name in ("abs_tol", "rel_tol"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"compare option {name!r} must be a number >= 0, not {value!r}")
        for name in ("case_sensitive", "strip_whitespace", "ignore_order"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"compare option {name!r} must be true or false, not {getattr(self, name)!r}")
        if self.condition_cols is not None:
            cols = self.condition_cols
            if isinstance(cols, (str, bytes, int)) or not isinstance(cols, Iterable):
                raise ValueError(f"compare option 'condition_cols' must be a list of column indexes or names, not {cols!r}")
            cols = tuple(cols)
            for c in cols:
                if isinstance(c, str):
                    if not c.strip():
                        raise ValueError(f"compare option 'condition_cols' holds an empty column name: {cols!r}")
                elif isinstance(c, bool) or not isinstance(c, int) or c < 0:
                    raise ValueError(f"compare option 'condition_cols' must hold column indexes >= 0 or column names, not {cols!r}")
            object.__setattr__(self, "condition_cols", cols)

    @property
    def has_tolerance(self) -> bool:
        return self.abs_tol > 0 or self.rel_tol > 0

    @property
    def names_columns(self) -> bool:
        """`condition_cols` names some column (so it needs the gold's column names)."""
        return any(isinstance(c, str) for c in self.condition_cols or ())

    def chosen_columns(self, width: int, names: Sequence[str] | None = None) -> tuple[int, ...]:
        """Columns mode: the gold columns to find in the prediction, as indexes (in the order given,
        without repeats). A name matches every gold column of that name, ignoring case and outer
        whitespace; a name the gold lacks (or a name without `names`) is a ValueError that says so.
        Indexes are returned as given, even beyond `width` (the comparison reports those)."""
        if self.condition_cols is None:
            return tuple(range(width))
        folded = [str(n).strip().casefold() for n in names] if names is not None else None
        chosen: list[int] = []
        for c in self.condition_cols:
            if isinstance(c, int):
                found = [c]
            elif folded is None:
                raise ValueError(f"compare option condition_cols names column {c!r}, but the gold's column names are unknown")
            else:
                found = [i for i, n in enumerate(folded) if n == c.strip().casefold()]
                if not found:
                    shown = ", ".join(repr(str(n)) for n in names or ()) or "none"
                    raise ValueError(f"compare option condition_cols names column {c!r}, which the gold result does not have "
                                     f"(its columns: {shown})")
            chosen += [i for i in found if i not in chosen]
        return tuple(chosen)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> "CompareOptions":
        """Build options from a case's `compare:` mapping; a wrong key or value raises ValueError naming it."""
        if data is None or (isinstance(data, Mapping) and not data):
            return DEFAULT_OPTIONS if cls is CompareOptions else cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"'compare' must be a mapping of options, not {data!r}")
        known = {f for f in cls.__dataclass_fields__}
        for key in data:
            if key not in known and key not in TERM_SELECTION_KEYS and key not in SOFT_SCORE_KEYS:
                raise ValueError(f"unknown compare option {key!r} (known: {', '.join(sorted(known))})")
        return cls(**{k: v for k, v in data.items() if k in known})


DEFAULT_OPTIONS = CompareOptions()  # frozen: one instance serves every case without `compare:`


@dataclass(frozen=True)
class Comparison:
    """The outcome of a comparison; truthy iff the results match.

    `pairing[i]` is the predicted column paired with gold column i (-1: none, in ``columns`` mode);
    it is set when a pairing was found, or tried as a best effort for a mismatch. `missing` are gold
    rows absent from the prediction and `extra` predicted rows absent from the gold (multiset
    difference, both in gold column order, original values, at most `DIFF_CAP` rows each;
    `missing_count` / `extra_count` are the full counts).
    """

    match: bool
    reason: str | None = None
    pairing: tuple[int, ...] | None = None
    missing: tuple[tuple, ...] = ()
    extra: tuple[tuple, ...] = ()
    missing_count: int = 0
    extra_count: int = 0
    first_order_difference: int | None = None
    detail: str | None = None

    def __bool__(self) -> bool:
        return self.match

    def to_json(self) -> dict[str, Any]:
        """Plain data for `CaseResult.diff` (values that JSON cannot hold are left to `default=str`)."""
        return {
            "match": self.match,
            "reason": self.reason,
            "pairing": list(self.pairing) if self.pairing is not None else None,
            "missing": [list(r) for r in self.missing],
            "extra": [list(r) for r in self.extra],
            "missing_count": self.missing_count,
            "extra_count": self.extra_count,
            "first_order_difference": self.first_order_difference,
            "detail": self.detail,
        }


def _normaliser(options: CompareOptions) -> Callable[[Any], Any]:
    if options.mode is Mode.SPIDER:
        return lambda v: v
    case_sensitive, strip = options.case_sensitive, options.strip_whitespace
    if case_sensitive and not strip:
        return normalise_value  # its defaults: no wrapper to call for every value
    return lambda v: normalise_value(v, case_sensitive, strip)


def row_values_key(options: CompareOptions | None = None) -> Callable[[Sequence[Any]], tuple]:
    """A row's values as `options` compare them, sorted: a key that no column pairing changes (two
    rows some pairing makes equal have the same key; it may also join rows that no single pairing
    does). For callers that match rows one by one, before a comparison decides."""
    norm = _normaliser(options or DEFAULT_OPTIONS)
    return lambda row: tuple(sorted(_value_sort_key(norm(v)) for v in row))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _NumberSlot:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<number>"


_NUM = _NumberSlot()  # stands for "some number" in the exact part of a value under a tolerance


# ----------------------------------------------------------------------------- the public function

def compare_results(
    gold_rows: Iterable[Sequence[Any]],
    pred_rows: Iterable[Sequence[Any]],
    order_matters: bool = False,
    options: CompareOptions | None = None,
    *,
    gold_columns: int | None = None,
    pred_columns: int | None = None,
    gold_names: Sequence[str] | None = None,
    ties: TieGroups | None = None,
    explain: bool = True,
) -> Comparison:
    """Compare a predicted result with the gold one (rows as sequences of values).

    `gold_columns` / `pred_columns` give the column counts for results that may have no rows
    (only rows travel here); they are ignored where rows exist. `gold_names` are the gold's
    column names, which ``columns`` mode needs when `condition_cols` names columns. `ties`: the
    gold's groups of rows tied on its ORDER BY keys (used when the comparison is ordered).
    `explain=False`: only whether they match is wanted (a mismatch may come without its reason,
    pairing or diff), for callers that ask many such questions (the near-miss classification).
    """
    opts = options or DEFAULT_OPTIONS
    gold = [tuple(r) for r in gold_rows]
    pred = [tuple(r) for r in pred_rows]
    gold_width = len(gold[0]) if gold else gold_columns
    pred_width = len(pred[0]) if pred else pred_columns
    if ties is not None and (not order_matters or opts.mode in (Mode.SPIDER, Mode.SET, Mode.SUBSET) or ties.strict
                             or sum(ties.sizes) != len(gold)):
        ties = None  # unordered, official, or nothing tied: the comparison as without ties
    if opts.mode is Mode.COLUMNS:
        return _compare_columns_mode(gold, pred, gold_width, pred_width, order_matters, opts, gold_names, ties)
    if not gold and not pred:
        if opts.mode is not Mode.SPIDER and None not in (gold_width, pred_width) and gold_width != pred_width:
            detail = f"both results are empty, but with {gold_width} and {pred_width} columns"
            return _mismatch(Reason.COLUMN_COUNT, detail)
        return Comparison(match=True)
    if opts.mode is not Mode.SPIDER and gold_width == pred_width and _identical(gold, pred, order_matters):
        # the common case of a right prediction: equal under Python equality (1 == 1.0), which
        # every mode but Spider's accepts (its quick rejection compares str(row), so 1 != 1.0 there),
        # so no normalisation or column permutation is needed
        return Comparison(match=True, pairing=tuple(range(gold_width or 0)))
    return _Comparer(gold, pred, gold_width, pred_width, order_matters, opts, ties, explain).run()


def _identical(gold: list[tuple], pred: list[tuple], order_matters: bool) -> bool:
    """Equal under Python's `==`, which the rules agree with except for a float of 1e15 or more
    against an integer or decimal (`2**60 == 2.0**60`, but floats count to 15 digits): a result
    holding such a float is left to the full comparison, so that column order cannot change the
    verdict."""
    if len(gold) != len(pred):
        return False
    if order_matters or gold == pred:
        same = gold == pred
    else:
        try:
            same = Counter(gold) == Counter(pred)
        except TypeError:  # an unhashable value: let the full comparison decide
            return False
    return same and not (_holds_big_float(gold) or _holds_big_float(pred))


def _holds_big_float(rows: list[tuple]) -> bool:
    return any(type(v) is float and not -1e15 < v < 1e15 for row in rows for v in row)


def _mismatch(reason: Reason, detail: str, **fields: Any) -> Comparison:
    return Comparison(match=False, reason=reason.value, detail=detail, **fields)


class _Comparer:
    """One comparison of two non-empty-or-one-empty results (all modes but ``columns``)."""

    def __init__(self, gold: list[tuple], pred: list[tuple], gold_width: int | None, pred_width: int | None,
                 order_matters: bool, opts: CompareOptions, ties: TieGroups | None = None,
                 explain: bool = True) -> None:
        self.opts = opts
        self.explain = explain
        self.mode = opts.mode
        self.equality = _Equality.of(opts)
        self.tolerant = self.equality.tolerant
        self.ordered = order_matters and opts.mode in (Mode.EXEC, Mode.SPIDER)
        norm = _normaliser(opts)
        self.norm = norm
        self.ties = ties if self.ordered else None
        self.gold, self.pred = gold, pred
        self.ngold = [tuple(norm(v) for v in row) for row in gold]
        self.npred = [tuple(norm(v) for v in row) for row in pred]
        if self.mode is Mode.SET:
            self.gold, self.ngold = _distinct(gold, self.ngold)
            self.pred, self.npred = _distinct(pred, self.npred)
        self.gold_width, self.pred_width = gold_width, pred_width

    # -- the rules, in the contract's order ------------------------------------------------------
    def run(self) -> Comparison:
        n_gold, n_pred = len(self.ngold), len(self.npred)
        subset = self.mode is Mode.SUBSET
        if (n_pred < n_gold) if subset else (n_pred != n_gold):
            rows = "distinct rows" if self.mode is Mode.SET else "rows"
            want = f"at least {n_gold}" if subset else f"{n_gold}"
            return self._with_diff(_mismatch(Reason.ROW_COUNT, f"expected {want} {rows}, got {n_pred}"))
        if None not in (self.gold_width, self.pred_width) and self.gold_width != self.pred_width:
            return _mismatch(Reason.COLUMN_COUNT, f"expected {self.gold_width} columns, got {self.pred_width}")
        if not self.ngold:  # subset of an empty gold
            return Comparison(match=True)
        if self.mode is Mode.SPIDER and official_quick_reject(self.gold, self.pred, self.ordered):
            return self._explain_failure(quick_rejected=True)
        if self.ordered:
            pairing = self._tied_pairing()[0] if self.ties is not None else self._ordered_pairing()
            if pairing is not None:
                return Comparison(match=True, pairing=pairing)
            return self._explain_failure()
        pairing, gave_up = self._unordered_pairing()
        if pairing is not None:
            return Comparison(match=True, pairing=pairing)
        return self._explain_failure(gave_up=gave_up)

    def _explain_failure(self, quick_rejected: bool = False, gave_up: bool = False) -> Comparison:
        if not self.explain:
            return Comparison(match=False)
        if self.ordered:
            pairing, gave_up = self._tied_rows_pairing() if self.ties is not None and self.ties.cut else self._unordered_pairing()
            if pairing is not None and not (quick_rejected and official_quick_reject(self.gold, self.pred, False)):
                first = self._first_order_difference(pairing)
                return Comparison(match=False, reason=Reason.ORDER.value, pairing=pairing,
                                  first_order_difference=first,
                                  detail=f"same rows in another order (first difference at row {first})")
        detail = "no column pairing makes the rows equal"
        if gave_up:
            detail = "the column-permutation search gave up (too many columns holding the same values)"
        elif quick_rejected:
            detail = "the rows differ (official quick rejection)"
        return self._with_diff(_mismatch(Reason.VALUES, detail))

    # -- diff ---------------------------------------------------------------------------------------
    def _with_diff(self, base: Comparison) -> Comparison:
        if not self.explain:
            return base
        width = self.gold_width
        if not self.ngold or not self.npred:  # one side is empty: everything on the other differs
            extra = [] if self.mode is Mode.SUBSET else self.pred
            return Comparison(
                match=False, reason=base.reason, missing=tuple(self.gold[:DIFF_CAP]),
                extra=tuple(extra[:DIFF_CAP]), missing_count=len(self.gold), extra_count=len(extra),
                detail=base.detail,
            )
        if width is None or width != self.pred_width:
            return base
        pairing = self._best_effort_pairing(width)
        projected = [tuple(row[j] for j in pairing) for row in self.npred]
        originals = [tuple(row[j] for j in pairing) for row in self.pred]
        if self.ties is not None and self.ties.cut:
            missing, extra = self._difference_with_spares(projected, originals)
        else:
            missing, extra = _multiset_difference(self.ngold, self.gold, projected, originals)
        if self.mode is Mode.SUBSET:
            extra = []
        first = None
        if self.ordered:
            first = next((r for r, (g, p) in enumerate(zip(self.ngold, projected)) if g != p), None)
            if first is None and len(self.ngold) != len(projected):
                first = min(len(self.ngold), len(projected))
        detail = base.detail or ""
        if missing or extra:
            detail += f" ({len(missing)} gold rows missing, {len(extra)} unexpected rows)"
        return Comparison(
            match=False, reason=base.reason, pairing=tuple(pairing),
            missing=tuple(missing[:DIFF_CAP]), extra=tuple(extra[:DIFF_CAP]),
            missing_count=len(missing), extra_count=len(extra),
            first_order_difference=first, detail=detail,
        )

    def _best_effort_pairing(self, width: int) -> list[int]:
        """Pair columns greedily by how many values they share: the pairing a reader would expect."""
        gold_sigs = [Counter(col) for col in _columns(self.ngold, width)]
        pred_sigs = [Counter(col) for col in _columns(self.npred, width)]
        return greedy_pairing(
            ((-sum((g & p).values()), i, j) for i, g in enumerate(gold_sigs) for j, p in enumerate(pred_sigs)), width
        )

    def _rows_equal(self, a: tuple, b: tuple) -> bool:
        return self.equality.rows_equal(a, b)

    def _values_equal(self, a: Any, b: Any) -> bool:
        return self.equality.values_equal(a, b)

    def _exact(self, value: Any) -> Any:
        return _NUM if self.tolerant and _is_number(value) else value

    # -- ordered: one permutation making every column equal as a vector -----------------------------
    def _ordered_pairing(self) -> tuple[int, ...] | None:
        width = len(self.ngold[0])
        gold_cols = _columns(self.ngold, width)
        pred_cols = _columns(self.npred, width)
        if self.tolerant:
            adjacency = [[j for j, p in enumerate(pred_cols) if self._rows_equal(g, p)] for g in gold_cols]
        else:
            by_vector: dict[tuple, list[int]] = {}
            for j, p in enumerate(pred_cols):
                by_vector.setdefault(p, []).append(j)
            adjacency = [by_vector.get(g, []) for g in gold_cols]
        matched = bipartite_matching(adjacency, width)
        return tuple(matched) if matched is not None else None

    # -- unordered: the column-permutation search ---------------------------------------------------
    def _unordered_pairing(self) -> tuple[tuple[int, ...] | None, bool]:
        search = _PermutationSearch(self)
        return search.find(), search.gave_up

    # -- ordered between tie groups, unordered within them ------------------------------------------
    def _tied_pairing(self, reuse: bool = False) -> tuple[tuple[int, ...] | None, bool]:
        """The permutation search with rows labelled by tie group (a predicted row by its position);
        with spare rows (a LIMIT cut a tie), a group's predicted rows need only be among its rows
        and spares."""
        assert self.ties is not None
        labels = self.ties.labels()
        gold_rows, gold_ids = list(self.ngold), list(labels)
        for group, rows in enumerate(self.ties.spare):
            for row in rows:
                gold_rows.append(tuple(self.norm(v) for v in row))
                gold_ids.append(group)
        search = _PermutationSearch(self, reuse=reuse, gold_rows=gold_rows, gold_ids=gold_ids, pred_ids=labels,
                                    within=self.ties.cut)
        return search.find(), search.gave_up

    def _tied_rows_pairing(self) -> tuple[tuple[int, ...] | None, bool]:
        """For a failure's reason, with a cut tie: a pairing under which the predicted rows are
        right but for their order (every one among the gold's rows and spares, every row of an uncut
        group there), or None."""
        assert self.ties is not None
        pool = list(self.ngold) + [tuple(self.norm(v) for v in row) for rows in self.ties.spare for row in rows]
        search = _PermutationSearch(self, gold_rows=pool, within=True)
        pairing = search.find()
        if pairing is None:
            return None, search.gave_up
        if self.tolerant:
            return pairing, False
        # each predicted row must find room in some group's rows and spares, the group's size at most
        quota = list(self.ties.sizes)
        pools = [Counter(self.ngold[start:start + size]) for start, size in zip(self.ties.starts(), self.ties.sizes)]
        for group, rows in enumerate(self.ties.spare):
            pools[group].update(tuple(self.norm(v) for v in row) for row in rows)
        for row in (tuple(p[j] for j in pairing) for p in self.npred):
            group = next((g for g in range(len(quota)) if quota[g] > 0 and pools[g][row] > 0), None)
            if group is None:
                return None, False
            quota[group] -= 1
            pools[group][row] -= 1
        return pairing, False

    def _first_order_difference(self, pairing: Sequence[int]) -> int | None:
        """The first row (the start of the first tie group) where the rows are not the gold's."""
        rows = [tuple(p[j] for j in pairing) for p in self.npred]
        if self.ties is None:
            return next((r for r, (g, p) in enumerate(zip(self.ngold, rows)) if not self._rows_equal(g, p)), None)
        for group, (start, size) in enumerate(zip(self.ties.starts(), self.ties.sizes)):
            if self.ties.spare[group] and not self.tolerant:
                room = Counter(self.ngold[start:start + size]) + Counter(tuple(self.norm(v) for v in row) for row in self.ties.spare[group])
                if any(room[row] < n for row, n in Counter(rows[start:start + size]).items()):
                    return start
                continue
            gold_part = sorted(self.ngold[start:start + size], key=_sort_key)
            pred_part = sorted(rows[start:start + size], key=_sort_key)
            if not all(map(self._rows_equal, gold_part, pred_part)):
                return start
        return None

    def _difference_with_spares(self, projected: list[tuple], originals: list[tuple]) -> tuple[list[tuple], list[tuple]]:
        """The multiset difference, except that a predicted row tied with a cut group (one of its
        spares, at that group's position) stands in for a missing row of that group."""
        assert self.ties is not None
        labels = self.ties.labels()
        missing_at = _unmatched(self.ngold, projected)
        extra_at = _unmatched(projected, self.ngold)
        open_slots = Counter(labels[i] for i in missing_at)
        spares = [Counter(tuple(self.norm(v) for v in row) for row in rows) for rows in self.ties.spare]
        excused: Counter = Counter()
        extra = []
        for j in extra_at:
            group = labels[j] if j < len(labels) else None
            if group is not None and open_slots[group] > 0 and spares[group][projected[j]] > 0:
                spares[group][projected[j]] -= 1
                open_slots[group] -= 1
                excused[group] += 1
            else:
                extra.append(originals[j])
        missing = []
        for i in missing_at:
            if excused[labels[i]] > 0:
                excused[labels[i]] -= 1
            else:
                missing.append(self.gold[i])
        return missing, extra


class _PermutationSearch:
    """Backtracking over column pairings, pruned by signatures, interchangeable columns and row multisets."""

    def __init__(self, comparer: _Comparer, reuse: bool = False, *, gold_rows: list[tuple] | None = None,
                 gold_ids: list[int] | None = None, pred_ids: list[int] | None = None, within: bool = False) -> None:
        self.c = comparer
        self.reuse = reuse  # columns mode: a predicted column may stand for several gold columns
        self.contain = comparer.mode is Mode.SUBSET  # the prediction holds every gold row
        self.within = within  # every predicted row is among the gold's (tie groups with spare rows)
        self.gold_rows = comparer.ngold if gold_rows is None else gold_rows
        self.pred_rows = comparer.npred
        # rows start in classes (tie groups); each paired column refines them
        self.gold_ids = gold_ids if gold_ids is not None else [0] * len(self.gold_rows)
        self.pred_ids = pred_ids if pred_ids is not None else [0] * len(self.pred_rows)
        width = len(self.gold_rows[0])
        self.width = width
        gold_cols = _columns(self.gold_rows, width)
        pred_cols = _columns(self.pred_rows, len(self.pred_rows[0]))
        exact = comparer._exact
        self.gold_exact = [tuple(exact(v) for v in col) for col in gold_cols]
        self.pred_exact = [tuple(exact(v) for v in col) for col in pred_cols]
        # predicted columns that are the same vector are interchangeable: keep one class for them
        classes: dict[tuple, list[int]] = {}
        for j, col in enumerate(pred_cols):
            classes.setdefault(col, []).append(j)
        self.classes = list(classes.values())
        gold_sigs = [Counter(col) for col in self.gold_exact]
        pred_sigs = [Counter(self.pred_exact[members[0]]) for members in self.classes]
        self.candidates: list[list[int]] = []
        if not self.contain and not self.within and not comparer.tolerant:  # equal signatures: look them up, do not scan
            by_signature: dict[frozenset, list[int]] = {}
            for k, sig in enumerate(pred_sigs):
                by_signature.setdefault(frozenset(sig.items()), []).append(k)
            self.candidates = [by_signature.get(frozenset(sig.items()), []) for sig in gold_sigs]
        else:
            for i in range(width):
                fits = [k for k, members in enumerate(self.classes)
                        if self._signature_fits(gold_sigs[i], pred_sigs[k], gold_cols[i], pred_cols[members[0]])]
                self.candidates.append(fits)
        self.order = sorted(range(width), key=lambda i: (len(self.candidates[i]), i))
        self.budget = max(_SEARCH_WORK // max(len(self.gold_rows), 1), _MIN_SEARCH_NODES)
        self.gave_up = False

    def _signature_fits(self, gold_sig: Counter, pred_sig: Counter, gold_col: tuple, pred_col: tuple) -> bool:
        if self.contain:
            if any(pred_sig[v] < n for v, n in gold_sig.items()):
                return False
        elif self.within:
            return all(gold_sig[v] >= n for v, n in pred_sig.items())
        elif gold_sig != pred_sig:
            return False
        if self.c.tolerant and not self.contain:
            gold_numbers = sorted(v for v in gold_col if _is_number(v))
            pred_numbers = sorted(v for v in pred_col if _is_number(v))
            return all(self.c._values_equal(a, b) for a, b in zip(gold_numbers, pred_numbers))
        return True

    def find(self) -> tuple[int, ...] | None:
        """Depth-first over the gold columns in `order` (iterative: results can be very wide)."""
        if any(not cands for cands in self.candidates):
            return None
        used = [0] * len(self.classes)
        assignment = [-1] * self.width
        # a frame: [depth, gold row ids, predicted row ids, next candidate position, class chosen]
        frames: list[list[Any]] = [[0, list(self.gold_ids), list(self.pred_ids), 0, -1]]
        while frames:
            frame = frames[-1]
            depth, gold_ids, pred_ids = frame[0], frame[1], frame[2]
            if depth == self.width:
                if self._leaf_ok(gold_ids, pred_ids, assignment):
                    return tuple(assignment)
                frames.pop()
                self._undo(frames[-1], used, assignment)
                continue
            i = self.order[depth]
            candidates = self.candidates[i]
            child = None
            while frame[3] < len(candidates):
                k = candidates[frame[3]]
                frame[3] += 1
                members = self.classes[k]
                if used[k] >= len(members) and not self.reuse:
                    continue
                self.budget -= 1
                if self.budget < 0:
                    self.gave_up = True
                    return None
                member = members[min(used[k], len(members) - 1)]
                refined = self._refine(gold_ids, pred_ids, self.gold_exact[i], self.pred_exact[member])
                if refined is not None:
                    assignment[i] = member
                    used[k] += 1
                    frame[4] = k
                    child = [depth + 1, refined[0], refined[1], 0, -1]
                    break
            if child is not None:
                frames.append(child)
                continue
            frames.pop()
            if frames:
                self._undo(frames[-1], used, assignment)
        return None

    def _undo(self, frame: list[Any], used: list[int], assignment: list[int]) -> None:
        """Take back the choice `frame` made for its gold column, so it can try its next candidate."""
        used[frame[4]] -= 1
        assignment[self.order[frame[0]]] = -1
        frame[4] = -1

    def _refine(self, gold_ids: list[int], pred_ids: list[int], gold_col: tuple, pred_col: tuple
                ) -> tuple[list[int], list[int]] | None:
        """Extend each row's class id by one more column; None if the row multisets now differ."""
        table: dict[tuple, int] = {}
        new_gold = [table.setdefault(key, len(table)) for key in zip(gold_ids, gold_col)]
        new_pred = []
        for key in zip(pred_ids, pred_col):
            cls = table.get(key)
            if cls is None:
                if not self.contain:
                    return None
                cls = table.setdefault(key, len(table))
            new_pred.append(cls)
        gold_counts, pred_counts = Counter(new_gold), Counter(new_pred)
        if self.contain:
            if any(pred_counts[cls] < n for cls, n in gold_counts.items()):
                return None
        elif self.within:
            if any(gold_counts[cls] < n for cls, n in pred_counts.items()):
                return None
        elif gold_counts != pred_counts:
            return None
        return new_gold, new_pred

    def _leaf_ok(self, gold_ids: list[int], pred_ids: list[int], assignment: list[int]) -> bool:
        if not self.c.tolerant:
            return True  # the last refinement compared the multisets of whole rows
        numeric = [i for i in range(self.width) if any(_is_number(row[i]) for row in self.gold_rows)]
        groups: dict[int, tuple[list[tuple], list[tuple]]] = {}
        for cls, row in zip(gold_ids, self.gold_rows):
            groups.setdefault(cls, ([], []))[0].append(tuple(row[i] for i in numeric))
        for cls, row in zip(pred_ids, self.pred_rows):
            if cls in groups:
                groups[cls][1].append(tuple(row[assignment[i]] for i in numeric))
        return all(self._rows_match(g, p) for g, p in groups.values())

    def _rows_match(self, gold: list[tuple], pred: list[tuple]) -> bool:
        """Every gold row matched to its own predicted row within tolerance (same counts unless subset)."""
        close = self.c._rows_equal
        if self.within:  # every predicted row matched to its own gold row
            if len(gold) > _MATCHING_CAP or len(pred) > _MATCHING_CAP:
                return False
            adjacency = [[i for i, g in enumerate(gold) if close(g, p)] for p in pred]
            return bipartite_matching(adjacency, len(gold)) is not None
        if not self.contain:
            gold_sorted, pred_sorted = sorted(gold, key=_sort_key), sorted(pred, key=_sort_key)
            if all(close(g, p) for g, p in zip(gold_sorted, pred_sorted)):
                return True
        if len(gold) > _MATCHING_CAP or len(pred) > _MATCHING_CAP:
            return False
        adjacency = [[j for j, p in enumerate(pred) if close(g, p)] for g in gold]
        return bipartite_matching(adjacency, len(pred)) is not None


# ----------------------------------------------------------------------------- columns mode

def _compare_columns_mode(gold: list[tuple], pred: list[tuple], gold_width: int | None, pred_width: int | None,
                          order_matters: bool, opts: CompareOptions, gold_names: Sequence[str] | None,
                          ties: TieGroups | None = None) -> Comparison:
    """The gold's chosen columns, found jointly among the predicted ones (see the module docstring)."""
    width = gold_width if gold_width is not None else (len(gold_names) if gold_names is not None else 0)
    selected = opts.chosen_columns(width, gold_names)  # a name the gold lacks raises ValueError
    outside = [c for c in selected if c >= width] if gold or gold_width is not None else []
    if outside:
        detail = f"condition_cols {outside} name columns the gold result does not have ({width})"
        return _mismatch(Reason.COLUMN_COUNT, detail)
    if len(gold) != len(pred):
        return _mismatch(Reason.ROW_COUNT, f"expected {len(gold)} rows, got {len(pred)}")
    if not gold:
        return Comparison(match=True)
    positional = order_matters and not opts.ignore_order
    pairing, gave_up = _joint_columns(gold, pred, selected, positional, opts, ties if positional else None)
    if pairing is not None:
        return Comparison(match=True, pairing=_full_pairing(pairing, selected, width))
    if positional and _joint_columns(gold, pred, selected, False, opts)[0] is not None:
        return _mismatch(Reason.ORDER, "the gold's columns are all there, with the rows in another order")
    exec_opts = dataclasses.replace(opts, mode=Mode.EXEC, condition_cols=None)
    alone = [_joint_columns(gold, pred, (i,), False, exec_opts)[0] for i in selected]
    lonely = [i for i, found in zip(selected, alone) if found is None]
    pairing = _full_pairing(tuple(found[0] if found else -1 for found in alone), selected, width)
    if gave_up:
        detail = "the column search gave up (too many columns holding the same values)"
    elif lonely:
        detail = f"gold column(s) {lonely} match no predicted column"
    else:
        detail = "each gold column is in the prediction, but no choice of predicted columns keeps the gold's rows together"
    return _mismatch(Reason.VALUES, detail, pairing=pairing)


def _full_pairing(pairing: tuple[int, ...], selected: tuple[int, ...], width: int) -> tuple[int, ...]:
    full = [-1] * width
    for i, j in zip(selected, pairing):
        if i < width:
            full[i] = j
    return tuple(full)


def _joint_columns(gold: list[tuple], pred: list[tuple], selected: Sequence[int], positional: bool,
                   opts: CompareOptions, ties: TieGroups | None = None) -> tuple[tuple[int, ...] | None, bool]:
    """(for each selected gold column, the predicted column holding it, or None; whether the search
    gave up). Predicted columns may be used more than once; rows are compared as multisets unless
    `positional` (then in sequence, or group by group with `ties`)."""
    projected = [tuple(row[i] for i in selected) for row in gold]
    exec_opts = dataclasses.replace(opts, mode=Mode.EXEC, condition_cols=None)
    if positional and ties is not None:
        spare = tuple(tuple(tuple(row[i] for i in selected) for row in rows) for rows in ties.spare)
        comparer = _Comparer(projected, pred, len(selected), len(pred[0]), True, exec_opts, TieGroups(ties.sizes, spare))
        return comparer._tied_pairing(reuse=True)
    comparer = _Comparer(projected, pred, len(selected), len(pred[0]), positional, exec_opts)
    if positional:  # rows are aligned: a column that equals a gold column as a vector keeps them together
        gold_cols = _columns(comparer.ngold, len(selected))
        pred_cols = _columns(comparer.npred, len(pred[0]))
        pairing = []
        for g in gold_cols:
            j = next((j for j, p in enumerate(pred_cols) if comparer._rows_equal(g, p)), None)
            if j is None:
                return None, False
            pairing.append(j)
        return tuple(pairing), False
    search = _PermutationSearch(comparer, reuse=True)
    return search.find(), search.gave_up


# ----------------------------------------------------------------------------- helpers

@dataclass(frozen=True)
class _Equality:
    """Equality of normalised values: exact, or numbers within `abs_tol` / `rel_tol` (`math.isclose`)."""

    abs_tol: float = 0.0
    rel_tol: float = 0.0

    @classmethod
    def of(cls, opts: CompareOptions) -> "_Equality":
        if opts.mode is Mode.SPIDER:
            return cls()
        return cls(opts.abs_tol, opts.rel_tol)

    @property
    def tolerant(self) -> bool:
        return self.abs_tol > 0 or self.rel_tol > 0

    def values_equal(self, a: Any, b: Any) -> bool:
        if self.tolerant and _is_number(a) and _is_number(b):
            return math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
        return a == b

    def rows_equal(self, a: tuple, b: tuple) -> bool:
        if not self.tolerant:
            return a == b
        return len(a) == len(b) and all(self.values_equal(x, y) for x, y in zip(a, b))


def _columns(rows: list[tuple], width: int) -> list[tuple]:
    return [tuple(row[i] for row in rows) for i in range(width)]


def _distinct(rows: list[tuple], normalised: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    seen: set[tuple] = set()
    kept, kept_normalised = [], []
    for row, key in zip(rows, normalised):
        if key not in seen:
            seen.add(key)
            kept.append(row)
            kept_normalised.append(key)
    return kept, kept_normalised


def _multiset_difference(gold_keys: list[tuple], gold_rows: list[tuple], pred_keys: list[tuple],
                         pred_rows: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """Rows of each side not matched by an equal row of the other (as multisets), original values."""
    pred_left = Counter(pred_keys)
    missing = []
    for key, row in zip(gold_keys, gold_rows):
        if pred_left[key] > 0:
            pred_left[key] -= 1
        else:
            missing.append(row)
    gold_left = Counter(gold_keys)
    extra = []
    for key, row in zip(pred_keys, pred_rows):
        if gold_left[key] > 0:
            gold_left[key] -= 1
        else:
            extra.append(row)
    return missing, extra


def _unmatched(rows: list[tuple], others: list[tuple]) -> list[int]:
    """Indexes of `rows` not matched by an equal row of `others` (as multisets)."""
    left = Counter(others)
    out = []
    for index, key in enumerate(rows):
        if left[key] > 0:
            left[key] -= 1
        else:
            out.append(index)
    return out


def _value_sort_key(value: Any) -> tuple:
    """A total order over normalised values of mixed types (NULLs first, numbers, then the rest)."""
    if value is None:
        return (0, 0)
    if value is NAN:
        return (1, 0)
    if _is_number(value):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, bytes):
        return (4, value)
    return (5, repr(value))


def _sort_key(row: tuple) -> tuple:
    return tuple(_value_sort_key(v) for v in row)


def bipartite_matching(adjacency: list[list[int]], right_size: int) -> list[int] | None:
    """A perfect matching of the left side (Kuhn's augmenting paths); `result[i]` = right partner."""
    partner_of_right = [-1] * right_size

    def augment(left: int, seen: list[bool]) -> bool:
        for right in adjacency[left]:
            if not seen[right]:
                seen[right] = True
                if partner_of_right[right] == -1 or augment(partner_of_right[right], seen):
                    partner_of_right[right] = left
                    return True
        return False

    unmatched = []
    for left, rights in enumerate(adjacency):  # a greedy start keeps the augmenting paths short
        free = next((r for r in rights if partner_of_right[r] == -1), None)
        if free is None:
            unmatched.append(left)
        else:
            partner_of_right[free] = left
    for left in unmatched:
        if not augment(left, [False] * right_size):
            return None
    result = [-1] * len(adjacency)
    for right, left in enumerate(partner_of_right):
        if left != -1:
            result[left] = right
    return result
