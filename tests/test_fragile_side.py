"""Which side is fragile (issue 31): on the stress neighbour a fragile pass differs on, the query
whose result shows what the broken invariant caused, told by restoring the invariant and running
both queries again (judge/fragile_side.py). Strict accuracy and `--nl2sql-fragile=fail` hold only
the prediction's (and both's) against the prediction; the terminal, md and HTML reports name the
side; the gold audit reads it for its `fragile_gold` finding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import make_db, make_shop, read_report, write_suite
from pytest_nl2sql.engines.base import Limits
from pytest_nl2sql.engines.sqlite import SqliteEngine
from pytest_nl2sql.engines.url import EngineKind
from pytest_nl2sql.judge import on_neighbours
from pytest_nl2sql.judge.execute import run_gold
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.summary import summarize
from pytest_nl2sql.neighbours import Neighbour
from pytest_nl2sql.neighbours import shrink_counterexample as shrink
from pytest_nl2sql.neighbours.invariants import Invariant, InvariantKind
from pytest_nl2sql.plugin.terminal import fragile_cases
from pytest_nl2sql.reports.html import render_html
from pytest_nl2sql.reports.md import render_markdown
from pytest_nl2sql.vocab import FragileSide, Kind, Verdict

SINGERS = """
CREATE TABLE singer(id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE song(id INTEGER PRIMARY KEY, title TEXT, singer_id INTEGER REFERENCES singer(id));
"""
# the case's own database: every name once, every song's singer known
OWN = SINGERS + """
INSERT INTO singer VALUES (1, 'Ann'), (2, 'Bo'), (3, 'Cy');
INSERT INTO song VALUES (10, 'a', 1), (11, 'b', 1), (12, 'c', 2), (13, 'd', 3);
"""
# two singers called Ann (a stress neighbour breaking "singer.name is unique")
NAMESAKES = SINGERS + """
INSERT INTO singer VALUES (1, 'Ann'), (2, 'Bo'), (7, 'Ann');
INSERT INTO song VALUES (10, 'a', 1), (11, 'b', 1), (12, 'c', 2), (14, 'e', 7);
"""
# a song whose singer is unknown (a stress neighbour breaking "song.singer_id is never NULL")
UNKNOWN = SINGERS + """
INSERT INTO singer VALUES (1, 'Ann'), (2, 'Bo'), (3, 'Cy');
INSERT INTO song VALUES (10, 'a', 1), (12, 'c', 2), (15, 'f', NULL);
"""
BY_NAME = "SELECT s.name, count(*) FROM singer AS s JOIN song ON song.singer_id = s.id GROUP BY s.name"
BY_KEY = "SELECT s.name, count(*) FROM singer AS s JOIN song ON song.singer_id = s.id GROUP BY s.id"
SILENT_EXCEPT = "SELECT name FROM singer EXCEPT SELECT s.name FROM singer AS s JOIN song ON song.singer_id = s.id"
SILENT_NOT_IN = "SELECT name FROM singer WHERE id NOT IN (SELECT singer_id FROM song)"
UNIQUE_NAME = Invariant(InvariantKind.UNIQUE, "singer", "name")
SINGER_KNOWN = Invariant(InvariantKind.NOT_NULL, "song", "singer_id")


def _check(tmp_path: Path, stress_sql: str, broken: Invariant, gold: str, predicted: str, *,
           shrunk: bool = False, own_sql: str = OWN) -> on_neighbours.NeighbourCheck:
    """`predicted` judged against `gold` on one stress neighbour (`stress_sql`) that breaks `broken`."""
    own = make_db(tmp_path / "own.sqlite", own_sql)
    (tmp_path / "n").mkdir()
    stress = make_db(tmp_path / "n" / "0.sqlite", stress_sql)
    neighbour = Neighbour(stress, 0, f"stress: {broken.words()}", broken, ())
    database = on_neighbours.OtherDatabase(stress, EngineKind.SQLITE, "neighbour 1 of 1", neighbour)
    rules = on_neighbours.JudgingRules((gold,), "sqlite", "auto")
    limits = Limits(timeout=60)
    engine = SqliteEngine(own, immutable=True)
    try:
        own_gold = run_gold([gold], engine, limits, dialect="sqlite")
    finally:
        engine.close()
    return on_neighbours.check(predicted, [database], rules, limits, lambda d: SqliteEngine(d.path, immutable=True),
                               shrink=shrink if shrunk else None, own_gold=own_gold)


@pytest.mark.parametrize("shrunk", [False, True])
def test_a_gold_that_groups_by_a_name_is_the_fragile_side(tmp_path: Path, shrunk: bool) -> None:
    """Two singers called Ann: the gold's one Ann with 3 songs merges them, the prediction's two
    Anns (2 and 1) do not. Told on the whole neighbour and on the shrunk counterexample alike."""
    check = _check(tmp_path, NAMESAKES, UNIQUE_NAME, BY_NAME, BY_KEY, shrunk=shrunk)
    assert check.is_fragile and check.fragile_side is FragileSide.GOLD
    assert not check.fragile_against_prediction
    assert check.to_json()["fragile_side"] == "gold"
    if shrunk:
        assert check.failure is not None and check.failure.shrunk


def test_the_side_is_told_on_a_duckdb_neighbour_too(tmp_path: Path) -> None:
    """A DuckDB case's neighbours are DuckDB files: restored copies are written and judged there."""
    duckdb = pytest.importorskip("duckdb")
    from pytest_nl2sql.engines.duckdb import DuckdbEngine, new_worker

    paths = {}
    for name, sql in (("own", OWN), ("stress", NAMESAKES)):
        paths[name] = tmp_path / f"{name}.duckdb"
        connection = duckdb.connect(str(paths[name]))
        connection.execute(sql)
        connection.close()
    neighbour = Neighbour(paths["stress"], 0, "stress", UNIQUE_NAME, ())
    database = on_neighbours.OtherDatabase(paths["stress"], EngineKind.DUCKDB, "neighbour 1 of 1", neighbour)
    rules = on_neighbours.JudgingRules((BY_NAME,), "duckdb", "auto")
    limits, worker = Limits(timeout=60), new_worker()
    try:
        engine = DuckdbEngine(paths["own"], worker=worker)
        try:
            own_gold = run_gold([BY_NAME], engine, limits, dialect="duckdb")
        finally:
            engine.close()
        by_key = BY_KEY + ", s.name"  # DuckDB wants every column shown grouped
        check = on_neighbours.check(by_key, [database], rules, limits, lambda d: DuckdbEngine(d.path, worker=worker, rows=d.rows),
                                    shrink=shrink, own_gold=own_gold)
    finally:
        worker.shutdown()
    assert check.is_fragile and check.fragile_side is FragileSide.GOLD


def test_a_prediction_that_groups_by_a_name_is_the_fragile_side(tmp_path: Path) -> None:
    check = _check(tmp_path, NAMESAKES, UNIQUE_NAME, BY_KEY, BY_NAME)
    assert check.fragile_side is FragileSide.PREDICTION and check.fragile_against_prediction


@pytest.mark.parametrize("shrunk", [False, True])
def test_not_in_over_a_column_holding_a_null_is_the_prediction_s_fragility(tmp_path: Path, shrunk: bool) -> None:
    """A song of no known singer: the prediction's NOT IN returns nothing, the gold's EXCEPT still
    returns Cy, who sings nothing."""
    check = _check(tmp_path, UNKNOWN, SINGER_KNOWN, SILENT_EXCEPT, SILENT_NOT_IN, shrunk=shrunk)
    assert check.is_fragile and check.fragile_side is FragileSide.PREDICTION
    assert check.fragile_against_prediction


def test_the_gold_s_not_in_is_the_gold_s_fragility(tmp_path: Path) -> None:
    check = _check(tmp_path, UNKNOWN, SINGER_KNOWN, SILENT_NOT_IN, SILENT_EXCEPT)
    assert check.fragile_side is FragileSide.GOLD


@pytest.mark.parametrize("shrunk", [False, True])
def test_a_null_sorted_first_as_the_youngest_is_the_gold_s_fragility(tmp_path: Path, shrunk: bool) -> None:
    """A pet of unknown age: the gold's ORDER BY age LIMIT 1 shows it as the youngest, the
    prediction's `= min(age)` shows the two youngest known (a tie the gold's LIMIT cuts elsewhere)."""
    pets = "CREATE TABLE pet(id INTEGER PRIMARY KEY, kind TEXT, age INTEGER);"
    own = pets + "INSERT INTO pet VALUES (1, 'cat', 3), (2, 'dog', 1), (3, 'dog', 5);"
    stress = pets + "INSERT INTO pet VALUES (1, 'cat', 3), (2, 'dog', 1), (3, 'dog', 5), (4, 'eel', 1), (5, 'cat', NULL);"
    gold = "SELECT kind FROM pet ORDER BY age LIMIT 1"
    predicted = "SELECT kind FROM pet WHERE age = (SELECT min(age) FROM pet)"
    check = _check(tmp_path, stress, Invariant(InvariantKind.NOT_NULL, "pet", "age"), gold, predicted, shrunk=shrunk, own_sql=own)
    assert check.is_fragile and check.fragile_side is FragileSide.GOLD


def test_a_gold_that_merges_namesakes_against_a_prediction_that_picks_one_is_both(tmp_path: Path) -> None:
    """The gold counts the songs of every Ann, the prediction those of the Ann its scalar subquery
    happens to find first: each result depends on a name naming one singer."""
    gold = "SELECT count(*) FROM singer AS s JOIN song ON song.singer_id = s.id WHERE s.name = 'Ann'"
    predicted = "SELECT count(*) FROM song WHERE singer_id = (SELECT id FROM singer WHERE name = 'Ann')"
    check = _check(tmp_path, NAMESAKES, UNIQUE_NAME, gold, predicted)
    assert check.is_fragile and check.fragile_side is FragileSide.BOTH and check.fragile_against_prediction


def test_a_difference_the_broken_invariant_does_not_explain_cannot_be_told(tmp_path: Path) -> None:
    """The queries differ on the stress neighbour (a title the prediction's LIKE also matches), but
    restoring its NULL does not make them agree: neither side is told, so both (strict counts it)."""
    gold = "SELECT title FROM song WHERE title = 'a'"
    predicted = "SELECT title FROM song WHERE title LIKE 'a%'"
    stress = UNKNOWN + "INSERT INTO song VALUES (16, 'ab', 2);"
    check = _check(tmp_path, stress, SINGER_KNOWN, gold, predicted)
    assert check.is_fragile and check.fragile_side is FragileSide.BOTH


def test_a_singer_without_song_counted_zero_is_asked_for_the_gold_that_drops_it_is_fragile(tmp_path: Path) -> None:
    """Every singer has a song on the case's database; a stress neighbour adds one who has none. The
    prediction's LEFT JOIN counts her 0, the gold's JOIN drops her: the gold relies on the invariant."""
    stress = OWN + "INSERT INTO singer VALUES (4, 'Dee');"
    every_singer_sings = Invariant(InvariantKind.PARTICIPATION, "singer", "id", "song", "singer_id")
    left = "SELECT s.name, count(song.id) FROM singer AS s LEFT JOIN song ON song.singer_id = s.id GROUP BY s.id"
    check = _check(tmp_path, stress, every_singer_sings, BY_KEY, left)
    assert check.is_fragile and check.fragile_side is FragileSide.GOLD


def test_a_gold_that_asks_for_what_only_the_stress_neighbour_holds_is_not_blamed(tmp_path: Path) -> None:
    """"Names shared by two singers": none on the case's database, so the gold returns nothing there;
    where two singers share a name it finds them and the prediction does not. The gold changing
    there says nothing against it: the side cannot be told (both, which strict counts)."""
    gold = "SELECT name FROM singer GROUP BY name HAVING count(*) > 1"
    predicted = "SELECT name FROM singer GROUP BY id HAVING count(*) > 1"
    check = _check(tmp_path, NAMESAKES, UNIQUE_NAME, gold, predicted)
    assert check.is_fragile and check.fragile_side is FragileSide.BOTH


def _result(case_id: str, side: str | None, verdict: Verdict = Verdict.PASS, position: int = 0) -> CaseResult:
    neighbours = {"checked": 3, "failed": 0, "fragile": 1 if side else 0, "fragile_side": side, "counterexample": None}
    return CaseResult(id=case_id, nodeid=f"s.yaml::{case_id}", file="s.yaml", position=position, kind=Kind.SQL,
                      verdict=verdict, neighbours=neighbours)


def test_strict_accuracy_counts_only_the_prediction_s_and_both_fragile_passes() -> None:
    results = [_result("g", "gold", position=0), _result("p", "prediction", position=1), _result("b", "both", position=2),
               _result("ok", None, position=3), _result("wrong", None, Verdict.MISMATCH, position=4)]
    summary = summarize(results)
    assert summary["fragile"] == 3
    assert summary["fragile_by_side"] == {"prediction": 1, "gold": 1, "both": 1}
    assert summary["strict_accuracy"] == pytest.approx(2 / 5)  # g and ok; p and b count as failures
    assert summary["accuracy"] == pytest.approx(4 / 5)
    old = summarize([_result("older", None, position=0).replace(neighbours={"checked": 1, "failed": 0, "fragile": 1})])
    assert old["fragile_by_side"] == {"prediction": 0, "gold": 0, "both": 1}  # a report that names no side: counted
    assert old["strict_accuracy"] == 0


def test_the_terminal_names_fragile_cases_the_prediction_s_first_at_most_ten() -> None:
    items = [_result(f"g{i}", "gold", position=i).to_json() for i in range(8)]
    items += [_result("p1", "prediction", position=20).to_json(), _result("b1", "both", position=21).to_json(),
              _result("p2", "prediction", position=22).to_json(), _result("ok", None, position=23).to_json(),
              _result("g9", "gold", position=24).to_json()]
    [line] = fragile_cases(items)
    assert line == ("  fragile passes: p1 (prediction), p2 (prediction), b1 (both), g0 (gold), g1 (gold), g2 (gold), "
                    "g3 (gold), g4 (gold), g5 (gold), g6 (gold), and 2 more (each item's neighbours.fragile_side in "
                    "--nl2sql-report=json)")
    assert fragile_cases([_result("ok", None).to_json()]) == []


def test_the_md_and_html_reports_show_the_side() -> None:
    results = [_result("g", "gold", position=0), _result("p", "prediction", position=1)]
    report = {"summary": {**summarize(results), "neighbours": {"cases": 2, "databases": 6, "caught": 0}},
              "items": [r.to_json() for r in results]}
    md = render_markdown(report)
    assert "fragile side: prediction 1, both 0, gold 1" in md
    assert md.index("| `s.yaml::p` | prediction |") < md.index("| `s.yaml::g` | gold |")
    html = render_html(report)
    assert "fragile side: prediction 1, both 0, gold 1" in html
    assert "fragile_side" in html  # the item's badge and explanation read it


def test_the_schema_knows_the_sides() -> None:
    schema = json.loads((Path(__file__).parents[1] / "pytest_nl2sql" / "reports" / "report.schema.json").read_text())
    assert schema["$defs"]["fragile_side"]["enum"] == [side.value for side in FragileSide]


SHOP_CASES: list[dict[str, Any]] = [
    # the shop's item names are all distinct: only a stress neighbour where two items share a name tells these apart
    {"id": "gold-merges", "gold": "SELECT DISTINCT name FROM item", "predicted": "SELECT name FROM item"},
    {"id": "prediction-merges", "gold": "SELECT name FROM item", "predicted": "SELECT DISTINCT name FROM item"},
]


def test_fragile_fail_fails_only_the_prediction_s_fragility_and_the_terminal_names_them(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, SHOP_CASES, database="shop.sqlite")
    result = pytester.runpytest("--nl2sql-report=json:report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "  strict (fragile passes counted as failures, unless only the gold is fragile) 1/2 = 50.0%; 2 fragile passes "
        "(*fragile side: prediction 1, both 0, gold 1;*",
        "  fragile passes: prediction-merges (prediction), gold-merges (gold)",
    ])
    items = {item["id"]: item for item in read_report(pytester.path / "report.json")["items"]}
    assert items["gold-merges"]["neighbours"]["fragile_side"] == "gold"
    assert items["prediction-merges"]["neighbours"]["fragile_side"] == "prediction"
    # the gold audit reads the side: a fragile gold is a finding on the gold-side case only
    assert [f["kind"] for f in items["gold-merges"]["gold_audit"]["findings"]] == ["fragile_gold"]
    assert "two rows of item share name" in items["gold-merges"]["gold_audit"]["findings"][0]["detail"]
    assert items["prediction-merges"]["gold_audit"]["findings"] == []

    result = pytester.runpytest("--nl2sql-fragile=fail", "--nl2sql-report=json:strict.json")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*nl2sql case prediction-merges*: mismatch (neighbour database (fragile))*",
                                 "  fragile passes: gold-merges (gold)"])
    summary = read_report(pytester.path / "strict.json")["summary"]
    assert summary["fragile_by_side"] == {"prediction": 0, "gold": 1, "both": 0} and summary["strict_accuracy"] == 0.5


