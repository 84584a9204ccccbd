"""The SQLAlchemy engine (any URL of no native engine), through dialects that run here: an alias of
SQLAlchemy's SQLite dialect on a file, and an alias of its PostgreSQL psycopg dialect against the
local server (skipped, naming the reason, when it is unreachable)."""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy", reason="SQLAlchemy is not installed")

import pytest_nl2sql.engines.sqlalchemy as sqlalchemy_engine  # noqa: E402
from helpers import generous, make_db, read_report, write_suite  # noqa: E402
from pytest_nl2sql.engines import (  # noqa: E402
    DatabaseMissing,
    EngineKind,
    Limits,
    QueryError,
    QueryTimeout,
    TooManyRows,
    open_engine,
    parse_database,
)
from pytest_nl2sql.engines.base import ConnectionLost  # noqa: E402
from pytest_nl2sql.engines.url import dialect_of, sqlglot_dialect  # noqa: E402
from servers import mariadb_database, postgres_schema  # noqa: E402

# a query with no end is stopped after 0.5 s; any other must end (in rows, a cap or an error)
# within a limit that follows the machine's load, not one a loaded machine overruns
FOREVER = Limits(timeout=0.5, max_rows=1_000, max_bytes=1_000_000)
LIMITS = Limits(timeout=generous(2), max_rows=1_000, max_bytes=1_000_000)

# Registered in SQLAlchemy's dialect registry (its own, per process): two schemes pytest-nl2sql
# has no native engine for, served by dialects that run on this machine.
sqlalchemy.dialects.registry.register("nl2sqltest", "sqlalchemy.dialects.sqlite.pysqlite", "SQLiteDialect_pysqlite")
sqlalchemy.dialects.registry.register("nl2sqlpg", "sqlalchemy.dialects.postgresql.psycopg", "PGDialect_psycopg")
sqlalchemy.dialects.registry.register("nl2sqlmy", "sqlalchemy.dialects.mysql.pymysql", "MySQLDialect_pymysql")

SCHEMA = """
CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT NOT NULL, capacity INTEGER);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, stadium_id INTEGER NOT NULL REFERENCES stadium (stadium_id), year TEXT);
INSERT INTO stadium VALUES (1, 'Hampden', 52000), (2, 'Balmoor', 4000);
INSERT INTO concert VALUES (1, 1, '2014'), (2, 1, '2015'), (3, 2, '2014');
"""


def _no_token_check(*args: Any, **kwargs: Any) -> None:
    """Stands in for `check_single_select` to show what the other layers hold on their own."""


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"nl2sqltest:///{make_db(tmp_path / 'shop.db', SCHEMA)}"


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Any]:
    engine = open_engine(sqlite_url)
    yield engine
    engine.close()


def _count(url: str) -> int:
    con = sqlite3.connect(url.partition(":///")[2])
    try:
        return con.execute("SELECT count(*) FROM concert").fetchone()[0]
    finally:
        con.close()


# -- URLs ---------------------------------------------------------------------------------------


def test_a_url_of_no_native_engine_goes_to_sqlalchemy(sqlite_url: str) -> None:
    spec = parse_database(sqlite_url)
    assert spec.kind is EngineKind.SQLALCHEMY and spec.dialect == "sqlite"
    assert dialect_of(sqlite_url) == "sqlite"  # the dialect a case is written in, by default
    assert dialect_of("mssql+pyodbc://u@h/db") == "tsql"
    engine = open_engine(sqlite_url)
    try:
        assert type(engine).__name__ == "SqlalchemyEngine" and engine.dialect == "sqlite"
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("name", "expected"),
    [("mssql", "tsql"), ("snowflake", "snowflake"), ("bigquery", "bigquery"), ("trino", "trino"),
     ("oracle", "oracle"), ("redshift", "redshift"), ("postgresql", "postgres"), ("awsathena", "athena"),
     ("databricks", "databricks"), ("no_such_dialect", "")],
)  # fmt: skip
def test_sqlalchemy_dialect_names_map_to_sqlglot(name: str, expected: str) -> None:
    assert sqlglot_dialect(name) == expected


