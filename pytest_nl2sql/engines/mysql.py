"""MySQL / MariaDB engine (PyMySQL): untrusted SQL contained by what the session is, not by words.

Containment, layer by layer; none of the first three relies on recognising words in the SQL:

1. A fresh session for every query. After each query the engine sends `COM_RESET_CONNECTION`
   (one round trip, about 30 microseconds on loopback): the server rolls back, releases
   `GET_LOCK` locks and table locks, drops temporary tables and prepared statements, clears
   user variables and resets every session variable to its global value (`sql_select_limit`,
   `sql_mode`...). Whatever a query did to its session, however it was spelled, the next case
   never sees it. Where the reset is not available (MySQL before 5.7.3, MariaDB before
   10.2.4) or fails, the connection is closed and the next query opens a new one.
2. A READ ONLY transaction (`START TRANSACTION READ ONLY`), the server's own time limit
   (`max_statement_time` on MariaDB, `max_execution_time` on MySQL) and a client watchdog that
   sends `KILL QUERY` from a second connection at the deadline.
3. Rows stream through an unbuffered cursor (`SSCursor`) and are counted against `Limits`
   (rows and bytes) one at a time; a result over a cap is stopped with `KILL QUERY` and the
   rest drained, so memory stays within about one row of the cap. One value is at most the
   server's `max_allowed_packet`.
4. `check_single_select` with the structural rules MySQL needs: exactly one statement (and
   PyMySQL never enables multi-statement packets), starting like a query, no `INTO`, no `:=`,
   and no executable comment (`/*! ... */`, `/*M! ... */`) anywhere the server reads code: the
   server runs their text as SQL while a tokenizer sees a comment, so no check of the tokens
   could describe what would run. A deny list of file and lock functions is kept as defence
   in depth only.

What a session reset cannot undo needs privilege, so the deployment must be least privilege:
connect as a user with `SELECT` on the benchmark database only — no `FILE` (`LOAD_FILE`,
`INTO OUTFILE`), no `PROCESS`/`SUPER`/`CONNECTION ADMIN` (killing other users' sessions), no
`INSERT`/`UPDATE` (MariaDB sequences advance outside transactions) and no `EXECUTE` on stored
functions with side effects. MySQL lets a user kill its own sessions, but only with the `KILL`
statement, which never passes the checks above. A connection killed or dropped under a query
raises `ConnectionLost` (the pipeline retries), as does a `KILL QUERY` that did not come from
this engine's time limit; the engine reopens the connection on the next query.
"""

from __future__ import annotations

import re
from typing import Any

from pytest_nl2sql.engines import ForeignKey, Table, create_table_ddl
from pytest_nl2sql.engines.base import (
    ConnectionLost,
    DatabaseMissing,
    EngineError,
    Limits,
    QueryError,
    QueryResult,
    QueryTimeout,
    Watchdog,
    check_single_select,
    collect_within,
    columns_by_table,
    import_driver,
    plain_row,
)
from pytest_nl2sql.engines.url import DatabaseSpec

CONNECT_TIMEOUT = 10  # seconds
COM_RESET_CONNECTION = 0x1F  # the protocol command (PyMySQL names the code COM_END)

# Server error codes meaning "the statement was interrupted": KILL QUERY, or MySQL's limit.
_INTERRUPTED = {1317, 3024}
_STATEMENT_TIME = 1969  # MariaDB: max_statement_time exceeded
# Error codes meaning "the connection is gone": client-side lost/gone away, and the server's
# own "connection was killed" / "shutdown in progress" / "disconnected for inactivity".
_CONNECTION_GONE = {2006, 2013, 2055, 1927, 1053, 4031}

DENIED_FUNCTIONS = frozenset(
    {"load_file", "get_lock", "release_lock", "release_all_locks", "sys_exec", "sys_eval"}
)


