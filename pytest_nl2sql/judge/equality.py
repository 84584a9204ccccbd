"""A short, stable hash of a query result, stored in baselines.

A baseline records the fingerprint of each case's predicted result so that a reviewer (and
`compare_with_baseline`) can tell whether a known failure still fails *the same way*. The hash
therefore follows the comparison's own notion of equality: column order never matters, row order
matters only for ordered results, and 1, 1.0, True and "1" are the same value. Floats are rounded
to 12 significant digits, so the same result computed by SQLite, DuckDB or PostgreSQL hashes alike.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

DIGEST_CHARS = 16  # 64 bits: plenty to tell results of one case apart, short enough to read

# Above this many column orders to try, fall back to an invariant that may (rarely) collide.
_MAX_PERMUTATIONS = 720

_NULL = "null"


def result_fingerprint(rows: Iterable[Sequence[Any]], order_matters: bool) -> str:
    """Hex digest of `rows` that ignores column order, and row order unless `order_matters`."""
    table = [tuple(canonical_value(v) for v in row) for row in rows]
    payload = _ordered_form(table) if order_matters else _unordered_form(table)
    text = json.dumps(["ordered" if order_matters else "unordered", payload], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def canonical_value(value: Any) -> str:
    """One token per value; equal tokens for values the comparison treats as equal."""
    if value is None:
        return _NULL
    if isinstance(value, bool):  # PostgreSQL returns booleans where SQLite returns 0 / 1
        return _number(int(value))
    if isinstance(value, int):
        return _number(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return canonical_value(raw.decode("utf-8"))
        except UnicodeDecodeError:
            return "b:" + raw.hex()
    if isinstance(value, str):
        number = _numeric_string(value)
        return "s:" + value if number is None else number
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date subclass
        return "s:" + value.isoformat()
    return "s:" + str(value)


def _number(value: int) -> str:
    return "n:" + str(value)


def _float(value: float) -> str:
    if math.isnan(value):
        return "n:nan"
    if math.isinf(value):
        return "n:inf" if value > 0 else "n:-inf"
    rounded = float(format(value, ".12g"))
    if rounded.is_integer():
        return _number(int(rounded))
    return "n:" + repr(rounded)


def _decimal(value: decimal.Decimal) -> str:
    if not value.is_finite():
        return _float(float(value))
    if value == value.to_integral_value():
        return _number(int(value))
    return _float(float(value))


def _numeric_string(text: str) -> str | None:
    """The number token of a string that spells a finite number exactly, else None."""
    if not text or text != text.strip() or "_" in text:
        return None
    try:
        number = decimal.Decimal(text)
    except decimal.InvalidOperation:
        return None
    return _decimal(number) if number.is_finite() else None


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
