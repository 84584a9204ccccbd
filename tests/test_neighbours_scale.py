"""Neighbours on big databases and a cache that travels (issue 32).

Learning what a database shows costs a sample of a big table, never a scan of it: a 300,000-row
table is read in a few thousand rows (counted in SQLite VM steps), with exact answers where an
index gives them cheaply. The neighbour cache is keyed by content, so a suite and its database
copied elsewhere (a DuckDB file written anew with the same rows) with the cache copied too is warm
there: nothing is generated, and the items are the same.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.neighbours.invariants import SMALL_TABLE_ROWS, InvariantKind, learn
from pytest_nl2sql.neighbours.schema import SqliteSource

BIG_ROWS = 300_000
STEP = 1000  # VM steps between two calls of the counting progress handler


def _big_database(path: Path) -> Path:
    """`person` (300,000 rows, one INSERT ... SELECT from a recursive CTE) beside a small `town`.

    Every column holds what a sample of it shows, but for the rows past 250,000, which no sample of
    a few thousand rows is likely to meet: `nickname` (no index) holds NULLs only there, and
    `badge` (indexed) does too; `grade` (indexed) holds a sixth value there."""
    connection = sqlite3.connect(path)
    connection.executescript(f"""
        CREATE TABLE town(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        INSERT INTO town VALUES (1, 'Lyon'), (2, 'Porto'), (3, 'Turin');
        CREATE TABLE person(
            id INTEGER PRIMARY KEY,
            name TEXT,
            town_id INTEGER,
            nickname TEXT,
            badge INTEGER,
            grade TEXT,
            kind TEXT,
            score INTEGER
        );
        CREATE INDEX person_badge ON person(badge);
        CREATE INDEX person_grade ON person(grade);
        INSERT INTO person
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {BIG_ROWS})
        SELECT i, 'person ' || i, 1 + i % 3,
               CASE WHEN i > 250000 AND i % 1000 = 7 THEN NULL ELSE 'nick ' || (i % 50) END,
               CASE WHEN i > 250000 AND i % 1000 = 7 THEN NULL ELSE i * 3 END,
               CASE WHEN i > 250000 AND i % 1000 = 7 THEN 'Z' ELSE char(65 + i % 5) END,
               CASE WHEN i % 2 = 0 THEN 'x' ELSE 'y' END,
               (i * 7919) % 1000
        FROM n;
    """)
    connection.close()
    return path


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _big_database(tmp_path_factory.mktemp("big") / "big.sqlite")


@contextmanager
def counted(reader: SqliteSource) -> Iterator[list[int]]:
    """The SQLite VM steps the reader's connection runs inside the block (in thousands)."""
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    reader.connection.set_progress_handler(tick, STEP)
    try:
        yield steps
    finally:
        reader.connection.set_progress_handler(None, STEP)


def _learned(path: Path) -> tuple[set[tuple[str, str, str, str]], dict[tuple[str, str], Any], int]:
    reader = SqliteSource(path)
    try:
        schema = reader.schema()
        with counted(reader) as steps:
            found = learn(reader, schema)
        return ({(i.kind.value, i.table, i.column, i.other_table) for i in found},
                {(i.table, i.column): i.values for i in found if i.kind is InvariantKind.CATEGORY}, steps[0] * STEP)
    finally:
        reader.close()


def _one_count(path: Path) -> int:
    """The VM steps of one count(DISTINCT ...) of one column over every row of `person`: learning
    used to run two of these on each column (and min, max, length), then read columns again."""
    reader = SqliteSource(path)
    try:
        with counted(reader) as steps:
            reader.connection.execute("SELECT count(DISTINCT name) FROM person").fetchone()
        return steps[0] * STEP
    finally:
        reader.close()