class MysqlEngine:
    """One MySQL/MariaDB connection, opened at once and reopened when dropped."""

    dialect = "mysql"

    def __init__(self, spec: DatabaseSpec) -> None:
        assert spec.server is not None
        self.spec = spec
        self._pymysql = import_driver("pymysql", "MySQL/MariaDB databases need the PyMySQL driver")
        self._conn: Any = None
        self._columns: dict[str, list[str]] | None = None  # schema_columns(), read on first use
        self._mariadb = False
        self._opened = False  # once open, failing to reopen is a lost server, not a bad case
        self._can_reset = True  # COM_RESET_CONNECTION works on this server
        charset = dict(spec.server.options).get("charset", "utf8mb4")
        if not re.fullmatch(r"[A-Za-z0-9_]+", charset):
            raise DatabaseMissing(f"not a MySQL character set name: {charset!r}")
        self._charset = charset
        self._connection()  # fail now (DatabaseMissing) rather than on every case

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> Any:
        server = self.spec.server
        assert server is not None
        options = dict(server.options)
        try:
            return self._pymysql.connect(
                host=server.host or "localhost",
                port=server.port or 3306,
                user=server.user or "root",
                password=server.password or "",
                database=server.database,
                unix_socket=options.get("unix_socket"),
                charset=self._charset,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
            )
        except self._pymysql.Error as error:
            if self._opened:
                raise ConnectionLost(
                    f"lost MySQL at {self.spec.describe()} and cannot reconnect: {error}"
                ) from None
            raise DatabaseMissing(
                f"cannot connect to MySQL at {self.spec.describe()}: {error}"
            ) from None

    def _connection(self) -> Any:
        if self._conn is None or not self._conn.open:
            self._drop_connection()
            self._conn = self._connect()
            self._opened = True
            self._mariadb = "mariadb" in self._conn.get_server_info().lower()
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass

    def _gone(self, error: Any, conn: Any) -> bool:
        code = error.args[0] if error.args else None
        return (
            code in _CONNECTION_GONE
            or isinstance(error, self._pymysql.InterfaceError)
            or not conn.open
        )

    def _reset(self) -> None:
        """Reset the session to a new connection's state (see the module docstring)."""
        conn = self._conn
        if conn is None or not conn.open:
            return
        if not self._can_reset:
            self._drop_connection()
            return
        try:
            conn._execute_command(COM_RESET_CONNECTION, b"")
            conn._read_ok_packet()
        except self._pymysql.MySQLError as error:
            if conn.open and not self._gone(error, conn):
                self._can_reset = False  # the server refused the command: reopen instead
            self._drop_connection()
        except Exception:  # noqa: BLE001 - unknown state: never reuse it
            self._drop_connection()

    # -- queries ------------------------------------------------------------------------------

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        check_single_select(
            sql,
            self.dialect,
            denied_functions=DENIED_FUNCTIONS,
            forbid_into=True,
            forbid_executable_comments=True,
        )
        pymysql = self._pymysql
        conn = self._begin(limits)
        watchdog = Watchdog(limits.timeout, self._killer(conn.thread_id()))
        cursor = conn.cursor(pymysql.cursors.SSCursor)
        streaming = False  # a result is open on the connection and not read to its end
        try:
            watchdog.start()
            cursor.execute(sql)
            streaming = True
            columns = tuple(d[0] for d in cursor.description or ())
            rows = collect_within(iter(cursor.fetchone, None), limits)
            streaming = False
        except pymysql.Error as error:
            streaming = False  # an error packet ends the result
            raise self._failure(error, conn, watchdog, limits) from None
        finally:
            watchdog.stop()
            self._end(cursor, streaming, watchdog)
        return QueryResult(columns, rows)

    def _begin(self, limits: Limits) -> Any:
        """A connection inside a fresh READ ONLY transaction under the query's time limit.

        A connection that died while idle is reopened once here, quietly: the query has not
        been sent yet. Session variables are set again on every query, as the reset after the
        previous one put them back to their global values.
        """
        pymysql = self._pymysql
        if self._mariadb:
            limit = f"SESSION max_statement_time = {limits.timeout:.6f}"
        else:
            limit = f"SESSION max_execution_time = {max(1, int(limits.timeout * 1000))}"
        setup = f"SET NAMES {self._charset}, SESSION autocommit = 1, {limit}"
        for attempt in (1, 2):
            conn = self._connection()
            try:
                with conn.cursor() as cursor:
                    cursor.execute(setup)
                    cursor.execute("START TRANSACTION READ ONLY")
                return conn
            except pymysql.Error as error:
                if not self._gone(error, conn):
                    self._reset()
                    raise QueryError(_message(error)) from None
                self._drop_connection()
                if attempt == 2:
                    raise self._connection_lost(error) from None
        raise AssertionError("unreachable")

    def _end(self, cursor: Any, streaming: bool, watchdog: Watchdog) -> None:
        """Stop and drain a result left half-read (a cap), then reset the session."""
        if self._conn is None or not self._conn.open:
            self._drop_connection()
            return
        if streaming:
            if not watchdog.fired:
                self._killer(self._conn.thread_id())()  # stop the server producing rows
            try:
                cursor.close()  # reads what is left of the (now interrupted) result
            except Exception:  # noqa: BLE001 - the interruption's error, or a broken link
                pass
        self._reset()

    def _failure(self, error: Any, conn: Any, watchdog: Watchdog, limits: Limits) -> EngineError:
        """The engine error for a driver error raised by the query."""
        code = error.args[0] if error.args else None
        if self._gone(error, conn):
            self._drop_connection()
            return ConnectionLost(
                f"lost the connection to MySQL at {self.spec.describe()} during the query:"
                f" {_message(error)}"
            )
        timeout = QueryTimeout(f"the query ran longer than {limits.timeout:g} s and was stopped")
        if code == _STATEMENT_TIME:
            return timeout
        if code in _INTERRUPTED:
            if watchdog.expired():
                return timeout
            return ConnectionLost(
                f"the query was interrupted from outside (not by its time limit): {_message(error)}"
            )
        if isinstance(error, self._pymysql.OperationalError) and watchdog.expired():
            return timeout
        return QueryError(_message(error))

    def _killer(self, thread_id: int) -> Any:
        def run() -> None:
            try:
                killer = self._connect()
            except EngineError:
                return
            try:
                with killer.cursor() as cursor:
                    cursor.execute(f"KILL QUERY {int(thread_id)}")
            except Exception:  # noqa: BLE001 - the query may have just finished
                pass
            finally:
                killer.close()

        return run

    # -- schema -------------------------------------------------------------------------------

    def schema_columns(self) -> dict[str, list[str]]:
        """{table: [column]}, read once per engine: every translated query asks for it, and a
        database under evaluation does not change its tables mid-run."""
        if self._columns is None:
            self._columns = columns_by_table(self._catalogue(_COLUMNS_QUERY))
        return {table: list(columns) for table, columns in self._columns.items()}

    def schema_ddl(self) -> str:
        """CREATE TABLE text with NOT NULL, primary and foreign keys (a prompt needs the join keys)."""
        columns = self._catalogue(_COLUMNS_QUERY)
        keys = self._catalogue(_KEYS_QUERY)
        return create_table_ddl(_tables(columns, keys), _quote)

    def _catalogue(self, query: str) -> list[tuple[Any, ...]]:
        """Rows of a catalogue query; a connection that died while idle is reopened once."""
        pymysql = self._pymysql
        for attempt in (1, 2):
            conn = self._connection()
            try:
                with conn.cursor() as cursor:
                    cursor.execute(query)
                    rows = cursor.fetchall()
                return [tuple(plain_row(row)) for row in rows]
            except pymysql.Error as error:
                if not self._gone(error, conn):
                    raise QueryError(_message(error)) from None
                self._drop_connection()
                if attempt == 2:
                    raise self._connection_lost(error) from None
        raise AssertionError("unreachable")

    def _connection_lost(self, error: Exception) -> ConnectionLost:
        return ConnectionLost(f"lost the connection to MySQL at {self.spec.describe()}: {_message(error)}")

    def close(self) -> None:
        self._drop_connection()

    def __repr__(self) -> str:
        return f"MysqlEngine({self.spec.describe()!r})"


