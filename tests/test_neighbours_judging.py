"""Judging beyond one database: a prediction right on the case's database by accident fails on a
database that tells it apart (a folder of databases, as the official test-suite layout has, or
generated neighbours); equivalent predictions pass on all of them; reports say both accuracies.

xdist equivalence of neighbour verdicts is checked once, in
`test_plugin_core.py::test_json_report_identical_with_and_without_xdist` (its suite holds `ACCIDENTS`
and three cases checked on the same neighbours: one caught, one fragile pass)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from helpers import make_shop, read_report, write_suite
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.judge import on_neighbours
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions
from pytest_nl2sql.metrics.summary import summarize
from pytest_nl2sql.vocab import Reason, Verdict

LABEL = CaseLabel("shop.nl2sql.yaml::q", "shop.nl2sql.yaml", 0)


def _db(path: Path, rows: list[tuple[int, str, float]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL)")
        conn.executemany("INSERT INTO item VALUES (?, ?, ?)", rows)
    conn.close()
    return path


def _folder(tmp_path: Path) -> Path:
    """db/shop/shop.sqlite hides a missing DISTINCT and `>` for `>=`; shop_2.sqlite does not."""
    folder = tmp_path / "db" / "shop"
    _db(folder / "shop.sqlite", [(1, "pen", 1.5), (2, "ink", 3.5), (3, "mug", 7.0)])
    _db(folder / "shop_2.sqlite", [(1, "pen", 2.0), (2, "pen", 3.0), (3, "mug", 2.0), (4, "cap", 9.0)])
    return folder


def _case(tmp_path: Path, gold: str, predicted: str, **fields: object) -> Case:
    folder = _folder(tmp_path)
    return Case(id="q", file=tmp_path / "shop.nl2sql.yaml", line=1, position=0, database="db/shop",
                database_target=str(folder), gold=(gold,), predicted=predicted, **fields)


@pytest.mark.parametrize(("gold", "predicted"), [
    ("SELECT DISTINCT name FROM item", "SELECT name FROM item"),
    ("SELECT name FROM item WHERE price >= 2", "SELECT name FROM item WHERE price > 2"),
])
def test_an_accidental_pass_on_the_case_database_fails_on_the_folder_s_other_database(tmp_path: Path, gold: str, predicted: str) -> None:
    outcome = Pipeline(RunOptions()).evaluate(_case(tmp_path, gold, predicted), LABEL)
    result = outcome.result
    assert result.verdict is Verdict.MISMATCH
    assert result.reason == Reason.NEIGHBOUR.value
    assert _counts(result.neighbours) == {"checked": 1, "failed": 1}
    assert "shop_2.sqlite" in outcome.explanation
    assert "the prediction matches the gold on db/shop, but not on 1 of 1 other database" in outcome.explanation
    assert result.diff["database"] == "shop_2.sqlite"


@pytest.mark.parametrize("predicted", [
    "SELECT DISTINCT i.name FROM item AS i",
    "select distinct \"name\" from (select * from item)",
    "SELECT name FROM item GROUP BY name",
])
def test_equivalent_predictions_pass_on_every_database(tmp_path: Path, predicted: str) -> None:
    outcome = Pipeline(RunOptions()).evaluate(_case(tmp_path, "SELECT DISTINCT name FROM item", predicted), LABEL)
    assert outcome.result.verdict is Verdict.PASS
    assert _counts(outcome.result.neighbours) == {"checked": 1, "failed": 0}


def test_without_neighbours_only_the_case_database_counts(tmp_path: Path) -> None:
    case = _case(tmp_path, "SELECT DISTINCT name FROM item", "SELECT name FROM item", neighbours=0)
    outcome = Pipeline(RunOptions()).evaluate(case, LABEL)
    assert outcome.result.verdict is Verdict.PASS
    assert outcome.result.neighbours is None


def test_a_prediction_wrong_on_its_own_database_is_not_judged_further(tmp_path: Path) -> None:
    outcome = Pipeline(RunOptions()).evaluate(_case(tmp_path, "SELECT DISTINCT name FROM item", "SELECT price FROM item"), LABEL)
    assert outcome.result.verdict is Verdict.MISMATCH
    assert outcome.result.reason == Reason.VALUES.value
    assert outcome.result.neighbours is None


def test_the_summary_keeps_the_accuracy_on_the_cases_own_databases(tmp_path: Path) -> None:
    pipeline = Pipeline(RunOptions())
    caught = pipeline.evaluate(_case(tmp_path / "a", "SELECT DISTINCT name FROM item", "SELECT name FROM item"), LABEL).result
    right = pipeline.evaluate(_case(tmp_path / "b", "SELECT DISTINCT name FROM item", "SELECT DISTINCT name FROM item"), LABEL).result
    summary = summarize([caught, right])
    assert (summary["accuracy"], summary["single_db_accuracy"]) == (0.5, 1.0)
    # the right prediction is the gold's own text: it matches everywhere, nothing runs again
    assert _counts(right.neighbours) == {"checked": 0, "failed": 0}
    assert summary["neighbours"] == {"cases": 2, "databases": 1, "caught": 1}
    json.dumps(summary)


@pytest.mark.parametrize(("predicted", "same"), [
    ("select distinct NAME from Item;", True),
    ("SELECT DISTINCT name\n  FROM item ;;", True),
    ("SELECT DISTINCT name FROM item WHERE name = 'Pen'", False),
    ("SELECT name FROM item", False),
])
def test_the_gold_s_own_text_is_recognised_token_for_token(predicted: str, same: bool) -> None:
    assert on_neighbours.same_query(predicted, ["SELECT DISTINCT name FROM item"], "sqlite") is same
    assert on_neighbours.same_query("SELECT 1 WHERE 'Pen' = 'pen'", ["SELECT 1 WHERE 'pen' = 'pen'"], "sqlite") is False


# --- end to end, with generated neighbours -------------------------------------------------

ACCIDENTS = [
    # the shop's names are all distinct and no price sits on 2.0: the real data hides both mistakes (a
    # DISTINCT merges two items once they share a name: the prediction's is the fragile side)
    {"id": "distinct", "gold": "SELECT name FROM item", "predicted": "SELECT DISTINCT name FROM item"},
    {"id": "boundary", "gold": "SELECT name FROM item WHERE price >= 2.5", "predicted": "SELECT name FROM item WHERE price > 2.5"},
    {"id": "rewrite", "gold": "SELECT name FROM item WHERE price >= 2.5",
     "predicted": "select i.\"name\" from item as i where not (i.price < 2.5)"},
]


def test_generated_neighbours_catch_accidental_passes_and_say_so(pytester: pytest.Pytester) -> None:
    """`price > 2.5` for `>= 2.5` fails on a plausible neighbour; a DISTINCT over names that are all
    distinct in the shop differs only where two items share a name (a stress neighbour): it passes,
    marked fragile (the prediction's side: its DISTINCT merges the two), and says so."""
    make_shop(pytester.path)
    write_suite(pytester.path, ACCIDENTS, database="shop.sqlite")
    result = pytester.runpytest("--nl2sql-report=json:report.json", "--nl2sql-report=md:report.md")
    result.assert_outcomes(passed=2, failed=1)
    assert ("strict (fragile passes counted as failures, unless only the gold is fragile): 33.3%; 1 fragile pass(es) "
            "(fragile side: prediction 1, both 0, gold 0" in (pytester.path / "report.md").read_text())
    result.stdout.fnmatch_lines([
        "*nl2sql case boundary*: mismatch (neighbour database)*",
        "*the prediction matches the gold on shop.sqlite, but not on * other database*",
        "*on neighbour * of *, its rows that tell the two queries apart:*",
        "*item (id, name, price, category): * row*",
        "*gold result there:*",
        "*predicted result there:*",
        "execution accuracy with neighbour databases 2/3 = 66.7%",
        "  one-database execution accuracy (the cases' own databases alone*) 3/3 = 100.0%; neighbour databases failed 1 prediction right there*",
        "  strict (fragile passes counted as failures, unless only the gold is fragile) 1/3 = 33.3%; 1 fragile pass *",
        "  fragile passes: distinct (prediction)",
    ])
    report = read_report(pytester.path / "report.json")
    items = {i["id"]: i for i in report["items"]}
    assert items["boundary"]["reason"] == "neighbour database"
    assert items["boundary"]["neighbours"]["failed"] >= 1
    shown = items["boundary"]["neighbours"]["counterexample"]
    assert shown["breaks"] is None and shown["tables"]["item"]["rows"] and shown["gold"] != shown["predicted"]
    assert items["distinct"]["verdict"] == "pass"
    fragile = items["distinct"]["neighbours"]
    assert fragile["failed"] == 0 and fragile["fragile"] >= 1 and fragile["fragile_side"] == "prediction"
    assert fragile["counterexample"]["breaks"] == "two rows of item share name"
    names = [row[1] for row in fragile["counterexample"]["tables"]["item"]["rows"]]
    assert len(names) == 2 and names[0] == names[1]  # the two rows that share a name: all it takes
    assert items["rewrite"]["neighbours"] == {**items["rewrite"]["neighbours"], "failed": 0, "fragile": 0, "counterexample": None}
    assert items["rewrite"]["neighbours"]["checked"] >= 1
    assert report["summary"]["single_db_accuracy"] == 1.0
    assert report["summary"]["accuracy"] == pytest.approx(2 / 3)
    assert report["summary"]["strict_accuracy"] == pytest.approx(1 / 3)
    assert report["summary"]["fragile"] == 1


def test_fragile_fail_fails_a_fragile_prediction_and_says_what_breaks_it(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, ACCIDENTS[:1], database="shop.sqlite")
    result = pytester.runpytest("--nl2sql-fragile=fail", "--nl2sql-report=json:report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*nl2sql case distinct*: mismatch (neighbour database (fragile))*",
        "*fragile, failed by --nl2sql-fragile=fail*",
        "*it differs when two rows of item share name*",
    ])
    [item] = read_report(pytester.path / "report.json")["items"]
    assert item["reason"] == "neighbour database (fragile)"
    assert pytester.runpytest("--nl2sql-fragile=maybe").ret == pytest.ExitCode.USAGE_ERROR


