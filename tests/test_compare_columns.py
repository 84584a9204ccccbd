"""`columns` mode keeps rows together; `condition_cols` by index and by name; timezone-aware values;
and the mistakes other evaluators are known to make, as pairs each mode must accept or reject."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from pytest_nl2sql.judge.compare import CompareOptions, compare_results
from pytest_nl2sql.judge.equality import normalise_value, result_fingerprint
from pytest_nl2sql.vocab import Reason

COLUMNS = CompareOptions(mode="columns")
MODES = ["exec", "set", "subset", "columns"]


class TestColumnsModeKeepsRowsTogether:
    GOLD = [("a", 1), ("b", 2)]

    @pytest.mark.parametrize("pred", [
        [("a", 1), ("b", 2)],
        [(1, "a"), (2, "b")],                       # columns permuted
        [(9, 1, "a"), (8, 2, "b")],                 # an extra predicted column
        [("b", 2, "x"), ("a", 1, "y")],             # rows in another order (unordered gold)
    ])
    def test_accepts(self, pred):
        assert compare_results(self.GOLD, pred, options=COLUMNS)

    @pytest.mark.parametrize("pred", [
        [("a", 2), ("b", 1)],                       # rows scrambled across columns: Spider 2.0 passes it
        [(2, "a", 0), (1, "b", 0)],                 # the same with an extra column
        [("a", 1), ("b", 3)],                       # a wrong value
        [("a",), ("b",)],                           # a gold column missing
    ])
    def test_rejects(self, pred):
        result = compare_results(self.GOLD, pred, options=COLUMNS)
        assert not result and result.reason == Reason.VALUES.value

    def test_scrambled_rows_say_so(self):
        result = compare_results(self.GOLD, [("a", 2), ("b", 1)], options=COLUMNS)
        assert "keeps the gold's rows together" in result.detail and result.pairing == (0, 1)

    def test_a_predicted_column_may_stand_for_two_equal_gold_columns(self):
        assert compare_results([(1, 1), (2, 2)], [(1,), (2,)], options=COLUMNS)
        assert not compare_results([(1, 1), (2, 3)], [(1,), (2,)], options=COLUMNS)

    def test_duplicates_count(self):
        assert not compare_results([("a", 1), ("a", 1)], [("a", 1, 0), ("b", 1, 0)], options=COLUMNS)
        assert compare_results([("a", 1), ("a", 1)], [("a", 1, 0), ("a", 1, 5)], options=COLUMNS)

    def test_ordered_gold_keeps_order_unless_ignore_order(self):
        swapped = [(2, "b"), (1, "a")]
        ordered = compare_results(self.GOLD, swapped, order_matters=True, options=COLUMNS)
        assert not ordered and ordered.reason == Reason.ORDER.value
        assert compare_results(self.GOLD, [(1, "a", 0), (2, "b", 0)], order_matters=True, options=COLUMNS)
        ignore = CompareOptions(mode="columns", ignore_order=True)
        assert compare_results(self.GOLD, swapped, order_matters=True, options=ignore)
        # ignore_order still keeps rows together
        assert not compare_results(self.GOLD, [(1, "b"), (2, "a")], order_matters=True, options=ignore)

    def test_tolerance_applies_jointly(self):
        opts = CompareOptions(mode="columns", abs_tol=0.01)
        assert compare_results([("a", 1.0), ("b", 2.0)], [("x", 2.004, "b"), ("y", 0.996, "a")], options=opts)
        assert not compare_results([("a", 1.0), ("b", 2.0)], [("x", 2.004, "a"), ("y", 0.996, "b")], options=opts)

    def test_wide_repetitive_results_stay_fast(self):
        gold = [tuple(range(i, i + 12)) for i in range(200)]
        pred = [tuple(reversed(row)) + (0,) * 5 for row in gold]
        assert compare_results(gold, pred, options=COLUMNS)


class TestConditionCols:
    GOLD = [("pen", 1.5, "office"), ("cap", 0.5, "clothes")]
    NAMES = ("name", "Price", "category")

    def test_by_index(self):
        opts = CompareOptions(mode="columns", condition_cols=(0, 2))
        assert compare_results(self.GOLD, [("office", "pen", 9), ("clothes", "cap", 9)], options=opts)

    def test_by_name_case_insensitive(self):
        opts = CompareOptions(mode="columns", condition_cols=("NAME", " price "))
        assert compare_results(self.GOLD, [(1.5, "pen"), (0.5, "cap")], options=opts, gold_names=self.NAMES)
        assert not compare_results(self.GOLD, [(0.5, "pen"), (1.5, "cap")], options=opts, gold_names=self.NAMES)

    def test_mixed_names_and_indexes(self):
        opts = CompareOptions(mode="columns", condition_cols=(0, "category"))
        assert compare_results(self.GOLD, [("pen", "office"), ("cap", "clothes")], options=opts, gold_names=self.NAMES)
        assert opts.chosen_columns(3, self.NAMES) == (0, 2)
        assert CompareOptions(mode="columns", condition_cols=(0, "name")).chosen_columns(3, self.NAMES) == (0,)

    def test_a_name_matches_every_column_of_that_name(self):
        opts = CompareOptions(mode="columns", condition_cols=("name",))
        assert opts.chosen_columns(3, ("name", "x", "Name")) == (0, 2)

    def test_unknown_name_is_an_error_naming_the_columns(self):
        opts = CompareOptions(mode="columns", condition_cols=("colour",))
        with pytest.raises(ValueError, match=r"'colour'.*its columns: 'name', 'Price', 'category'"):
            compare_results(self.GOLD, self.GOLD, options=opts, gold_names=self.NAMES)
        with pytest.raises(ValueError, match="column names are unknown"):
            compare_results(self.GOLD, self.GOLD, options=opts)

    def test_index_outside_the_gold(self):
        result = compare_results(self.GOLD, self.GOLD, options=CompareOptions(mode="columns", condition_cols=(5,)))
        assert result.reason == Reason.COLUMN_COUNT.value

    @pytest.mark.parametrize("bad", ["name", 3, [""], [True], [-1], [1.5]])
    def test_bad_values(self, bad):
        with pytest.raises(ValueError, match="condition_cols"):
            CompareOptions.from_mapping({"mode": "columns", "condition_cols": bad})


class TestTimezoneAwareValues:
    PLUS_TWO = dt.timezone(dt.timedelta(hours=2))

    def at(self, hour, tz):
        return dt.datetime(2024, 5, 1, hour, 30, tzinfo=tz)

    def test_same_instant_whatever_the_offset_and_the_column_order(self):
        gold = [(self.at(10, self.PLUS_TWO), 1), (self.at(11, self.PLUS_TWO), 2)]
        same_order = [(self.at(8, dt.timezone.utc), 1), (self.at(9, dt.timezone.utc), 2)]
        permuted = [(1, self.at(8, dt.timezone.utc)), (2, self.at(9, dt.timezone.utc))]
        for pred in (same_order, permuted, list(reversed(permuted))):
            assert compare_results(gold, pred)
        assert result_fingerprint(gold, False) == result_fingerprint(permuted, False)

    def test_another_instant_differs(self):
        gold = [(self.at(10, self.PLUS_TWO), 1)]
        assert not compare_results(gold, [(1, self.at(10, dt.timezone.utc))])
        assert not compare_results(gold, [(self.at(8, None), 1)])  # a naive time is no instant

    def test_normalised_to_utc(self):
        assert normalise_value(self.at(10, self.PLUS_TWO)) == "2024-05-01 08:30:00+00:00"
        assert normalise_value(dt.time(10, 0, tzinfo=self.PLUS_TWO)) == "08:00:00+00:00"
        assert normalise_value(dt.date(2024, 5, 1)) == "2024-05-01"


class TestOtherEvaluatorsMistakes:
    """Pairs that evaluators in the wild get wrong; every mode must get them right."""

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize("filler", [0, -99999, "", "None", "nan"])
    def test_null_is_not_a_filler_value(self, mode, filler):
        assert not compare_results([(1, None)], [(1, filler)], options=CompareOptions(mode=mode))
        assert compare_results([(1, None)], [(1, None)], options=CompareOptions(mode=mode))

    @pytest.mark.parametrize("mode", MODES)
    def test_rows_scrambled_across_columns(self, mode):
        gold = [("a", 1), ("b", 2), ("c", 3)]
        assert not compare_results(gold, [("a", 3), ("b", 1), ("c", 2)], options=CompareOptions(mode=mode))

    @pytest.mark.parametrize("mode", MODES)
    def test_nan_equals_nan(self, mode):
        nan = float("nan")
        assert compare_results([(nan, 1)], [(nan, 1)], options=CompareOptions(mode=mode))
        assert compare_results([(nan, 1)], [(1, nan)], options=CompareOptions(mode=mode))
        assert not compare_results([(nan,)], [(None,)], options=CompareOptions(mode=mode))
        assert not compare_results([(nan,)], [(0,)], options=CompareOptions(mode=mode))

    @pytest.mark.parametrize("mode", MODES)
    def test_tolerance_is_a_distance_not_rounding(self, mode):
        opts = CompareOptions(mode=mode, abs_tol=0.01)
        # round(x, 2) calls these different (1.0 and 1.01); they are 0.0002 apart
        assert compare_results([(1.0049,)], [(1.0051,)], options=opts)
        assert not compare_results([(1.0,)], [(1.02,)], options=opts)
        rel = CompareOptions(mode=mode, rel_tol=1e-3)
        assert compare_results([(123456.0,)], [(123500.0,)], options=rel)  # 3.6e-4 relative
        assert not compare_results([(0.0012,)], [(0.0011,)], options=rel)  # rounding to 2 places: both 0.0

    def test_nan_is_not_close_to_anything(self):
        assert not math.isclose(float("nan"), 0.0, abs_tol=1)
        assert not compare_results([(float("nan"),)], [(0.0,)], options=CompareOptions(abs_tol=1))
