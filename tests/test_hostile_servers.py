"""Containment of hostile predictions on the real servers, layer by layer.

Each attack was first reproduced by hand against the previous engines (see the module
docstrings of `engines/postgres.py` and `engines/mysql.py` for the design). The tests connect
as a least-privilege user they create themselves (the recommended deployment), in a scratch
database they create and drop, and check three things:

- the token check refuses the attack (defence in depth),
- with the token check switched off, the session layer alone still contains it: nothing the
  query did to its session reaches the next query, and other sessions are unaffected,
- memory stays bounded while a result streams, and a connection killed from outside is a
  `ConnectionLost` (never the model's fault) after which the same engine works again.

Servers (CI provides them on loopback): PostgreSQL 127.0.0.1:5432 with trust auth, MariaDB
127.0.0.1:3306 with root and an empty password. A test skips, naming the reason, when its
driver or server is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlglot

import pytest_nl2sql.engines.mysql as mysql_engine
import pytest_nl2sql.engines.postgres as postgres_engine
from helpers import generous
from pytest_nl2sql.cli import postgres_role_sql
from pytest_nl2sql.engines import Limits, QueryError, QueryTimeout, TooManyRows, open_engine
from pytest_nl2sql.engines.base import (
    ConnectionLost,
    SizeBudget,
    check_single_select,
    executable_comment,
    value_size,
)
from servers import PG_HOST, mariadb_admin, postgres_admin

# queries that must finish (or fail on a cap) within their limit: it follows the machine's load
LIMITS = Limits(timeout=generous(5), max_rows=1_000, max_bytes=1_000_000)
THREE = [(1,), (2,), (3,)]
MB = 1024 * 1024


def _no_token_check(*args: Any, **kwargs: Any) -> None:
    """Stands in for `check_single_select` to show what the other layers hold on their own."""


def _later(delay: float, action: Callable[[], Any]) -> threading.Timer:
    timer = threading.Timer(delay, action)
    timer.daemon = True
    timer.start()
    return timer


# -- PostgreSQL ---------------------------------------------------------------------------------


@dataclass
class PgServer:
    url: str  # as the read-only role
    role: str
    database: str
    admin: Any  # superuser connection to the scratch database (autocommit)

    def run(self, sql: str, *params: Any) -> list[tuple]:
        return self.admin.execute(sql, params or None).fetchall()


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    server, user = postgres_admin()
    import psycopg

    suffix = uuid.uuid4().hex[:12]
    database, role = f"nl2sql_hostile_{suffix}", f"nl2sql_ro_{suffix}"
    server.execute(f'CREATE DATABASE "{database}"')
    admin = psycopg.connect(
        f"postgresql://{user}@{PG_HOST}/{database}", autocommit=True, connect_timeout=3
    )
    try:
        admin.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)")
        admin.execute("INSERT INTO t VALUES (1), (2), (3)")
        # the recommended deployment, exactly as `nl2sql readonly-role` prints it: connect, read,
        # nothing else; signalling revoked (two workers sharing the role could kill each other's
        # connection). Trust auth on loopback: no password.
        for statement in postgres_role_sql(database, role).splitlines():
            if not statement.startswith("--"):
                admin.execute(statement)
        yield PgServer(
            url=f"postgresql://{role}@127.0.0.1:5432/{database}",
            role=role,
            database=database,
            admin=admin,
        )
    finally:
        admin.close()
        server.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (database,),
        )
        server.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        server.execute(f'DROP ROLE IF EXISTS "{role}"')
        server.close()


@pytest.fixture
def pg_engine(pg: PgServer) -> Iterator[Any]:
    engine = open_engine(pg.url)
    yield engine
    engine.close()


@pytest.mark.services
class TestPostgres:
    def test_the_role_is_least_privilege(self, pg: PgServer, pg_engine) -> None:
        ((superuser, signal, read_files),) = pg_engine.execute(
            "SELECT r.rolsuper::int, pg_has_role(r.oid, 'pg_signal_backend', 'MEMBER')::int,"
            " pg_has_role(r.oid, 'pg_read_server_files', 'MEMBER')::int"
            " FROM pg_roles r WHERE r.rolname = current_user",
            LIMITS,
        ).rows
        assert (superuser, signal, read_files) == (0, 0, 0)

    def test_token_check_refuses_escaped_and_indirect_lock_calls(self, pg_engine) -> None:
        for sql in (
            r'SELECT U&"pg\005fadvisory\005flock"(1)',
            r"""SELECT U&"pg!005fadvisory!005flock" UESCAPE '!' (1)""",
            "SELECT query_to_xml('select pg_advisory_lock(1)', true, true, '')",
            'SELECT pg_catalog."pg_terminate_backend"(1)',
        ):
            with pytest.raises(QueryError, match="not allowed"):
                pg_engine.execute(sql, LIMITS)
        assert pg_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE

    def test_advisory_locks_do_not_outlive_the_query(
        self, pg: PgServer, pg_engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(postgres_engine, "check_single_select", _no_token_check)
        pg_engine.execute(r'SELECT U&"pg\005fadvisory\005flock"(4242)', LIMITS)
        pg_engine.execute(
            "SELECT query_to_xml('select pg_advisory_lock(4243)', true, true, '')", LIMITS
        )
        # another session takes both locks at once: the engine's session holds neither
        assert pg.run("SELECT pg_try_advisory_lock(4242), pg_try_advisory_lock(4243)") == [
            (True, True)
        ]
        pg.run("SELECT pg_advisory_unlock_all()")
        assert pg_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE

    def test_session_settings_do_not_reach_the_next_query(
        self, pg_engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(postgres_engine, "check_single_select", _no_token_check)
        (before,) = pg_engine.execute("SELECT current_setting('work_mem')", LIMITS).rows
        pg_engine.execute(
            "SELECT query_to_xml('select set_config(''work_mem'', ''1GB'', false)',"
            " true, true, '')",
            LIMITS,
        )
        assert pg_engine.execute("SELECT current_setting('work_mem')", LIMITS).rows == [before]
        # the time limit set by the engine is not the query's to lift
        with pytest.raises(QueryTimeout):
            pg_engine.execute(
                "SELECT set_config('statement_timeout', '0', true), pg_sleep(3)",
                Limits(timeout=0.5),
            )

    def test_without_the_token_check_only_a_query_runs(
        self, pg: PgServer, pg_engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(postgres_engine, "check_single_select", _no_token_check)
        for sql in (
            "DELETE FROM t",
            "SELECT 1; DELETE FROM t",
            "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
            "COMMIT",
            "SET ROLE postgres",
            "DISCARD ALL",
            "COPY t TO STDOUT",
            "SELECT pg_read_file('/etc/hostname')",
            "SELECT pg_ls_dir('.')",
        ):
            with pytest.raises(QueryError):
                pg_engine.execute(sql, LIMITS)
            assert pg_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE, sql
        assert pg.run("SELECT count(*) FROM t") == [(3,)]

    def test_sql_in_strings_replication_and_privileged_functions_are_refused(
        self, pg: PgServer, pg_engine
    ) -> None:
        """`ts_stat` runs SQL held in a string, unseen by the check; a replication slot outlives
        the transaction; `pg_stat_reset` is in no list of ours, but the catalogue withholds it
        from PUBLIC, so it is refused too."""
        for sql in (
            "SELECT * FROM ts_stat('SELECT to_tsvector(pg_read_file(''/etc/hostname''))')",
            "SELECT ts_rewrite(to_tsquery('a'), 'SELECT to_tsquery(''a''), to_tsquery(''b'')')",
            "SELECT pg_create_physical_replication_slot('nl2sql_slot')",
            "SELECT pg_catalog.pg_stat_reset()",
        ):
            with pytest.raises(QueryError, match="not allowed"):
                pg_engine.execute(sql, LIMITS)
        assert pg.run("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'nl2sql_slot'") == [(0,)]
        assert pg_engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]

    def test_a_prediction_cannot_end_another_workers_connection(
        self, pg: PgServer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(postgres_engine, "check_single_select", _no_token_check)
        attacker, other = open_engine(pg.url), open_engine(pg.url)  # two workers, one role
        try:
            assert other.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]
            kill_all = (
                "SELECT {}(pid) FROM pg_stat_activity"
                " WHERE usename = current_user AND pid <> pg_backend_pid()"
            )
            for function in ("pg_terminate_backend", "pg_cancel_backend"):
                with pytest.raises(QueryError, match="permission denied"):
                    attacker.execute(kill_all.format(function), LIMITS)
                with pytest.raises(QueryError, match="permission denied"):
                    attacker.execute(
                        "SELECT query_to_xml('" + kill_all.format(function).replace("'", "''")
                        + "', true, true, '')",
                        LIMITS,
                    )
            # nor the administrator's: signalling a superuser needs superuser
            with pytest.raises(QueryError):
                attacker.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE usename <> current_user AND datname = current_database()",
                    LIMITS,
                )
            assert other.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]
            assert pg.run("SELECT 1") == [(1,)]
        finally:
            attacker.close()
            other.close()

    def test_a_killed_backend_is_connection_lost_then_reconnects(
        self, pg: PgServer, pg_engine
    ) -> None:
        assert pg_engine.execute("SELECT 1", LIMITS).rows == [(1,)]
        terminate = lambda: pg.run(  # noqa: E731
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE usename = %s AND datname = %s",
            pg.role,
            pg.database,
        )
        timer = _later(0.3, terminate)
        started = time.monotonic()
        with pytest.raises(ConnectionLost, match="lost the connection"):
            pg_engine.execute("SELECT pg_sleep(60)", Limits(timeout=120))
        timer.join()
        assert time.monotonic() - started < 30  # ended by the kill, long before the sleep would
        assert pg_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE
        # killed while idle, between two queries: reopened quietly, the query never ran
        terminate()
        assert pg_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE

    def test_a_cancel_from_outside_is_not_a_timeout(self, pg: PgServer, pg_engine) -> None:
        timer = _later(
            0.3,
            lambda: pg.run(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity"
                " WHERE usename = %s AND datname = %s",
                pg.role,
                pg.database,
            ),
        )
        with pytest.raises(ConnectionLost, match="cancelled from outside"):
            pg_engine.execute("SELECT pg_sleep(4)", LIMITS)
        timer.join()
        with pytest.raises(QueryTimeout):
            pg_engine.execute("SELECT pg_sleep(4)", Limits(timeout=0.3))
        assert pg_engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]

    def test_huge_values_stream_within_the_size_cap(self, pg: PgServer) -> None:
        report = _measure_in_child(
            pg.url,
            "SELECT repeat('x', 5 * 1024 * 1024) FROM generate_series(1, 50)",
        )
        assert report["outcome"] == "TooManyRows"
        assert report["seconds"] < 30  # stopped at the cap, not after reading 250 MB
        # 50 values of 5 MB = 250 MB; the cap is 20 MB: at most the cap and a few rows
        assert report["peak_growth_mb"] < 100, report
        assert report["after"] == [[3]]

    def test_one_huge_value_is_refused_on_the_server(self, pg: PgServer) -> None:
        """The driver holds a whole row before any cap can count it (and the client two or
        three copies of it): a 100 MB value must never be sent."""
        report = _measure_in_child(pg.url, "SELECT 1 AS n, repeat('x', 100 * 1024 * 1024) AS big")
        assert report["outcome"] == "TooManyRows"
        assert report["peak_growth_mb"] < 50, report
        assert report["after"] == [[3]]

    def test_the_size_guard_keeps_what_a_query_means(self, pg_engine) -> None:
        for sql, columns, rows in (
            ("SELECT x FROM t ORDER BY x DESC;; -- the end", ("x",), [(3,), (2,), (1,)]),
            ("SELECT x, x FROM t ORDER BY 1 LIMIT 2 /* a comment */ ;", ("x", "x"), [(1, 1), (2, 2)]),
            ("VALUES (2, 'b'), (1, 'a')", ("column1", "column2"), [(2, "b"), (1, "a")]),
            ("TABLE t", ("x",), THREE),
            ("WITH w AS (SELECT x FROM t) SELECT count(*) FROM w", ("count",), [(3,)]),
            ("SELECT NULL::text AS nothing", ("nothing",), [(None,)]),
        ):
            result = pg_engine.execute(sql, LIMITS)
            assert (result.columns, sorted(result.rows, key=repr) if "ORDER" not in sql and "VALUES" not in sql else result.rows) == (
                columns, sorted(rows, key=repr) if "ORDER" not in sql and "VALUES" not in sql else rows
            ), sql
        # a `)` that would close the guard's derived table early is refused
        with pytest.raises(QueryError, match="parentheses"):
            pg_engine.execute("SELECT x FROM t) AS q, (SELECT 1", LIMITS)

    def test_rows_stop_at_the_row_cap(self, pg_engine) -> None:
        with pytest.raises(TooManyRows, match="more than 1000 rows"):
            pg_engine.execute("SELECT g FROM generate_series(1, 10000000) g", LIMITS)
        assert pg_engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]

    def test_huge_numbers_cost_neither_time_nor_unaccounted_memory(self, pg_engine) -> None:
        started = time.monotonic()
        (big,) = pg_engine.execute("SELECT 10::numeric ^ 100000 + 0.5", LIMITS).rows[0]
        ((exact,),) = pg_engine.execute("SELECT 10::numeric ^ 40 + 1", LIMITS).rows
        (rows,) = pg_engine.execute(
            "SELECT count(*) FROM (SELECT 10::numeric ^ 100000 FROM generate_series(1, 300)) s",
            LIMITS,
        ).rows
        wide = pg_engine.execute(
            "SELECT 10::numeric ^ 100000 FROM generate_series(1, 300)",
            Limits(timeout=generous(5), max_bytes=50 * MB),
        ).rows
        # as SQLite stores an integer beyond 64 bits: REAL; a 40-digit one stays exact
        assert big == float("inf") and exact == 10**40 + 1 and rows == (300,)
        assert len(wide) == 300 and {value for (value,) in wide} == {float("inf")}
        assert time.monotonic() - started < 30  # seconds, not the minutes exact arithmetic would take
        # a long number the driver keeps as text counts its length
        with pytest.raises(TooManyRows, match="size cap"):
            pg_engine.execute(
                "SELECT (10::numeric ^ 100000)::text FROM generate_series(1, 100)",
                Limits(timeout=generous(5), max_bytes=2 * MB),
            )
        assert pg_engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]


# -- MariaDB / MySQL ----------------------------------------------------------------------------


@dataclass
class MyServer:
    url: str  # as the read-only user
    user: str
    database: str
    admin: Any

    def run(self, sql: str, *params: Any) -> list[tuple]:
        with self.admin.cursor() as cursor:
            cursor.execute(sql, params or None)
            return list(cursor.fetchall())

    def sessions(self) -> list[int]:
        return [
            thread
            for (thread,) in self.run(
                "SELECT id FROM information_schema.processlist WHERE user = %s", self.user
            )
        ]


@pytest.fixture(scope="module")
def my() -> Iterator[MyServer]:
    admin = mariadb_admin("test")
    import pymysql

    suffix = uuid.uuid4().hex[:12]
    database, user = f"nl2sql_hostile_{suffix}", f"nl2sql_ro_{suffix}"
    server = MyServer(
        url=f"mysql://{user}@127.0.0.1:3306/{database}", user=user, database=database, admin=admin
    )
    try:
        server.run(f"CREATE DATABASE `{database}`")
        server.run(f"CREATE TABLE `{database}`.t (x INTEGER PRIMARY KEY)")
        server.run(f"INSERT INTO `{database}`.t VALUES (1), (2), (3)")
        server.run(f"CREATE USER '{user}'@'%'")  # no password, loopback only
        server.run(f"GRANT SELECT ON `{database}`.* TO '{user}'@'%'")  # and nothing else
        yield server
    finally:
        for thread in server.sessions():
            try:
                server.run(f"KILL {int(thread)}")
            except pymysql.Error:
                pass
        server.run(f"DROP USER IF EXISTS '{user}'@'%'")
        server.run(f"DROP DATABASE IF EXISTS `{database}`")
        admin.close()


@pytest.fixture
def my_engine(my: MyServer) -> Iterator[Any]:
    engine = open_engine(my.url)
    yield engine
    engine.close()


SELECT_LIMIT_ATTACK = "/*! SET SESSION sql_select_limit = 1, @nl2sql = */ (SELECT 1)"


@pytest.mark.services
class TestMariadb:
    def test_executable_comments_are_refused(self, my_engine) -> None:
        for sql in (
            SELECT_LIMIT_ATTACK,
            "SELECT 1 /*!, GET_LOCK('nl2sql', 0) */",
            "SELECT 1 /*M!100000 , @v := 5 */",
            "SELECT x FROM t /*!50000 INTO OUTFILE '/tmp/nl2sql-outfile' */",
            "SELECT 1 -- /*! not run, but refused all the same */",
        ):
            with pytest.raises(QueryError, match="executable comment"):
                my_engine.execute(sql, LIMITS)
        # inside a string literal or a quoted name the marker is data
        assert my_engine.execute("SELECT '/*! text */' AS `/*!`", LIMITS).rows == [
            ("/*! text */",)
        ]
        assert my_engine.execute("SELECT x FROM t ORDER BY x /* plain */", LIMITS).rows == THREE

    def test_session_variables_do_not_reach_the_next_query(
        self, my_engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(mysql_engine, "check_single_select", _no_token_check)
        my_engine.execute(SELECT_LIMIT_ATTACK, LIMITS)
        assert my_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE
        my_engine.execute("SELECT 1 /*!, @v := 5 */", LIMITS)
        my_engine.execute("SELECT x FROM t LIMIT 1 INTO @w", LIMITS)
        assert my_engine.execute("SELECT @v, @w, @nl2sql", LIMITS).rows == [(None, None, None)]
        my_engine.execute("/*! SET SESSION sql_mode = 'ANSI_QUOTES', @x = */ (SELECT 1)", LIMITS)
        (mode,) = my_engine.execute("SELECT @@session.sql_mode", LIMITS).rows[0]
        assert "ANSI_QUOTES" not in mode

    def test_locks_do_not_outlive_the_query(
        self, my: MyServer, my_engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(mysql_engine, "check_single_select", _no_token_check)
        name = f"nl2sql_{uuid.uuid4().hex[:8]}"
        assert my_engine.execute(f"SELECT 1 /*!, GET_LOCK('{name}', 0) */", LIMITS).rows == [
            (1, 1)
        ]
        assert my.run("SELECT IS_FREE_LOCK(%s)", name) == [(1,)]
        try:  # row locks (if the user may take them at all) end with the query's transaction
            my_engine.execute("SELECT x FROM t FOR UPDATE", LIMITS)
        except QueryError:
            pass
        my.run("START TRANSACTION")
        try:
            assert len(my.run(f"SELECT x FROM `{my.database}`.t FOR UPDATE NOWAIT")) == 3
        finally:
            my.run("ROLLBACK")
        assert my_engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]

    def test_files_stay_out_of_reach(
        self, my: MyServer, my_engine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(mysql_engine, "check_single_select", _no_token_check)
        target = f"/tmp/nl2sql-outfile-{uuid.uuid4().hex[:8]}"
        with pytest.raises(QueryError, match="(?i)denied"):
            my_engine.execute(f"SELECT x FROM t /*! INTO OUTFILE '{target}' */", LIMITS)
        assert not Path(target).exists()
        assert my_engine.execute("SELECT 1 /*!, LOAD_FILE('/etc/hostname') */", LIMITS).rows == [
            (1, None)
        ]
        for sql in (
            "DELETE FROM t",
            "DROP TABLE t",
            "CREATE TABLE u (x INT)",
            "SELECT 1; DELETE FROM t",
        ):
            with pytest.raises(QueryError):
                my_engine.execute(sql, LIMITS)
        assert my.run(f"SELECT count(*) FROM `{my.database}`.t") == [(3,)]

    def test_a_killed_connection_is_connection_lost_then_reconnects(
        self, my: MyServer, my_engine
    ) -> None:
        assert my_engine.execute("SELECT 1", LIMITS).rows == [(1,)]

        def kill(what: str = "") -> None:
            for thread in my.sessions():
                my.run(f"KILL {what} {int(thread)}")

        timer = _later(0.3, kill)
        started = time.monotonic()
        with pytest.raises(ConnectionLost, match="lost the connection"):
            my_engine.execute("SELECT SLEEP(60)", Limits(timeout=120))
        timer.join()
        assert time.monotonic() - started < 30  # ended by the kill, long before the sleep would
        assert my_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE
        kill()  # while idle: reopened quietly, the query never ran
        assert my_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE
        # a KILL QUERY that is not the engine's time limit is not the model's timeout either
        timer = _later(0.3, lambda: kill("QUERY"))
        with pytest.raises(ConnectionLost, match="interrupted from outside"):
            my_engine.execute("SELECT SLEEP(4)", LIMITS)
        timer.join()
        with pytest.raises(QueryTimeout):
            my_engine.execute("SELECT SLEEP(4)", Limits(timeout=0.3))
        assert my_engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]

    def test_huge_values_stream_within_the_size_cap(self, my: MyServer) -> None:
        report = _measure_in_child(
            my.url,
            "WITH RECURSIVE s (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 50)"
            " SELECT REPEAT('x', 5 * 1024 * 1024) FROM s",
        )
        assert report["outcome"] == "TooManyRows"
        assert report["seconds"] < 30  # stopped at the cap, not after reading 250 MB
        assert report["peak_growth_mb"] < 100, report
        assert report["after"] == [[3]]

    def test_a_query_that_swallows_its_cancel_is_still_a_timeout(self, my_engine) -> None:
        """MariaDB's BENCHMARK answers KILL QUERY (and its own max_statement_time) by returning
        0 as if it had finished: the watchdog's firing, not the answer, decides."""
        started = time.monotonic()
        with pytest.raises(QueryTimeout):
            my_engine.execute("SELECT BENCHMARK(2000000000, MD5('x'))", Limits(timeout=1))
        assert time.monotonic() - started < 20
        assert my_engine.execute("SELECT x FROM t ORDER BY x", LIMITS).rows == THREE

    def test_the_reset_is_cheap(self, my_engine) -> None:
        """One COM_RESET_CONNECTION round trip (about 30 microseconds on loopback), never a new
        connection: the same connection and server session after 200 resets. (Its speed was
        asserted here, 5 ms a reset, which a loaded machine can miss; speed is for benchmarks/.)"""
        ((session,),) = my_engine.execute("SELECT CONNECTION_ID()", LIMITS).rows
        conn = my_engine._conn
        for _ in range(200):
            my_engine._reset()
        assert my_engine._conn is conn and conn.open and my_engine._can_reset
        assert my_engine.execute("SELECT CONNECTION_ID()", LIMITS).rows == [(session,)]
        assert my_engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(3,)]


