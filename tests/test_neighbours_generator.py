"""Classes of data the neighbour generator makes so that wrong answers that one database hides
fail (issue 31): no tie where a gold's LIMIT cuts (and a tie at the top where the gold settles it
itself; a tie in one neighbour where a subquery's LIMIT cuts, the gold's fragility), a value on
both sides of a set operation, NULL references where the source holds them, groups whose
aggregate sits on a HAVING bound; and counterexamples that keep a parent referenced by text ('4'
against the key 4)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers import make_db
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions
from pytest_nl2sql.neighbours import neighbours_for
from pytest_nl2sql.neighbours.literals import read_golds
from pytest_nl2sql.neighbours.schema import Schema, open_source
from pytest_nl2sql.vocab import Verdict

LABEL = CaseLabel("generator.yml::case", "generator.yml")

POKER = """
    CREATE TABLE people(People_ID INTEGER PRIMARY KEY, Name TEXT, Height REAL);
    CREATE TABLE poker_player(Poker_Player_ID INTEGER PRIMARY KEY, People_ID INTEGER REFERENCES people(People_ID),
                              Money_Rank REAL, Earnings REAL);
    INSERT INTO people VALUES (1, 'Aleksey Ostapenko', 207.0), (2, 'Teodor Salparov', 182.0), (3, 'Yevgeni Sivozhelez', 196.0),
        (4, 'Maksim Botin', 194.0), (5, 'Semen Poltavskiy', 205.0), (6, 'Sergey Grankin', 193.0), (7, 'Roman Bragin', 187.0);
    INSERT INTO poker_player VALUES (1, 1, 68.0, 476090.0), (2, 2, 141.0, 189233.0), (3, 5, 166.0, 104871.0),
        (4, 6, 58.0, 596462.0), (5, 7, 154.0, 142800.0);
"""
TALLEST = "SELECT T2.Money_Rank FROM people AS T1 JOIN poker_player AS T2 ON T1.People_ID = T2.People_ID ORDER BY T1.Height DESC LIMIT 1"

SINGERS = """
    CREATE TABLE singer(id INTEGER PRIMARY KEY, name TEXT, age INTEGER, country TEXT, net_worth REAL);
    INSERT INTO singer VALUES (1, 'Joe', 52, 'France', 30.0), (2, 'Tim', 43, 'USA', 12.5), (3, 'Ann', 29, 'USA', 8.0),
        (4, 'Liz', 61, 'UK', 44.0), (5, 'Bob', 35, 'France', 3.5), (6, 'Sue', 47, 'UK', 19.0), (7, 'Kim', 38, 'USA', 22.0);
"""

SCHOOL = """
    CREATE TABLE teacher(id INTEGER PRIMARY KEY, name TEXT, age INTEGER);
    CREATE TABLE student(id INTEGER PRIMARY KEY, name TEXT, grade INTEGER);
    INSERT INTO teacher VALUES (1, 'Mona', 40), (2, 'Nils', 51), (3, 'Omar', 33), (4, 'Pia', 45);
    INSERT INTO student VALUES (1, 'Ann', 9), (2, 'Bea', 10), (3, 'Cal', 11), (4, 'Dee', 9), (5, 'Eve', 12), (6, 'Fay', 10);
"""

SHOP = """
    CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, city TEXT);
    CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customer(id), amount REAL, status TEXT);
    INSERT INTO customer VALUES (1, 'Acme', 'Oslo'), (2, 'Bolt', 'Rome'), (3, 'Cord', 'Oslo'), (4, 'Dart', 'Lima'), (5, 'Echo', 'Rome');
    INSERT INTO orders VALUES (1, 1, 10.0, 'paid'), (2, 1, 25.0, 'paid'), (3, 2, 7.5, 'open'), (4, NULL, 12.0, 'open'),
        (5, 3, 30.0, 'paid'), (6, NULL, 5.0, 'open'), (7, 4, 8.0, 'paid'), (8, 5, 19.0, 'refunded'), (9, 2, 40.0, 'refunded'),
        (10, 3, 15.0, 'paid');
