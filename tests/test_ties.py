"""Ties on the gold's ORDER BY keys, and LIMITs that cut through them (issue 9).

Real SQLite databases, the product's engine, `run_gold` and `judge`: rows tied on every ORDER BY
key may come in any order; at a LIMIT/OFFSET cut any of the tied rows is right; anything else is
judged as before. Spider compat mode never uses ties.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from helpers import make_db, read_report, write_suite
from pytest_nl2sql.engines.base import Limits
from pytest_nl2sql.engines.sqlite import SqliteEngine
from pytest_nl2sql.judge import ties
from pytest_nl2sql.judge.compare import compare_results
from pytest_nl2sql.judge.execute import judge, run_gold
from pytest_nl2sql.judge.ties import TieGroups
from pytest_nl2sql.vocab import Verdict

# score ties: (a, e) at 3, (b, c) at 2, d alone at 1, f has no score
PLAYERS_SQL = """
CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT, score INTEGER, team TEXT, age INTEGER);
INSERT INTO player VALUES (1, 'a', 3, 'x', 30), (2, 'b', 2, 'x', 20), (3, 'c', 2, 'y', 20),
                          (4, 'd', 1, 'y', 40), (5, 'e', 3, 'z', 30), (6, 'f', NULL, 'z', 50);
CREATE TABLE coach(name TEXT, score INTEGER);
INSERT INTO coach VALUES ('k', 2), ('l', 5);
"""

LIMITS = Limits(timeout=10)


@pytest.fixture
def engine(tmp_path: Path) -> SqliteEngine:
    return SqliteEngine(make_db(tmp_path / "players.sqlite", PLAYERS_SQL))


def verdict(engine: SqliteEngine, gold: str | list[str], predicted: str, **options) -> Verdict:
    outcome = run_gold([gold] if isinstance(gold, str) else gold, engine, LIMITS, **options)
    return judge(predicted, outcome, engine, LIMITS, spider_compat=options.get("spider_compat", False)).verdict


# -------------------------------------------------------------------------- pairs that must pass

PASSING = [
    pytest.param("SELECT name FROM player WHERE score IS NOT NULL ORDER BY score",
                 "SELECT name FROM player WHERE score IS NOT NULL ORDER BY score, name DESC", id="tie-other-order"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 1",
                 "SELECT 'e'", id="limit-1-other-tied-row"),
    pytest.param("SELECT name FROM player ORDER BY score DESC, name LIMIT 1",
                 "SELECT 'a'", id="limit-1-no-tie"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 2 OFFSET 1",
                 "SELECT name FROM player WHERE name IN ('a', 'c') ORDER BY name", id="limit-offset-cut-both-ends"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 3",
                 "SELECT name FROM player WHERE name IN ('e', 'a', 'c') ORDER BY score DESC, name DESC", id="limit-cut-at-end"),
    pytest.param("SELECT name, score * 10 AS s FROM player WHERE score > 1 ORDER BY s",
                 "SELECT name, score * 10 FROM player WHERE score > 1 ORDER BY score * 10, name DESC", id="alias-key"),
    pytest.param("SELECT name, score FROM player WHERE score > 1 ORDER BY 2 DESC",
                 "SELECT score, name FROM player WHERE score > 1 ORDER BY score DESC, name", id="position-key-permuted-columns"),
    pytest.param("SELECT name FROM player WHERE score > 0 ORDER BY score * -1",
                 "SELECT name FROM player WHERE score > 0 ORDER BY score DESC, name DESC", id="expression-key-hidden"),
    pytest.param("SELECT name FROM player ORDER BY team, age",
                 "SELECT name FROM player ORDER BY team, age, name DESC", id="several-keys"),
    pytest.param("SELECT name FROM player ORDER BY score",
                 "SELECT name FROM player ORDER BY score, name DESC", id="nulls-in-keys"),
    pytest.param("SELECT name FROM player ORDER BY score DESC NULLS LAST LIMIT 5",
                 "SELECT name FROM player WHERE score IS NOT NULL ORDER BY score DESC, name DESC", id="nulls-last-limit"),
    pytest.param("SELECT age FROM player GROUP BY age ORDER BY count(*) DESC LIMIT 1",
                 "SELECT 30", id="group-by-count-limit-1"),
    pytest.param("SELECT name FROM player UNION SELECT name FROM coach ORDER BY 1 LIMIT 2",
                 "SELECT name FROM player ORDER BY name LIMIT 2", id="union-ordered"),
    pytest.param("SELECT name, score FROM player UNION ALL SELECT name, score FROM coach ORDER BY score DESC LIMIT 2",
                 "SELECT 'l', 5 UNION ALL SELECT 'e', 3", id="union-limit-cut"),
    pytest.param("SELECT name FROM player ORDER BY (SELECT count(*) FROM coach WHERE coach.score <= player.score) DESC LIMIT 1",
                 "SELECT 'e'", id="correlated-subquery-key"),
    pytest.param("SELECT DISTINCT score FROM player WHERE score IS NOT NULL ORDER BY score DESC LIMIT 2",
                 "SELECT 3 UNION ALL SELECT 2", id="distinct-key-is-output"),
    pytest.param("SELECT * FROM player ORDER BY score DESC LIMIT 1",
                 "SELECT * FROM player WHERE name = 'e'", id="star-hidden-key"),
    pytest.param("SELECT name FROM player ORDER BY rank() OVER (ORDER BY score DESC) LIMIT 1",
                 "SELECT 'e'", id="window-key"),
]


@pytest.mark.parametrize(("gold", "predicted"), PASSING)
def test_right_predictions_pass(engine: SqliteEngine, gold: str, predicted: str) -> None:
    assert verdict(engine, gold, predicted) is Verdict.PASS


# -------------------------------------------------------------------------- pairs that must fail

FAILING = [
    pytest.param("SELECT name FROM player WHERE score IS NOT NULL ORDER BY score",
                 "SELECT name FROM player WHERE score IS NOT NULL ORDER BY score DESC", "order", id="wrong-order-between-groups"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 1", "SELECT 'b'", "values", id="row-outside-the-tie"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 2", "SELECT 'e' UNION ALL SELECT 'b'", "values",
                 id="tied-row-plus-wrong-one"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 2", "SELECT 'e' UNION ALL SELECT 'e'", "values",
                 id="same-tied-row-twice"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 3",
                 "SELECT name FROM player ORDER BY score DESC LIMIT 4", "row count", id="right-rows-plus-extra"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 1",
                 "SELECT name FROM player ORDER BY score DESC LIMIT 2", "row count", id="limit-1-two-rows"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 2 OFFSET 1", "SELECT 'c' UNION ALL SELECT 'b'", "values",
                 id="offset-cut-skips-the-first-group"),
    pytest.param("SELECT name FROM player ORDER BY score DESC LIMIT 3", "SELECT 'c' UNION ALL SELECT 'a' UNION ALL SELECT 'e'",
                 "order", id="cut-group-first"),
]


@pytest.mark.parametrize(("gold", "predicted", "reason"), FAILING)
def test_wrong_predictions_fail(engine: SqliteEngine, gold: str, predicted: str, reason: str) -> None:
    outcome = run_gold([gold], engine, LIMITS)
    judgement = judge(predicted, outcome, engine, LIMITS)
    assert judgement.verdict is Verdict.MISMATCH
    assert judgement.reason == reason


def test_diff_counts_a_tied_stand_in_as_right(engine: SqliteEngine) -> None:
    """'e' stands in for 'a' (tied, cut away); only the wrong row is in the diff."""
    outcome = run_gold(["SELECT name FROM player ORDER BY score DESC LIMIT 3"], engine, LIMITS)
    judgement = judge("SELECT 'e' UNION ALL SELECT 'a' UNION ALL SELECT 'd'", outcome, engine, LIMITS)
    assert judgement.verdict is Verdict.MISMATCH
    comparison = judgement.comparison
    assert (comparison.missing_count, comparison.extra_count) == (1, 1)
    assert comparison.extra == (("d",),)
    assert comparison.missing[0][0] in ("b", "c")


def test_order_failure_names_the_first_group_that_differs(engine: SqliteEngine) -> None:
    outcome = run_gold(["SELECT name FROM player WHERE score IS NOT NULL ORDER BY score"], engine, LIMITS)
    judgement = judge("SELECT name FROM player WHERE score IS NOT NULL ORDER BY score = 2, score", outcome, engine, LIMITS)
    assert judgement.reason == "order"
    assert judgement.comparison.first_order_difference == 1  # d is right; the (b, c) group is not


# -------------------------------------------------------------------------- what the gold outcome holds

def test_results_hold_visible_columns_and_the_gold_rows_only(engine: SqliteEngine) -> None:
    outcome = run_gold(["SELECT name FROM player ORDER BY score DESC, age LIMIT 2 OFFSET 1"], engine, LIMITS)
    (result,) = outcome.results
    assert result.columns == ("name",)
    assert len(result.rows) == 2 and all(len(row) == 1 for row in result.rows)
    assert outcome.queries == ("SELECT name FROM player ORDER BY score DESC, age LIMIT 2 OFFSET 1",)
    assert outcome.ties[0] is not None and sum(outcome.ties[0].sizes) == 2


def test_no_order_by_needs_no_rewrite(engine: SqliteEngine) -> None:
    outcome = run_gold(["SELECT name FROM player WHERE score = 2"], engine, LIMITS)
    assert outcome.ties == (None,) and outcome.warnings == ()


def test_warnings(engine: SqliteEngine) -> None:
    assert run_gold(["SELECT name FROM player ORDER BY score DESC LIMIT 1"], engine, LIMITS).warnings == (
        "LIMIT 1 cuts through a tie of 2 rows on the ORDER BY keys: any of them is accepted",)
    # the OFFSET cuts the (a, e) tie and the LIMIT the (b, c) one: the same sentence, said once
    assert run_gold(["SELECT name FROM player ORDER BY score DESC LIMIT 2 OFFSET 1"], engine, LIMITS).warnings == (
        "LIMIT 2 OFFSET 1 cuts through a tie of 2 rows on the ORDER BY keys: any of them is accepted",)
    assert run_gold(["SELECT name FROM player LIMIT 2"], engine, LIMITS).warnings == (ties.UNORDERED_LIMIT_WARNING,)
    assert ties.UNORDERED_LIMIT_WARNING == "LIMIT without ORDER BY: which rows is up to the database"
    # no warning: the LIMIT does not cut (fewer rows), the aggregate is one row, ties only free the order
    assert run_gold(["SELECT name FROM player LIMIT 10"], engine, LIMITS).warnings == ()
    assert run_gold(["SELECT count(*) FROM player LIMIT 1"], engine, LIMITS).warnings == ()
    assert run_gold(["SELECT name FROM player ORDER BY score"], engine, LIMITS).warnings == ()
    assert run_gold(["SELECT name FROM player ORDER BY score DESC, name LIMIT 1"], engine, LIMITS).warnings == ()


def test_a_tie_longer_than_the_extension_says_at_least(engine: SqliteEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ties, "EXTENSION", 1)
    outcome = run_gold(["SELECT name FROM player ORDER BY score DESC LIMIT 1"], engine, LIMITS)
    assert outcome.warnings == ("LIMIT 1 cuts through a tie of at least 2 rows on the ORDER BY keys: any of them is accepted",)
    assert judge("SELECT 'e'", outcome, engine, LIMITS).verdict is Verdict.PASS


def test_several_golds_each_have_their_own_groups(engine: SqliteEngine) -> None:
    golds = ["SELECT name FROM player ORDER BY score LIMIT 1", "SELECT name FROM player ORDER BY score DESC LIMIT 1"]
    outcome = run_gold(golds, engine, LIMITS)
    assert outcome.ties[0] == TieGroups((1,))  # f (NULL) alone
    assert outcome.ties[1] == TieGroups((1,), ((("e",),),))
    assert outcome.warnings == ("gold query 2 of 2: LIMIT 1 cuts through a tie of 2 rows on the ORDER BY keys: any of them is accepted",)
    assert judge("SELECT 'e'", outcome, engine, LIMITS).verdict is Verdict.PASS
    assert judge("SELECT 'f'", outcome, engine, LIMITS).verdict is Verdict.PASS
    assert judge("SELECT 'b'", outcome, engine, LIMITS).verdict is Verdict.MISMATCH


def test_tolerance_and_case_options_work_with_ties(engine: SqliteEngine) -> None:
    outcome = run_gold(["SELECT name, score FROM player ORDER BY score DESC LIMIT 1"], engine, LIMITS)
    assert judge("SELECT 'E', 3.0001", outcome, engine, LIMITS,
                 compare={"abs_tol": 0.001, "case_sensitive": False}).verdict is Verdict.PASS
    assert judge("SELECT 'E', 3.0001", outcome, engine, LIMITS).verdict is Verdict.MISMATCH


def test_columns_mode_respects_tie_groups(engine: SqliteEngine) -> None:
    outcome = run_gold(["SELECT name FROM player ORDER BY score DESC LIMIT 1"], engine, LIMITS)
    assert judge("SELECT 'e', 99", outcome, engine, LIMITS, compare={"mode": "columns"}).verdict is Verdict.PASS
    outcome = run_gold(["SELECT name FROM player WHERE score IS NOT NULL ORDER BY score"], engine, LIMITS)
    predicted = "SELECT name, age FROM player WHERE score IS NOT NULL ORDER BY score, name DESC"
    assert judge(predicted, outcome, engine, LIMITS, compare={"mode": "columns"}).verdict is Verdict.PASS
    wrong = "SELECT name, age FROM player WHERE score IS NOT NULL ORDER BY score DESC"
    assert judge(wrong, outcome, engine, LIMITS, compare={"mode": "columns"}).reason == "order"


def test_unordered_and_ordered_options(engine: SqliteEngine) -> None:
    gold = "SELECT name FROM player WHERE score IS NOT NULL ORDER BY score"
    assert verdict(engine, gold, "SELECT name FROM player WHERE score IS NOT NULL", order="unordered") is Verdict.PASS
    # `ordered` over a gold without ORDER BY: every row is its own group, as before
    outcome = run_gold(["SELECT name FROM player WHERE score = 2"], engine, LIMITS, order="ordered")
    assert judge("SELECT name FROM player WHERE score = 2 ORDER BY name DESC", outcome, engine, LIMITS).reason == "order"


# -------------------------------------------------------------------------- compat and fallbacks

def test_spider_compat_has_no_tie_handling(engine: SqliteEngine) -> None:
    gold = "SELECT name FROM player ORDER BY score DESC LIMIT 1"
    outcome = run_gold([gold], engine, LIMITS, spider_compat=True)
    assert outcome.ties == () and outcome.warnings == ()
    assert judge("SELECT 'e'", outcome, engine, LIMITS, spider_compat=True).verdict is Verdict.MISMATCH
    assert judge("SELECT 'a'", outcome, engine, LIMITS, spider_compat=True).verdict is Verdict.PASS
    outcome = run_gold([gold], engine, LIMITS, compare={"mode": "spider"})  # ties ignored by the mode itself
    assert judge("SELECT 'e'", outcome, engine, LIMITS, compare={"mode": "spider"}).verdict is Verdict.MISMATCH


@pytest.mark.parametrize("gold", [
    "SELECT DISTINCT team FROM player ORDER BY age DESC",  # a hidden age would change DISTINCT
    "SELECT name FROM player ORDER BY random() LIMIT 1",  # a hidden copy would draw other numbers
    "SELECT name FROM player UNION SELECT name FROM coach ORDER BY length(name)",  # not an output column
    "SELECT name FROM player ORDER BY count(*)",  # a hidden count(*) would make it one row
    "SELECT score * 2 AS s FROM player ORDER BY s + age",  # an expression over an alias
])
def test_unsafe_rewrites_are_not_planned(gold: str) -> None:
    assert ties.shape(gold, "sqlite", 100_000).plan is None


def test_fallback_runs_the_gold_as_written(engine: SqliteEngine) -> None:
    """DISTINCT with a key outside the output: no groups, the ordered comparison of today."""
    gold = "SELECT DISTINCT team FROM player WHERE team != 'z' ORDER BY age"
    outcome = run_gold([gold], engine, LIMITS)
    assert outcome.ties == (None,)
    assert outcome.results[0].columns == ("team",)
    assert judge(gold, outcome, engine, LIMITS).verdict is Verdict.PASS


def test_a_rewrite_the_database_refuses_falls_back(engine: SqliteEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever goes wrong with the augmented query, the gold runs as written and is judged as before."""
    broken = ties.TiePlan("SELECT no_such_column FROM player", keys=(-1,), hidden=1)
    monkeypatch.setattr(ties, "shape", lambda sql, dialect, max_rows: ties.GoldShape(plan=broken))
    outcome = run_gold(["SELECT name FROM player ORDER BY score DESC LIMIT 1"], engine, LIMITS)
    assert outcome.ties == (None,) and outcome.results[0].rows == [("a",)]
    assert judge("SELECT 'a'", outcome, engine, LIMITS).verdict is Verdict.PASS
    assert judge("SELECT 'e'", outcome, engine, LIMITS).verdict is Verdict.MISMATCH


