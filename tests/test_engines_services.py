"""PostgreSQL, MariaDB/MySQL and DuckDB engines against real databases on this machine.

The servers are the ones CI provides on loopback (PostgreSQL 127.0.0.1:5432, trust auth, user
postgres or root, database `test`; MariaDB 127.0.0.1:3306, root with an empty password,
database `test`). A test skips, naming the reason, when its driver or server is missing. Each
test run creates its own uniquely named schema (PostgreSQL) or database (MariaDB) and drops it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_nl2sql.engines import (
    DatabaseMissing,
    EngineError,
    Limits,
    QueryError,
    QueryTimeout,
    TooManyRows,
    open_engine,
)
from pytest_nl2sql.engines.duckdb import READ_ONLY_CONFIG
from servers import PG_HOST, mariadb_admin, postgres_admin

pytestmark = pytest.mark.services

# Normal queries get a generous limit (a loaded machine must not turn them into timeouts); only the
# queries that must time out run under the short one.
LIMITS = Limits(timeout=30.0, max_rows=1_000, max_bytes=1_000_000)
SHORT = Limits(timeout=0.5, max_rows=1_000, max_bytes=1_000_000)
ROWS = [(1, "one", "2020-01-02", 1.5), (2, "two", None, 3)]


@dataclass
class Database:
    """A scratch database on one engine: its URL, and a count of `t` seen by an admin."""

    url: str
    dialect: str
    count_rows: Callable[[], int]
    hostile: list[tuple[str, type[EngineError]]] = field(default_factory=list)
    attached: bool = False  # a DuckDB file attached to a shared worker's instance (neighbours)


COMMON_HOSTILE: list[tuple[str, type[EngineError]]] = [
    ("INSERT INTO t VALUES (3, 'three', NULL, 0)", QueryError),
    ("UPDATE t SET s = 'changed'", QueryError),
    ("DELETE FROM t", QueryError),
    ("DROP TABLE t", QueryError),
    ("CREATE TABLE u (x INTEGER)", QueryError),
    ("CREATE TEMPORARY TABLE t (x INTEGER)", QueryError),
    ("ALTER TABLE t ADD COLUMN y INTEGER", QueryError),
    ("SELECT 1; DROP TABLE t", QueryError),
    ("COMMIT", QueryError),
    ("BEGIN", QueryError),
    ("ROLLBACK", QueryError),
    ("SELECT * FROM t; SELECT 2", QueryError),
    ("", QueryError),
]


def _postgres(schema: str) -> Iterator[Database]:
    admin, user = postgres_admin()
    base = f"postgresql://{user}@{PG_HOST}/test"
    admin.execute(f'CREATE SCHEMA "{schema}"')
    admin.execute(
        f'CREATE TABLE "{schema}".t (x INTEGER PRIMARY KEY, s TEXT, d DATE, n NUMERIC(10, 2))'
    )
    admin.execute(
        f"INSERT INTO \"{schema}\".t VALUES (1, 'one', '2020-01-02', 1.5), (2, 'two', NULL, 3)"
    )

    def count_rows() -> int:
        return admin.execute(f'SELECT count(*) FROM "{schema}".t').fetchone()[0]

    hostile = [
        ("SELECT pg_sleep(30)", QueryTimeout),
        ("SELECT count(*) FROM generate_series(1, 10000000000)", QueryTimeout),
        ("SELECT * FROM generate_series(1, 100000)", TooManyRows),
        ("SELECT repeat('x', 100000) FROM generate_series(1, 100)", TooManyRows),
        ("SELECT pg_read_file('/etc/passwd')", QueryError),
        ("SELECT pg_catalog.pg_ls_dir('.')", QueryError),
        ("COPY t TO '/tmp/nl2sql-copied.csv'", QueryError),
        ("COPY (SELECT 1) TO PROGRAM 'touch /tmp/nl2sql-pwned'", QueryError),
        ("SET search_path = pg_catalog", QueryError),
        ("SET default_transaction_read_only = off", QueryError),
        ("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d", QueryError),
        ("SELECT pg_advisory_lock(42)", QueryError),
        (r'SELECT U&"pg\005fadvisory\005flock"(42)', QueryError),
        ("SELECT query_to_xml('select pg_advisory_lock(42)', true, true, '')", QueryError),
        ("SELECT nextval('nope_seq')", QueryError),
        ("DO $$ BEGIN DELETE FROM t; END $$", QueryError),
    ]
    try:
        yield Database(
            url=f"{base}?options=-csearch_path%3D{schema}",
            dialect="postgres",
            count_rows=count_rows,
            hostile=COMMON_HOSTILE + hostile,
        )
    finally:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


def _mariadb(database: str) -> Iterator[Database]:
    admin = mariadb_admin("test")

    def run(sql: str) -> list[tuple]:
        with admin.cursor() as cursor:
            cursor.execute(sql)
            return list(cursor.fetchall())

    def count_rows() -> int:
        return run(f"SELECT count(*) FROM `{database}`.t")[0][0]

    run(f"CREATE DATABASE `{database}`")
    run(f"CREATE TABLE `{database}`.t (x INTEGER PRIMARY KEY, s TEXT, d DATE, n DECIMAL(10, 2))")
    run(f"INSERT INTO `{database}`.t VALUES (1, 'one', '2020-01-02', 1.5), (2, 'two', NULL, 3)")
    hostile = [
        ("SELECT SLEEP(30)", QueryTimeout),
        (
            "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 100000)"
            " SELECT n FROM c",
            TooManyRows,
        ),
        ("SELECT x INTO OUTFILE '/tmp/nl2sql-outfile.txt' FROM t", QueryError),
        ("SELECT x FROM t INTO @v", QueryError),
        ("SELECT @v := 1", QueryError),
        ("SELECT LOAD_FILE('/etc/passwd')", QueryError),
        ("SELECT GET_LOCK('nl2sql', 0)", QueryError),
        ("/*! SET SESSION sql_select_limit = 1, @x = */ (SELECT 1)", QueryError),
        ("SELECT 1 /*!, GET_LOCK('nl2sql', 0) */", QueryError),
        ("SELECT 1 /*M!100000 , @v := 5 */", QueryError),
        ("SET GLOBAL max_connections = 1", QueryError),
        ("SET @@session.sql_mode = 'ANSI'", QueryError),
        ("SET autocommit = 1", QueryError),
        ("START TRANSACTION", QueryError),
        ("LOCK TABLES t WRITE", QueryError),
        ("GRANT ALL ON *.* TO 'nobody'@'%'", QueryError),
    ]
    try:
        yield Database(
            url=f"mysql://root@127.0.0.1:3306/{database}",
            dialect="mysql",
            count_rows=count_rows,
            hostile=COMMON_HOSTILE + hostile,
        )
    finally:
        run(f"DROP DATABASE IF EXISTS `{database}`")
        admin.close()


def _duckdb(directory: Path, *, attached: bool = False) -> Iterator[Database]:
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed")
    path = directory / "scratch.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE t (x INTEGER PRIMARY KEY, s VARCHAR, d DATE, n DECIMAL(10, 2))")
    conn.execute("INSERT INTO t VALUES (1, 'one', '2020-01-02', 1.5), (2, 'two', NULL, 3)")
    conn.close()

    def count_rows() -> int:
        # DuckDB shares one instance per file, so a second connection needs the same config
        with duckdb.connect(str(path), read_only=True, config=dict(READ_ONLY_CONFIG)) as reader:
            return reader.execute("SELECT count(*) FROM t").fetchone()[0]

    hostile = [
        ("SELECT count(*) FROM range(1000000000000)", QueryTimeout),
        ("SELECT * FROM range(100000)", TooManyRows),
        ("SELECT repeat('x', 100000) FROM range(100)", TooManyRows),
        ("SELECT * FROM read_csv('/etc/passwd')", QueryError),
        ("COPY t TO '/tmp/nl2sql-duck.csv'", QueryError),
        ("ATTACH '/tmp/nl2sql-attached.duckdb' AS a", QueryError),
        ("SET enable_external_access = true", QueryError),
        ("PRAGMA enable_profiling", QueryError),
        ("INSTALL httpfs", QueryError),
        ("CREATE TEMP VIEW t AS SELECT 99 AS x", QueryError),
        ("DETACH memory", QueryError),
        ("USE memory", QueryError),
    ]
    yield Database(
        url=f"duckdb:///{path}",
        dialect="duckdb",
        count_rows=count_rows,
        hostile=COMMON_HOSTILE + hostile,
        attached=attached,
    )


@pytest.fixture(scope="module", params=["postgres", "mariadb", "duckdb", "duckdb-attached"])
def database(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[Database]:
    name = f"nl2sql_test_{uuid.uuid4().hex[:12]}"
    factory = {
        "postgres": lambda: _postgres(name),
        "mariadb": lambda: _mariadb(name),
        "duckdb": lambda: _duckdb(tmp_path_factory.mktemp("duck")),
        "duckdb-attached": lambda: _duckdb(tmp_path_factory.mktemp("duck"), attached=True),
    }[request.param]
    yield from factory()


@pytest.fixture(scope="module")
def engine(database: Database):
    if database.attached:  # as a neighbour is opened: in a worker shared with other databases
        from pytest_nl2sql.engines.duckdb import DuckdbEngine, new_worker

        worker = new_worker()
        engine = DuckdbEngine(Path(database.url.removeprefix("duckdb:///")), worker=worker)
        yield engine
        engine.close()
        worker.shutdown()
        return
    engine = open_engine(database.url)
    yield engine
    engine.close()


def test_duckdb_reads_no_temp_directory(tmp_path: Path) -> None:
    """With external access off DuckDB still lets file functions read its temp directory
    (`<file>.tmp/`): it is unset, on an engine's own instance as on the neighbours' shared one."""
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed")
    path = tmp_path / "db.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE t AS SELECT 1 AS x")
    (tmp_path / "db.duckdb.tmp").mkdir()
    (tmp_path / "db.duckdb.tmp" / "secret.txt").write_text("secret")
    engine = open_engine(f"duckdb:///{path}")
    try:
        with pytest.raises(QueryError, match="(?i)disabled"):
            engine.execute(f"SELECT content FROM read_text('{tmp_path}/db.duckdb.tmp/secret.txt')", LIMITS)
        settings = dict(engine.execute("SELECT name, value FROM duckdb_settings() WHERE name IN"
                                       " ('allowed_directories', 'temp_directory')", LIMITS).rows)
        assert settings == {"allowed_directories": "[]", "temp_directory": ""}
    finally:
        engine.close()


def test_a_duckdb_file_with_a_write_ahead_log_is_read_whole_beside_neighbours(tmp_path: Path) -> None:
    """A hard link would leave `<file>.wal` behind and show the data of the last checkpoint: such a
    file (a folder's database a writer left open) gets an instance of its own in the shared worker."""
    pytest.importorskip("duckdb", reason="duckdb is not installed")
    from pytest_nl2sql.engines.duckdb import DuckdbEngine, new_worker

    path = tmp_path / "open.duckdb"
    script = ("import sys, os, duckdb\nc = duckdb.connect(sys.argv[1])\nc.execute('SET checkpoint_threshold = \\'1GB\\'')\n"
              "c.execute('CREATE TABLE t (x INTEGER)')\nc.execute('CHECKPOINT')\n"
              "c.execute('INSERT INTO t SELECT range FROM range(5)')\nos._exit(0)\n")
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=120)  # ends without a checkpoint
    assert (tmp_path / "open.duckdb.wal").exists()
    worker = new_worker()
    engine = DuckdbEngine(path, worker=worker)
    try:
        assert engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(5,)]
    finally:
        engine.close()
        worker.shutdown()