"""
BIGGEST_PAID = ("SELECT o.id, c.name FROM orders AS o JOIN customer AS c ON o.customer_id = c.id WHERE o.status = 'paid'"
                " ORDER BY o.amount DESC LIMIT 3")

EVALUATION = """
    CREATE TABLE employee(Employee_ID INTEGER PRIMARY KEY, Name TEXT, Age INTEGER);
    CREATE TABLE evaluation(Employee_ID INTEGER REFERENCES employee(Employee_ID), Year_awarded TEXT, Bonus REAL,
                            PRIMARY KEY (Employee_ID, Year_awarded));
    INSERT INTO employee VALUES (1, 'George Chuter', 23), (2, 'Lee Mears', 29), (3, 'Mark Regan', 43), (4, 'Jason Hobson', 30),
        (5, 'Tim Payne', 29), (6, 'Andrew Sheridan', 28);
    INSERT INTO evaluation VALUES (1, '2011', 3000.0), (2, '2015', 3200.0), (1, '2016', 2900.0), (4, '2017', 3200.0),
        (5, '2018', 4000.0), (1, '2018', 3900.0), (3, '2012', 1500.0);
"""


def _judge(path: Path, gold: str, predicted: str) -> object:
    case = Case(id="case", file=path.parent / "generator.yml", line=1, position=0, database=path.name,
                database_target=str(path), gold=(gold,), predicted=predicted)
    return Pipeline(RunOptions(cache_dir=path.parent / f"cache-{path.stem}")).evaluate(case, LABEL).result


def _fails_on_a_neighbour(result: object) -> bool:
    return result.verdict is Verdict.MISMATCH and result.reason == "neighbour database"  # type: ignore[attr-defined]


def _passes(result: object) -> bool:
    return result.verdict is Verdict.PASS and result.neighbours["failed"] == 0  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- ties at the top

def test_what_the_gold_ranks_by_is_read(tmp_path: Path) -> None:
    from pytest_nl2sql.neighbours.literals import Top

    reader = open_source(make_db(tmp_path / "singers.sqlite", SINGERS), "sqlite")
    schema = reader.schema()
    reader.close()

    def tops(gold: str) -> tuple:
        facts = read_golds([gold], "sqlite", schema)
        assert facts is not None
        return facts.tops

    assert tops("SELECT name FROM singer WHERE age = (SELECT max(age) FROM singer)") == (Top(("singer", "age"), True, 1, True, extreme=True),)
    assert tops("SELECT name FROM singer ORDER BY net_worth LIMIT 2") == (Top(("singer", "net_worth"), False, 2, False),)
    assert tops("SELECT name FROM singer ORDER BY age DESC, name LIMIT 1") == (Top(("singer", "age"), True, 1, True),)
    assert tops("SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1") == (
        Top(None, True, 1, False, (("singer", "country"),)),)
    assert tops("SELECT age FROM singer ORDER BY age DESC LIMIT 1") == ()  # it shows only what it ranks by


def test_no_plausible_neighbour_ties_where_the_gold_s_limit_cuts(tmp_path: Path) -> None:
    """'The money rank of the tallest poker player': a tall person with two players (their rows tie
    on the height), or two people of one height, leave the gold's pick to the database, and such a
    neighbour is not counted. Every plausible neighbour has one row at the top (5 of 6 tied before)."""
    path = make_db(tmp_path / "poker.sqlite", POKER)
    found = neighbours_for(path, [TALLEST], 3, cache_dir=tmp_path / "cache")
    plausible = [n for n in found if n.breaks is None]
    assert plausible
    for neighbour in plausible:
        connection = sqlite3.connect(neighbour.path)
        try:
            top = connection.execute(TALLEST.replace("SELECT T2.Money_Rank", "SELECT T1.Height").replace("LIMIT 1", "LIMIT 2")).fetchall()
        finally:
            connection.close()
        assert len(top) < 2 or top[0] != top[1], neighbour.note


def test_a_top_one_pick_is_judged_on_every_neighbour(tmp_path: Path) -> None:
    """Each neighbour where the gold's pick is determined counts: a right rewrite is checked on all
    of them (on 2 of 6 before), and a pick by another column that agrees on the case's database
    fails on one."""
    path = make_db(tmp_path / "poker.sqlite", POKER)
    right = _judge(path, TALLEST, "SELECT T2.Money_Rank FROM people AS T1 JOIN poker_player AS T2 ON T1.People_ID = T2.People_ID"
                                  " WHERE T1.Height = (SELECT max(p.Height) FROM people AS p JOIN poker_player AS q"
                                  " ON p.People_ID = q.People_ID)")
    assert _passes(right)
    assert right.neighbours["checked"] == len(neighbours_for(path, [TALLEST], 3, cache_dir=tmp_path / "cache-poker"))
    wrong = _judge(path, TALLEST, TALLEST.replace("ORDER BY T1.Height DESC", "ORDER BY T1.Name"))
    assert _fails_on_a_neighbour(wrong)


def test_the_tallest_person_is_not_the_tallest_player(tmp_path: Path) -> None:
    """Spider's 'money rank of the tallest poker player' answered with the tallest of all people:
    right on the case's database (the tallest person plays), wrong where a taller person does not,
    which the source allows (two of its seven people play no poker)."""
    path = make_db(tmp_path / "poker.sqlite", POKER)
    wrong = _judge(path, TALLEST, TALLEST.replace("ORDER BY T1.Height DESC LIMIT 1",
                                                  "WHERE T1.Height = (SELECT max(Height) FROM people)"))
    assert _fails_on_a_neighbour(wrong)
    assert wrong.neighbours["counterexample"]["breaks"] is None


def test_a_gold_that_keeps_every_tied_group_fails_a_pick_of_one(tmp_path: Path) -> None:
    """The gold keeps every country with the most singers; `ORDER BY count(*) DESC LIMIT 1` keeps
    one. Only a tie at the top tells them apart, and the gold settles it: a neighbour has one."""
    path = make_db(tmp_path / "singers.sqlite", SINGERS)
    gold = ("SELECT country FROM singer GROUP BY country HAVING count(*) = "
            "(SELECT count(*) FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1)")
    wrong = _judge(path, gold, "SELECT country FROM singer GROUP BY country ORDER BY count(*) DESC LIMIT 1")
    assert _fails_on_a_neighbour(wrong)
    right = _judge(path, gold, "SELECT country FROM singer GROUP BY country HAVING count(*) = "
                               "(SELECT max(n) FROM (SELECT count(*) AS n FROM singer GROUP BY country))")
    assert _passes(right)


# 'The name of the poker player who earns the most', the top-1 pick inside a subquery: a tie at that
# cut leaves the gold's answer to the database (`judge.fragile_gold`), at the top level to the tie handling.
RICHEST = "SELECT Name FROM people WHERE People_ID = (SELECT People_ID FROM poker_player ORDER BY Earnings DESC LIMIT 1)"


def _tied_at_the_cut(neighbour: object, ranking: str) -> bool:
    connection = sqlite3.connect(neighbour.path)  # type: ignore[attr-defined]
    try:
        top = connection.execute(ranking).fetchall()
    finally:
        connection.close()
    return len(top) == 2 and top[0] == top[1]


def test_a_subquery_s_limit_is_tied_in_one_plausible_neighbour_and_untied_in_the_others(tmp_path: Path) -> None:
    """One plausible neighbour ties where the subquery's LIMIT cuts, so that a team learns the
    gold's answer there is the database's pick (none did in generator 19); the others stay untied,
    so that a wrong pick fails on them. The same ranking at the top level stays untied everywhere:
    a tie there is the tie handling's, and such a neighbour tells nothing."""
    path = make_db(tmp_path / "poker.sqlite", POKER)
    ranking = "SELECT Earnings FROM poker_player ORDER BY Earnings DESC LIMIT 2"
    for count in (3, 6):
        plausible = [n for n in neighbours_for(path, [RICHEST], count, cache_dir=tmp_path / "cache") if n.breaks is None]
        tied = [n for n in plausible if _tied_at_the_cut(n, ranking)]
        assert tied and len(plausible) - len(tied) >= 2, (count, [n.note for n in tied])
    top_level = ("SELECT T1.Name FROM people AS T1 JOIN poker_player AS T2 ON T1.People_ID = T2.People_ID"
                 " ORDER BY T2.Earnings DESC LIMIT 1")
    plausible = [n for n in neighbours_for(path, [top_level], 3, cache_dir=tmp_path / "cache") if n.breaks is None]
    assert plausible and not any(_tied_at_the_cut(n, ranking) for n in plausible)


