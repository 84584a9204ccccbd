"""Holes in judging that let a wrong prediction pass (issue 29, found by a red team), each closed:

- a difference on a plausible neighbour is excused as "what the gold never showed its author"
  only as far as the *gold's* result there holds rows (NULL, zero, copies) the prediction lacks;
  a prediction that adds rows holding NULL or 0 (`>= 0` for `> 0`, `OR bonus IS NULL`,
  `coalesce(bonus, 1000)`), or more copies of a row than the gold (`>=` for `>` where names repeat),
  fails;
- an integer of 1e15 or more and a double of the same value compare alike in either column order,
  in memory and inside the engine;
- the in-engine column pairing search is bounded.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_nl2sql.engines.base import QueryResult
from pytest_nl2sql.judge.execute import GoldOutcome, Judgement
from pytest_nl2sql.judge.on_neighbours import JudgingRules, unseen_by_gold
from pytest_nl2sql.vocab import Verdict

# ----------------------------------------------------------------------------- 1. what the gold never showed


def _why(own: list[tuple], here: list[tuple], predicted: list[tuple], ordered: bool = False) -> str | None:
    width = len((own or here or predicted or [(None,)])[0])
    columns = tuple(f"c{i}" for i in range(width))

    def gold(rows: list[tuple]) -> GoldOutcome:
        return GoldOutcome((QueryResult(columns, rows),), ("gold",), ordered)

    judgement = Judgement(Verdict.MISMATCH, result=QueryResult(columns, predicted))
    return unseen_by_gold(gold(own), gold(here), judgement, JudgingRules(("gold",), "sqlite", "auto"))


@pytest.mark.parametrize(("own", "here", "predicted"), [
    # `bonus >= 0` for `bonus > 0`, the bonus shown: the prediction adds a row holding 0
    ([("ann", 120), ("bob", 300)], [("ann", 120)], [("ann", 120), ("cy", 0)]),
    # `bonus <> 50 OR bonus IS NULL` for `bonus <> 50`: the prediction adds a row holding NULL
    ([("ann", 120)], [("ann", 120)], [("ann", 120), ("fay", None)]),
    # the prediction has more NULL rows than the gold, which has some the prediction lacks too
    ([("ann", 120)], [("ann", 120), ("fay", None)], [("ann", 120), ("cy", None), ("cy", None)]),
    # `>=` for `>` with only names shown, where the neighbour repeats a name: one copy too many
    ([("ann",), ("bob",)], [("ann",), ("ann",), ("bob",)], [("ann",), ("ann",), ("ann",), ("bob",)]),
    # a dropped DISTINCT: the prediction repeats a row the gold has once
    ([("ann",), ("bob",)], [("ann",), ("bob",)], [("ann",), ("ann",), ("bob",)]),
    # fewer copies of one row, more of another: not "only repeats"
    ([("ann",), ("bob",)], [("ann",), ("ann",), ("bob",)], [("ann",), ("bob",), ("bob",)]),
    # the gold's NULL row is gone, and the prediction's own zero row is not the gold's
    ([("ann", 2)], [("ann", 2), (None, 1)], [("ann", 2), ("bob", 0)]),
])
def test_rows_the_prediction_adds_are_never_excused(own: list, here: list, predicted: list) -> None:
    assert _why(own, here, predicted) is None


@pytest.mark.parametrize(("own", "here", "predicted", "what"), [
    # the gold repeats a name through a join here, never on its own database; the prediction lists it once
    ([("ann",), ("bob",)], [("ann",), ("ann",), ("bob",)], [("ann",), ("bob",)], "repeated rows"),
    # the gold returns a NULL row here, never on its own database; the rest agrees
    ([("ann", 3)], [("ann", 3), (None, 1)], [("ann", 3)], "rows holding NULL"),
    # the gold counts a group zero here (a LEFT JOIN); the prediction (an inner join) lacks it
    ([("ann", 2)], [("ann", 2), ("bob", 0)], [("ann", 2)], "rows holding zero"),
    # the prediction's own NULL row is one the gold has too; it lacks the gold's other one
    ([("ann", 3)], [("ann", 3), ("cy", None), (None, 1)], [("cy", None), ("ann", 3)], "rows holding NULL"),
    # columns in another order: rows are matched whatever the column pairing
    ([("ann", 3)], [("ann", 3), (None, 1)], [(3, "ann")], "rows holding NULL"),
])
def test_rows_only_the_gold_holds_there_are_excused(own: list, here: list, predicted: list, what: str) -> None:
    why = _why(own, here, predicted)
    assert why is not None and what in why and "which the gold never returns on the case's database" in why


def test_an_ordered_result_keeps_its_order_once_the_gold_s_unseen_rows_go() -> None:
    own = [("2001-01-01", "ann"), ("2002-01-01", "bob")]
    here = [(None, "cy"), ("2001-01-01", "ann"), ("2002-01-01", "bob")]  # NULL sorts first: "the earliest"
    assert _why(own, here, [("2001-01-01", "ann"), ("2002-01-01", "bob")], ordered=True) is not None
    assert _why(own, here, [("2002-01-01", "bob"), ("2001-01-01", "ann")], ordered=True) is None


# End to end: an employee table whose bonus column holds NULLs, zeros and repeated names. Each wrong
# prediction matches the gold on the case's own database (the NULL, zero and repeated rows there are
# ones both queries leave out) and passed before, exit 0; a plausible neighbour tells it apart.
STAFF = """
CREATE TABLE employee(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, bonus INTEGER);
INSERT INTO employee VALUES (1, 'ann', 'sales', 120), (2, 'bob', 'sales', 300), (3, 'cy', 'ops', NULL),
    (4, 'dee', 'ops', 50), (5, 'eve', 'sales', 200), (6, 'fay', 'hr', NULL), (7, 'gus', 'hr', 10),
    (8, 'hal', 'ops', 150), (9, 'ivy', 'sales', 80), (10, 'jo', 'hr', 75), (11, 'ann', 'ops', 90), (12, 'bob', 'hr', 60);
