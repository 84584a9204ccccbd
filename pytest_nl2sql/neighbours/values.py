"""Values: as a column stores them (SQLite's affinity, DuckDB's types), and the values next to a
gold literal that separate `>` from `>=`, `=` from LIKE, one literal from another.
"""

from __future__ import annotations

import bisect
import datetime
import decimal
import math
from typing import Any

from pytest_nl2sql.neighbours.literals import Hint
from pytest_nl2sql.neighbours.schema import BLOB, DATE, INT, OTHER, REAL, TEXT, TIMESTAMP, Column


class Unstorable(ValueError):
    """The value has no form the column can hold."""


def _number_from_text(text: str) -> int | float | None:
    stripped = text.strip()
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        number = float(stripped)
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


# The exact types a SQLite column of each affinity holds as they are (`_sqlite_stored` returns
# such a value unchanged): generation stores millions of values, nearly all of these.
SQLITE_AS_IS = {
    "INTEGER": frozenset({int}), "NUMERIC": frozenset({int}), "REAL": frozenset({float}), "TEXT": frozenset({str}),
    "BLOB": frozenset({int, float, str, bytes}),
}


def stored(value: Any, column: Column, kind: str) -> Any:
    """`value` as the column will hold it (so that keys compare as the database compares them)."""
    if value is None:
        return None
    if kind == "sqlite" and type(value) in SQLITE_AS_IS.get(column.affinity, ()):
        return value
    if isinstance(value, decimal.Decimal):
        value = int(value) if value == value.to_integral_value() else float(value)
    if kind == "sqlite":
        return _sqlite_stored(value, column.affinity)
    return _duckdb_stored(value, column.value_class)


def _sqlite_stored(value: Any, affinity: str) -> Any:
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        value = value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else value.isoformat()
    if affinity in ("INTEGER", "NUMERIC"):
        if isinstance(value, str):
            number = _number_from_text(value)
            if number is None:
                return value
            value = number
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
            return int(value)
        return value
    if affinity == "REAL":
        if isinstance(value, str):
            number = _number_from_text(value)
            return value if number is None else float(number)
        return float(value) if isinstance(value, int) else value
    if affinity == "TEXT":
        if isinstance(value, float):
            return repr(value) if not value.is_integer() else f"{value:.1f}"
        if isinstance(value, int):
            return str(value)
        return value
    return value


def _duckdb_stored(value: Any, value_class: str) -> Any:
    try:
        if value_class == INT:
            if isinstance(value, str):
                number = _number_from_text(value)
                if number is None:
                    raise Unstorable(value)
                value = number
            if isinstance(value, float) and not value.is_integer():
                raise Unstorable(value)
            return int(value)
        if value_class == REAL:
            if isinstance(value, str):
                number = _number_from_text(value)
                if number is None:
                    raise Unstorable(value)
                return float(number)
            return float(value)
        if value_class == TEXT:
            return value if isinstance(value, str) else str(value)
        if value_class == DATE:
            if isinstance(value, datetime.datetime):
                return value.date()
            if isinstance(value, str):
                return datetime.date.fromisoformat(value.strip()[:10])
            return value
        if value_class == TIMESTAMP:
            if isinstance(value, str):
                return datetime.datetime.fromisoformat(value.strip())
            if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
                return datetime.datetime(value.year, value.month, value.day)
            return value
    except (TypeError, ValueError, OverflowError) as e:
        raise Unstorable(str(e)) from e
    return value


def _next_text(text: str) -> str:
    """A string just above `text` in binary order."""
    return text + "a"


def _previous_text(text: str) -> str:
    """A string just below `text` in binary order (or '' when there is none)."""
    if not text:
        return ""
    last = text[-1]
    if ord(last) > 32:
        return text[:-1] + chr(ord(last) - 1) + "z"
    return text[:-1]


def _dates_around(text: str) -> list[str]:
    try:
        day = datetime.date.fromisoformat(text[:10])
    except ValueError:
        return []
    rest = text[10:]
    return [(day - datetime.timedelta(days=1)).isoformat() + rest, (day + datetime.timedelta(days=1)).isoformat() + rest]


