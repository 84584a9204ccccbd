"""Plausible neighbours: the invariants a database shows are learned, every plausible neighbour
keeps them, a stress neighbour breaks exactly one, and differences a careful reader would not
hold against a prediction (stress data, what the gold never showed its author) make it fragile
rather than wrong."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import make_db
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions
from pytest_nl2sql.neighbours import neighbours_for
from pytest_nl2sql.neighbours.build import build_neighbours
from pytest_nl2sql.neighbours.invariants import InvariantKind, Observed, learn
from pytest_nl2sql.neighbours.plausible import Keeper, offending, settle, violations
from pytest_nl2sql.neighbours.schema import open_source
from pytest_nl2sql.vocab import Verdict

LABEL = CaseLabel("plausible.yml::case", "plausible.yml")


def _world(path: Path) -> Path:
    """What Spider's databases show without declaring it: names unique, every country on a
    continent that exists (no foreign key declared), every continent with a country, a category
    spelled one way, a name with its code, a link table holding no row twice."""
    make_db(path, """
            CREATE TABLE continent(id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE country(code TEXT PRIMARY KEY, name TEXT, continent INTEGER, kind TEXT, population INTEGER);
            CREATE TABLE city(id INTEGER PRIMARY KEY, name TEXT, country TEXT REFERENCES country(code));
            CREATE TABLE visit(city_id INTEGER REFERENCES city(id), year INTEGER);
            INSERT INTO continent VALUES (1, 'Europe'), (2, 'Asia'), (3, 'Africa');
            INSERT INTO country VALUES ('FRA', 'France', 1, 'Republic', 65), ('DEU', 'Germany', 1, 'Republic', 83),
                ('JPN', 'Japan', 2, 'Monarchy', 125), ('KEN', 'Kenya', 3, 'Republic', 54), ('ABW', 'Aruba', 1, 'Territory', 1),
                ('ESP', 'Spain', 1, 'Monarchy', 47);
            INSERT INTO city VALUES (1, 'Paris', 'FRA'), (2, 'Lyon', 'FRA'), (3, 'Berlin', 'DEU'), (4, 'Tokyo', 'JPN'),
                (5, 'Nairobi', 'KEN'), (6, 'Madrid', 'ESP');
            INSERT INTO visit VALUES (1, 2001), (1, 2002), (3, 2001), (4, 2003), (6, 2003);
        """)
    return path


@pytest.fixture
def world(tmp_path: Path) -> Path:
    return _world(tmp_path / "world.sqlite")


def _learned(path: Path) -> set[tuple[str, str, str, str]]:
    reader = open_source(path, "sqlite")
    try:
        return {(i.kind.value, i.table, i.column, i.other_table) for i in learn(reader, reader.schema())}
    finally:
        reader.close()


def test_the_invariants_a_database_shows_are_learned(world: Path) -> None:
    found = _learned(world)
    assert ("unique", "country", "name", "") in found  # a name, distinct in every row
    assert ("unique", "country", "population", "") not in found  # six distinct numbers are chance, not a key
    assert ("not null", "country", "continent", "") in found
    assert ("inclusion", "country", "continent", "continent") in found  # no foreign key declared; the data obeys one
    assert ("participation", "continent", "id", "country") in found  # every continent has a country
    assert ("category", "country", "kind", "") in found
    assert ("spelling", "country", "name", "") in found
    assert ("identity", "country", "name", "country") in found  # Aruba is ABW
    assert ("unique", "visit", "city_id", "") in found  # the whole row of a keyless table: (city_id, year) together


def test_a_literal_that_names_one_row_is_kept_to_one(tmp_path: Path) -> None:
    path = tmp_path / "school.sqlite"
    make_db(path, """
            CREATE TABLE student(id INTEGER PRIMARY KEY, name TEXT, grade INTEGER);
            INSERT INTO student VALUES (1, 'Kyle', 9), (2, 'Jordan', 10), (3, 'Jordan', 11), (4, 'Ann', 9);
        """)
    found = neighbours_for(path, ["SELECT grade FROM student WHERE name = 'Kyle'"], 3, cache_dir=tmp_path / "cache")
    once = [i for i in found[0].invariants if i.kind is InvariantKind.ONCE]
    assert [(i.column, i.values) for i in once] == [("name", ("Kyle",))]
    for neighbour in found:
        kyles = sqlite3.connect(neighbour.path).execute("SELECT count(*) FROM student WHERE name = 'Kyle'").fetchone()[0]
        assert kyles <= 1 if neighbour.plausible else True
    assert any(n.breaks is not None and n.breaks.kind is InvariantKind.ONCE for n in found)

def test_a_category_value_found_once_names_no_row(tmp_path: Path) -> None:
    """college_1: one 'A' among six enrolments is chance, not a name (the column is a category,
    and `enroll_grade` holds the table's word): neighbours may give other classes an 'A', so a
    prediction that drops `class_code = 10018` fails on one."""
    path = tmp_path / "college.sqlite"
    make_db(path, """
            CREATE TABLE student(stu_num INTEGER PRIMARY KEY, stu_lname TEXT);
            CREATE TABLE enroll(class_code TEXT, stu_num INTEGER REFERENCES student(stu_num), enroll_grade TEXT);
            INSERT INTO student VALUES (321452, 'Bowser'), (324257, 'Smithson');
            INSERT INTO enroll VALUES ('10014', 321452, 'C'), ('10014', 324257, 'B'), ('10018', 321452, 'A'),
                ('10018', 324257, 'B'), ('10021', 321452, 'C'), ('10021', 324257, 'C');
        """)
    gold = ("SELECT T1.stu_lname FROM student AS T1 JOIN enroll AS T2 ON T1.stu_num = T2.stu_num"
            " WHERE T2.enroll_grade = 'A' AND T2.class_code = 10018")
    found = neighbours_for(path, [gold], 3, cache_dir=tmp_path / "cache")
    assert not [i for i in found[0].invariants if i.kind is InvariantKind.ONCE]
    assert ("category", "enroll", "enroll_grade") in {(i.kind.value, i.table, i.column) for i in found[0].invariants}
    dropped = gold.replace(" AND T2.class_code = 10018", "")

    def differ(database: Path) -> bool:
        connection = sqlite3.connect(database)
        try:
            return sorted(connection.execute(gold).fetchall()) != sorted(connection.execute(dropped).fetchall())
        finally:
            connection.close()
    assert not differ(path)  # the case's own database cannot tell them apart
    assert any(differ(n.path) for n in found if n.plausible)



@pytest.mark.parametrize("gold", [
    "SELECT c.name, count(*) FROM country AS c JOIN city AS t ON t.country = c.code GROUP BY c.name",
    "SELECT name FROM country WHERE population >= 60 AND kind = 'Republic'",
    "SELECT k.name FROM continent AS k JOIN country AS c ON c.continent = k.id WHERE c.name = 'Aruba'",
    "SELECT t.name FROM city AS t JOIN visit AS v ON v.city_id = t.id WHERE v.year > 2001",
])
def test_every_plausible_neighbour_keeps_every_invariant_and_a_stress_one_breaks_exactly_one(world: Path, tmp_path: Path, gold: str) -> None:
    built = build_neighbours(world, [gold], 3, dialect="sqlite", kind="sqlite", seed=b"test")
    reader = open_source(world, "sqlite")
    declared = reader.schema()
    reader.close()
    observed = built.observed
    assert [b for b in built.neighbours if b.breaks is None]
    for neighbour in built.neighbours:
        broken = set(violations(neighbour.rows, observed.schema_with(declared), observed, {}))
        if neighbour.breaks is None:
            assert not broken, neighbour.note
        else:  # the one it breaks (a repeated name is no longer one name's identity)
            assert broken - set(observed.invariants) == set() and neighbour.breaks in broken
            assert broken - set(observed.invariants) - set(Observed(tuple(broken)).without(neighbour.breaks).invariants) == set()
            assert set(Observed(tuple(broken)).without(neighbour.breaks).invariants) == set(), neighbour.note


def test_no_plausible_neighbour_renames_a_code_or_moves_a_country(world: Path, tmp_path: Path) -> None:
    found = neighbours_for(world, ["SELECT c.name FROM country AS c WHERE c.name = 'Aruba'"], 3, cache_dir=tmp_path / "cache")
    for neighbour in (n for n in found if n.plausible):
        rows = sqlite3.connect(neighbour.path).execute("SELECT code, continent FROM country WHERE name = 'Aruba'").fetchall()
        assert all(row == ("ABW", 1) for row in rows)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["FRA", "DEU", "JPN", "XXX", None]), st.sampled_from(["Paris", "Lyon", "Oslo", None])),
                max_size=12), st.integers(0, 2**32))
def test_settle_leaves_no_row_that_breaks_an_invariant(world: Path, cities: list[tuple[str | None, str | None]], seed: int) -> None:
    """Whatever rows a repair leaves, settling keeps only rows that break nothing."""
    reader = open_source(world, "sqlite")
    declared = reader.schema()
    observed = Observed(learn(reader, declared))
    reader.close()
    schema = observed.schema_with(declared)
    rows = {"continent": [(1, "Europe"), (2, "Asia")], "country": [("FRA", "France", 1, "Republic", 65), ("JPN", "Japan", 2, "Monarchy", 125)],
            "city": [(i + 10, name, code) for i, (code, name) in enumerate(cities)], "visit": [(10, 2001), (10, 2001)]}
    rows = Keeper(schema, observed, {}, random.Random(seed)).keep(rows)
    settled = settle(rows, schema, observed, {})
    assert all(not offending(settled, schema, invariant, {}) for invariant in observed.invariants)
    assert all(set(settled[t]) <= set(rows[t]) for t in rows)  # rows only go


def _case(path: Path, gold: str, predicted: str) -> Case:
    return Case(id="case", file=path.parent / "plausible.yml", line=1, position=0, database=path.name,
                database_target=str(path), gold=(gold,), predicted=predicted)


def test_grouping_by_a_unique_name_instead_of_its_key_is_fragile_not_wrong(world: Path, tmp_path: Path) -> None:
    """The issue's first class: `GROUP BY name` for `GROUP BY code` where names are unique."""
    case = _case(world, "SELECT c.name, count(*) FROM country AS c JOIN city AS t ON t.country = c.code GROUP BY c.code",
                 "SELECT c.name, count(*) FROM country AS c JOIN city AS t ON t.country = c.code GROUP BY c.name")
    result = Pipeline(RunOptions(cache_dir=tmp_path / "cache")).evaluate(case, LABEL).result
    assert result.verdict is Verdict.PASS
    assert result.neighbours["failed"] == 0 and result.neighbours["fragile"] >= 1
    assert "country" in result.neighbours["counterexample"]["breaks"]  # the first stress neighbour that tells them apart


def test_a_gold_that_cuts_a_tie_inside_a_subquery_does_not_fail_the_prediction(tmp_path: Path) -> None:
    """'the stadium with the highest capacity': the gold's `LIMIT 1` picks one of two stadiums at
    the top capacity, the prediction counts both: fragile (the gold's answer is the database's pick)."""
    path = tmp_path / "concerts.sqlite"
    make_db(path, """
            CREATE TABLE stadium(id INTEGER PRIMARY KEY, name TEXT, capacity INTEGER);
            CREATE TABLE concert(id INTEGER PRIMARY KEY, stadium_id INTEGER REFERENCES stadium(id));
            INSERT INTO stadium VALUES (1, 'Glebe', 4000), (2, 'Hampden', 52000), (3, 'Balmoor', 2000), (4, 'Ibrox', 51000),
                (5, 'Tynecastle', 20000), (6, 'Pittodrie', 22000);
            INSERT INTO concert VALUES (1, 2), (2, 2), (3, 1), (4, 4), (5, 3), (6, 6);
        """)
    case = _case(path, "SELECT count(*) FROM concert WHERE stadium_id = (SELECT id FROM stadium ORDER BY capacity DESC LIMIT 1)",
                 "SELECT count(*) FROM concert AS c JOIN stadium AS s ON c.stadium_id = s.id WHERE s.capacity = (SELECT max(capacity) FROM stadium)")
    result = Pipeline(RunOptions(cache_dir=tmp_path / "cache")).evaluate(case, LABEL).result
    assert result.verdict is Verdict.PASS
    assert result.neighbours["failed"] == 0


def test_a_wrong_prediction_still_fails_on_a_plausible_neighbour_with_a_short_counterexample(world: Path, tmp_path: Path) -> None:
    case = _case(world, "SELECT name FROM country WHERE population >= 60", "SELECT name FROM country WHERE population > 60")
    pipeline = Pipeline(RunOptions(cache_dir=tmp_path / "cache"))
    first = pipeline.evaluate(case, LABEL)
    assert first.result.verdict is Verdict.MISMATCH and first.result.reason == "neighbour database"
    shown = first.result.neighbours["counterexample"]
    assert shown["breaks"] is None
    assert sum(len(t["rows"]) for t in shown["tables"].values()) <= 3
    assert "every row" not in (first.explanation or "") and "... and" not in (first.explanation or "")
    remembered = list((tmp_path / "cache").rglob("shrunk/*.json"))
    assert remembered  # the rows kept, for the next run
    again = Pipeline(RunOptions(cache_dir=tmp_path / "cache")).evaluate(case, LABEL).result
    assert again.neighbours["counterexample"] == shown


def _outcomes(own: list[tuple], here: list[tuple], predicted: list[tuple], ordered: bool = False) -> tuple:
    from pytest_nl2sql.engines.base import QueryResult
    from pytest_nl2sql.judge.execute import GoldOutcome, Judgement

    columns = tuple(f"c{i}" for i in range(len((own or here or predicted or [(None,)])[0])))
    gold = lambda rows: GoldOutcome((QueryResult(columns, rows),), ("gold",), ordered)  # noqa: E731
    return gold(own), gold(here), Judgement(Verdict.MISMATCH, result=QueryResult(columns, predicted))


@pytest.mark.parametrize(("own", "here", "predicted", "fragile"), [
    # the gold repeats a name through a join here, never on its own database; the prediction lists it once
    ([("ann",), ("bob",)], [("ann",), ("ann",), ("bob",)], [("ann",), ("bob",)], True),
    # the prediction adds repeats the gold never returns (a dropped DISTINCT): a failure
    ([("ann",), ("bob",)], [("ann",), ("bob",)], [("ann",), ("ann",), ("bob",)], False),
    # the gold returns a NULL row here, never on its own database; the rest agrees
    ([("ann", 3)], [("ann", 3), (None, 1)], [("ann", 3)], True),
    # the gold's own result holds NULLs: a difference in them counts
    ([("ann", None)], [("ann", 3), (None, 1)], [("ann", 3)], False),
    # a group the gold counts zero here (it never shows one on its own database) is the only difference
    ([("ann", 2)], [("ann", 2), ("bob", 0)], [("ann", 2)], True),
    # ... but a zero the prediction adds is its own: a failure (issue 29)
    ([("ann", 2)], [("ann", 2)], [("ann", 2), ("bob", 0)], False),
    # a wrong value is a failure whatever the gold showed
    ([("ann", 2)], [("ann", 2)], [("ann", 3)], False),
])
def test_a_difference_in_what_the_gold_never_showed_is_fragile(own: list, here: list, predicted: list, fragile: bool) -> None:
    from pytest_nl2sql.judge.on_neighbours import JudgingRules, unseen_by_gold

    own_gold, gold, judgement = _outcomes(own, here, predicted)
    why = unseen_by_gold(own_gold, gold, judgement, JudgingRules(("gold",), "sqlite", "auto"))
    assert (why is not None) is fragile
    if why:
        assert "which the gold never returns on the case's database" in why


def test_a_gold_except_over_names_that_two_students_share_is_the_fragile_query(tmp_path: Path) -> None:
    """Two students called Jordan, one with a friend: the gold's EXCEPT over names drops both, a
    prediction over ids keeps the friendless one. The difference is the gold's, where the differing
    name is shared; not where it is not."""
    from pytest_nl2sql.engines.base import Limits
    from pytest_nl2sql.engines.sqlite import SqliteEngine
    from pytest_nl2sql.judge.fragile_gold import why_gold_is_fragile

    path = tmp_path / "school.sqlite"
    make_db(path, """
            CREATE TABLE student(id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE friend(student_id INTEGER REFERENCES student(id), friend_id INTEGER REFERENCES student(id));
            INSERT INTO student VALUES (1, 'Jordan'), (2, 'Jordan'), (3, 'Ann'), (4, 'Dee');
            INSERT INTO friend VALUES (1, 3), (3, 1);
        """)
    gold = "SELECT name FROM student EXCEPT SELECT s.name FROM friend AS f JOIN student AS s ON f.student_id = s.id"
    keys = frozenset({("student", "id"), ("friend", "student_id"), ("friend", "friend_id")})
    engine = SqliteEngine(path, immutable=True)
    try:
        assert "EXCEPT" in (why_gold_is_fragile([gold], "sqlite", engine, Limits(), keys, ["Jordan"]) or "")
        assert why_gold_is_fragile([gold], "sqlite", engine, Limits(), keys, ["Dee"]) is None
        by_id = "SELECT id FROM student EXCEPT SELECT f.student_id FROM friend AS f"
        assert why_gold_is_fragile([by_id], "sqlite", engine, Limits(), keys, ["Jordan"]) is None  # ids are keys
        tie = "SELECT name FROM student WHERE id = (SELECT student_id FROM friend ORDER BY friend_id > 0 DESC LIMIT 1)"
        assert "tie" in (why_gold_is_fragile([tie], "sqlite", engine, Limits(), keys, []) or "")
        # a bare column beside MAX: two Jordans hold the largest name, SQLite shows either's id
        assert "bare column" in (why_gold_is_fragile(["SELECT max(name), id FROM student"], "sqlite", engine, Limits(), keys, []) or "")
        assert why_gold_is_fragile(["SELECT min(name), id FROM student"], "sqlite", engine, Limits(), keys, []) is None  # one Ann
    finally:
        engine.close()


def test_a_prediction_that_matched_everywhere_is_not_run_again(world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_nl2sql.judge import on_neighbours

    case = _case(world, "SELECT name FROM country WHERE population >= 60", "SELECT name FROM country WHERE NOT population < 60")
    first = Pipeline(RunOptions(cache_dir=tmp_path / "cache")).evaluate(case, LABEL).result
    assert first.verdict is Verdict.PASS and first.neighbours["checked"] >= 3
    assert list((tmp_path / "cache").rglob("verdicts/*.json"))

    def runs(*args: object, **kwargs: object) -> None:
        raise AssertionError("a remembered pass ran on a neighbour again")

    monkeypatch.setattr(on_neighbours, "_judge_on", runs)
    again = Pipeline(RunOptions(cache_dir=tmp_path / "cache")).evaluate(case, LABEL).result
    assert again.verdict is Verdict.PASS and again.neighbours == first.neighbours
    other = _case(world, "SELECT name FROM country WHERE population >= 60", "SELECT name FROM country WHERE population > 60")
    with pytest.raises(AssertionError, match="ran on a neighbour again"):  # another prediction is judged afresh
        Pipeline(RunOptions(cache_dir=tmp_path / "cache")).evaluate(other, LABEL)


def test_the_gold_s_outcome_on_a_neighbour_is_remembered_exactly(world: Path, tmp_path: Path) -> None:
    """Every value kind SQLite returns comes back as it went in (floats, NaN-free reals, bytes,
    NULL), with ties and warnings."""
    from pytest_nl2sql.engines.base import QueryResult
    from pytest_nl2sql.judge import gold_memo
    from pytest_nl2sql.judge.execute import GoldOutcome
    from pytest_nl2sql.judge.ties import TieGroups

    gold = GoldOutcome((QueryResult(("a", "b"), [(1, 0.1 + 0.2), (None, b"\x00\xff"), ("x", 1e308)]),), ("SELECT 1",), True,
                       (TieGroups((2, 1), (((None, b"\x01"),), ())),), ("a LIMIT cuts a tie",))
    path = tmp_path / "gold" / "0-key.json"
    gold_memo.remember(path, gold)
    assert gold_memo.recall(path) == gold
    assert gold_memo.recall(tmp_path / "missing.json") is None


def test_a_top_one_counterexample_is_shrunk_past_ties(tmp_path: Path) -> None:
    """A difference that needs group 0 exactly one row ahead of group 1 (a top-1 question's lead):
    removing any one row breaks it, removing one of each keeps it. Single removals are stuck at
    all 19 rows; pairs go until at most `READABLE_ROWS` are left."""
    from pytest_nl2sql.neighbours.generate import Repairer, create_database
    from pytest_nl2sql.neighbours.shrink import READABLE_ROWS, _Shrinker

    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, g INTEGER)")
    connection.close()
    reader = open_source(path, "sqlite")
    schema = reader.schema()
    reader.close()
    rows = {"t": [(i, 0) for i in range(10)] + [(100 + i, 1) for i in range(9)]}

    def differs(database: Path) -> bool:
        counts = dict(sqlite3.connect(database).execute("SELECT g, count(*) FROM t GROUP BY g").fetchall())
        return counts.get(0, 0) == counts.get(1, 0) + 1

    kept = set(_Shrinker(schema, rows, differs, tmp_path, budget=128).shrink())
    assert len(kept) <= READABLE_ROWS
    chosen = {"t": [row for i, row in enumerate(rows["t"]) if ("t", i) in kept]}
    connection, _ = create_database(schema, chosen, tmp_path / "check.sqlite", Repairer(schema, random.Random(0)))
    connection.close()
    assert differs(tmp_path / "check.sqlite")


def test_a_like_literal_takes_the_data_s_spelling_an_equality_keeps_its_own(tmp_path: Path) -> None:
    """`LIKE 'korea'` matches 'Korea' whatever case its author typed: the neighbour spells it as
    the data does. `= 'english'` matches one spelling only: the neighbour keeps the gold's."""
    from pytest_nl2sql.neighbours.invariants import respelled
    from pytest_nl2sql.neighbours.literals import read_golds

    path = tmp_path / "docs.sqlite"
    make_db(path, """
            CREATE TABLE paragraph(id INTEGER PRIMARY KEY, text TEXT);
            INSERT INTO paragraph VALUES (1, 'Korea'), (2, 'Brazil'), (3, 'English');
        """)
    reader = open_source(path, "sqlite")
    try:
        schema = reader.schema()
        facts = read_golds(["SELECT id FROM paragraph WHERE text LIKE 'korea' OR text = 'english' OR text LIKE '%bra%'"], "sqlite", schema)
        assert facts is not None
        values = sorted(str(h.value) for h in respelled(reader, schema, facts).hints)
    finally:
        reader.close()
    assert values == ["%bra%", "Korea", "english"]


def test_the_python_api_takes_the_fragile_policy(tmp_path: Path) -> None:
    from pytest_nl2sql.api import evaluate_suite

    path = tmp_path / "shop.sqlite"
    make_db(path, """
            CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL);
            INSERT INTO item VALUES (1, 'pen', 1.5), (2, 'mug', 7.0), (3, 'ink', 3.0), (4, 'cap', 9.0);
        """)
    suite = tmp_path / "s.nl2sql.yaml"
    # a DISTINCT that merges two items once they share a name: the prediction is the fragile side
    suite.write_text("database: shop.sqlite\ncases:\n  - id: distinct\n    gold: SELECT name FROM item\n"
                     "    predicted: SELECT DISTINCT name FROM item\n")
    lenient = evaluate_suite(suite, rootdir=tmp_path, cache_dir=tmp_path / "cache")
    strict = evaluate_suite(suite, rootdir=tmp_path, cache_dir=tmp_path / "cache", fragile="fail")
    assert lenient["items"][0]["verdict"] == "pass" and lenient["summary"]["fragile"] == 1
    assert strict["items"][0]["reason"] == "neighbour database (fragile)" and strict["summary"]["fragile"] == 0
    with pytest.raises(ValueError, match="fragile"):
        evaluate_suite(suite, fragile="maybe")


def test_neighbours_stay_small_whatever_the_source_holds(tmp_path: Path) -> None:
    """A table of large blobs and long texts: values are cut when read into a neighbour, and long
    texts are not read to learn names, keys or categories."""
    from pytest_nl2sql.neighbours.schema import VALUE_BYTES_KEPT

    path = tmp_path / "blobs.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE doc(id INTEGER PRIMARY KEY, title TEXT, body BLOB, kind TEXT)")
        connection.executemany("INSERT INTO doc VALUES (?, ?, ?, ?)",
                               [(i, f"t{i}", bytes(2_000_000), "x" * 300_000) for i in range(1, 7)])
    connection.close()
    found = neighbours_for(path, ["SELECT title FROM doc WHERE id > 2"], 3, cache_dir=tmp_path / "cache")
    assert found
    for neighbour in found:
        assert neighbour.path.stat().st_size < 2_000_000
        for body, kind in sqlite3.connect(neighbour.path).execute("SELECT body, kind FROM doc"):
            assert body is None or len(body) <= VALUE_BYTES_KEPT
            assert kind is None or len(kind) <= VALUE_BYTES_KEPT
    assert not any(i.kind is InvariantKind.CATEGORY for i in found[0].invariants)  # 300 kB texts are no category


@pytest.mark.parametrize("count", [17, 3000])
def test_a_case_or_a_run_asks_for_a_bounded_number_of_neighbours(pytester: pytest.Pytester, count: int) -> None:
    from helpers import make_shop, write_suite

    make_shop(pytester.path)
    write_suite(pytester.path, [{"id": "many", "gold": "SELECT name FROM item", "predicted": "SELECT name FROM item",
                                 "neighbours": count}], database="shop.sqlite")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*`neighbours` must be a whole number of neighbour databases from 0 to 16*"])
    write_suite(pytester.path, [{"id": "many", "gold": "SELECT name FROM item", "predicted": "SELECT name FROM item"}],
                database="shop.sqlite")
    assert pytester.runpytest(f"--nl2sql-neighbours={count}").ret == pytest.ExitCode.USAGE_ERROR
