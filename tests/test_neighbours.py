"""Neighbour databases: deterministic, cached, constraint-respecting, the source never written, and
built so that the classic accidental passes fail on them while equivalent SQL still passes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.judge.compare import compare_results
from pytest_nl2sql.judge.order import has_top_level_order_by
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions
from pytest_nl2sql.neighbours import GENERATOR_VERSION, NeighbourCache, neighbours_for, shrink_counterexample
from pytest_nl2sql.vocab import Verdict

SPIDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "spider"


def _shop(path: Path) -> Path:
    """Real data that hides the usual mistakes: no duplicate names, no age on 30, one employee per
    department; and one row breaking its declared foreign key (as Spider's data sometimes does)."""
    with sqlite3.connect(path) as connection:
        connection.executescript("""
            CREATE TABLE dept(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, budget REAL);
            CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER, dept_id INTEGER NOT NULL
                             REFERENCES dept(id), salary REAL);
            CREATE UNIQUE INDEX emp_name_dept ON emp(name, dept_id);
            INSERT INTO dept VALUES (1, 'sales', 10.5), (2, 'ops', 20.0), (3, 'lab', 7.25);
            INSERT INTO emp VALUES (1, 'ann', 25, 1, 100.0), (2, 'bob', 41, 2, 170.0), (3, 'cy', 35, 3, 150.0),
                                   (4, 'dee', 52, 9, 120.0);
        """)
    connection.close()
    return path


def _rows(path: Path) -> dict[str, list[list[object]]]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [t for (t,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: [list(r) for r in connection.execute(f'SELECT * FROM "{t}" ORDER BY rowid')] for t in tables}
    finally:
        connection.close()


def _run(path: Path, sql: str) -> tuple[int, list[tuple]]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        cursor = connection.execute(sql)
        return len(cursor.description), cursor.fetchall()
    finally:
        connection.close()


def _differ(path: Path, gold: str, predicted: str) -> bool:
    gold_width, gold_rows = _run(path, gold)
    pred_width, pred_rows = _run(path, predicted)
    return not compare_results(gold_rows, pred_rows, has_top_level_order_by(gold), gold_columns=gold_width,
                               pred_columns=pred_width).match


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return _shop(tmp_path / "shop.sqlite")


@pytest.mark.parametrize(("gold", "wrong"), [
    ("SELECT DISTINCT name FROM emp", "SELECT name FROM emp"),
    ("SELECT name FROM emp WHERE age >= 30", "SELECT name FROM emp WHERE age > 30"),
    ("SELECT dept_id, max(salary) FROM emp GROUP BY dept_id", "SELECT dept_id, min(salary) FROM emp GROUP BY dept_id"),
    ("SELECT name FROM emp WHERE age > 30 AND salary < 180", "SELECT name FROM emp WHERE age > 30"),
    ("SELECT name FROM emp ORDER BY age DESC LIMIT 1", "SELECT name FROM emp ORDER BY id DESC LIMIT 1"),
])
def test_an_accidental_pass_on_the_real_data_is_separated_by_a_neighbour(shop: Path, tmp_path: Path, gold: str, wrong: str) -> None:
    assert not _differ(shop, gold, wrong)  # the real data hides the mistake
    found = neighbours_for(shop, [gold], 3, cache_dir=tmp_path / "cache")
    assert found
    assert any(_differ(n.path, gold, wrong) for n in found)


def _workshop(path: Path) -> Path:
    """An association table between two parents, a boundary two joins away from the selected
    column, no price on the average, and a table shipped empty."""
    with sqlite3.connect(path) as connection:
        connection.executescript("""
            CREATE TABLE machine(machine_id INTEGER PRIMARY KEY, points REAL, price INTEGER);
            CREATE TABLE tech(tech_id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE assignment(tech_id INTEGER REFERENCES tech(tech_id), machine_id INTEGER REFERENCES machine(machine_id),
                                    PRIMARY KEY (tech_id, machine_id));
            CREATE TABLE paper(paper_id INTEGER PRIMARY KEY, year INTEGER, title TEXT);
            INSERT INTO machine VALUES (1, 62.0, 10), (2, 105.0, 20), (3, 126.0, 40);
            INSERT INTO tech VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');
            INSERT INTO assignment VALUES (1, 1), (2, 2), (3, 3);
        """)
    connection.close()
    return path


@pytest.mark.parametrize(("gold", "wrong"), [
    (("SELECT t.name FROM assignment AS a JOIN machine AS m ON a.machine_id = m.machine_id JOIN tech AS t"
      " ON a.tech_id = t.tech_id WHERE m.points > 70"),
     ("SELECT t.name FROM assignment AS a JOIN machine AS m ON a.machine_id = m.machine_id JOIN tech AS t"
      " ON a.tech_id = t.tech_id WHERE m.points >= 70")),
    ("SELECT machine_id FROM machine WHERE price > (SELECT avg(price) FROM machine)",
     "SELECT machine_id FROM machine WHERE price >= (SELECT avg(price) FROM machine)"),
    ("SELECT paper_id FROM paper WHERE year = (SELECT max(year) FROM paper)",
     "SELECT paper_id FROM paper WHERE year = (SELECT min(year) FROM paper)"),
])
def test_boundaries_behind_joins_computed_or_in_empty_tables_are_reached(tmp_path: Path, gold: str, wrong: str) -> None:
    source = _workshop(tmp_path / "workshop.sqlite")
    assert not _differ(source, gold, wrong)
    found = neighbours_for(source, [gold], 3, cache_dir=tmp_path / "cache")
    assert any(_differ(n.path, gold, wrong) for n in found)


@pytest.mark.parametrize(("gold", "same"), [
    ("SELECT DISTINCT id FROM emp", "SELECT id FROM emp"),  # DISTINCT on the primary key stays redundant
    ("SELECT e.name FROM emp AS e JOIN dept AS d ON e.dept_id = d.id", "SELECT name FROM emp"),  # NOT NULL foreign key
    ("SELECT count(*) FROM emp WHERE age >= 30", "SELECT COUNT(1) FROM emp AS x WHERE (x.age >= 30)"),
    ("SELECT name, age FROM emp WHERE name LIKE 'a%'", "select AGE, \"name\" from EMP where NAME like 'a%' order by 1"),
    ("SELECT DISTINCT name, dept_id FROM emp", "SELECT name, dept_id FROM emp"),  # a UNIQUE index
])
def test_equivalent_queries_are_not_separated(shop: Path, tmp_path: Path, gold: str, same: str) -> None:
    found = neighbours_for(shop, [gold], 4, cache_dir=tmp_path / "cache")
    assert found
    for neighbour in found:
        assert not _differ(neighbour.path, gold, same), neighbour.note


def test_neighbours_respect_the_schema_s_constraints(shop: Path, tmp_path: Path) -> None:
    found = neighbours_for(shop, ["SELECT d.name, count(*) FROM emp AS e JOIN dept AS d ON e.dept_id = d.id"
                                  " WHERE e.age BETWEEN 30 AND 40 GROUP BY d.name"], 4, cache_dir=tmp_path / "cache")
    assert len([n for n in found if n.plausible]) == 4 and len(found) <= 8
    for neighbour in found:
        connection = sqlite3.connect(f"file:{neighbour.path}?mode=ro", uri=True)
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert connection.execute("SELECT count(*) FROM emp WHERE name IS NULL OR dept_id IS NULL").fetchone() == (0,)
        assert connection.execute("SELECT count(*) - count(DISTINCT name) FROM dept").fetchone() == (0,)
        schema = [r for r in connection.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name")]
        connection.close()
        source = sqlite3.connect(f"file:{shop}?mode=ro", uri=True)
        assert schema == [r for r in source.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name")]
        source.close()
        assert sum(len(rows) for rows in _rows(neighbour.path).values()) <= 120  # small


def test_generation_is_deterministic_across_cache_folders_and_hash_seeds(shop: Path, tmp_path: Path) -> None:
    gold = "SELECT DISTINCT name FROM emp WHERE age > 30 ORDER BY name"
    first = [_rows(n.path) for n in neighbours_for(shop, [gold], 3, cache_dir=tmp_path / "a")]
    second = [_rows(n.path) for n in neighbours_for(shop, [gold], 3, cache_dir=tmp_path / "b")]
    assert first == second and first
    script = (
        "import json, sys, sqlite3; from pathlib import Path; from pytest_nl2sql.neighbours import neighbours_for\n"
        "found = neighbours_for(Path(sys.argv[1]), [sys.argv[2]], 3, cache_dir=Path(sys.argv[3]))\n"
        "out = []\n"
        "for n in found:\n"
        "    c = sqlite3.connect(n.path)\n"
        "    t = [r[0] for r in c.execute(\"SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name\")]\n"
        "    out.append({x: [list(r) for r in c.execute(f'SELECT * FROM \"{x}\" ORDER BY rowid')] for x in t})\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(shop), gold, str(tmp_path / "other")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "4242"}, check=True)
    assert json.loads(done.stdout) == json.loads(json.dumps(first))


def test_a_run_without_neighbours_never_imports_the_generator(shop: Path, tmp_path: Path) -> None:
    """~0.1 s of every start-up: judging imports `literals`, `schema` and `invariants`, which must
    not bring the generator (`build`, `generate`, `distill`, ...) with them; the package's names
    still give it on first use."""
    suite = tmp_path / "s.nl2sql.yaml"
    suite.write_text(json.dumps({"database": str(shop), "cases": [
        {"id": "old", "question": "?", "gold": "SELECT name FROM emp WHERE age > 30", "predicted": "SELECT name FROM emp WHERE age >= 31"}]}))
    generator = ("build", "cache", "distill", "generate", "mutants", "plausible", "shrink", "values")
    script = (
        "import sys; from pytest_nl2sql.api import evaluate_suite\n"
        f"report = evaluate_suite({str(suite)!r}, neighbours=0, cache_dir={str(tmp_path / 'cache')!r})\n"
        "assert report['items'][0]['verdict'] == 'pass', report['items']\n"
        f"print(sorted(m for m in {generator!r} if 'pytest_nl2sql.neighbours.' + m in sys.modules))\n"
        "from pytest_nl2sql.neighbours import NeighbourCache, neighbours_for\n"
        "import pytest_nl2sql.neighbours as package\n"
        "print(NeighbourCache is package.NeighbourCache, NeighbourCache.__module__, NeighbourCache.__qualname__)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[]", "True pytest_nl2sql.neighbours NeighbourCache"]


def test_the_source_is_never_written(shop: Path, tmp_path: Path) -> None:
    before = (shop.read_bytes(), shop.stat().st_mtime_ns)
    neighbours_for(shop, ["SELECT name FROM emp WHERE age >= 30"], 3, cache_dir=tmp_path / "cache")
    assert (shop.read_bytes(), shop.stat().st_mtime_ns) == before
    assert sorted(p.name for p in shop.parent.iterdir()) == ["cache", "shop.sqlite"]  # no journal or WAL left beside it


def test_the_second_call_is_a_cache_hit_and_the_key_follows_source_and_gold(shop: Path, tmp_path: Path) -> None:
    cache = NeighbourCache(tmp_path / "cache")
    gold = "SELECT name FROM emp WHERE age >= 30"
    first = cache.neighbours_for(shop, [gold], 2)
    assert cache.generated == 1
    assert cache.neighbours_for(shop, [gold], 2) == first
    assert cache.generated == 1
    fresh = NeighbourCache(tmp_path / "cache")  # another process: found on disk
    assert fresh.neighbours_for(shop, [gold], 2) == first and fresh.generated == 0
    key = cache.key(shop, [gold], 2, "sqlite", "sqlite")
    assert cache.key(shop, [gold + " "], 2, "sqlite", "sqlite") != key
    assert cache.key(shop, [gold], 3, "sqlite", "sqlite") != key
    # DuckDB neighbours are keyed by the DuckDB that writes them (an older one cannot read them)
    import pytest_nl2sql.neighbours.cache as cache_module

    keys = {}
    for version in ((1, 1), (2, 0)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cache_module, "duckdb_version", lambda version=version: version)
            keys[version] = (cache.key(shop, [gold], 2, "sqlite", "duckdb"), cache.key(shop, [gold], 2, "sqlite", "sqlite"))
    assert keys[(1, 1)][0] != keys[(2, 0)][0] and keys[(1, 1)][1] == keys[(2, 0)][1] == key
    with sqlite3.connect(shop) as connection:
        connection.execute("INSERT INTO dept VALUES (4, 'hr', 1.0)")
    connection.close()
    assert cache.key(shop, [gold], 2, "sqlite", "sqlite") != key
    assert GENERATOR_VERSION in json.loads((first[0].path.parent / "manifest.json").read_text())["version"]


def test_a_gold_the_generator_cannot_read_gives_no_neighbours(shop: Path, tmp_path: Path) -> None:
    assert neighbours_for(shop, ["SELEC name FROM"], 3, cache_dir=tmp_path / "c") == ()
    assert neighbours_for(shop, ["SELECT x FROM no_such_table"], 3, cache_dir=tmp_path / "c") == ()
    assert neighbours_for(tmp_path / "missing.sqlite", ["SELECT 1"], 3, cache_dir=tmp_path / "c") == ()
    assert neighbours_for(shop, ["SELECT name FROM emp"], 0, cache_dir=tmp_path / "c") == ()


def test_shrinking_keeps_few_rows_that_still_separate(shop: Path, tmp_path: Path) -> None:
    gold, wrong = "SELECT DISTINCT name FROM emp", "SELECT name FROM emp"
    found = neighbours_for(shop, [gold], 3, cache_dir=tmp_path / "cache")
    neighbour = next(n for n in found if _differ(n.path, gold, wrong))
    before = neighbour.path.read_bytes()
    calls: list[Path] = []

    def differs(path: Path) -> bool:
        calls.append(path)
        return _differ(path, gold, wrong)

    example = shrink_counterexample(neighbour, differs, tables=["emp"])
    assert neighbour.path.read_bytes() == before
    assert len(calls) <= 200
    [(table, columns, rows)] = example.tables
    assert table == "emp" and columns == ("id", "name", "age", "dept_id", "salary")
    assert len(rows) == 2 and rows[0][1] == rows[1][1]  # two rows with one name: all it takes


@pytest.mark.skipif(not (SPIDER / "database" / "concert_singer").is_dir(), reason="Spider data not at ../shared/data/spider")
def test_a_spider_database_gives_valid_small_neighbours(tmp_path: Path) -> None:
    source = SPIDER / "database" / "concert_singer" / "concert_singer.sqlite"
    gold = ("SELECT T2.name, count(*) FROM singer_in_concert AS T1 JOIN singer AS T2 ON T1.singer_id = T2.singer_id"
            " WHERE T2.age > 30 GROUP BY T2.singer_id")
    found = neighbours_for(source, [gold], 3, cache_dir=tmp_path / "cache")
    assert len([n for n in found if n.plausible]) == 3
    for neighbour in found:
        connection = sqlite3.connect(f"file:{neighbour.path}?mode=ro", uri=True)
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        connection.close()
        assert all(len(rows) <= 60 for rows in _rows(neighbour.path).values())
    assert any(_run(n.path, gold)[1] for n in found)  # the gold returns rows on some neighbour


def test_duckdb_sources_give_duckdb_neighbours(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    source = tmp_path / "shop.duckdb"
    connection = duckdb.connect(str(source))
    connection.execute("CREATE TABLE dept(id INTEGER PRIMARY KEY, name VARCHAR NOT NULL)")
    connection.execute("CREATE TABLE emp(id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, age INTEGER, dept_id INTEGER REFERENCES dept(id))")
    connection.execute("INSERT INTO dept VALUES (1, 'sales'), (2, 'ops')")
    connection.execute("INSERT INTO emp VALUES (1, 'ann', 25, 1), (2, 'bob', 41, 2), (3, 'cy', 35, 1)")
    connection.close()
    before = source.read_bytes()
    gold, wrong = "SELECT name FROM emp WHERE age >= 30", "SELECT name FROM emp WHERE age > 30"
    found = neighbours_for(source, [gold], 2, cache_dir=tmp_path / "cache", dialect="duckdb", kind="duckdb")
    assert found and all(n.path.suffix == ".duckdb" for n in found)
    assert source.read_bytes() == before
    from pytest_nl2sql.neighbours.schema import duckdb_version

    if duckdb_version() >= (1, 2):  # written in 16 KB blocks: ~0.8 MB each in DuckDB's default 256 KB ones
        assert all(n.path.stat().st_size < 300_000 for n in found), [n.path.stat().st_size for n in found]

    def differs(path: Path) -> bool:
        with duckdb.connect(str(path), read_only=True) as db:
            return sorted(db.execute(gold).fetchall()) != sorted(db.execute(wrong).fetchall())

    assert any(differs(n.path) for n in found)
    with duckdb.connect(str(found[0].path), read_only=True) as db:
        assert db.execute("SELECT count(*) FROM emp WHERE dept_id NOT IN (SELECT id FROM dept)").fetchone() == (0,)


def test_a_duckdb_counterexample_shrinks_alike_on_files_and_on_rows_the_engine_copies(tmp_path: Path) -> None:
    """A DuckDB shrink's attempts are the row numbers kept, copied by the worker from the
    neighbour itself (a file per attempt costs ~10 ms): the same rows are kept as with files."""
    duckdb = pytest.importorskip("duckdb")
    from pytest_nl2sql.engines import Limits
    from pytest_nl2sql.engines.base import RowIds
    from pytest_nl2sql.engines.duckdb import DuckdbEngine, new_worker

    source = tmp_path / "shop.duckdb"
    with duckdb.connect(str(source)) as connection:
        connection.execute("CREATE TABLE dept(id INTEGER PRIMARY KEY, name VARCHAR NOT NULL)")
        connection.execute("CREATE TABLE emp(id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, age INTEGER,"
                           " hired DATE, dept_id INTEGER REFERENCES dept(id))")
        connection.execute("INSERT INTO dept VALUES (1, 'sales'), (2, 'ops'), (3, 'lab')")
        connection.execute("INSERT INTO emp SELECT i, 'e' || (i % 7), 20 + i % 30, DATE '2020-01-01' + i::INTEGER,"
                           " 1 + i % 3 FROM range(1, 40) r(i)")
    gold, wrong = "SELECT DISTINCT d.name FROM dept d JOIN emp e ON e.dept_id = d.id WHERE e.age > 30", \
        "SELECT d.name FROM dept d JOIN emp e ON e.dept_id = d.id WHERE e.age > 30"
    found = neighbours_for(source, [gold], 3, cache_dir=tmp_path / "cache", dialect="duckdb", kind="duckdb")
    worker = new_worker()

    def results(engine: DuckdbEngine) -> tuple[list, list]:
        try:
            return sorted(engine.execute(gold, Limits()).rows), sorted(engine.execute(wrong, Limits()).rows)
        finally:
            engine.close()

    def differs(path: Path) -> bool:
        return len(set(map(tuple, results(DuckdbEngine(path, worker=worker))))) == 2

    asked: list[object] = []

    def differs_on_rows(rows: RowIds) -> bool:
        asked.append(rows)
        return len(set(map(tuple, results(DuckdbEngine(neighbour.path, worker=worker, rows=rows))))) == 2

    try:
        neighbour = next(n for n in found if differs(n.path))
        on_files = shrink_counterexample(neighbour, differs, tables=["dept", "emp"])
        on_rows = shrink_counterexample(neighbour, lambda path: pytest.fail("a file was written"), tables=["dept", "emp"],
                                        differs_on_rows=differs_on_rows)
    finally:
        worker.shutdown()
    assert asked and on_rows == on_files
    with duckdb.connect(str(neighbour.path), read_only=True) as db:
        whole = db.execute("SELECT (SELECT count(*) FROM dept) + (SELECT count(*) FROM emp)").fetchone()[0]
    assert 0 < sum(len(rows) for _, _, rows in on_rows.tables) < whole


def test_a_duckdb_column_named_rowid_shrinks_on_files(tmp_path: Path) -> None:
    """A column named `rowid` hides DuckDB's row identifier, by which the engine would copy an
    attempt's rows: such a neighbour is shrunk on files, and the rows kept are the right ones."""
    duckdb = pytest.importorskip("duckdb")
    from pytest_nl2sql.neighbours import Neighbour

    path = tmp_path / "n.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE t (rowid INTEGER, v VARCHAR)")
        connection.execute("INSERT INTO t VALUES (7, 'a'), (7, 'b'), (NULL, 'c'), (1, 'a')")

    def differs(attempt: Path) -> bool:
        with duckdb.connect(str(attempt), read_only=True) as db:
            return db.execute("SELECT count(*) FROM t WHERE v = 'a'").fetchone()[0] == 2

    example = shrink_counterexample(Neighbour(path=path, index=0, note="n"), differs,
                                    differs_on_rows=lambda rows: pytest.fail("rows copied by a hidden rowid"))
    [(table, columns, rows)] = example.tables
    assert (table, columns, sorted(rows)) == ("t", ("rowid", "v"), [(1, "a"), (7, "a")])


def test_a_sqlite_gold_on_a_duckdb_source_runs_on_its_neighbours_as_the_judge_translates_it(tmp_path: Path) -> None:
    """A Spider gold (SQLite) on a DuckDB copy: a bare column beside GROUP BY and `year >= 2014` on
    a text column run on DuckDB only as `judge.translate` rewrites them. Generation must run the
    gold that way too, or no candidate runs it and the case silently gets no neighbours."""
    duckdb = pytest.importorskip("duckdb")
    source = tmp_path / "concerts.duckdb"
    connection = duckdb.connect(str(source))
    connection.execute("CREATE TABLE concert(concert_id INTEGER PRIMARY KEY, concert_name VARCHAR NOT NULL, year VARCHAR)")
    connection.execute("CREATE TABLE singer_in_concert(concert_id INTEGER REFERENCES concert(concert_id), singer_id INTEGER)")
    connection.execute("INSERT INTO concert VALUES (1, 'Auditions', '2014'), (2, 'Super bootcamp', '2014'), (3, 'Home Visits', '2015')")
    connection.execute("INSERT INTO singer_in_concert VALUES (1, 2), (1, 3), (2, 3), (3, 5), (3, 6)")
    connection.close()
    gold = ("SELECT T2.concert_name, count(*) FROM singer_in_concert AS T1 JOIN concert AS T2 ON T1.concert_id = T2.concert_id"
            " WHERE T2.year >= 2014 GROUP BY T2.concert_id")
    found = neighbours_for(source, [gold], 3, cache_dir=tmp_path / "cache", dialect="sqlite", kind="duckdb")
    assert found, "no neighbour: the gold ran on no candidate"


@pytest.mark.parametrize("wrong", [
    "SELECT title FROM publication WHERE year > 2000 ORDER BY citation_num DESC LIMIT 2",
    "SELECT title FROM publication WHERE year > 2000 ORDER BY pid DESC LIMIT 1",
    "SELECT title FROM publication WHERE year > 4001 ORDER BY citation_num DESC LIMIT 1",
])
def test_a_table_shipped_empty_gets_rows_that_meet_the_gold_s_literals(tmp_path: Path, wrong: str) -> None:
    """Spider's academic, geo and yelp ship empty: made-up rows must meet `year > 2000` often
    enough (values on, inside and outside the literal) for a top-1 to be decided on several rows."""
    source = tmp_path / "academic.sqlite"
    with sqlite3.connect(source) as connection:
        connection.executescript("""
            CREATE TABLE author(aid INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE publication(pid INTEGER PRIMARY KEY, title TEXT, year INTEGER, citation_num INTEGER,
                                     aid INTEGER REFERENCES author(aid));
        """)
    connection.close()
    gold = "SELECT title FROM publication WHERE year > 2000 ORDER BY citation_num DESC LIMIT 1"
    assert _judged_with_neighbours(source, gold, wrong, tmp_path) == (Verdict.MISMATCH, "neighbour database")


def _judged_with_neighbours(source: Path, gold: str, predicted: str, tmp_path: Path) -> tuple[Verdict, str | None]:
    """(verdict, reason) of a prediction judged as the plugin judges it, with three neighbours."""
    case = Case(id="q", file=tmp_path / "s.nl2sql.yaml", line=1, position=0, database=source.name,
                database_target=str(source), gold=(gold,), predicted=predicted)
    result = Pipeline(RunOptions(neighbours=3, cache_dir=tmp_path / "cache")).evaluate(
        case, CaseLabel("s.nl2sql.yaml::q", "s.nl2sql.yaml", 0)).result
    return result.verdict, result.reason


@pytest.mark.skipif(not (SPIDER / "database" / "tracking_share_transactions").is_dir(),
                    reason="needs the Spider databases in ../shared/data/spider")
@pytest.mark.parametrize("wrong", [
    'SELECT MIN(amount_of_transaction) FROM TRANSACTIONS WHERE transaction_type_code = "PUR"',
    'SELECT MIN(amount_of_transaction) FROM TRANSACTIONS WHERE transaction_type_code = "PUR" AND share_count >= 50',
])
def test_a_row_just_outside_the_condition_wins_the_aggregate_somewhere(tmp_path: Path, wrong: str) -> None:
    """A MIN whose condition is dropped or shifted shows itself only if a row the condition keeps
    out holds the smallest value: rows made just outside the gold's literal get one past the rest."""
    source = SPIDER / "database" / "tracking_share_transactions" / "tracking_share_transactions.sqlite"
    gold = 'SELECT min(amount_of_transaction) FROM TRANSACTIONS WHERE transaction_type_code  =  "PUR" AND share_count  >  50'
    assert _judged_with_neighbours(source, gold, wrong, tmp_path) == (Verdict.MISMATCH, "neighbour database")