def test_a_right_answer_to_a_subquery_s_top_pick_is_fragile_on_the_gold_s_side_and_a_wrong_pick_fails(tmp_path: Path) -> None:
    """Every top earner, where the gold picks one: right, flagged fragile with the gold the fragile
    side and the tie named (it passed unflagged in generator 19). The best money rank, which is the
    top earner's on the case's database, fails on an untied neighbour."""
    path = make_db(tmp_path / "poker.sqlite", POKER)
    right = _judge(path, RICHEST, "SELECT Name FROM people WHERE People_ID IN (SELECT People_ID FROM poker_player"
                                  " WHERE Earnings = (SELECT max(Earnings) FROM poker_player))")
    assert _passes(right)
    assert right.neighbours["fragile"] >= 1 and right.neighbours["fragile_side"] == "gold"  # type: ignore[attr-defined]
    assert "LIMIT inside a subquery" in right.neighbours["counterexample"]["breaks"]  # type: ignore[attr-defined]
    wrong = _judge(path, RICHEST, RICHEST.replace("ORDER BY Earnings DESC", "ORDER BY Money_Rank"))
    assert _fails_on_a_neighbour(wrong)
    assert wrong.neighbours["counterexample"]["breaks"] is None  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- values on both sides

def test_an_except_left_out_fails_where_a_name_is_on_both_sides(tmp_path: Path) -> None:
    """No teacher is called like a student on the case's database, so `EXCEPT SELECT name FROM
    student` removes nothing there; a neighbour where one is shows it."""
    path = make_db(tmp_path / "school.sqlite", SCHOOL)
    gold = "SELECT name FROM teacher EXCEPT SELECT name FROM student"
    assert _fails_on_a_neighbour(_judge(path, gold, "SELECT name FROM teacher"))
    assert _passes(_judge(path, gold, "SELECT DISTINCT name FROM teacher WHERE name NOT IN (SELECT name FROM student)"))