@pytest.mark.parametrize(("table", "column", "excused"), [
    ("person", "name", True),  # two people called Jordan: the gold's INTERSECT merges them, its difference is excused
    ("shop", "district", False),  # two shops in one district: that district is the answer, not a merge
])
def test_a_set_operation_merges_only_rows_that_share_a_name(tmp_path: Path, table: str, column: str, excused: bool) -> None:
    """`district ... INTERSECT district ...` asks which districts hold both kinds of shop: a district
    shared by two shops is the point (Spider dev 0293, 0294; a prediction that repeats the district
    or wants one shop to be both is wrong). Only where the compared column names its rows (a person's
    name) do two rows sharing a value merge two entities."""
    from pytest_nl2sql.judge.fragile_gold import why_gold_is_fragile

    path = make_db(tmp_path / "db.sqlite", f"""
        CREATE TABLE {table}(id INTEGER PRIMARY KEY, {column} TEXT, n INTEGER);
        INSERT INTO {table} VALUES (1, 'Jordan', 2000), (2, 'Jordan', 20000), (3, 'Kim', 5000);
    """)
    gold = f"SELECT {column} FROM {table} WHERE n < 3000 INTERSECT SELECT {column} FROM {table} WHERE n > 10000"
    engine = SqliteEngine(path, immutable=True)
    try:
        why = why_gold_is_fragile([gold], "sqlite", engine, Limits(timeout=60), frozenset({(table, "id")}), ("Jordan",))
    finally:
        engine.close()
    assert (why == "rows that share a value the gold's INTERSECT compares (a name, not a key), which it merges") is excused
    assert excused or why is None


