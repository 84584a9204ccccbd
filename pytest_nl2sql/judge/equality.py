"""The one rule for "equal values" (`normalise_value`), and the short, stable hash of a query
result built on it (`result_fingerprint`), stored in baselines.

The comparison (`compare.py`) compares normalised values; a baseline records the fingerprint of
each case's predicted result so that a reviewer (and `compare_with_baseline`) can tell whether a
known failure still fails *the same way*. Both read values through `normalise_value`, so two
results the comparison calls equal always hash alike, and two it tells apart hash apart: column
order never matters, row order matters only for ordered results, 1, 1.0, True and "1" are the same
value, floats agree to 15 significant digits (an integer equals a float only when the float, to 15
digits, is that integer: `10**15` and `1e15`, not `2**60` and `2.0**60`, which Python's `==` calls
equal; `compare.py` and `in_engine.py` follow this, not `==`), bytes are never text, and
timezone-aware timestamps are instants (`10:00+02:00` is `08:00+00:00`: both are written in UTC).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import hashlib
import itertools
import json
import math
import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

DIGEST_CHARS = 16  # 64 bits: plenty to tell results of one case apart, short enough to read

# Above this many column orders to try, fall back to an invariant that may (rarely) collide.
_MAX_PERMUTATIONS = 720

_NULL = "null"



class _NaN:
    """A NaN that equals itself (and only NaN), so NaN results can be compared at all."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NaN"


NAN = _NaN()
_NUMBER_START = frozenset("+-.0123456789")
_NUMERIC = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # over a value, not over SQL


def _number(value: float) -> Any:
    if math.isnan(value):
        return NAN
    if math.isinf(value):
        return value
    value = float(f"{value:.15g}")
    return int(value) if value.is_integer() else value


def _utc_time(value: _dt.time) -> _dt.time:
    """A time of day with an offset, as the same time in UTC (a day's wrap-around ignored)."""
    moment = _dt.datetime.combine(_dt.date(2000, 1, 3), value).astimezone(_dt.timezone.utc)
    return moment.timetz()


def _text(value: str, case_sensitive: bool, strip_whitespace: bool) -> Any:
    """Numeric text as its number (`"1.50"` is 1.5), other text as written (or folded, stripped)."""
    text = value.strip() if strip_whitespace else value
    if text[:1] in _NUMBER_START and _NUMERIC.fullmatch(text):  # names and words: no regex
        if "." in text or "e" in text or "E" in text:
            return _number(float(text))
        return int(text)
    return text if case_sensitive else text.casefold()


def normalise_value(value: Any, case_sensitive: bool = True, strip_whitespace: bool = False) -> Any:
    """The canonical, hashable form in which ``exec`` mode compares a value (see the module docstring)."""
    kind = type(value)  # the common types first, by identity (this runs for every value compared)
    if kind is int or value is None:
        return value
    if kind is str:
        return _text(value, case_sensitive, strip_whitespace)
    if kind is float:
        return _number(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, decimal.Decimal):
        if value.is_nan():
            return NAN
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        return _number(float(value))
    if isinstance(value, str):
        return _text(value, case_sensitive, strip_whitespace)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, _dt.datetime):
        if value.utcoffset() is not None:  # an instant: the same whatever the offset it is written in
            value = value.astimezone(_dt.timezone.utc)
        return value.isoformat(sep=" ")
    if isinstance(value, _dt.time):
        if value.utcoffset() is not None:
            value = _utc_time(value)
        return value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return tuple(normalise_value(v, case_sensitive, strip_whitespace) for v in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value




def result_fingerprint(rows: Iterable[Sequence[Any]], order_matters: bool) -> str:
    """Hex digest of `rows` that ignores column order, and row order unless `order_matters`."""
    table = _tokens(rows)
    payload = _ordered_form(table) if order_matters else _unordered_form(table)
    text = json.dumps(["ordered" if order_matters else "unordered", payload], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


_PLAIN = frozenset({str, int, float, bytes, type(None)})  # equal values of one of these types have one token


def _tokens(rows: Iterable[Sequence[Any]]) -> list[tuple[str, ...]]:
    """`canonical_value` of every value, each distinct plain value tokenized once: a result
    repeats its values (a fingerprint of every failing result is kept for the gold audit)."""
    known: dict[tuple[type, Any], str] = {}
    table = []
    for row in rows:
        tokens = []
        for value in row:
            kind = type(value)
            if kind in _PLAIN:
                token = known.get((kind, value))
                if token is None:
                    token = known[(kind, value)] = canonical_value(value)
            else:
                token = canonical_value(value)
            tokens.append(token)
        table.append(tuple(tokens))
    return table


def canonical_value(value: Any) -> str:
    """One token per value; equal tokens exactly for the values `normalise_value` makes equal."""
    return _token(normalise_value(value))


def _token(value: Any) -> str:
    if value is None:
        return _NULL
    if value is NAN:
        return "n:nan"
    if isinstance(value, int):
        return "n:" + str(value) if value.bit_length() < 10_000 else "n:#" + hashlib.sha256(value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)).hexdigest()
    if isinstance(value, float):
        return "n:" + repr(value)
    if isinstance(value, bytes):
        return "b:" + value.hex()
    if isinstance(value, str):
        return "s:" + value
    if isinstance(value, tuple):
        return "t:" + json.dumps([_token(v) for v in value], ensure_ascii=False)
    return "o:" + repr(value)


def _ordered_form(table: list[tuple[str, ...]]) -> list[Any]:
    """Rows keep their order; columns are sorted by their whole content.

    Two columns with equal content are interchangeable, so sorting them is canonical.
    """
    if not _rectangular(table):
        return [list(row) for row in table]
    columns = sorted(zip(*table)) if table else []
    return [list(row) for row in zip(*columns)]


def _unordered_form(table: list[tuple[str, ...]]) -> list[Any]:
    """The smallest sorted row list over the column orders that could be canonical.

    Columns are first grouped by their sorted values (a key that no row or column permutation
    changes); only columns with the same key can be swapped, and we try those swaps.
    """
    if not table or not _rectangular(table):
        return sorted(list(row) for row in table)
    columns = list(zip(*table))
    keys = [tuple(sorted(column)) for column in columns]
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    ordered_groups = [groups[key] for key in sorted(groups)]
    count = math.prod(math.factorial(len(group)) for group in ordered_groups)
    if count > _MAX_PERMUTATIONS:
        # Invariant but not injective: column contents plus each row's multiset of values.
        return [
            "approx",
            sorted(keys),
            sorted(sorted(row) for row in table),
        ]
    best: list[list[str]] | None = None
    for choice in itertools.product(*(itertools.permutations(g) for g in ordered_groups)):
        order = [index for group in choice for index in group]
        candidate = sorted([row[i] for i in order] for row in table)
        if best is None or candidate < best:
            best = candidate
    return best or []


def _rectangular(table: list[tuple[str, ...]]) -> bool:
    return len({len(row) for row in table}) <= 1