def test_neighbours_off_and_in_compat_mode_judge_on_the_case_database_alone(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, ACCIDENTS, database="shop.sqlite")
    for flags in (["--nl2sql-neighbours=0"], ["--nl2sql-compat=spider"]):
        result = pytester.runpytest(*flags, "--nl2sql-report=json:report.json")
        result.assert_outcomes(passed=3)
        assert all(i["neighbours"] is None for i in read_report(pytester.path / "report.json")["items"])


def test_the_neighbours_case_key_overrides_the_run(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, ACCIDENTS[:1], database="shop.sqlite", neighbours=0)
    pytester.runpytest().assert_outcomes(passed=1)
    write_suite(pytester.path, [{**ACCIDENTS[1], "neighbours": 2}], database="shop.sqlite")
    pytester.runpytest("--nl2sql-neighbours=0").assert_outcomes(failed=1)


@pytest.mark.parametrize(("predicted", "verdict", "neighbours"), [
    # all the tied rows: right under one reading of the gold; that database is not counted
    ("SELECT name FROM item WHERE price = (SELECT max(price) FROM item)", Verdict.PASS, {"checked": 1, "failed": 0}),
    # a row outside the tie: wrong under every reading; counted
    ("SELECT name FROM item ORDER BY id DESC LIMIT 1", Verdict.MISMATCH, {"checked": 2, "failed": 2}),
])
def test_a_database_where_the_gold_is_not_determined_counts_only_certain_failures(
        tmp_path: Path, predicted: str, verdict: Verdict, neighbours: dict[str, int]) -> None:
    """`ORDER BY price DESC LIMIT 1` on shop_2.sqlite, where two items share the top price: the
    gold's own answer is the database's choice there."""
    case = _case(tmp_path, "SELECT name FROM item ORDER BY price DESC LIMIT 1", predicted)
    (tmp_path / "db" / "shop" / "shop_2.sqlite").unlink()
    _db(tmp_path / "db" / "shop" / "shop_2.sqlite", [(1, "pen", 9.0), (2, "ink", 9.0), (3, "mug", 2.0)])
    _db(tmp_path / "db" / "shop" / "shop_3.sqlite", [(1, "pen", 9.0), (2, "ink", 8.0)])
    outcome = Pipeline(RunOptions()).evaluate(case, LABEL)
    assert outcome.result.verdict is verdict
    assert _counts(outcome.result.neighbours) == neighbours


def _counts(neighbours: dict[str, Any] | None) -> dict[str, int] | None:
    """The JSON item's databases checked and failed (its counterexample is tested on its own)."""
    return None if neighbours is None else {"checked": neighbours["checked"], "failed": neighbours["failed"]}


def test_a_right_prediction_checked_on_no_neighbour_says_so(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """When no candidate database runs the gold, the case has no neighbours: the item says why
    (`extra.neighbours_off`) and the summary counts it, rather than pass as if it were checked."""
    from pytest_nl2sql.neighbours import cache

    make_shop(pytester.path)
    monkeypatch.setattr(cache.NeighbourCache, "neighbours_for", lambda self, *args, **kwargs: ())  # generation made none
    write_suite(pytester.path, [{"id": "right", "gold": "SELECT 1", "predicted": "SELECT 2 - 1"},
                                {"id": "wrong", "gold": "SELECT 1", "predicted": "SELECT 2"}], database="shop.sqlite")
    result = pytester.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*neighbour databases off for 1 right prediction: none could be generated*"])
    items = {i["id"]: i for i in read_report(pytester.path / "r.json")["items"]}
    assert items["right"]["neighbours"] is None and "none could be generated" in items["right"]["extra"]["neighbours_off"]