@pytest.mark.parametrize(("predicted", "excused"), [
    ([("Ann",)], True),  # Ann has a cat and a dog; the two Jordans one each: the gold's INTERSECT merges them
    ([("Ann",), ("Ann",)], True),  # (copies aside)
    ([], False),  # 'Cat' where the data holds 'cat': nobody, for a reason of the prediction's own
    ([("Ann",), ("Jordan",)], False),  # the gold's answer itself: no namesakes kept apart
])
def test_a_set_operation_excuses_only_a_prediction_that_keeps_the_namesakes_apart(
        tmp_path: Path, predicted: list[tuple[str]], excused: bool) -> None:
    """The merge excuses the difference when the prediction gives what the gold gives once each
    side's rows are compared by key too (Spider dev 0059: a prediction asking for PetType = 'Cat'
    found nobody on every neighbour, and passed as the gold's fragility because names repeat)."""
    from pytest_nl2sql.judge.fragile_gold import why_gold_is_fragile

    path = make_db(tmp_path / "db.sqlite", """
        CREATE TABLE person(id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE pet(owner INTEGER REFERENCES person(id), kind TEXT);
        INSERT INTO person VALUES (1, 'Jordan'), (2, 'Jordan'), (3, 'Ann'), (4, 'Ann');
        INSERT INTO pet VALUES (1, 'cat'), (2, 'dog'), (3, 'cat'), (3, 'dog');
    """)
    gold = ("SELECT p.name FROM person AS p JOIN pet ON pet.owner = p.id WHERE pet.kind = 'cat' "
            "INTERSECT SELECT p.name FROM person AS p JOIN pet ON pet.owner = p.id WHERE pet.kind = 'dog'")
    engine = SqliteEngine(path, immutable=True)
    try:
        why = why_gold_is_fragile([gold], "sqlite", engine, Limits(timeout=60), frozenset({("person", "id"), ("pet", "owner")}),
                                  ("Jordan", "Ann"), predicted)
    finally:
        engine.close()
    assert (why == "rows that share a value the gold's INTERSECT compares (a name, not a key), which it merges") is excused