def test_learning_the_invariants_of_a_big_table_reads_a_sample_not_the_table(big: Path) -> None:
    found, categories, steps = _learned(big)
    # every invariant of every column of the 300,000-row table costs less than one count(DISTINCT ...)
    # of one of its columns (before: 34 million steps, more than 15 of those)
    one = _one_count(big)
    assert steps < one, f"{steps:,} VM steps to learn the invariants; one count(DISTINCT name) takes {one:,}"
    # what the sample shows is learned as it would be from the whole table
    assert ("unique", "person", "name", "") in found
    assert ("inclusion", "person", "town_id", "town") in found
    assert ("participation", "town", "id", "person") in found  # every town is among the sample's town_id values
    assert ("spelling", "person", "nickname", "") in found
    assert categories.get(("person", "kind")) == ("x", "y")  # a category of the sample, not indexed
    # exact where an index answers cheaply: the NULLs of the indexed `badge` and the rare sixth
    # grade are found although no sampled row holds them
    assert ("not null", "person", "badge", "") not in found
    assert ("not null", "person", "score", "") in found
    assert categories[("person", "grade")] == ("A", "B", "C", "D", "E", "Z")  # walked through its index
    # what only a scan would show is missed, as the docs say: `nickname`'s rare NULLs
    assert ("not null", "person", "nickname", "") in found


def test_a_table_below_the_threshold_is_read_whole(tmp_path: Path) -> None:
    """Below `SMALL_TABLE_ROWS` nothing is sampled: one NULL in the last row is seen."""
    path = tmp_path / "small.sqlite"
    connection = sqlite3.connect(path)
    connection.executescript(f"""
        CREATE TABLE item(id INTEGER PRIMARY KEY, label TEXT);
        INSERT INTO item WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {SMALL_TABLE_ROWS})
        SELECT i, CASE WHEN i = {SMALL_TABLE_ROWS} THEN NULL ELSE 'label ' || i END FROM n;
    """)
    connection.close()
    found, _, _ = _learned(path)
    assert ("not null", "item", "label", "") not in found
    assert ("unique", "item", "label", "") in found


