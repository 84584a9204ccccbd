"""Soft scores (spec 004): column names normalised, rows matched optimally, worked by hand."""

from __future__ import annotations

import pytest

from helpers import make_db, write_suite
from pytest_nl2sql import evaluate_suite
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

    def test_row_scores_on_every_paired_column(self):
        # name pairs by name, age with years by the comparison. gold rows {a1, b2, c3, d4},
        # predicted {a1, b2, x9}: TP 2 -> P 2/3, R 1/2, F1 4/7 (columns: name only, P = R = 1/2)
        s = soft_scores(["name", "age"], [("a", 1), ("b", 2), ("c", 3), ("d", 4)],
                        ["name", "years"], [("a", 1), ("b", 2), ("x", 9)])
        assert (s.column_precision, s.column_recall, s.column_f1) == (0.5, 0.5, 0.5)
        assert (s.row_precision, s.row_recall, s.row_f1) == pytest.approx((2 / 3, 1 / 2, 4 / 7))
        # b's age wrong: its row no longer matches, though its name does
        s2 = soft_scores(["name", "age"], [("a", 1), ("b", 2)], ["name", "years"], [("a", 1), ("b", 3)])
        assert s2.row_f1 == 0.5

    def test_duplicates_match_one_to_one(self):
        # gold a, a, b; predicted a, b, b: TP 2 (one a, one b)
        s = soft_scores(["x"], [("a",), ("a",), ("b",)], ["x"], [("a",), ("b",), ("b",)])
        assert (s.row_precision, s.row_recall) == pytest.approx((2 / 3, 2 / 3))

    def test_no_common_name_still_scores_the_rows_the_comparison_pairs(self):
        s = soft_scores(["name"], [("a",)], ["title"], [("a",)])
        assert s == SoftScores(0.0, 0.0, 0.0, 1.0, 1.0, 1.0)
        nothing_paired = soft_scores(["name", "age"], [("a", 1)], ["title"], [("a",)])
        assert nothing_paired == SoftScores(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

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


# ----------------------------------------------------------------------------- the amendment
# Row scores compare every column the result comparison pairs (names first, then the verdict's
# pairing by position and values); every engine's spelling of count(*) is one name.

def test_every_engines_count_star_is_one_name():
    n = TestColumnNames.namer.normalise
    # SQLite and MySQL `count(*)`, PostgreSQL `count`, DuckDB `count_star()`
    assert n("count_star()") == n("COUNT_STAR()") == n("count(*)") == n("count") == n("Count( * )") == "number"
    assert n("count_star") == "number star"  # a plain name is not an expression: its words as they are


def test_a_max_for_an_avg_scores_no_row():
    # the only common name is `category`; `max(price)` stands where `avg(price)` does, every value wrong
    gold = (["category", "avg(price)"], [("office", 2.25), ("clothes", 1.5), ("kitchen", 8.0)])
    pred = (["category", "max(price)"], [("office", 3.0), ("clothes", 2.5), ("kitchen", 9.0)])
    s = soft_scores(*gold, *pred)
    assert (s.column_precision, s.column_recall) == (0.5, 0.5)  # column scores stay by name
    assert (s.row_precision, s.row_recall, s.row_f1) == (0.0, 0.0, 0.0)
    # one value right of three: one row
    right_once = soft_scores(*gold, pred[0], [("office", 2.25), ("clothes", 2.5), ("kitchen", 9.0)])
    assert right_once.row_f1 == pytest.approx(1 / 3)


def test_renamed_and_reordered_columns_of_a_right_answer_score_every_row():
    gold = (["name", "count(*)"], [("a", 1), ("b", 2)])
    s = soft_scores(*gold, ["n", "who"], [(2, "b"), (1, "a")])  # no name in common: the comparison pairs them
    assert (s.column_f1, s.row_f1) == (0.0, 1.0)
    # two columns of one name: the comparison's pairing decides which is which
    twice = soft_scores(["name", "name"], [("a", "x"), ("b", "y")], ["name", "name"], [("y", "b"), ("x", "a")])
    assert (twice.column_f1, twice.row_f1) == (1.0, 1.0)


def test_names_come_before_the_comparisons_pairing():
    # `age` is paired by name although it holds the names (the comparison pairs `name` with it): no
    # row matches, and `name`, whose partner is taken, counts as missing
    s = soft_scores(["name", "age"], [("a", 1), ("b", 2)], ["age", "x"], [("a", 1), ("b", 2)])
    assert (s.column_f1, s.row_f1) == (0.5, 0.0)


def test_a_column_the_comparison_cannot_pair_counts_as_missing():
    # another width: the comparison pairs nothing, so only the names pair (rows matched on `name`)
    s = soft_scores(["name", "age"], [("a", 1), ("b", 2)], ["name"], [("a",), ("b",)])
    assert (s.column_recall, s.row_f1) == (0.5, 1.0)
    none = soft_scores(["name", "age"], [("a", 1), ("b", 2)], ["who"], [("a",), ("b",)])
    assert none.row_f1 == 0.0


PRICES_SQL = """
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL, category TEXT);
INSERT INTO item VALUES (1, 'pen', 1.5, 'office'), (2, 'ink', 3.0, 'office'), (3, 'cap', 0.5, 'clothes'),
                        (4, 'hat', 2.5, 'clothes'), (5, 'mug', 7.0, 'kitchen'), (6, 'pan', 9.0, 'kitchen');
"""

ENGINE_CASES = [
    # right answers: the engine's name for count(*) against an alias `count`; renamed and reordered
    {"id": "count-alias", "gold": "SELECT category, count(*) FROM item GROUP BY category",
     "predicted": "SELECT category, count(*) AS count FROM item GROUP BY category"},
    {"id": "count-bare", "gold": "SELECT category, count(*) AS count FROM item GROUP BY category",
     "predicted": "SELECT category, COUNT(*) FROM item GROUP BY category"},
    {"id": "renamed", "gold": "SELECT category, count(*) FROM item GROUP BY category",
     "predicted": "SELECT count(id) AS n, category AS c FROM item GROUP BY category"},
    # every average answered by a maximum
    {"id": "max-for-avg", "gold": "SELECT category, avg(price) FROM item GROUP BY category",
     "predicted": "SELECT category, max(price) FROM item GROUP BY category"},
    # two golds: the second (not the one judged closest) holds two of its three rows: P 2/3, R 1
    {"id": "among-golds", "gold": ["SELECT category, avg(price) FROM item GROUP BY category",
                                   "SELECT category, max(price) FROM item WHERE category <> 'office' GROUP BY category"],
     "predicted": "SELECT category, max(price) FROM item GROUP BY category"},
]


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_soft_scores_of_a_run_on_each_engine(tmp_path, engine):
    if engine == "sqlite":
        database = str(make_db(tmp_path / "prices.sqlite", PRICES_SQL))
    else:
        duckdb = pytest.importorskip("duckdb")
        path = tmp_path / "prices.duckdb"
        con = duckdb.connect(str(path))
        con.execute(PRICES_SQL)
        con.close()
        database = f"duckdb:///{path}"
    suite = write_suite(tmp_path, ENGINE_CASES, database=database)
    report = evaluate_suite(suite, neighbours=0, rootdir=tmp_path)
    items = {i["id"]: i for i in report["items"]}
    got = {k: (i["verdict"], i["soft_scores"]["column_f1"], i["soft_scores"]["row_f1"]) for k, i in items.items()}
    assert got == {
        "count-alias": ("pass", 1.0, 1.0),
        "count-bare": ("pass", 1.0, 1.0),
        "renamed": ("pass", 0.0, 1.0),
        "max-for-avg": ("mismatch", 0.5, 0.0),
        "among-golds": ("mismatch", 1.0, pytest.approx(0.8)),
    }