"""
WRONG = [
    {"id": "ge-zero", "gold": "SELECT name, bonus FROM employee WHERE bonus > 0",
     "predicted": "SELECT name, bonus FROM employee WHERE bonus >= 0"},
    {"id": "dropped-conjunct", "gold": "SELECT name, bonus FROM employee WHERE bonus > 0 AND bonus <> 0",
     "predicted": "SELECT name, bonus FROM employee WHERE bonus >= 0"},
    {"id": "or-null", "gold": "SELECT name, bonus FROM employee WHERE bonus <> 50 AND dept = 'sales'",
     "predicted": "SELECT name, bonus FROM employee WHERE (bonus <> 50 OR bonus IS NULL) AND dept = 'sales'"},
    {"id": "coalesce", "gold": "SELECT name, bonus FROM employee WHERE bonus > 100 AND dept = 'sales'",
     "predicted": "SELECT name, bonus FROM employee WHERE coalesce(bonus, 1000) > 100 AND dept = 'sales'"},
]
RIGHT = [
    {"id": "not-le-zero", "gold": "SELECT name, bonus FROM employee WHERE bonus > 0",
     "predicted": "SELECT e.name, e.bonus FROM employee AS e WHERE NOT e.bonus <= 0"},
    {"id": "ne-rewritten", "gold": "SELECT name, bonus FROM employee WHERE bonus <> 50 AND dept = 'sales'",
     "predicted": "SELECT bonus, name FROM employee WHERE dept = 'sales' AND (bonus < 50 OR bonus > 50)"},
    {"id": "coalesce-right", "gold": "SELECT name, bonus FROM employee WHERE bonus > 100 AND dept = 'sales'",
     "predicted": "SELECT name, bonus FROM employee WHERE coalesce(bonus, 0) > 100 AND dept = 'sales'"},
]


def _staff_suite(directory: Path, cases: list[dict[str, Any]], data: str = STAFF) -> Path:
    with sqlite3.connect(directory / "staff.sqlite") as conn:
        conn.executescript(data)
    conn.close()
    suite = directory / "staff.nl2sql.yaml"
    suite.write_text(yaml.safe_dump({"database": "staff.sqlite", "cases": cases}, sort_keys=False))
    return suite


def test_a_prediction_adding_null_or_zero_rows_fails_on_a_neighbour_and_right_rewrites_pass(tmp_path: Path) -> None:
    from pytest_nl2sql.api import evaluate_suite

    suite = _staff_suite(tmp_path, WRONG + RIGHT)
    report = evaluate_suite(suite, rootdir=tmp_path, cache_dir=tmp_path / "cache")
    items = {item["id"]: item for item in report["items"]}
    for case in WRONG:
        item = items[case["id"]]
        assert (item["verdict"], item["reason"]) == ("mismatch", "neighbour database"), case["id"]
        shown = item["neighbours"]["counterexample"]
        assert shown["breaks"] is None
        # what the counterexample shows is what the reason says: the prediction has a row the gold lacks
        assert any(row not in shown["gold"] for row in shown["predicted"]), case["id"]
    for case in RIGHT:
        item = items[case["id"]]
        assert item["verdict"] == "pass" and item["neighbours"]["failed"] == 0 and item["neighbours"]["fragile"] == 0, case["id"]
    assert report["summary"]["single_db_accuracy"] == 1.0


def test_the_same_verdicts_under_xdist(pytester: pytest.Pytester) -> None:
    _staff_suite(pytester.path, WRONG[:1] + WRONG[2:3] + RIGHT[:1])
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=1, failed=2)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*nl2sql case ge-zero*: mismatch (neighbour database)*"])


# Names repeat in the table, never among the bonuses above 100 (the gold's result on its own database
# holds no repeat); a neighbour's gold result repeats a name, and its row at 100 is one more copy.
NAMES = """
CREATE TABLE employee(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, bonus INTEGER);
INSERT INTO employee VALUES (1, 'ann', 'sales', 120), (2, 'bob', 'sales', 300), (3, 'ann', 'ops', 40), (4, 'bob', 'ops', 50),
    (5, 'cy', 'sales', 200), (6, 'ann', 'hr', 30), (7, 'bob', 'hr', 10), (8, 'cy', 'ops', 20), (9, 'ann', 'sales', 80),
    (10, 'bob', 'hr', 75), (11, 'cy', 'ops', 90), (12, 'ann', 'hr', 60);