def test_a_missing_dialect_or_driver_says_what_to_install() -> None:
    with pytest.raises(DatabaseMissing, match=r"pytest-nl2sql\[sqlalchemy\].*snowflake-sqlalchemy") as error:
        parse_database("snowflake://me:s3cret-pw@account/db")
    assert "s3cret-pw" not in str(error.value) and "me:***@account" in str(error.value)
    with pytest.raises(DatabaseMissing, match=r"driver 'pyodbc'.*pytest-nl2sql\[sqlalchemy\]"):
        parse_database("mssql+pyodbc://u@h/db")
    with pytest.raises(DatabaseMissing, match="unknown database URL scheme 'nosuchdb'"):
        parse_database("nosuchdb://u@h/db")


def test_without_sqlalchemy_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "sqlalchemy" or m.startswith("sqlalchemy.")]:
        monkeypatch.setitem(sys.modules, name, None)  # a failing import, as when not installed
    with pytest.raises(DatabaseMissing, match=r"SQLAlchemy, which is not installed.*pytest-nl2sql\[sqlalchemy\]"):
        parse_database("snowflake://u@account/db")


# -- SQLite through SQLAlchemy ------------------------------------------------------------------


def test_rows_and_schema(sqlite_engine: Any) -> None:
    result = sqlite_engine.execute("SELECT s.name, count(*) FROM concert c JOIN stadium s USING (stadium_id) GROUP BY s.name ORDER BY 1", LIMITS)
    assert result.columns[0] == "name" and result.rows == [("Balmoor", 1), ("Hampden", 2)]
    assert sqlite_engine.schema_columns() == {"concert": ["concert_id", "stadium_id", "year"], "stadium": ["stadium_id", "name", "capacity"]}
    ddl = sqlite_engine.schema_ddl()
    assert '"name" TEXT NOT NULL' in ddl and 'PRIMARY KEY ("stadium_id")' in ddl
    assert 'FOREIGN KEY ("stadium_id") REFERENCES "stadium" ("stadium_id")' in ddl


