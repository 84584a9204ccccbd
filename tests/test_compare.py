"""Result comparison: the validation suite of the execution-match spec (000), category by category,
then the options, modes and diagnostics we add, and property-based tests.

The "SQL Execution" and "50/50 Spider validation" categories run real queries: they are in
`test_compare_spider.py`.
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_nl2sql.judge.compare import (
    DIFF_CAP,
    NAN,
    CompareOptions,
    Comparison,
    Mode,
    compare_results,
    normalise_value,
)
from pytest_nl2sql.judge.order import has_top_level_order_by
from pytest_nl2sql.vocab import Reason


def rows(*values):
    """Single-column rows: rows(1, 2) == [(1,), (2,)]."""
    return [(v,) for v in values]


# ---------------------------------------------------------------- 1. Basic functionality (11)

class TestBasicFunctionality:
    def test_identical_lists_match(self):
        assert compare_results(rows(1, 2, 3), rows(1, 2, 3))

    def test_reordered_lists_match(self):
        assert compare_results(rows(1, 2, 3), rows(3, 1, 2))

    def test_duplicates_same_counts_match(self):
        assert compare_results(rows(1, 1, 2), rows(1, 2, 1))

    def test_duplicates_different_counts_do_not_match(self):
        result = compare_results(rows(1, 1, 2), rows(1, 2, 2))
        assert not result and result.reason == Reason.VALUES.value

    def test_different_lengths_do_not_match(self):
        result = compare_results(rows(1, 2), rows(1, 2, 3))
        assert not result and result.reason == Reason.ROW_COUNT.value

    def test_empty_lists_match(self):
        assert compare_results([], [])

    def test_normalise_whole_float_to_int(self):
        assert normalise_value(3.0) == 3 and isinstance(normalise_value(3.0), int)

    def test_normalise_numeric_string_to_int(self):
        assert normalise_value("42") == 42 and isinstance(normalise_value("42"), int)

    def test_normalise_string_float_to_number(self):
        assert normalise_value("1.50") == 1.5
        assert normalise_value("-2.5e1") == -25

    def test_normalise_none_stays_none(self):
        assert normalise_value(None) is None

    def test_normalise_regular_string_unchanged(self):
        assert normalise_value("abc") == "abc"
        assert normalise_value("1abc") == "1abc"
        assert normalise_value("nan") == "nan"  # Python's float() would accept these; we do not
        assert normalise_value("1_000") == "1_000"


# ---------------------------------------------------------------- 2. Column order permutation (4)

class TestColumnOrderPermutation:
    def test_three_columns_swapped(self):
        gold = [("Alice", 30, "NY"), ("Bob", 25, "LA")]
        pred = [("NY", "Alice", 30), ("LA", "Bob", 25)]
        result = compare_results(gold, pred)
        assert result and result.pairing == (1, 2, 0)

    def test_two_columns_swapped(self):
        result = compare_results([("Alice", 30), ("Bob", 25)], [(30, "Alice"), (25, "Bob")])
        assert result and result.pairing == (1, 0)

    def test_same_column_order_matches(self):
        result = compare_results([("Alice", 30), ("Bob", 25)], [("Alice", 30), ("Bob", 25)])
        assert result and result.pairing == (0, 1)

    def test_different_values_do_not_match(self):
        result = compare_results([("Alice", 30), ("Bob", 25)], [(30, "Alice"), (26, "Bob")])
        assert not result and result.reason == Reason.VALUES.value

    def test_one_permutation_for_all_rows(self):
        # each row matches under *some* permutation, but no single one fits both rows
        gold = [(1, 2), (3, 4)]
        pred = [(2, 1), (3, 4)]
        assert not compare_results(gold, pred)


# ---------------------------------------------------------------- 3. Row order / ORDER BY (4 + detection)

class TestRowOrder:
    def test_different_order_unordered_matches(self):
        assert compare_results(rows(1, 2, 3), rows(3, 2, 1), order_matters=False)

    def test_different_order_ordered_does_not_match(self):
        result = compare_results(rows(1, 2, 3), rows(1, 3, 2), order_matters=True)
        assert not result
        assert result.reason == Reason.ORDER.value
        assert result.first_order_difference == 1

    def test_same_order_unordered_matches(self):
        assert compare_results(rows(1, 2, 3), rows(1, 2, 3), order_matters=False)

    def test_same_order_ordered_matches(self):
        assert compare_results(rows(1, 2, 3), rows(1, 2, 3), order_matters=True)

    def test_ordered_with_columns_permuted(self):
        gold = [("a", 1), ("b", 2)]
        assert compare_results(gold, [(1, "a"), (2, "b")], order_matters=True)
        assert compare_results(gold, [(2, "b"), (1, "a")], order_matters=True).reason == Reason.ORDER.value

    def test_ordered_wrong_values_say_values_not_order(self):
        result = compare_results(rows(1, 2), rows(1, 3), order_matters=True)
        assert result.reason == Reason.VALUES.value
        assert result.first_order_difference == 1

    @pytest.mark.parametrize(
        "sql, expected",
        [
            ("SELECT name FROM users ORDER BY age", True),
            ("select name from users order by age desc limit 3", True),
            ("SELECT name FROM users", False),
            ("SELECT name FROM (SELECT name FROM users ORDER BY age LIMIT 3)", False),
            ("SELECT name FROM users WHERE id IN (SELECT id FROM t ORDER BY x LIMIT 1)", False),
            ("SELECT name FROM users WHERE name = 'order by'", False),
            ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1", True),
            ("SELECT a FROM t UNION SELECT b FROM u", False),
            ("WITH c AS (SELECT a FROM t ORDER BY a) SELECT a FROM c", False),
            ("(SELECT a FROM t ORDER BY a)", True),
            ("SELECT a FROM t ORDER  BY a", True),
        ],
    )
    def test_top_level_order_by_detection(self, sql, expected):
        assert has_top_level_order_by(sql, "sqlite") is expected

    def test_order_by_detection_survives_unparseable_sql(self):
        # sqlglot cannot parse this; the tokenizer fallback still sees the top-level ORDER BY
        assert has_top_level_order_by("SELECT a FROM t WHERE x = = 1 ORDER BY y") is True
        assert has_top_level_order_by("SELECT a FROM t WHERE x = = (SELECT y FROM u ORDER BY y)") is False
        assert has_top_level_order_by("SELECT 'unterminated ORDER BY x") is False


# ---------------------------------------------------------------- 4. Duplicate rows (3)

class TestDuplicateRows:
    def test_same_count_different_order(self):
        assert compare_results([(1, "a"), (1, "a"), (2, "b")], [(2, "b"), (1, "a"), (1, "a")])

    def test_different_counts_do_not_match(self):
        result = compare_results([(1, "a"), (1, "a"), (2, "b")], [(1, "a"), (2, "b"), (2, "b")])
        assert not result
        assert result.missing == ((1, "a"),) and result.extra == ((2, "b"),)

    def test_all_same_values(self):
        assert compare_results([(7, 7)] * 5, [(7, 7)] * 5)
        assert not compare_results([(7, 7)] * 5, [(7, 7)] * 4)


# ---------------------------------------------------------------- 5. Empty results (3)

class TestEmptyResults:
    def test_both_empty(self):
        assert compare_results([], [])

    def test_gold_empty_prediction_not(self):
        result = compare_results([], rows(1))
        assert not result and result.reason == Reason.ROW_COUNT.value
        assert result.extra == ((1,),)

    def test_gold_not_empty_prediction_empty(self):
        result = compare_results(rows(1), [])
        assert not result and result.reason == Reason.ROW_COUNT.value
        assert result.missing == ((1,),)

    def test_both_empty_with_different_known_column_counts(self):
        result = compare_results([], [], gold_columns=2, pred_columns=1)
        assert not result and result.reason == Reason.COLUMN_COUNT.value
        assert compare_results([], [], gold_columns=2, pred_columns=2)
        assert compare_results([], [], gold_columns=2)  # unknown: nothing to hold against it

    def test_both_empty_in_spider_mode_are_equal_whatever_the_columns(self):
        assert compare_results([], [], options=CompareOptions(mode="spider"), gold_columns=2, pred_columns=1)


# ---------------------------------------------------------------- 6. NULL handling (3)

class TestNullHandling:
    def test_null_in_same_positions(self):
        assert compare_results([(1, None), (2, "b")], [(1, None), (2, "b")])

    def test_null_does_not_equal_a_value(self):
        assert not compare_results([(1, None)], [(1, "a")])
        assert not compare_results(rows(None), rows(0))
        assert not compare_results(rows(None), rows(""))

    def test_multiple_nulls(self):
        assert compare_results([(None, None), (None, 1)], [(1, None), (None, None)])
        assert not compare_results([(None, None), (None, 1)], [(None, None), (None, None)])


# ---------------------------------------------------------------- 7. Type coercion (2)

class TestTypeCoercion:
    def test_int_vs_whole_float(self):
        assert compare_results([(1, 2)], [(1.0, 2.0)])

    def test_int_vs_numeric_string(self):
        assert compare_results([(1, 2)], [(1.0, "2")])
        assert compare_results(rows(1.5), rows("1.50"))
        assert not compare_results(rows("abc"), rows("ABC"))

    def test_float_summation_noise_is_ignored(self):
        assert compare_results(rows(0.1 + 0.2), rows(0.3))
        assert not compare_results(rows(0.3001), rows(0.3))

    def test_booleans_are_numbers(self):
        assert compare_results(rows(True, False), rows(1, 0))

    def test_bytes_are_never_text(self):
        assert compare_results(rows(b"ab"), rows(memoryview(b"ab")))
        assert not compare_results(rows(b"ab"), rows("ab"))

    def test_decimals_dates_and_nan(self):
        assert compare_results(rows(decimal.Decimal("2.50")), rows(2.5))
        assert compare_results(rows(decimal.Decimal("3")), rows("3"))
        assert compare_results(rows(datetime.date(2020, 1, 2)), rows("2020-01-02"))
        assert compare_results(rows(datetime.datetime(2020, 1, 2, 3, 4, 5)), rows("2020-01-02 03:04:05"))
        assert normalise_value(float("nan")) is NAN
        assert compare_results(rows(float("nan")), rows(float("nan")))
        assert not compare_results(rows(float("nan")), rows(None))


# ---------------------------------------------------------------- 9. Column permutation edge cases (4)

class TestPermutationEdgeCases:
    def test_identical_columns(self):
        gold = [(1, 1, 1), (2, 2, 2)]
        result = compare_results(gold, [(2, 2, 2), (1, 1, 1)])
        assert result and sorted(result.pairing) == [0, 1, 2]

    def test_ambiguous_same_values(self):
        # both columns hold {1, 2}; only the crossed pairing keeps the rows together
        gold = [(1, 2), (2, 1), (1, 1)]
        assert compare_results(gold, [(2, 1), (1, 2), (1, 1)])
        assert not compare_results(gold, [(1, 2), (2, 1), (2, 2)])

    def test_five_columns_reversed(self):
        gold = [(1, "a", 2.5, None, "x"), (2, "b", 3.5, "n", "y")]
        pred = [tuple(reversed(r)) for r in gold]
        result = compare_results(gold, pred)
        assert result and result.pairing == (4, 3, 2, 1, 0)

    def test_single_column(self):
        assert compare_results(rows("a", "b"), rows("b", "a"))
        assert not compare_results(rows("a", "b"), rows("a", "c"))

    def test_thirty_identical_columns(self):
        gold = [tuple([1] * 30) for _ in range(200)]
        assert compare_results(gold, [tuple(r) for r in gold])

    def test_shuffled_twelve_columns_and_one_broken_row(self):
        rng = random.Random(7)
        gold = [tuple(rng.choice([0, 1, 2]) for _ in range(12)) for _ in range(500)]
        perm = list(range(12))
        rng.shuffle(perm)
        pred = [tuple(r[p] for p in perm) for r in gold]
        result = compare_results(gold, pred)
        assert result
        assert all(g == tuple(p[j] for j in result.pairing) for g, p in zip(gold, pred))
        broken = list(pred)
        broken[17] = tuple(x + 1 for x in broken[17])
        assert not compare_results(gold, broken)

    def test_very_wide_results_do_not_exhaust_the_stack(self):
        gold = [tuple(range(i, i + 2000)) for i in range(5)]
        result = compare_results(gold, [tuple(reversed(r)) for r in gold])
        assert result and result.pairing[0] == 1999

    def test_search_gives_up_beyond_its_budget_with_a_mismatch_that_says_so(self, monkeypatch):
        import pytest_nl2sql.judge.compare as compare

        monkeypatch.setattr(compare, "_SEARCH_WORK", 1)
        monkeypatch.setattr(compare, "_MIN_SEARCH_NODES", 1)
        gold = [tuple((i + k) % 4 for k in range(4)) for i in range(4)]  # equal signatures everywhere
        result = compare_results(gold, [(r[1], r[0], r[2], r[3]) for r in gold])
        assert not result and "gave up" in result.detail

    def test_same_signatures_different_vectors(self):
        # every column is a permutation of the same values: signatures cannot tell them apart
        gold = [(i % 4, (i + 1) % 4, (i + 2) % 4, (i + 3) % 4) for i in range(8)]
        pred = [(r[2], r[0], r[3], r[1]) for r in gold]
        assert compare_results(gold, pred)
        assert not compare_results(gold, [(r[0], r[1], r[3], r[2]) for r in gold[:4]] + pred[4:])


# ---------------------------------------------------------------- reasons, column count, diff

class TestDiagnostics:
    def test_column_count(self):
        result = compare_results([(1, 2)], [(1,)])
        assert not result and result.reason == Reason.COLUMN_COUNT.value and result.pairing is None

    def test_row_count_is_checked_before_column_count(self):
        assert compare_results([(1, 2)], [(1,), (2,)]).reason == Reason.ROW_COUNT.value

    def test_diff_is_in_gold_column_order_with_original_values(self):
        gold = [("Alice", 30), ("Bob", 25), ("Carol", 41)]
        pred = [(30, "Alice"), ("25", "Bob"), (40, "Carol")]
        result = compare_results(gold, pred)
        assert not result and result.reason == Reason.VALUES.value
        assert result.pairing == (1, 0)
        assert result.missing == (("Carol", 41),) and result.extra == (("Carol", 40),)
        assert result.missing_count == result.extra_count == 1
        assert "1 gold rows missing" in result.detail

    def test_diff_is_capped_but_counted(self):
        gold = rows(*range(DIFF_CAP + 50))
        pred = rows(*range(-1, -DIFF_CAP - 51, -1))
        result = compare_results(gold, pred)
        assert len(result.missing) == DIFF_CAP and result.missing_count == DIFF_CAP + 50
        assert len(result.extra) == DIFF_CAP and result.extra_count == DIFF_CAP + 50

    def test_comparison_is_truthy_iff_match_and_serialises(self):
        assert bool(Comparison(match=True)) and not Comparison(match=False, reason="values")
        data = compare_results([(1, "a")], [("a", 2)]).to_json()
        assert data["match"] is False and data["pairing"] == [1, 0] and data["missing"] == [[1, "a"]]


# ---------------------------------------------------------------- options

class TestOptions:
    def test_absolute_tolerance(self):
        opts = CompareOptions(abs_tol=0.01)
        assert compare_results([(1.0, "a")], [("a", 1.005)], options=opts)
        assert not compare_results([(1.0, "a")], [("a", 1.02)], options=opts)

    def test_relative_tolerance(self):
        opts = CompareOptions(rel_tol=1e-3)
        assert compare_results(rows(1000.0), rows(1000.9), options=opts)
        assert not compare_results(rows(1000.0), rows(1002), options=opts)

    def test_tolerance_needs_a_one_to_one_row_matching(self):
        opts = CompareOptions(abs_tol=0.1)
        gold = [(1.0, "x"), (1.05, "x"), (5.0, "y")]
        assert compare_results(gold, [("x", 1.04), ("y", 5.02), ("x", 1.0)], options=opts)
        # both gold 1.0 and 1.05 would have to use the single predicted 1.02
        assert not compare_results(gold, [("x", 1.02), ("y", 5.0), ("x", 1.3)], options=opts)

    def test_tolerance_in_ordered_results(self):
        opts = CompareOptions(abs_tol=0.01)
        assert compare_results(rows(1.0, 2.0), rows(1.001, 2.001), order_matters=True, options=opts)
        assert compare_results(rows(1.0, 2.0), rows(2.001, 1.001), order_matters=True, options=opts).reason == "order"

    def test_case_insensitive(self):
        opts = CompareOptions(case_sensitive=False)
        assert compare_results(rows("Paris"), rows("PARIS"), options=opts)
        assert not compare_results(rows("Paris"), rows("PARIS"))

    def test_strip_whitespace(self):
        opts = CompareOptions(strip_whitespace=True)
        assert compare_results(rows("Paris", 1), rows("Paris  ", " 1"), options=opts)
        assert not compare_results(rows("Paris"), rows("Paris "))

    def test_from_mapping(self):
        opts = CompareOptions.from_mapping({"mode": "columns", "abs_tol": 0.01, "condition_cols": [0, 2],
                                            "ignore_order": True})
        assert opts.mode is Mode.COLUMNS and opts.condition_cols == (0, 2) and opts.ignore_order
        assert CompareOptions.from_mapping(None) == CompareOptions()
        assert CompareOptions.from_mapping({"min_recall": 0.5}) == CompareOptions()

    @pytest.mark.parametrize(
        "mapping, key",
        [
            ({"tolerance": 0.1}, "tolerance"),
            ({"mode": "fuzzy"}, "mode"),
            ({"abs_tol": -1}, "abs_tol"),
            ({"abs_tol": "small"}, "abs_tol"),
            ({"case_sensitive": "no"}, "case_sensitive"),
            ({"condition_cols": [-1]}, "condition_cols"),
            ({"condition_cols": "0"}, "condition_cols"),
        ],
    )
    def test_from_mapping_names_the_bad_key(self, mapping, key):
        with pytest.raises(ValueError, match=key):
            CompareOptions.from_mapping(mapping)


# ---------------------------------------------------------------- modes

class TestModes:
    def test_set_mode_ignores_duplicates(self):
        opts = CompareOptions(mode="set")
        assert compare_results(rows(1, 1, 2), rows(2, 1), options=opts)
        assert compare_results(rows(1, 1, 2), rows(2, 1), order_matters=True, options=opts)
        result = compare_results(rows(1, 1, 2), rows(2, 3), options=opts)
        assert not result and result.reason == Reason.VALUES.value
        assert compare_results(rows(1, 2), rows(1), options=opts).reason == Reason.ROW_COUNT.value

    def test_subset_mode(self):
        opts = CompareOptions(mode="subset")
        gold = [("a", 1), ("b", 2)]
        assert compare_results(gold, [(3, "c"), (2, "b"), (1, "a")], options=opts)
        assert compare_results([], [(1, "a")], options=opts)
        result = compare_results(gold, [(3, "c"), (1, "a"), (1, "a")], options=opts)
        assert not result and result.missing == (("b", 2),) and result.extra == ()
        assert compare_results(gold, [(1, "a")], options=opts).reason == Reason.ROW_COUNT.value
        # duplicates count: a gold row twice needs two predicted copies
        assert not compare_results([("a", 1)] * 2, [(1, "a"), (2, "b")], options=opts)

    def test_columns_mode(self):
        opts = CompareOptions(mode="columns")
        gold = [("a", 1), ("b", 2)]
        assert compare_results(gold, [(9, 1, "a"), (8, 2, "b")], options=opts)
        result = compare_results(gold, [(9, 1, "a"), (8, 3, "b")], options=opts)
        assert not result and result.reason == Reason.VALUES.value and result.pairing == (2, -1)
        assert compare_results(gold, [("a",), ("b",)], options=opts).reason == Reason.VALUES.value
        assert compare_results(gold, [("a", 1)], options=opts).reason == Reason.ROW_COUNT.value

    def test_columns_mode_condition_cols(self):
        opts = CompareOptions(mode="columns", condition_cols=(0,))
        gold = [("a", 1), ("b", 2)]
        assert compare_results(gold, [("a", 5), ("b", 6)], options=opts)
        bad = CompareOptions(mode="columns", condition_cols=(2,))
        assert compare_results(gold, gold, options=bad).reason == Reason.COLUMN_COUNT.value

    def test_columns_mode_order(self):
        gold = [("a", 1), ("b", 2)]
        swapped = [("b", 2), ("a", 1)]
        assert compare_results(gold, swapped, options=CompareOptions(mode="columns"))
        ordered = compare_results(gold, swapped, order_matters=True, options=CompareOptions(mode="columns"))
        assert not ordered and ordered.reason == Reason.ORDER.value
        ignore = CompareOptions(mode="columns", ignore_order=True)
        assert compare_results(gold, swapped, order_matters=True, options=ignore)

    def test_columns_mode_tolerance_like_spider2(self):
        opts = CompareOptions(mode="columns", abs_tol=0.01)
        assert compare_results([(1.0,), (2.0,)], [(1.005, "x"), (2.0, "y")], options=opts)

    def test_spider_mode_uses_python_equality(self):
        opts = CompareOptions(mode="spider")
        assert compare_results(rows(1), rows(1.0), options=opts)
        assert not compare_results(rows(1), rows("1"), options=opts)
        assert not compare_results(rows("a"), rows("A"), options=CompareOptions(mode="spider", case_sensitive=False))

    def test_spider_mode_reproduces_the_official_quick_rejection(self):
        # official rows are sorted by str(x) + str(type(x)): (1, 1.5) -> (1.5, 1) but (1.0, 1.5) -> (1.0, 1.5)
        opts = CompareOptions(mode="spider")
        assert not compare_results([(1, 1.5)], [(1.0, 1.5)], options=opts)
        assert compare_results([(1, 1.5)], [(1.0, 1.5)])
        assert compare_results([(1, 0.5)], [(1.0, 0.5)], options=opts)


# ---------------------------------------------------------------- a brute-force reference

def brute_force(gold, pred, order_matters, normalise=normalise_value):
    """Try every column permutation: the obviously-right, exponential definition."""
    if not gold and not pred:
        return True
    if len(gold) != len(pred) or len(gold[0]) != len(pred[0]):
        return False
    g = [tuple(normalise(v) for v in r) for r in gold]
    p = [tuple(normalise(v) for v in r) for r in pred]
    for perm in itertools.permutations(range(len(g[0]))):
        q = [tuple(r[j] for j in perm) for r in p]
        if (g == q) if order_matters else (Counter(g) == Counter(q)):
            return True
    return False


def official_result_eq(gold, pred, order_matters):
    """test-suite-sql-eval's result_eq, restated: quick rejection, then every permutation."""
    if not gold and not pred:
        return True
    if len(gold) != len(pred) or len(gold[0]) != len(pred[0]):
        return False
    key = lambda x: str(x) + str(type(x))  # noqa: E731
    s1 = [tuple(sorted(r, key=key)) for r in gold]
    s2 = [tuple(sorted(r, key=key)) for r in pred]
    if (s1 != s2) if order_matters else (set(s1) != set(s2)):
        return False
    return brute_force(gold, pred, order_matters, normalise=lambda v: v)


