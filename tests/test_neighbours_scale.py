"""Neighbours on big databases and a cache that travels (issue 32).

Learning what a database shows costs a sample of a big table, never a scan of it: a 300,000-row
table is read in a few thousand rows (counted in SQLite VM steps), with exact answers where an
index gives them cheaply. The neighbour cache is keyed by content, so a suite and its database
copied elsewhere (a DuckDB file written anew with the same rows) with the cache copied too is warm
there: nothing is generated, and the items are the same.
"""

from __future__ import annotations

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