def test_hostile_sql_is_contained(sqlite_engine: Any, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for sql in ("DELETE FROM concert", "SELECT 1; DELETE FROM concert", "DROP TABLE concert", "SELECT 1 INTO x"):
        with pytest.raises(QueryError):
            sqlite_engine.execute(sql, LIMITS)
    # without the token check, the session (PRAGMA query_only) still refuses the write
    monkeypatch.setattr(sqlalchemy_engine, "check_single_select", _no_token_check)
    with pytest.raises(QueryError, match="(?i)readonly|read-only|read only"):
        sqlite_engine.execute("DELETE FROM concert", LIMITS)
    monkeypatch.undo()
    assert _count(sqlite_url) == 3
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        sqlite_engine.execute("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c", FOREVER)
    assert time.monotonic() - started < 20  # a query with no end, stopped
    with pytest.raises(TooManyRows, match="more than 1000 rows"):
        sqlite_engine.execute("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT n FROM c", LIMITS)
    with pytest.raises(TooManyRows, match="size cap"):
        sqlite_engine.execute("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c LIMIT 500) SELECT zeroblob(100000) FROM c", LIMITS)
    assert sqlite_engine.execute("SELECT count(*) FROM concert", LIMITS).rows == [(3,)]


def test_query_errors_carry_the_database_message(sqlite_engine: Any) -> None:
    with pytest.raises(QueryError, match="no such column: nope"):
        sqlite_engine.execute("SELECT nope FROM concert", LIMITS)
    assert sqlite_engine.execute("SELECT count(*) FROM stadium", LIMITS).rows == [(2,)]


# -- PostgreSQL through SQLAlchemy --------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_urls() -> Iterator[tuple[str, Any, str]]:
    """(URL of the schema through the `nl2sqlpg` alias, admin connection, the URL's application name)."""
    with postgres_schema("nl2sql_sa", SCHEMA) as scratch:
        url = scratch.url.replace("postgresql://", "nl2sqlpg://", 1)
        yield f"{url}&application_name={scratch.name}", scratch.admin, scratch.name


@pytest.fixture
def pg_engine(pg_urls: tuple[str, Any, str]) -> Iterator[Any]:
    engine = open_engine(pg_urls[0])
    yield engine
    engine.close()


@pytest.mark.services
def test_postgres_through_sqlalchemy_contains_hostile_sql(
    pg_engine: Any, pg_urls: tuple[str, Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, admin, schema = pg_urls
    assert pg_engine.dialect == "postgres"
    assert pg_engine.execute("SELECT name FROM stadium ORDER BY stadium_id", LIMITS).rows == [("Hampden",), ("Balmoor",)]
    ddl = pg_engine.schema_ddl()
    assert '"name" TEXT NOT NULL' in ddl and 'REFERENCES "stadium" ("stadium_id")' in ddl
    # the write is refused by the token check, and without it by the READ ONLY transaction
    with pytest.raises(QueryError):
        pg_engine.execute("DELETE FROM concert", LIMITS)
    monkeypatch.setattr(sqlalchemy_engine, "check_single_select", _no_token_check)
    with pytest.raises(QueryError):
        pg_engine.execute("WITH d AS (DELETE FROM concert RETURNING *) SELECT * FROM d", LIMITS)
    monkeypatch.undo()
    assert admin.execute(f'SELECT count(*) FROM "{schema}".concert').fetchone() == (3,)
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        pg_engine.execute("SELECT pg_sleep(60)", FOREVER)
    assert time.monotonic() - started < 20  # stopped at its limit, long before the sleep ends
    with pytest.raises(TooManyRows, match="more than 1000 rows"):
        pg_engine.execute("SELECT g FROM generate_series(1, 1000000) g", Limits(timeout=generous(5), max_rows=1_000))
    with pytest.raises(TooManyRows, match="size cap"):
        pg_engine.execute("SELECT repeat('x', 100000) FROM generate_series(1, 100)", LIMITS)
    assert pg_engine.execute("SELECT count(*) FROM concert", LIMITS).rows == [(3,)]


@pytest.mark.services
def test_postgres_through_sqlalchemy_reconnects_after_a_killed_backend(pg_engine: Any, pg_urls: tuple[str, Any, str]) -> None:
    _, admin, schema = pg_urls

    def terminate() -> None:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (schema,))

    assert pg_engine.execute("SELECT 1", LIMITS).rows == [(1,)]
    timer = threading.Timer(0.3, terminate)
    timer.start()
    with pytest.raises(ConnectionLost):
        pg_engine.execute("SELECT pg_sleep(3)", Limits(timeout=5))
    timer.join()
    assert pg_engine.execute("SELECT count(*) FROM stadium", LIMITS).rows == [(2,)]
    terminate()  # while idle, between two queries: reopened quietly, the query never ran
    assert pg_engine.execute("SELECT count(*) FROM stadium", LIMITS).rows == [(2,)]


@pytest.mark.services
def test_postgres_through_sqlalchemy_keeps_no_session_state_and_denies_as_natively(
    pg_engine: Any, pg_urls: tuple[str, Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, admin, _ = pg_urls
    for sql in ("SELECT pg_advisory_lock(42)", "SELECT * FROM ts_stat('SELECT 1')"):
        with pytest.raises(QueryError, match="not allowed"):
            pg_engine.execute(sql, LIMITS)
    monkeypatch.setattr(sqlalchemy_engine, "check_single_select", _no_token_check)
    key = 4242 + os.getpid() % 10_000  # apart from any other process's test
    pg_engine.execute(f"SELECT pg_advisory_lock({key})", Limits(timeout=30))
    # a session lock survives a rollback: only a fresh session for the next query ends it
    # (the closed session's backend releases it as it exits, a moment after the close)
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s"
    deadline = time.monotonic() + 30
    while admin.execute(held, (key,)).fetchone() != (0,) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert admin.execute(held, (key,)).fetchone() == (0,)


@pytest.mark.services
def test_mariadb_through_a_mysql_dialect_is_contained_as_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    """A MySQL SQLAlchemy dialect pointed at MariaDB: MariaDB's own time limit (it has no
    `max_execution_time`), the native deny list, a fresh session per query, and a query that
    swallowed its cancel (`BENCHMARK` answers 0 to `KILL QUERY`) still a timeout."""
    with mariadb_database("nl2sql_sa", "CREATE TABLE t (x INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2)") as scratch:
        engine = open_engine(scratch.url.replace("mysql://", "nl2sqlmy://", 1))
        try:
            assert engine.containment.timeout is not None
            assert "max_statement_time" in engine.containment.timeout(1.0)[0]
            assert engine.execute("SELECT count(*) FROM t", Limits(timeout=30)).rows == [(2,)]
            with pytest.raises(QueryError, match="not allowed"):
                engine.execute("SELECT GET_LOCK('nl2sql_sa', 0)", Limits(timeout=30))
            started = time.monotonic()
            with pytest.raises(QueryTimeout):
                engine.execute("SELECT BENCHMARK(2000000000, MD5('x'))", Limits(timeout=1))
            assert time.monotonic() - started < 20
            monkeypatch.setattr(sqlalchemy_engine, "check_single_select", _no_token_check)
            assert engine.execute("SELECT LAST_INSERT_ID(5)", Limits(timeout=30)).rows == [(5,)]
            assert engine.execute("SELECT LAST_INSERT_ID()", Limits(timeout=30)).rows == [(0,)]
            lock = f"nl2sql_sa_{os.getpid()}"
            engine.execute(f"SELECT GET_LOCK('{lock}', 0)", Limits(timeout=30))

            def free() -> bool:  # the closed session's thread frees it as it ends
                with scratch.admin.cursor() as cursor:
                    cursor.execute(f"SELECT IS_FREE_LOCK('{lock}')")
                    return cursor.fetchall() == ((1,),)

            deadline = time.monotonic() + 30
            while not free() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert free()
        finally:
            engine.close()


# -- neighbours ---------------------------------------------------------------------------------


def test_the_summary_says_neighbours_were_off_for_a_sqlalchemy_engine_and_why(pytester: pytest.Pytester) -> None:
    """No neighbour databases for a SQLAlchemy URL (no local copy is known to mean what the
    warehouse means): each right prediction records why, the run warns once per engine, and the
    summary counts them, so a reader does not take the accuracy for one checked on neighbours."""
    database = make_db(pytester.path / "shop.db", SCHEMA)
    pytester.makeconftest("""
        import sqlalchemy
        sqlalchemy.dialects.registry.register("nl2sqltest", "sqlalchemy.dialects.sqlite.pysqlite", "SQLiteDialect_pysqlite")
    """)
    gold = "SELECT name FROM stadium WHERE capacity > 5000"
    write_suite(pytester.path, [
        {"id": "right", "gold": gold, "predicted": "SELECT name FROM stadium WHERE 5000 < capacity"},
        {"id": "also-right", "gold": gold, "predicted": "SELECT name FROM stadium WHERE capacity >= 5001"},
        {"id": "wrong", "gold": gold, "predicted": "SELECT name FROM stadium"},
    ], database=f"nl2sqltest:///{database}")
    result = pytester.runpytest("--nl2sql-report=json:r.json", "-W", "always")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*NoNeighbours: no neighbour databases for sqlite through SQLAlchemy*",
        "*neighbour databases off for 2 right predictions: sqlite through SQLAlchemy: its database is not copied*",
    ])
    assert result.stdout.str().count("NoNeighbours: no neighbour databases") == 1
    report = read_report(pytester.path / "r.json")
    assert list(report["summary"]["neighbours_off"].values()) == [2]
    items = {i["id"]: i for i in report["items"]}
    assert items["right"]["neighbours"] is None and "not copied" in items["right"]["extra"]["neighbours_off"]
    assert "neighbours_off" not in items["wrong"].get("extra", {})