def test_an_attached_duckdb_reaches_no_file(tmp_path: Path) -> None:
    """Neighbours are attached to one DuckDB instance per worker, which may attach only from a
    private folder: the folder is empty while queries run, no path leads out of it, and the
    folder is gone with the worker."""
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed")
    from pytest_nl2sql.engines.duckdb import DuckdbEngine, new_worker
    from pytest_nl2sql.judge.execute import execute_once_more_if_lost

    paths = []
    for name in ("a", "b"):
        paths.append(tmp_path / f"{name}.duckdb")
        with duckdb.connect(str(paths[-1])) as conn:
            conn.execute(f"CREATE TABLE t AS SELECT '{name}' AS s")
    (tmp_path / "secret.csv").write_text("x\nsecret\n")
    worker = new_worker()
    first, second = (DuckdbEngine(path, worker=worker) for path in paths)
    try:
        assert first.execute("SELECT s FROM t", LIMITS).rows == [("a",)]
        assert second.execute("SELECT s FROM t", LIMITS).rows == [("b",)]
        assert first.schema_columns() == {"t": ["s"]}
        # one thread: tied rows come in the same order every run (a counterexample is replayed, not shrunk again)
        assert first.execute("SELECT current_setting('threads')", LIMITS).rows == [(1,)]
        (link,) = second.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()", LIMITS).rows[0]
        folder = Path(link).parent
        assert folder != tmp_path and folder.is_dir() and list(folder.iterdir()) == []
        assert second.execute(f"SELECT count(*) FROM glob('{folder}/*')", LIMITS).rows == [(0,)]
        for sql in (f"SELECT * FROM read_csv('{folder}/../{tmp_path.name}/secret.csv')",
                    f"SELECT * FROM read_csv('{tmp_path}/secret.csv')",
                    f"SELECT * FROM '{paths[0]}'",
                    f"ATTACH '{folder}/x.duckdb' AS x"):
            with pytest.raises(QueryError):
                second.execute(sql, LIMITS)
        # DuckDB lets file functions read its temp directory even with external access off: unset
        settings = dict(first.execute("SELECT name, value FROM duckdb_settings() WHERE name IN"
                                      " ('allowed_directories', 'temp_directory')", LIMITS).rows)
        assert settings == {"allowed_directories": f"[{folder}/]", "temp_directory": ""}
        os.kill(worker.pid, signal.SIGKILL)  # a killed child cannot remove its folder: its parent does
        assert execute_once_more_if_lost(first, "SELECT s FROM t", LIMITS).rows == [("a",)]  # in a new child
        assert not folder.exists()
        (link,) = first.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()", LIMITS).rows[0]
        folder = Path(link).parent
    finally:
        first.close()
        second.close()
        worker.shutdown()
    assert not folder.exists()