def step_away(value: Any, descending: bool) -> Any | None:
    """A value just past `value` away from the top of an ordering (below it when the top is the
    greatest, above it when it is the least), in its own kind; None when there is none."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value - 1 if descending else value + 1
    if isinstance(value, float):
        return value - 0.5 if descending else value + 0.5
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value - datetime.timedelta(days=1) if descending else value + datetime.timedelta(days=1)
    if isinstance(value, str):
        around = _dates_around(value)
        if around:
            return around[0] if descending else around[1]
        return (_previous_text(value) or None) if descending else _next_text(value)
    return None


def sort_key(value: Any) -> tuple[int, Any]:
    """How SQLite orders stored values (numbers, then texts, then blobs); DuckDB's typed columns
    order within their one kind the same way."""
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, (int, float)):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    if isinstance(value, bytes):
        return (3, value)
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return (2, value.isoformat())
    return (2, repr(value))


def values_near(literal: Any, value_class: str) -> list[Any]:
    """The literal and its neighbours on either side: v-1, v, v+1 for numbers, nearby strings
    and dates for text."""
    if isinstance(literal, str) and value_class in (INT, REAL):
        number = _number_from_text(literal)
        if number is not None:
            literal = number
    if isinstance(literal, bool):
        literal = int(literal)
    if isinstance(literal, int):
        if value_class == REAL:
            return [literal - 1, literal - 0.5, literal, literal + 0.5, literal + 1]
        return [literal - 1, literal, literal + 1]
    if isinstance(literal, float):
        if value_class == INT:
            low = int(literal // 1)
            return sorted({low - 1, low, low + 1, low + 2})
        step = max(abs(literal) * 1e-3, 0.01)
        return [literal - 1, literal - step, literal, literal + step, literal + 1]
    if isinstance(literal, str):
        around = _dates_around(literal) if value_class in (DATE, TIMESTAMP, TEXT, OTHER) else []
        if value_class in (DATE, TIMESTAMP):
            return [around[0], literal, around[1]] if around else [literal]
        return [_previous_text(literal), literal, _next_text(literal), *around]
    return [literal]


def satisfying(hint: Hint, value_class: str) -> list[Any]:
    """Values that make the hint's condition true (to combine with other conditions)."""
    value = hint.value
    if hint.op in ("=", "<=", ">="):
        return [value]
    if hint.op == "in":
        return list(value)  # type: ignore[arg-type]
    if hint.op == "between":
        return [value[0], value[1]]  # type: ignore[index]
    if hint.op == "like":
        return like_matches(str(value))[:1]
    near = values_near(value, value_class)
    if hint.op == ">":
        return near[-1:]
    if hint.op == "<":
        return near[:1]
    return []


def hint_values(hint: Hint, value_class: str) -> list[Any]:
    """Every value worth a row of its own for this hint: on, just inside and just outside."""
    if hint.op in ("<", "<=", ">", ">=", "=", "!="):
        found = values_near(hint.value, value_class)
        if hint.op in ("=", "!=") and isinstance(hint.value, str) and value_class not in (DATE, TIMESTAMP):
            found = [hint.value, hint.value.swapcase(), hint.value + " ", *found[:1]]
        return found
    if hint.op == "between":
        low, high = hint.value  # type: ignore[misc]
        return values_near(low, value_class) + values_near(high, value_class)
    if hint.op == "in":
        return list(hint.value)  # type: ignore[arg-type]
    if hint.op == "like":
        return like_matches(str(hint.value)) + like_misses(str(hint.value))
    return []


def _like_filled(pattern: str, percent: str) -> str:
    return "".join(percent if ch == "%" else "x" if ch == "_" else ch for ch in pattern)


def like_matches(pattern: str) -> list[str]:
    """Strings that match a LIKE pattern: % as nothing, % as some text, in another case."""
    bare = _like_filled(pattern, "")
    padded = _like_filled(pattern, "Qz")
    found = [bare, padded, bare.swapcase()]
    return list(dict.fromkeys(found))


def like_misses(pattern: str) -> list[str]:
    """Strings that just miss: one fixed character dropped, or the text next to the pattern."""
    pieces = [piece for piece in pattern.replace("_", "%").split("%") if piece]
    if not pieces:
        return []
    longest = max(pieces, key=len)
    missing_first = _like_filled(pattern.replace(longest, longest[1:], 1), "")
    missing_last = _like_filled(pattern.replace(longest, longest[:-1], 1), "")
    return [value for value in dict.fromkeys([missing_first, missing_last]) if value]


def _stem(text: str) -> str:
    """A text without the numbers earlier fresh values appended ("ann 6 8" -> "ann"), so that
    fresh names stay short enough to read in a counterexample."""
    words = text.split(" ")
    while len(words) > 1 and words[-1].isdigit():
        words.pop()
    return " ".join(words) or "v"