def test_plan_reads_keys_from_output_columns(engine: SqliteEngine) -> None:
    plan = ties.shape("SELECT name AS n, score FROM player ORDER BY 2, n, score + 1", "sqlite", 100).plan
    assert plan is not None and plan.keys == (1, 0, -1) and plan.hidden == 1
    plan = ties.shape("SELECT name FROM player ORDER BY name", "sqlite", 100).plan
    assert plan is not None and not plan.rewritten and plan.keys == (0,)
    plan = ties.shape("SELECT name FROM player ORDER BY name LIMIT 5 OFFSET 2", "sqlite", 10).plan
    assert plan is not None and (plan.limit, plan.offset, plan.extended) == (5, 2, 10)  # capped at the row cap


def test_compare_results_with_ties_directly() -> None:
    gold = [(1, "x"), (2, "y"), (2, "z")]
    groups = TieGroups((1, 2))
    assert compare_results(gold, [("x", 1), ("z", 2), ("y", 2)], True, ties=groups)
    assert not compare_results(gold, [(2, "y"), (1, "x"), (2, "z")], True, ties=groups)
    assert compare_results(gold, [(2, "z"), (1, "x"), (2, "y")], False, ties=groups)  # unordered: ties unused
    cut = TieGroups((1, 1), ((), ((2, "w"),)))
    assert compare_results(gold[:2], [(1, "x"), (2, "w")], True, ties=cut)
    assert not compare_results(gold[:2], [(2, "w"), (1, "x")], True, ties=cut)