# -- memory, measured in a fresh process --------------------------------------------------------

_CHILD = r"""
import json, sys, time
from pytest_nl2sql.engines import Limits, TooManyRows, open_engine

def peak_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

url, sql, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
engine = open_engine(url)
engine.execute("SELECT count(*) FROM t", Limits())
before = peak_kb()
started = time.monotonic()
try:
    engine.execute(sql, Limits(timeout=timeout, max_bytes=20 * 1024 * 1024))
    outcome = "ran"
except TooManyRows:
    outcome = "TooManyRows"
seconds = time.monotonic() - started
growth = (peak_kb() - before) / 1024
after = engine.execute("SELECT count(*) FROM t", Limits()).rows
print(json.dumps({"outcome": outcome, "seconds": seconds, "peak_growth_mb": growth,
                  "after": after}))
"""


def _measure_in_child(url: str, sql: str) -> dict[str, Any]:
    """Run `sql` once in a new Python process and report its peak memory growth (VmHWM). The
    outcome and the memory are what is asserted, so the time limits follow the machine's load (a
    fixed 8 s query limit failed on a loaded machine: the server takes that long to make 100 MB)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("peak memory is read from /proc/self/status (Linux only)")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url, sql, str(generous(8))],
        capture_output=True,
        text=True,
        timeout=generous(60),
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the structural checks, without a server ----------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "marker"),
    [
        (SELECT_LIMIT_ATTACK, "/*!"),
        ("SELECT 1 /*M!100000 , 2 */", "/*M!"),
        ("SELECT 1 /*m!100000 , 2 */", "/*m!"),
        ("SELECT 2*/*! 3*/ 1", "/*!"),
        ("SELECT 1--1 /*! , 2 */", "/*!"),
        ("SELECT 1 # /*! , 2 */", "/*!"),
        # a backslash makes the end of a literal depend on the server's sql_mode
        (r"SELECT 'a\' /*! , 2 */ '", "/*!"),
        (r"SELECT 1 AS `a\` /*! , 2 */ -- `", "/*!"),
        ("SELECT '/*! data */'", None),
        ("SELECT 'it''s /*! data */' AS `/*!`", None),
        ('SELECT "/*! data */"', None),
        ("SELECT 1 /* plain */ /*+ hint */", None),
    ],
)
def test_executable_comment_is_found_where_the_server_reads_code(
    sql: str, marker: str | None
) -> None:
    assert executable_comment(sql, sqlglot.tokenize(sql, read="mysql")) == marker


@pytest.mark.parametrize(
    "sql",
    [
        r'SELECT U&"pg\005fadvisory\005flock"(1)',
        r'SELECT u&"pg\+00005Fadvisory_lock"(1)',
        r"""SELECT U&"pg!005fadvisory!005flock" UESCAPE '!' (1)""",
        'SELECT pg_catalog."pg_advisory_lock"(1)',
        "SELECT PG_ADVISORY_LOCK (1)",
    ],
)
def test_denied_functions_are_found_in_unicode_escapes(sql: str) -> None:
    with pytest.raises(QueryError, match="(?i)function pg_advisory_lock"):
        check_single_select(sql, "postgres", denied_functions=frozenset({"pg_advisory_lock"}))


def test_names_in_unicode_escapes_that_are_not_calls_pass() -> None:
    check_single_select(
        r'SELECT U&"d\0061ta" FROM t', "postgres", denied_functions=frozenset({"data"})
    )


def test_size_budget_counts_big_numbers() -> None:
    from decimal import Decimal

    assert value_size(7) == SizeBudget.VALUE_OVERHEAD
    assert value_size(10**100_000) > 40_000
    assert value_size(Decimal("9" * 100_000)) > 40_000
    budget = SizeBudget(Limits(max_bytes=1_000_000))
    with pytest.raises(TooManyRows, match="size cap"):
        for _ in range(100):
            budget.add((10**100_000,))
    assert budget.rows < 30
