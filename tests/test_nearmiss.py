"""Named near misses: each kind on a pair it fits and a pair it does not; the contract's order."""

from __future__ import annotations

import pytest

from pytest_nl2sql.judge.compare import CompareOptions
from pytest_nl2sql.judge.nearmiss import describe, near_miss
from pytest_nl2sql.vocab import NEAR_MISSES, NearMiss


def miss(gold, pred, ordered=False, options=None, golds=None):
    width = lambda rows: len(rows[0]) if rows else 1  # noqa: E731
    gold_results = golds or [(gold, width(gold))]
    kind = near_miss(gold_results, pred, width(pred), ordered, options)
    return kind.value if kind else None


def test_the_contract_order():
    assert NEAR_MISSES == ("order_only", "duplicates", "extra_columns", "missing_columns", "float_tolerance",
                           "null_vs_zero_or_empty", "case_or_whitespace", "limit_prefix")


@pytest.mark.parametrize("gold, pred, ordered, expected", [
    # order_only: right rows in another order (ordered gold)
    ([(1,), (2,)], [(2,), (1,)], True, "order_only"),
    ([(1,), (2,)], [(2,), (3,)], True, None),
    # duplicates: lost or added
    ([(1,), (1,), (2,)], [(1,), (2,)], False, "duplicates"),
    ([(1,), (2,)], [(1,), (2,), (2,)], False, "duplicates"),
    ([(1,), (2,)], [(1,), (3,)], False, None),
    # extra_columns: every gold column present, rows kept together
    ([("a", 1), ("b", 2)], [("a", 1, 9), ("b", 2, 8)], False, "extra_columns"),
    ([("a", 1), ("b", 2)], [("a", 2, 9), ("b", 1, 8)], False, None),  # rows scrambled
    # missing_columns: the rest right
    ([("a", 1), ("b", 2)], [("a",), ("b",)], False, "missing_columns"),
    ([("a", 1), ("b", 2)], [("a",), ("c",)], False, None),
    # float_tolerance: within 1e-4 relative
    ([(1000.0,)], [(1000.05,)], False, "float_tolerance"),
    ([(1000.0,)], [(1001.0,)], False, None),
    ([("1.0001",)], [(1,)], False, "float_tolerance"),
    # null_vs_zero_or_empty
    ([(1, None)], [(1, 0)], False, "null_vs_zero_or_empty"),
    ([(None,)], [("",)], False, "null_vs_zero_or_empty"),
    ([(0.0,)], [(None,)], False, "null_vs_zero_or_empty"),
    ([(0,)], [("",)], False, None),  # no NULL involved
    ([(None,)], [(1,)], False, None),
    # case_or_whitespace
    ([("Paris",)], [("paris",)], False, "case_or_whitespace"),
    ([("Paris",)], [(" Paris\t",)], False, "case_or_whitespace"),
    ([("Paris",)], [("Pariss",)], False, None),
    # limit_prefix: under an ordered gold
    ([(1,), (2,), (3,)], [(1,), (2,)], True, "limit_prefix"),
    ([(1,)], [(1,), (2,), (3,)], True, "limit_prefix"),
    ([(1,), (2,), (3,)], [(1,), (2,)], False, None),  # unordered: no prefix
    ([(1,), (2,), (3,)], [], True, None),  # an empty result is no near miss
    ([(1,), (2,), (3,)], [(2,), (3,)], True, None),
])
def test_each_kind(gold, pred, ordered, expected):
    assert miss(gold, pred, ordered) == expected


def test_the_first_kind_that_fits_wins():
    # the same rows with a duplicate lost, and a prefix of the ordered gold: duplicates first
    assert miss([(1,), (2,), (2,)], [(1,), (2,)], ordered=True) == "duplicates"
    # one kind of difference is named; two at once (another order and another case) are none
    assert miss([("a",), ("B",)], [("A",), ("b",)], ordered=True) == "case_or_whitespace"
    assert miss([("a",), ("B",)], [("b",), ("A",)], ordered=True) is None
    # an extra column whose other values are within tolerance: extra_columns is checked first but
    # needs equal values; float_tolerance needs the same columns: neither fits
    assert miss([(1.0,)], [(1.00001, 5)]) is None


def test_the_case_options_are_kept():
    # case folding is the case's own option: the remaining difference is a duplicate
    opts = CompareOptions(case_sensitive=False)
    assert miss([("A",), ("a",)], [("a",)], options=opts) == "duplicates"


def test_a_pair_equal_in_the_default_mode_has_none():
    # it failed the case's own mode (here subset of a set: the default comparison calls it equal)
    assert miss([(1,), (2,)], [(2,), (1,)], options=CompareOptions(mode="spider")) is None


def test_any_of_several_golds():
    golds = [([(9,)], 1), ([(1,), (2,)], 1)]
    assert miss(None, [(2,), (1,)], ordered=True, golds=golds) == "order_only"


def test_descriptions():
    assert describe("extra_columns") == "extra_columns (every gold column is there, plus others)"
    assert all(describe(kind) for kind in NearMiss)
