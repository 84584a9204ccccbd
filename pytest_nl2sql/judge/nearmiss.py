"""Naming a near miss: what kind of almost-right a failed comparison was (the contract's list).

Each kind is a relaxed comparison that the failed pair passes; they are tried in the contract's
order (`vocab.NearMiss`) and the first that fits is the name. Each check starts from the case's own
comparison options (tolerances, case, whitespace), in the default mode:

- `order_only`: the rows match when order is ignored;
- `duplicates`: the rows match as sets (duplicates ignored), not as multisets;
- `extra_columns`: the prediction has more columns, and the gold's are all among them, rows kept
  together (``columns`` mode);
- `missing_columns`: the prediction has fewer columns, and they are all among the gold's, rows kept
  together (``columns`` mode with the roles swapped);
- `float_tolerance`: the rows match with numbers within 1e-4 relative;
- `null_vs_zero_or_empty`: the rows match once NULL, 0 and '' are taken as one value (and at least
  one NULL is involved);
- `case_or_whitespace`: the rows match with case folded and outer whitespace stripped;
- `limit_prefix`: under an ordered gold, the shorter result (not empty) equals the first rows of
  the longer one.

Only mismatches are examined (and only then: it costs a few comparisons); a failure without a
result, and a pass, has no near miss. With several golds, the first kind that fits any of them. A
pair that the default mode calls equal (it failed only the case's own mode: `set`, `subset`,
`columns`, `spider`) has no near miss.
"""

from __future__ import annotations

import dataclasses
import decimal
from collections.abc import Sequence
from typing import Any

from pytest_nl2sql.judge.compare import DEFAULT_OPTIONS, CompareOptions, Mode, compare_results
from pytest_nl2sql.judge.equality import normalise_value
from pytest_nl2sql.vocab import NearMiss

FLOAT_REL_TOL = 1e-4

DESCRIPTIONS = {
    NearMiss.ORDER_ONLY: "the right rows in another order",
    NearMiss.DUPLICATES: "the same rows, with duplicates lost or added",
    NearMiss.EXTRA_COLUMNS: "every gold column is there, plus others",
    NearMiss.MISSING_COLUMNS: "some gold columns are missing, the rest is right",
    NearMiss.FLOAT_TOLERANCE: "the numbers agree within 1e-4 relative",
    NearMiss.NULL_VS_ZERO_OR_EMPTY: "NULL against 0 or ''",
    NearMiss.CASE_OR_WHITESPACE: "the strings differ only in case or leading/trailing whitespace",
    NearMiss.LIMIT_PREFIX: "one result is a prefix of the other (a LIMIT off?)",
}