VALUES = st.one_of(st.none(), st.integers(-2, 2), st.sampled_from([1.0, 2.0, 1.5, -0.5]),
                   st.sampled_from(["a", "b", "1", "2", "1.5"]))


@st.composite
def result_pairs(draw, max_cols=4):
    width = draw(st.integers(1, max_cols))
    gold = draw(st.lists(st.tuples(*[VALUES] * width), max_size=6))
    choice = draw(st.sampled_from(["same", "perm", "mutate", "other"]))
    pred = list(gold)
    if choice in ("perm", "mutate") and gold:
        perm = draw(st.permutations(range(width)))
        pred = [tuple(r[j] for j in perm) for r in gold]
        pred = draw(st.permutations(pred))
        if choice == "mutate":
            r = draw(st.integers(0, len(pred) - 1))
            c = draw(st.integers(0, width - 1))
            row = list(pred[r])
            row[c] = draw(VALUES)
            pred[r] = tuple(row)
    elif choice == "other":
        pred = draw(st.lists(st.tuples(*[VALUES] * width), max_size=6))
    return gold, list(pred)


def brute_force_tolerant(gold, pred, abs_tol):
    """Every column permutation, then every row matching: the definition of a tolerant multiset match."""
    if len(gold) != len(pred) or (gold and len(gold[0]) != len(pred[0])):
        return False
    if not gold:
        return True

    def close(a, b):
        if isinstance(a, float) and isinstance(b, float):
            return abs(a - b) <= abs_tol
        return a == b

    for perm in itertools.permutations(range(len(gold[0]))):
        q = [tuple(r[j] for j in perm) for r in pred]
        for order in itertools.permutations(q):
            if all(all(close(a, b) for a, b in zip(g, p)) for g, p in zip(gold, order)):
                return True
    return False