"""


def test_a_row_more_than_the_gold_fails_once_a_neighbour_repeats_a_name(tmp_path: Path) -> None:
    """`>=` for `>` with only names shown passed (fragile, "only in repeated rows") while its
    counterexample showed the prediction's extra row; fewer copies than the gold stay excused."""
    from pytest_nl2sql.api import evaluate_suite

    gold = "SELECT name FROM employee WHERE bonus > 100"
    suite = _staff_suite(tmp_path, [
        {"id": "at-least", "gold": gold, "predicted": "SELECT name FROM employee WHERE bonus >= 100"},
        {"id": "distinct", "gold": gold, "predicted": "SELECT DISTINCT name FROM employee WHERE bonus > 100"},
        {"id": "rewrite", "gold": gold, "predicted": "SELECT e.name FROM employee AS e WHERE NOT e.bonus <= 100"},
    ], NAMES)
    items = {item["id"]: item for item in evaluate_suite(suite, rootdir=tmp_path, cache_dir=tmp_path / "cache")["items"]}
    assert (items["at-least"]["verdict"], items["at-least"]["reason"]) == ("mismatch", "neighbour database")
    shown = items["at-least"]["neighbours"]["counterexample"]
    assert shown["breaks"] is None and len(shown["predicted"]) > len(shown["gold"])
    assert items["distinct"]["verdict"] == "pass" and items["distinct"]["neighbours"]["failed"] == 0
    assert "repeated rows" in items["distinct"]["neighbours"]["counterexample"]["breaks"]  # the gold's repeats, excused
    assert items["rewrite"]["verdict"] == "pass" and items["rewrite"]["neighbours"]["fragile"] == 0