class _Blank:
    """NULL, 0 and '' as one value (for `null_vs_zero_or_empty`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<NULL/0/''>"


_BLANK = _Blank()


def _blank(value: Any) -> bool:
    n = normalise_value(value)
    return n is None or n == "" or (type(n) is int and n == 0)


def _blanked(rows: Sequence[Sequence[Any]]) -> list[tuple]:
    return [tuple(_BLANK if _blank(v) else v for v in row) for row in rows]


def near_miss(gold_results: Sequence[tuple[Sequence[Sequence[Any]], int]], pred_rows: Sequence[Sequence[Any]],
              pred_width: int, order_matters: bool, options: CompareOptions | None = None) -> NearMiss | None:
    """The first near miss (contract order) that the prediction is to any gold result.
    `gold_results` are (rows, column count) pairs."""
    base = dataclasses.replace(options or DEFAULT_OPTIONS, mode=Mode.EXEC, condition_cols=None, ignore_order=False)
    pred = [tuple(r) for r in pred_rows]
    golds = [([tuple(r) for r in rows], width) for rows, width in gold_results]
    if any(_shape(g, w) == _shape(pred, pred_width) and
           compare_results(g, pred, order_matters, base, gold_columns=w, pred_columns=pred_width, explain=False).match for g, w in golds):
        return None  # equal in the default mode: the case's own mode (set, subset, columns, spider) failed it
    for kind in NearMiss:
        for gold, width in golds:
            if _fits(kind, gold, width, pred, pred_width, order_matters, base):
                return kind
    return None


def _shape(rows: list[tuple], width: int) -> tuple[int, int]:
    return len(rows), width


def _any_value(rows: list[tuple], test: Any) -> bool:
    return any(test(v) for row in rows for v in row)


def _fits(kind: NearMiss, gold: list[tuple], gold_width: int, pred: list[tuple], pred_width: int,
          ordered: bool, base: CompareOptions) -> bool:
    """Whether the pair is this kind of near miss; cheap shape tests first (most kinds need the
    same number of rows or columns), so that a failure costs a few comparisons at most."""
    def same(g: list[tuple], p: list[tuple], opts: CompareOptions = base, in_order: bool = ordered) -> bool:
        return compare_results(g, p, in_order, opts, gold_columns=gold_width, pred_columns=pred_width, explain=False).match

    same_width, same_rows = gold_width == pred_width, len(gold) == len(pred)
    if kind is NearMiss.ORDER_ONLY:
        return ordered and same_width and same_rows and same(gold, pred, in_order=False)
    if kind is NearMiss.DUPLICATES:
        return same_width and _has_duplicates(gold, pred, base) and same(gold, pred, dataclasses.replace(base, mode=Mode.SET), False)
    if kind is NearMiss.EXTRA_COLUMNS:
        return pred_width > gold_width and same_rows and compare_results(
            gold, pred, False, dataclasses.replace(base, mode=Mode.COLUMNS), gold_columns=gold_width, explain=False).match
    if kind is NearMiss.MISSING_COLUMNS:
        return 0 < pred_width < gold_width and same_rows and bool(pred) and compare_results(
            pred, gold, False, dataclasses.replace(base, mode=Mode.COLUMNS), gold_columns=pred_width, explain=False).match
    if not same_width:
        return False
    if kind is NearMiss.FLOAT_TOLERANCE:
        tolerant = dataclasses.replace(base, rel_tol=max(base.rel_tol, FLOAT_REL_TOL))
        return same_rows and _any_value(gold + pred, _inexact) and same(gold, pred, tolerant)
    if kind is NearMiss.NULL_VS_ZERO_OR_EMPTY:
        return same_rows and _any_value(gold + pred, lambda v: v is None) and same(_blanked(gold), _blanked(pred))
    if kind is NearMiss.CASE_OR_WHITESPACE:
        folded = dataclasses.replace(base, case_sensitive=False, strip_whitespace=True)
        return same_rows and _any_value(gold, _text) and same(gold, pred, folded)
    if kind is NearMiss.LIMIT_PREFIX:
        n = min(len(gold), len(pred))
        return ordered and n > 0 and not same_rows and same(gold[:n], pred[:n])
    return False


def _has_duplicates(gold: list[tuple], pred: list[tuple], options: CompareOptions) -> bool:
    """Some result repeats a row, as the comparison sees rows (else set and multiset comparison agree)."""
    def repeats(rows: list[tuple]) -> bool:
        try:
            if len(set(rows)) < len(rows):  # equal values normalise alike: a repeat as written is one
                return True
        except TypeError:  # an unhashable value: the normalised rows tell
            pass
        keys = {tuple(normalise_value(v, options.case_sensitive, options.strip_whitespace) for v in row) for row in rows}
        return len(keys) < len(rows)

    return repeats(gold) or repeats(pred)


def _inexact(value: Any) -> bool:
    """A value that a relative tolerance could bring closer to another: a float or decimal number,
    or numeric text with a point or an exponent (integers are exact)."""
    if isinstance(value, (float, decimal.Decimal)):
        return True
    return isinstance(value, str) and isinstance(normalise_value(value), float)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def describe(kind: NearMiss | str) -> str:
    """`extra_columns (every gold column is there, plus others)`: for failure texts."""
    kind = NearMiss(kind)
    return f"{kind.value} ({DESCRIPTIONS[kind]})"