def fresh_value(column: Column, taken: set[Any], counter: int) -> Any | None:
    """A value for a key column that no row has yet (None when the type has no easy one)."""
    if column.value_class in (INT, REAL) or column.affinity in ("INTEGER", "NUMERIC"):  # else the numbers are not asked for
        numbers = [v for v in taken if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if column.value_class in (INT, REAL) or numbers:
            ordered = [v for v in numbers if v == v]  # a NaN orders with nothing: max() would depend on the set's order
            start = int(max(ordered)) + 1 if ordered else 1
            return start + counter
    if column.value_class in (TEXT, OTHER):
        texts = sorted(str(v) for v in taken if isinstance(v, str))
        base = _stem(texts[counter % len(texts)]) if texts else "v"
        candidate = f"{base} {counter + 2}"
        while candidate in taken:
            counter += 1
            candidate = f"{base} {counter + 2}"
        return candidate
    if column.value_class == DATE:
        return (datetime.date(2001, 1, 1) + datetime.timedelta(days=counter + len(taken))).isoformat()
    if column.value_class == BLOB:
        return bytes([counter % 256, len(taken) % 256])
    return None


class FreshValues:
    """`fresh_value(column, taken | {extra}, counter)` over a `taken` that only grows (`add`), with
    what it reads kept as it grows (the greatest number, the texts in order) instead of scanned
    per call: a candidate's made rows ask for a fresh key each, over the same column's values."""

    def __init__(self, column: Column, taken: set[Any]) -> None:
        self.column = column
        self.taken = set(taken)
        self.texts = sorted(str(v) for v in self.taken if isinstance(v, str))
        self.greatest: Any = None  # the greatest number (int or float, not bool) in `taken`, None if none
        self.exact = True  # False once a number that orders with no other (NaN) is in `taken`: then scanned as before
        for value in self.taken:
            self._count(value)

    def _count(self, value: Any) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and math.isnan(value):
                self.exact = False
            elif self.greatest is None or value > self.greatest:
                self.greatest = value

    def add(self, value: Any) -> None:
        if value in self.taken:
            return  # the set keeps the value it holds (1 stays where 1.0 or True comes)
        self.taken.add(value)
        self._count(value)
        if isinstance(value, str):
            bisect.insort(self.texts, str(value))

    def fresh(self, extra: Any, counter: int) -> Any | None:
        """What `fresh_value(self.column, self.taken | {extra}, counter)` returns."""
        column, new = self.column, extra not in self.taken
        if not self.exact or (new and isinstance(extra, float) and math.isnan(extra)):
            return fresh_value(column, self.taken | {extra}, counter)
        if column.value_class in (INT, REAL) or column.affinity in ("INTEGER", "NUMERIC"):
            greatest = self.greatest
            if new and isinstance(extra, (int, float)) and not isinstance(extra, bool) and (greatest is None or extra > greatest):
                greatest = extra
            if column.value_class in (INT, REAL) or greatest is not None:
                start = int(greatest) + 1 if greatest is not None else 1
                return start + counter
        if column.value_class in (TEXT, OTHER):
            texts, count = self.texts, len(self.texts)
            at = count  # where `extra` sits among the texts (past the end: not among them)
            if new and isinstance(extra, str):
                at = bisect.bisect_left(texts, str(extra))
                count += 1
            if count:
                index = counter % count
                chosen = texts[index] if index < at else str(extra) if index == at else texts[index - 1]
                base = _stem(chosen)
            else:
                base = "v"
            candidate = f"{base} {counter + 2}"
            while candidate in self.taken or candidate == extra:
                counter += 1
                candidate = f"{base} {counter + 2}"
            return candidate
        size = len(self.taken) + new
        if column.value_class == DATE:
            return (datetime.date(2001, 1, 1) + datetime.timedelta(days=counter + size)).isoformat()
        if column.value_class == BLOB:
            return bytes([counter % 256, size % 256])
        return None


def _like_holds(pattern: str, text: str) -> bool:
    """SQLite's LIKE (ASCII case folded, % any run, _ one character), without a regex."""
    pattern, text = pattern.lower(), text.lower()
    # positions in the pattern reachable after each character of the text
    states = {0}
    def closure(found: set[int]) -> set[int]:
        result = set(found)
        for p in found:
            q = p
            while q < len(pattern) and pattern[q] == "%":
                q += 1
                result.add(q)
        return result
    states = closure(states)
    for ch in text:
        moved = set()
        for p in states:
            if p < len(pattern):
                if pattern[p] == "%":
                    moved.add(p)
                elif pattern[p] == "_" or pattern[p] == ch:
                    moved.add(p + 1)
        states = closure(moved)
        if not states:
            return False
    return len(pattern) in states


def hint_holds(hint: Hint, value: Any) -> bool:
    """Does a stored value satisfy the hint's condition (roughly as SQL would)?"""
    if value is None:
        return False
    literal = hint.value
    try:
        if hint.op == "like":
            return isinstance(value, str) and _like_holds(str(literal), value)
        if hint.op == "in":
            return any(_equal(value, v) for v in literal)  # type: ignore[union-attr]
        if hint.op == "between":
            low, high = literal  # type: ignore[misc]
            return _order(low) <= _order(value) <= _order(high)
        if hint.op == "=":
            return _equal(value, literal)
        if hint.op == "!=":
            return not _equal(value, literal)
        left, right = _order(value), _order(literal)
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[hint.op]
    except TypeError:
        return False


def _comparable(value: Any) -> Any:
    if isinstance(value, str):
        number = _number_from_text(value)
        return number if number is not None else value
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def _equal(left: Any, right: Any) -> bool:
    return _comparable(left) == _comparable(right)


def _order(value: Any) -> tuple[int, Any]:
    value = _comparable(value)
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))