def test_rows_come_back_as_plain_values(engine, database: Database) -> None:
    result = engine.execute("SELECT x, s, d, n FROM t ORDER BY x", LIMITS)
    assert engine.dialect == database.dialect
    assert [c.lower() for c in result.columns] == ["x", "s", "d", "n"]
    assert result.rows == ROWS
    assert [type(v) for v in result.rows[1]] == [int, str, type(None), int]
    assert engine.schema_columns()["t"] == ["x", "s", "d", "n"]
    assert "t" in engine.schema_ddl()


def test_aggregates_are_int_or_float(engine) -> None:
    total, mean, count = engine.execute("SELECT sum(x), avg(x), count(*) FROM t", LIMITS).rows[0]
    assert (total, mean, count) == (3, 1.5, 2)
    assert type(total) is int and type(mean) is float and type(count) is int


def test_hostile_queries_are_refused_and_change_nothing(engine, database: Database) -> None:
    for sql, expected in database.hostile:
        with pytest.raises(expected):
            engine.execute(sql, SHORT if expected is QueryTimeout else LIMITS)
        # the engine's own connection is still healthy, and the data is unchanged
        assert engine.execute("SELECT x, s FROM t ORDER BY x", LIMITS).rows == [
            (1, "one"),
            (2, "two"),
        ], sql
    assert database.count_rows() == 2
    for leftover in ("nl2sql-copied.csv", "nl2sql-pwned", "nl2sql-outfile.txt", "nl2sql-duck.csv"):
        assert not (Path("/tmp") / leftover).exists()


def test_query_errors_carry_the_database_message(engine) -> None:
    with pytest.raises(QueryError, match="(?i)nope"):
        engine.execute("SELECT nope FROM t", LIMITS)
    assert engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(2,)]


@pytest.mark.parametrize(
    "url",
    ["postgresql://postgres@127.0.0.1:1/test", "mysql://root@127.0.0.1:1/test"],
)
def test_unreachable_server_is_database_missing(url: str) -> None:
    pytest.importorskip("psycopg" if url.startswith("postgresql") else "pymysql")
    with pytest.raises(DatabaseMissing, match="127.0.0.1"):
        open_engine(url)


def test_missing_duckdb_file_is_database_missing(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    with pytest.raises(DatabaseMissing, match="nope.duckdb"):
        open_engine(f"duckdb:///{tmp_path / 'nope.duckdb'}")
    assert list(tmp_path.iterdir()) == []