def test_the_neighbours_of_a_big_database_are_generated_without_a_scan(big: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole generation for a gold on the big table (schema, invariants, candidates sampled
    by rowid runs, the gold's literals looked up) costs less than one count(DISTINCT ...) of one
    of its columns (before: 52 million steps)."""
    from pytest_nl2sql.neighbours import NeighbourCache, schema

    steps = [0]
    opened = schema.SqliteSource.__init__

    def counting(self: SqliteSource, path: Path) -> None:
        opened(self, path)
        if Path(path) == big:
            def tick() -> int:
                steps[0] += 1
                return 0
            self.connection.set_progress_handler(tick, STEP)

    monkeypatch.setattr(schema.SqliteSource, "__init__", counting)
    neighbours = NeighbourCache(tmp_path / "cache").neighbours_for(
        big, ["SELECT count(*) FROM person WHERE grade = 'B' AND score >= 500 AND nickname = 'nick 7'"], 3)
    monkeypatch.undo()
    assert neighbours
    one = _one_count(big)
    assert steps[0] * STEP < one, f"{steps[0] * STEP:,} VM steps to generate; one count(DISTINCT name) takes {one:,}"


# --- a cache keyed by content travels ---------------------------------------------------------

WAREHOUSE_CASES = [
    {"id": "big-sales", "question": "Sales over 50.",
     "gold": "SELECT sale_id FROM sales WHERE amount > 50",
     "predicted": "SELECT sale_id FROM sales WHERE amount >= 51"},
    {"id": "north-total", "question": "Total sales of the northern stores.",
     "gold": "SELECT sum(s.amount) FROM sales AS s JOIN stores AS t ON s.store_id = t.store_id WHERE t.region = 'north'",
     "predicted": "SELECT sum(amount) FROM sales WHERE store_id IN (SELECT store_id FROM stores WHERE region = 'north')"},
    {"id": "busiest-stores", "question": "The three stores with the most sales.",
     "gold": "SELECT store_id, count(*) FROM sales GROUP BY store_id ORDER BY count(*) DESC, store_id LIMIT 3",
     "predicted": "SELECT store_id, count(sale_id) AS n FROM sales GROUP BY store_id ORDER BY n DESC, store_id LIMIT 3"},
]


def _warehouse(path: Path, source: Path | None = None) -> Path:
    """A small warehouse built with CREATE TABLE AS, as warehouses are: from scratch, or copied
    from `source` table by table (a new file of the same content, in other bytes)."""
    import duckdb

    connection = duckdb.connect(str(path))
    try:
        if source is None:
            connection.execute("CREATE TABLE stores AS SELECT i AS store_id, 'store ' || i AS store_name,"
                               " CASE WHEN i % 2 = 0 THEN 'north' ELSE 'south' END AS region FROM range(1, 9) AS t(i)")
            connection.execute("CREATE TABLE sales AS SELECT i AS sale_id, 1 + i % 8 AS store_id, (i * 37) % 100 AS amount,"
                               " CAST(DATE '2024-01-01' + INTERVAL (i % 60) DAY AS DATE) AS sold_on FROM range(1, 401) AS t(i)")
        else:
            connection.execute(f"ATTACH '{source}' AS old (READ_ONLY)")
            for table in ("stores", "sales"):
                connection.execute(f"CREATE TABLE {table} AS SELECT * FROM old.{table}")
            connection.execute("DETACH old")
    finally:
        connection.close()
    return path


def _warehouse_suite(directory: Path, source: Path | None = None) -> Path:
    from helpers import write_suite

    directory.mkdir(parents=True, exist_ok=True)
    _warehouse(directory / "warehouse.duckdb", source)
    return write_suite(directory, WAREHOUSE_CASES, name="warehouse.nl2sql.yaml", database="warehouse.duckdb")


@pytest.fixture
def generations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys the neighbour cache generates (a miss each) while the test runs."""
    from pytest_nl2sql.neighbours import cache

    made: list[str] = []
    generate = cache.NeighbourCache._generate

    def counted(self: Any, source: Path, golds: Any, count: int, dialect: str, kind: str, key: str, folder: Path) -> Any:
        made.append(key)
        return generate(self, source, golds, count, dialect, kind, key, folder)

    monkeypatch.setattr(cache.NeighbourCache, "_generate", counted)
    return made


def _key_folders(cache_dir: Path) -> set[str]:
    return {p.relative_to(cache_dir).as_posix() for p in cache_dir.glob("*/*") if p.is_dir()}


def _judged(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The items as judged: all but timings and the database's hash, which ties a review to the
    file's bytes (the rewritten file's differ, by design)."""
    from helpers import without_timings

    return [{k: v for k, v in item.items() if k != "database_hash"} for item in without_timings(report)["items"]]


def test_a_cache_copied_with_its_suite_is_warm_elsewhere(tmp_path: Path, generations: list[str]) -> None:
    """The suite and its DuckDB database copied to another folder, the database written anew by
    CREATE TABLE AS (other bytes, same rows), the cache copied to a third place: the run there
    generates nothing and judges every item as the first run did."""
    from pytest_nl2sql import evaluate_suite
    from pytest_nl2sql.neighbours.cache import file_digest

    first_suite = _warehouse_suite(tmp_path / "here")
    first = evaluate_suite(first_suite, cache_dir=tmp_path / "cache", rootdir=first_suite.parent)
    assert generations and all((item.get("neighbours") or {}).get("checked") for item in first["items"]), first["items"]
    built = _key_folders(tmp_path / "cache")

    elsewhere = tmp_path / "elsewhere" / "checkout"
    second_suite = _warehouse_suite(elsewhere, source=first_suite.parent / "warehouse.duckdb")
    assert file_digest(elsewhere / "warehouse.duckdb") != file_digest(first_suite.parent / "warehouse.duckdb")
    travelled = shutil.copytree(tmp_path / "cache", tmp_path / "restored" / "cache")
    generations.clear()
    second = evaluate_suite(second_suite, cache_dir=travelled, rootdir=elsewhere)
    assert generations == []  # warm: every case's neighbours found in the copied cache
    assert _key_folders(travelled) == built
    assert _judged(second) == _judged(first)


def test_the_content_key_follows_the_rows_not_the_bytes(tmp_path: Path) -> None:
    """A DuckDB file rewritten with the same rows keeps its key; one changed value changes it."""
    import duckdb

    from pytest_nl2sql.neighbours.cache import duckdb_content

    original = _warehouse(tmp_path / "a.duckdb")
    same = _warehouse(tmp_path / "b.duckdb", source=original)
    changed = _warehouse(tmp_path / "c.duckdb", source=original)
    connection = duckdb.connect(str(changed))
    connection.execute("UPDATE sales SET amount = amount + 1 WHERE sale_id = 400")
    connection.close()
    assert duckdb_content(original) == duckdb_content(same)
    assert duckdb_content(changed) != duckdb_content(original)


def test_nl2sql_neighbours_build_fills_the_cache_a_run_reads(tmp_path: Path, generations: list[str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`nl2sql neighbours build FOLDER --cache-dir DIR` generates the neighbours of every case file
    found there; a run on that cache then generates none."""
    from pytest_nl2sql import cli, evaluate_suite

    suite = _warehouse_suite(tmp_path / "suites")  # --jobs 1: built in this process, where `generations` counts
    assert cli.main(["neighbours", "build", str(suite.parent), "--cache-dir", str(tmp_path / "cache"), "--jobs", "1"]) == 0
    said = capsys.readouterr().out
    assert "warehouse.nl2sql.yaml: 3 cases, neighbours for 3" in said, said
    assert len(generations) == 3
    generations.clear()
    report = evaluate_suite(suite, cache_dir=tmp_path / "cache", rootdir=suite.parent)
    assert generations == []
    assert all((item.get("neighbours") or {}).get("checked") for item in report["items"])
    # again: nothing left to build
    assert cli.main(["neighbours", "build", str(suite), "--cache-dir", str(tmp_path / "cache")]) == 0
    assert "3 cases, neighbours for 3 (0 generated, 3 found in the cache)" in capsys.readouterr().out
    assert generations == []


def test_nl2sql_neighbours_build_in_several_processes_builds_the_same(tmp_path: Path, generations: list[str],
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`--jobs 2` shares the generations out to two other processes (nothing is generated in this
    one); the cache holds the very databases `--jobs 1` builds here, and the lines say the same."""
    from helpers import make_shop, neighbour_databases, write_suite
    from pytest_nl2sql import cli

    make_shop(tmp_path)
    cases = [{"id": f"c{n}", "question": "?", "gold": gold} for n, gold in enumerate([
        "SELECT DISTINCT name FROM item", "SELECT name FROM item WHERE price >= 2.5",
        "SELECT count(*) FROM item WHERE price > 1", "SELECT name FROM item WHERE price >= 2.5"])]  # a gold twice: one key
    suite = write_suite(tmp_path, cases, database="shop.sqlite")
    said = []
    for jobs in ("1", "2"):
        assert cli.main(["neighbours", "build", str(suite), "--cache-dir", str(tmp_path / f"cache{jobs}"), "--jobs", jobs]) == 0
        said.append(capsys.readouterr().out.splitlines()[0])
    assert len(generations) == 3  # --jobs 1 only: --jobs 2 built in its pool
    assert said[0] == said[1] == f"{suite}: 4 cases, neighbours for 4 (3 generated, 1 found in the cache)"
    built = neighbour_databases(tmp_path / "cache1")
    assert len(built) == 3 and built == neighbour_databases(tmp_path / "cache2")
    assert cli.main(["neighbours", "build", str(suite), "--cache-dir", str(tmp_path / "cache2"), "--jobs", "2"]) == 0
    assert "neighbours for 4 (0 generated, 4 found in the cache)" in capsys.readouterr().out


def test_nl2sql_neighbours_build_refuses_what_is_no_case_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_nl2sql import cli

    assert cli.main(["neighbours", "build", str(tmp_path / "missing.nl2sql.yaml"), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "no case file" in capsys.readouterr().err
    (tmp_path / "broken.nl2sql.yaml").write_text("cases: [unclosed\n")
    assert cli.main(["neighbours", "build", str(tmp_path / "broken.nl2sql.yaml"), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "broken.nl2sql.yaml" in capsys.readouterr().err
    assert cli.main(["neighbours", "build", str(tmp_path), "--nl2sql-neighbours", "17"]) == 2
    assert cli.main(["neighbours", "build", str(tmp_path), "--jobs", "0"]) == 2
    assert "--jobs must be 1 or more" in capsys.readouterr().err