class TestProperties:
    @settings(max_examples=300, deadline=None)
    @given(
        st.integers(1, 3).flatmap(lambda w: st.tuples(
            st.lists(st.tuples(*[st.sampled_from([0.5, 0.55, 0.6, 1.5, "x"])] * w), max_size=5),
            st.lists(st.tuples(*[st.sampled_from([0.5, 0.55, 0.6, 1.5, "x"])] * w), max_size=5),
        ))
    )
    def test_tolerant_comparison_equals_the_brute_force_definition(self, pair):
        gold, pred = pair
        opts = CompareOptions(abs_tol=0.06)
        assert bool(compare_results(gold, pred, options=opts)) == brute_force_tolerant(gold, pred, 0.06)

    # Each property below was a test of its own, drawing its own 200-400 examples; drawing them is
    # nine tenths of the time (the comparisons are cheap), so the properties of one kind share
    # their examples, every property still checked on at least as many.

    @settings(max_examples=400, deadline=None)
    @given(result_pairs(), st.booleans())
    def test_exec_and_spider_modes_equal_their_definitions(self, pair, ordered):
        gold, pred = pair
        exec_result = compare_results(gold, pred, ordered)
        # exec mode: the brute-force definition (every column permutation, rows as multisets or lists)
        assert bool(exec_result) == brute_force(gold, pred, ordered)
        # spider mode: test-suite-sql-eval's result_eq
        assert bool(compare_results(gold, pred, ordered, CompareOptions(mode="spider"))) == official_result_eq(gold, pred, ordered)
        # exec mode is symmetric
        assert bool(compare_results(gold, pred)) == bool(compare_results(pred, gold))
        # a found pairing really maps the rows
        if exec_result and gold:
            norm = lambda r: tuple(normalise_value(v) for v in r)  # noqa: E731
            mapped = [norm(tuple(r[j] for j in exec_result.pairing)) for r in pred]
            expected = [norm(r) for r in gold]
            assert (mapped == expected) if ordered else (Counter(mapped) == Counter(expected))

    @settings(max_examples=300, deadline=None)
    @given(result_pairs(), st.booleans(), st.randoms(use_true_random=False))
    def test_verdicts_do_not_depend_on_column_or_row_order_nor_on_the_diff(self, pair, ordered, rnd):
        gold, pred = pair
        # permuting the predicted columns never changes the verdict
        perm = list(range(len(pred[0]) if pred else 0))
        rnd.shuffle(perm)
        permuted = [tuple(r[j] for j in perm) for r in pred]
        for mode in ("exec", "spider"):
            opts = CompareOptions(mode=mode)
            verdict = bool(compare_results(gold, pred, ordered, opts))
            assert verdict == bool(compare_results(gold, permuted, ordered, opts)), mode
        # shuffling the rows of an unordered result never changes the verdict
        shuffled = list(pred)
        rnd.shuffle(shuffled)
        for mode in ("exec", "spider", "set", "subset"):
            opts = CompareOptions(mode=mode)
            verdict = bool(compare_results(gold, pred, False, opts))
            assert verdict == bool(compare_results(gold, shuffled, False, opts)), mode
        # a match-only comparison gives the same answer without the diff (each mode, where one was drawn)
        for mode in ("exec", "set", "subset", "spider"):
            options = CompareOptions(mode=mode)
            full = compare_results(gold, pred, ordered, options)
            quick = compare_results(gold, pred, ordered, options, explain=False)
            assert quick.match == full.match, mode
            assert quick.match or (quick.missing == () and quick.extra == () and quick.pairing is None), mode


def test_only_ascii_digits_make_a_numeric_string() -> None:
    assert compare_results([("1",)], [(1,)])
    assert not compare_results([("１",)], [(1,)])  # a full-width digit is text
    assert not compare_results([("٣",)], [(3,)])
