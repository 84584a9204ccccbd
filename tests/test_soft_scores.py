"""Soft scores (spec 004): column names normalised, rows matched optimally, worked by hand."""

from __future__ import annotations

import pytest

from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.soft import (
    ColumnNamer,
    SoftScores,
    ValueRule,
    best_soft_scores,
    hopcroft_karp,
    parse_synonym_lines,
    soft_scores,
    synonyms_from,
)
from pytest_nl2sql.metrics.summary import summarize
from pytest_nl2sql.vocab import Kind, Verdict


def scores(*values: float) -> dict[str, float]:
    names = ("column_precision", "column_recall", "column_f1", "row_precision", "row_recall", "row_f1")
    return dict(zip(names, values))


class TestColumnNames:
    namer = ColumnNamer()

    def test_the_spec_example(self):
        # lower case + trim, underscores to spaces, stop words, synonyms word by word
        assert self.namer.normalise("  Customer_ID_Number ") == "customer identifier number"

    @pytest.mark.parametrize("a, b", [
        ("Customer", "customer"),
        ("customer_id", "customer id"),
        ("the_number_of_singers", "number singers"),
        ("count", "number"),
        ("avg_age", "average age"),
        ("unique names", "distinct names"),
        ("total_qty", "sum quantity"),
    ])
    def test_equal_names(self, a, b):
        assert self.namer.normalise(a) == self.namer.normalise(b)

    @pytest.mark.parametrize("a, b", [("name", "names"), ("customer", "customer id"), ("max_age", "min_age")])
    def test_different_names(self, a, b):
        assert self.namer.normalise(a) != self.namer.normalise(b)

    def test_expression_names_are_read_by_their_parts(self):
        n = self.namer.normalise
        assert n("count(*)") == n("COUNT(*)") == n("count(T1.singer_id)") == n("count") == "number"
        assert n("count(DISTINCT name)") == "number distinct"
        assert n("avg(T1.age)") == n("AVG(age)") == n("average_age") == "average age"
        assert n("max(T2.price)") == "maximum price"
        assert n("max(x) - min(x)") == "maximum x sub minimum x"
        assert n("f(((") == "f((("  # sqlglot cannot read it: an ordinary name

    def test_synonyms_added_and_chained(self):
        namer = ColumnNamer.with_extra({"cnt": "count"}, {"headcount": "cnt", "colour": "color"})
        assert namer.normalise("headcount") == namer.normalise("count") == "number"
        assert namer.normalise("Colour") == "color"
        assert ColumnNamer.with_extra({"a1": "b1", "b1": "a1"}).normalise("a1") in ("a1", "b1")  # a cycle stops

    def test_synonym_maps_are_checked(self):
        assert synonyms_from({"Colour": "COLOR"}) == {"colour": "color"}
        with pytest.raises(ValueError, match="one word"):
            synonyms_from({"two words": "x"})
        with pytest.raises(ValueError, match="mapping"):
            synonyms_from(["x"])
        assert parse_synonym_lines("\n# comment\ncolour = color\n  Qty= amount \n") == {"colour": "color", "qty": "amount"}
        with pytest.raises(ValueError, match="line 2"):
            parse_synonym_lines(["a = b", "nonsense"])