# ----------------------------------------------------------------------------- NULL references

def test_left_join_for_join_fails_where_the_source_holds_null_references(tmp_path: Path) -> None:
    """Orders without a customer exist in the source (none of them paid): a paid one without a
    customer is plausible, and `LEFT JOIN` for `JOIN` shows there."""
    path = make_db(tmp_path / "shop.sqlite", SHOP)
    wrong = _judge(path, BIGGEST_PAID, BIGGEST_PAID.replace(" JOIN customer", " LEFT JOIN customer"))
    assert _fails_on_a_neighbour(wrong)
    assert wrong.neighbours["counterexample"]["breaks"] is None  # a plausible neighbour, not a stress one
    right = _judge(path, BIGGEST_PAID, "SELECT o.id, c.name FROM customer AS c JOIN orders AS o ON c.id = o.customer_id"
                                       " WHERE o.status = 'paid' ORDER BY o.amount DESC LIMIT 3")
    assert _passes(right)


def test_null_references_only_where_the_source_holds_them(tmp_path: Path) -> None:
    gold = "SELECT o.id, c.name FROM orders AS o JOIN customer AS c ON o.customer_id = c.id WHERE o.status = 'paid'"

    def null_paid(path: Path) -> list[int]:
        counts = []
        for neighbour in neighbours_for(path, [gold], 3, cache_dir=path.parent / f"cache-{path.stem}"):
            if neighbour.breaks is None:
                connection = sqlite3.connect(neighbour.path)
                counts.append(connection.execute(
                    "SELECT count(*) FROM orders WHERE status = 'paid' AND customer_id IS NULL").fetchone()[0])
                connection.close()
        return counts

    with_nulls = null_paid(make_db(tmp_path / "shop.sqlite", SHOP))
    assert with_nulls and all(with_nulls)
    without = null_paid(make_db(tmp_path / "tidy.sqlite", SHOP.replace("NULL, 12.0", "1, 12.0").replace("NULL, 5.0", "2, 5.0")))
    assert without and not any(without)


# ----------------------------------------------------------------------------- boundaries of HAVING