# -------------------------------------------------------------------------- end to end

def test_a_tie_case_passes_through_pytest(pytester: pytest.Pytester) -> None:
    con = sqlite3.connect(pytester.path / "players.sqlite")
    con.executescript(PLAYERS_SQL)
    con.commit()
    con.close()
    cases = [
        {"id": "top", "question": "Who scored most?", "gold": "SELECT name FROM player ORDER BY score DESC LIMIT 1",
         "predicted": "SELECT name FROM player WHERE score = (SELECT max(score) FROM player) ORDER BY name DESC LIMIT 1"},
        {"id": "ranked", "question": "Players by score", "gold": "SELECT name FROM player ORDER BY score",
         "predicted": "SELECT name FROM player ORDER BY score, name DESC"},
        {"id": "wrong", "question": "Who scored least?", "gold": "SELECT name FROM player WHERE score IS NOT NULL ORDER BY score LIMIT 1",
         "predicted": "SELECT 'b'"},
    ]
    write_suite(pytester.path, cases, name="players.nl2sql.yaml", database="players.sqlite")
    result = pytester.runpytest("--nl2sql-report=json:report.json")
    result.assert_outcomes(passed=2, failed=1)
    verdicts = {item["id"]: item["verdict"] for item in read_report(pytester.path / "report.json")["items"]}
    assert verdicts == {"top": "pass", "ranked": "pass", "wrong": "mismatch"}
    compat = pytester.runpytest("--nl2sql-compat=spider")
    compat.assert_outcomes(passed=0, failed=3)