_COLUMNS_QUERY = (
    "SELECT table_name, column_name, column_type, is_nullable = 'YES'"
    " FROM information_schema.columns"
    " WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position"
)
# Primary and foreign keys, one row per key column, in key order.
_KEYS_QUERY = (
    "SELECT table_name, constraint_name, column_name, referenced_table_name, referenced_column_name"
    " FROM information_schema.key_column_usage"
    " WHERE table_schema = DATABASE()"
    " AND (constraint_name = 'PRIMARY' OR referenced_table_name IS NOT NULL)"
    " ORDER BY table_name, constraint_name = 'PRIMARY' DESC, constraint_name, ordinal_position"
)


def _tables(columns: list[tuple[Any, ...]], keys: list[tuple[Any, ...]]) -> list[Table]:
    """`Table`s from (table, column, type, nullable) rows and key-column rows."""
    shapes: dict[str, list[tuple[str, str, bool]]] = {}
    for table, column, kind, nullable in columns:
        shapes.setdefault(table, []).append((column, kind, bool(nullable)))
    primary: dict[str, list[str]] = {}
    foreign: dict[tuple[str, str], tuple[list[str], str, list[str]]] = {}
    for table, constraint, column, referenced, their in keys:
        if constraint == "PRIMARY":
            primary.setdefault(table, []).append(column)
        else:
            own, _, theirs = foreign.setdefault((table, constraint), ([], referenced, []))
            own.append(column)
            theirs.append(their)
    by_table: dict[str, list[ForeignKey]] = {}
    for (table, _), (own, referenced, theirs) in foreign.items():
        by_table.setdefault(table, []).append(ForeignKey(tuple(own), referenced, tuple(theirs)))
    return [
        Table(name, tuple(cols), tuple(primary.get(name, ())), tuple(by_table.get(name, ())))
        for name, cols in shapes.items()
    ]


def _message(error: Any) -> str:
    args = getattr(error, "args", ())
    return str(args[1]) if len(args) > 1 else str(error)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
