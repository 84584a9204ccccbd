"""A SQLite-dialect suite copied to PostgreSQL, MariaDB and DuckDB (with copy-db, as a user would)
gets SQLite's verdicts there: the SQL leans on SQLite's leniencies (`Year = 2014` on a text
column, a bare column beside GROUP BY, a case-insensitive LIKE, a scalar subquery of several
rows, a derived table without alias, LIMIT inside IN, AVG of text, a bare column beside max),
which the translation (`judge.translate`) carries over. Each test makes its own database and
drops it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import make_db, write_suite
from pytest_nl2sql import evaluate_suite
from pytest_nl2sql.copydb import copy_database
from servers import mariadb_database_url, postgres_database_url

# `Year` is text, as in Spider's concert_singer: SQLite compares it with numbers as text
# ('9' > '2013'), which a numeric comparison would not.
SQLITE_DDL = """
CREATE TABLE stadium (Stadium_ID INTEGER PRIMARY KEY, Name TEXT NOT NULL, Capacity INTEGER);
CREATE TABLE concert (concert_ID INTEGER PRIMARY KEY, Stadium_ID INTEGER REFERENCES stadium (Stadium_ID), Year TEXT);
INSERT INTO stadium VALUES (1, 'Hampden Park', 4000), (2, 'Balmoor', 3960), (3, 'Glebe Park', 52500);
INSERT INTO concert VALUES (1, 1, '2014'), (2, 1, '2014'), (3, 2, '2015'), (4, 3, '2014'), (5, 1, '9');
"""

CASES = [
    {"id": "year-equals-a-number", "gold": "SELECT count(*) FROM concert WHERE Year = 2014",
     "predicted": "SELECT count(*) FROM concert WHERE year = '2014'"},
    {"id": "year-compared-as-text", "gold": "SELECT count(*) FROM concert WHERE Year > 2013",  # '9' > '2013'
     "predicted": "SELECT count(*) FROM concert"},
    {"id": "bare-column-beside-group-by",
     "gold": "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id"
             " WHERE T1.year = 2014 GROUP BY T1.stadium_id",
     "predicted": "SELECT name, count(*) FROM stadium JOIN concert ON concert.stadium_id = stadium.stadium_id"
                  " WHERE year = 2014 GROUP BY stadium.stadium_id ORDER BY capacity"},
    {"id": "like-ignores-case", "gold": "SELECT name FROM stadium WHERE name LIKE '%PARK%'",
     "predicted": "SELECT name FROM stadium WHERE name LIKE '%park'"},
    {"id": "avg-of-text", "gold": "SELECT avg(year) FROM concert",
     "predicted": "SELECT sum(year) * 1.0 / count(*) FROM concert"},
    {"id": "scalar-subquery-of-several-rows", "gold": "SELECT name FROM stadium WHERE stadium_id = 1",
     "predicted": "SELECT name FROM stadium WHERE stadium_id = (SELECT stadium_id FROM concert WHERE year = 2014 AND stadium_id = 1)"},
    {"id": "derived-table-without-alias", "gold": "SELECT count(*) FROM (SELECT stadium_id FROM concert GROUP BY stadium_id)",
     "predicted": "SELECT count(DISTINCT stadium_id) FROM concert"},
    {"id": "bare-column-beside-max", "gold": "SELECT name, max(capacity) FROM stadium",
     "predicted": "SELECT name, capacity FROM stadium ORDER BY capacity DESC LIMIT 1"},
    {"id": "limit-inside-in",
     "gold": "SELECT name FROM stadium WHERE stadium_id IN"
             " (SELECT stadium_id FROM concert GROUP BY stadium_id ORDER BY count(*) DESC LIMIT 1)",
     "predicted": "SELECT name FROM stadium ORDER BY (SELECT count(*) FROM concert WHERE concert.stadium_id = stadium.stadium_id)"
                  " DESC LIMIT 1"},
]


def _verdicts(directory: Path, database: str, cases: list[dict[str, Any]]) -> dict[str, str]:
    suite = write_suite(directory, cases, name="concerts.nl2sql.yaml", dialect="sqlite", database=database)
    report = evaluate_suite(suite, neighbours=0, timeout=10)
    return {item["id"]: item["verdict"] for item in report["items"]}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_db(tmp_path_factory.mktemp("concerts") / "concerts.sqlite", SQLITE_DDL)


@pytest.fixture(scope="module")
def on_sqlite(source: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _verdicts(tmp_path_factory.mktemp("sqlite"), str(source), CASES)


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.services),
                        pytest.param("mariadb", marks=pytest.mark.services), "duckdb"])
def copied(request: pytest.FixtureRequest, source: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(engine, URL of a copy of the SQLite database made with copy-db), dropped afterwards."""
    if request.param == "duckdb":
        pytest.importorskip("duckdb")
        url = f"duckdb:///{tmp_path / 'concerts.duckdb'}"
        copy_database(str(source), url)
        yield "duckdb", url
        return
    made = postgres_database_url("nl2sql_trs") if request.param == "postgres" else mariadb_database_url("nl2sql_trs")
    with made as url:
        copy_database(str(source), url, create=True)
        yield request.param, url


def test_sqlite_verdicts_hold_on_every_engine(copied: tuple[str, str], on_sqlite: dict[str, str], tmp_path: Path) -> None:
    _, url = copied
    assert set(on_sqlite.values()) == {"pass"}  # each prediction is right on SQLite
    assert _verdicts(tmp_path, url, CASES) == on_sqlite