class TestWorkedByHand:
    def test_column_scores(self):
        # gold {customer identifier number, average price}; predicted adds `quantity`:
        # TP 2, FP 1, FN 0 -> P 2/3, R 1, F1 2*(2/3)/(5/3) = 0.8
        s = soft_scores(["Customer_ID_Number", "avg_price"], [(1, 10.0)],
                        ["customer identifier number", "average price", "qty"], [(1, 10.0, 5)])
        assert (s.column_precision, s.column_recall, s.column_f1) == pytest.approx((2 / 3, 1.0, 0.8))
        assert (s.row_precision, s.row_recall, s.row_f1) == (1.0, 1.0, 1.0)

    def test_row_scores_on_the_common_columns(self):
        # common column: name. gold names {a, b, c, d}, predicted {a, b, x}: TP 2 -> P 2/3, R 1/2, F1 4/7
        s = soft_scores(["name", "age"], [("a", 1), ("b", 2), ("c", 3), ("d", 4)],
                        ["name", "city"], [("a", "p"), ("b", "q"), ("x", "r")])
        assert (s.column_precision, s.column_recall, s.column_f1) == (0.5, 0.5, 0.5)
        assert (s.row_precision, s.row_recall, s.row_f1) == pytest.approx((2 / 3, 1 / 2, 4 / 7))

    def test_duplicates_match_one_to_one(self):
        # gold a, a, b; predicted a, b, b: TP 2 (one a, one b)
        s = soft_scores(["x"], [("a",), ("a",), ("b",)], ["x"], [("a",), ("b",), ("b",)])
        assert (s.row_precision, s.row_recall) == pytest.approx((2 / 3, 2 / 3))

    def test_no_common_column_scores_no_row(self):
        s = soft_scores(["name"], [("a",)], ["title"], [("a",)])
        assert s == SoftScores(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def test_empty_results(self):
        assert soft_scores(["a"], [], ["a"], []).row_f1 == 1.0
        empty_pred = soft_scores(["a"], [(1,)], ["a"], [])
        assert (empty_pred.row_precision, empty_pred.row_recall, empty_pred.row_f1) == (0.0, 0.0, 0.0)

    def test_values_compare_as_the_default_comparison(self):
        s = soft_scores(["n"], [(1,), ("2",), (None,), (float("nan"),)], ["n"], [(1.0,), (2,), (None,), (float("nan"),)])
        assert s.row_f1 == 1.0
        assert soft_scores(["n"], [(None,)], ["n"], [(0,)]).row_f1 == 0.0

    def test_case_and_whitespace_options_apply(self):
        gold, pred = [("Paris",)], [(" paris ",)]
        assert soft_scores(["c"], gold, ["c"], pred).row_f1 == 0.0
        assert soft_scores(["c"], gold, ["c"], pred, rule=ValueRule(case_sensitive=False, strip_whitespace=True)).row_f1 == 1.0

    def test_optimal_not_greedy_matching(self):
        # abs_tol 0.1: gold 1.0 is close to both predictions, gold 1.1 only to 1.05. Spider 2.0's
        # greedy matching pairs 1.0 with the first close row (1.05) and leaves 1.1 alone: TP 1.
        # The maximum matching pairs 1.0-0.95 and 1.1-1.05: TP 2.
        rule = ValueRule(abs_tol=0.1)
        s = soft_scores(["v"], [(1.0,), (1.1,)], ["v"], [(1.05,), (0.95,)], rule=rule)
        assert (s.row_precision, s.row_recall) == (1.0, 1.0)
        # two numeric columns go through Hopcroft-Karp
        s2 = soft_scores(["k", "v", "w"], [("a", 1.0, 0), ("a", 1.1, 0)], ["k", "v", "w"],
                         [("a", 1.05, 0.01), ("a", 0.95, 0.01)], rule=rule)
        assert s2.row_f1 == 1.0

    def test_tolerance_rows_group_by_their_text(self):
        rule = ValueRule(abs_tol=0.5)
        s = soft_scores(["k", "v"], [("a", 1.0), ("b", 2.0)], ["k", "v"], [("b", 1.0), ("a", 2.0)], rule=rule)
        assert s.row_f1 == 0.0

    def test_best_of_several_golds(self):
        gold_rows = (["name"], [("a",), ("b",)])
        gold_cols = (["name", "age"], [("a", 1), ("z", 9)])
        best = best_soft_scores([gold_cols, gold_rows], ["name"], [("a",), ("b",)])
        assert best is not None and best.row_f1 == 1.0 and best.column_f1 == 1.0
        # equal row F1 (0.5 each): the better column F1 wins, whichever gold comes first
        other = (["name", "x"], [("a", 0), ("z", 0)])
        tie = best_soft_scores([other, gold_cols], ["name", "age"], [("a", 1), ("b", 2)])
        assert tie.row_f1 == 0.5 and tie.column_f1 == 1.0


def test_hopcroft_karp_finds_the_maximum():
    assert hopcroft_karp([[0, 1], [0], [2]], 3) == 3
    assert hopcroft_karp([[0], [0], [0]], 1) == 1
    assert hopcroft_karp([[1, 0], [1]], 2) == 2
    big = [[j for j in range(i, min(i + 3, 500))] for i in range(500)]
    assert hopcroft_karp(big, 500) == 500


def test_summary_means_count_a_prediction_that_did_not_run_as_zero():
    def result(n: int, verdict: Verdict, soft: dict | None, near: str | None = None) -> CaseResult:
        return CaseResult(id=f"c{n}", nodeid=f"f::c{n}", file="f", position=n, kind=Kind.SQL, verdict=verdict,
                          soft_scores=soft, near_miss=near)
    summary = summarize([
        result(0, Verdict.PASS, scores(1, 1, 1, 1, 1, 1)),
        result(1, Verdict.MISMATCH, scores(0.5, 1, 2 / 3, 0, 0, 0), "extra_columns"),
        result(2, Verdict.PRED_ERROR, None),
        result(3, Verdict.GOLD_ERROR, None),  # not judged: left out
    ])
    assert summary["soft_scores"]["column_precision"] == pytest.approx(0.5)
    assert summary["soft_scores"]["row_f1"] == pytest.approx(1 / 3)
    assert summary["near_miss"]["extra_columns"] == 1 and sum(summary["near_miss"].values()) == 1
    assert list(summary["near_miss"]) == ["order_only", "duplicates", "extra_columns", "missing_columns",
                                          "float_tolerance", "null_vs_zero_or_empty", "case_or_whitespace",
                                          "limit_prefix"]
    assert summarize([result(3, Verdict.GOLD_ERROR, None)])["soft_scores"] is None