def test_a_having_bound_on_an_aggregate_is_held_by_a_group(tmp_path: Path) -> None:
    """No employee's bonuses sum to 3500 exactly, nor does one's greatest bonus come to 3100: a
    group of its own on the bound tells `>=` from `>` (and `<=` from `<`)."""
    path = make_db(tmp_path / "evaluation.sqlite", EVALUATION)
    gold = "SELECT Employee_ID, sum(Bonus) FROM evaluation GROUP BY Employee_ID HAVING sum(Bonus) > 3500"
    assert _fails_on_a_neighbour(_judge(path, gold, gold.replace("> 3500", ">= 3500")))
    assert _passes(_judge(path, gold, gold.replace("> 3500", "<> 0 AND NOT sum(Bonus) <= 3500")))
    greatest = ("SELECT T1.Name, max(T2.Bonus) FROM employee AS T1 JOIN evaluation AS T2 ON T1.Employee_ID = T2.Employee_ID"
                " GROUP BY T1.Employee_ID HAVING max(T2.Bonus) < 3100")
    assert _fails_on_a_neighbour(_judge(path, greatest, greatest.replace("< 3100", "<= 3100")))


# ----------------------------------------------------------------------------- counterexamples

def _league_schema(tmp_path: Path, team_id_type: str) -> Schema:
    """The schema of teams and their players, `player.team_id` of the type given."""
    path = make_db(tmp_path / "league.sqlite", f"""
        CREATE TABLE team(id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT, team_id {team_id_type} REFERENCES team(id));
    """)
    reader = open_source(path, "sqlite")
    try:
        return reader.schema()
    finally:
        reader.close()


def test_a_shrunk_counterexample_keeps_a_parent_referenced_by_text(tmp_path: Path) -> None:
    """player.team_id is TEXT, team.id INTEGER: '4' joins 4 (SQLite gives the text the key's
    affinity). Removing team 4 must remove the players pointing at it, and a kept player keeps its
    team: no shown row points at nothing."""
    from pytest_nl2sql.neighbours.shrink import _Shrinker

    schema = _league_schema(tmp_path, "TEXT")
    rows = {"team": [(i, f"team {i}") for i in range(1, 7)],
            "player": [(10 + i, f"p{i}", str(1 + i % 6)) for i in range(12)]}

    def differs(database: Path) -> bool:
        connection = sqlite3.connect(database)
        try:
            return connection.execute("SELECT count(*) FROM player WHERE name = 'p3'").fetchone()[0] == 1
        finally:
            connection.close()

    kept = set(_Shrinker(schema, rows, differs, tmp_path, budget=128).shrink())
    assert ("player", 3) in kept  # p3, of team '4'
    assert ("team", 3) in kept  # team 4


def test_a_shrink_asks_about_each_set_of_rows_once(tmp_path: Path) -> None:
    """Removing a team removes its players, so two chunks can leave the same rows (a player's
    chunk and its team's): an attempt on rows already found not to differ is answered from
    memory, with no database written or queried, and counts against the budget as it did."""
    from pytest_nl2sql.neighbours.shrink import _Shrinker

    schema = _league_schema(tmp_path, "INTEGER")
    rows = {"team": [(i, f"team {i}") for i in range(1, 5)],
            "player": [(10 + i, f"p{i}", 1 + i % 4) for i in range(8)]}
    seen: list[frozenset[tuple[str, tuple[object, ...]]]] = []

    def differs(database: Path) -> bool:
        connection = sqlite3.connect(database)
        try:
            content = frozenset((t, r) for t in ("team", "player") for r in connection.execute(f"SELECT * FROM {t}"))
            seen.append(content)
            return connection.execute("SELECT count(*) FROM player WHERE name IN ('p3', 'p6')").fetchone()[0] == 2
        finally:
            connection.close()

    shrinker = _Shrinker(schema, rows, differs, tmp_path, budget=128)
    kept = set(shrinker.shrink())
    assert kept == {("player", 3), ("player", 6), ("team", 3), ("team", 2)}  # p3 and p6, and their teams 4 and 3
    assert len(seen) == len(set(seen))  # no set of rows asked about twice
    assert shrinker.attempts > len(seen)  # the answers from memory were counted
