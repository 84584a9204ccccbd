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

A result of more than `Limits.memory_rows` rows is not held: `execute` raises `ResultTooLarge`,
and the caller reads it again with `stream` (`judge/large.py` compares results so): the same
layers, the rows read from the unbuffered cursor in batches (`BATCH_ROWS`, about `BATCH_BYTES`).
The watchdog is armed only while a batch is read, with the time the query has left, so the
consumer's time between batches is not the query's. The server's own limit counts wall time
over the whole statement (the consumer's time too, while the server waits to send), so for a
stream it is only a backstop, `stream_server_seconds` of the time limit. Closing a stream that
was not read to its end stops the query (`KILL QUERY`) and drains what is in flight. A consumer
pausing longer than the server's `net_write_timeout` between batches loses the connection.

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

import functools
import re
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pytest_nl2sql.engines import ForeignKey, Table, create_table_ddl
from pytest_nl2sql.engines.base import (
    BatchStream,
    ConnectionLost,
    DatabaseMissing,
    EngineError,
    Limits,
    QueryError,
    QueryResult,
    SizeBudget,
    Watchdog,
    check_single_select,
    close_quietly,
    collect_within,
    columns_by_table,
    connect_error,
    import_driver,
    plain_row,
    timed_out,
    types_by_table,
    value_size,
)
from pytest_nl2sql.engines.url import DatabaseSpec

CONNECT_TIMEOUT = 10  # seconds
COM_RESET_CONNECTION = 0x1F  # the protocol command (PyMySQL names the code COM_END)
BATCH_ROWS = 2_000  # rows per streamed batch at most (as the SQLite and DuckDB workers send)
BATCH_BYTES = 4 * 1024 * 1024  # and about this many bytes (estimated as `SizeBudget` does)

# Server error codes meaning "the statement was interrupted": KILL QUERY, or MySQL's limit.
_INTERRUPTED = {1317, 3024}
_STATEMENT_TIME = 1969  # MariaDB: max_statement_time exceeded
# Error codes meaning "the connection is gone": client-side lost/gone away, and the server's
# own "connection was killed" / "shutdown in progress" / "disconnected for inactivity".
_CONNECTION_GONE = {2006, 2013, 2055, 1927, 1053, 4031}


@functools.cache
def _connection_class(pymysql: Any) -> type:
    """PyMySQL's connection, its TLS context for the "preferred" mode (no TLS option given: TLS
    when the server offers it, nothing verified) made once per process. PyMySQL made one for every
    connection, loading the system's CA certificates each time (~20 ms of CPU) for a context that
    verifies nothing; a context may serve any number of connections. Any TLS option the user gives
    is PyMySQL's own, as before."""

    class Connection(pymysql.connections.Connection):  # type: ignore[misc,name-defined]
        _preferred: ssl.SSLContext | None = None
        _preferred_lock = threading.Lock()

        def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
            if not (isinstance(sslp, dict) and not sslp):
                return super()._create_ssl_ctx(sslp)
            with Connection._preferred_lock:
                if Connection._preferred is None:
                    Connection._preferred = super()._create_ssl_ctx({})
                return Connection._preferred

    return Connection


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
        self._types: dict[str, dict[str, str]] | None = None  # schema_types(), read on first use
        self._mariadb = False
        self._opened = False  # once open, failing to reopen is a lost server, not a bad case
        self._can_reset = True  # COM_RESET_CONNECTION works on this server
        self._streaming = False  # a stream holds the connection's result until closed
        charset = dict(spec.server.options).get("charset", "utf8mb4")
        if not re.fullmatch(r"[A-Za-z0-9_]+", charset):
            raise DatabaseMissing(f"not a MySQL character set name: {charset!r}")
        self._charset = charset
        self._connection()  # fail now (DatabaseMissing) rather than on every case

    @property
    def is_mariadb(self) -> bool:
        """Whether the server (as last connected) is MariaDB rather than MySQL."""
        return self._mariadb

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> Any:
        server = self.spec.server
        assert server is not None
        options = dict(server.options)
        try:
            return _connection_class(self._pymysql)(
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
            raise connect_error(self._opened, f"MySQL at {self.spec.describe()}", error) from None

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
            close_quietly(conn)

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
        self._check(sql)
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
            rows = collect_within(iter(cursor.fetchone, None), limits, spill=True)
            streaming = False
        except pymysql.Error as error:
            streaming = False  # an error packet ends the result
            raise self._failure(error, conn, watchdog, limits) from None
        except BaseException as error:
            if not isinstance(error, Exception):  # Ctrl-C mid-query: the server would run it to its end
                streaming = False
                self._abandon(conn)
            raise
        finally:
            watchdog.stop()
            self._end(cursor, streaming, watchdog)
        watchdog.raise_if_overran(limits.timeout)
        return QueryResult(columns, rows)

    @contextmanager
    def stream(self, sql: str, limits: Limits, *, trusted: bool = False) -> Iterator[BatchStream]:
        """The rows of `sql` batch by batch (`base.StreamingEngine.stream`), under the guards of
        `execute` (module docstring); when the stream is closed, read to its end or not, the
        query is stopped and the session reset. `trusted` changes nothing: the gold passes the
        same checks. One stream at a time, and no `execute` while it is open."""
        self._check(sql)
        conn = self._begin(limits, server_seconds=stream_server_seconds(limits.timeout))
        batches = _Batches(self, conn, limits)
        self._streaming = True
        try:
            started = time.monotonic()
            columns, first, done = batches.start(sql)
            result = BatchStream(
                columns, first, done, batches.more, lambda: None, limits,
                spent=time.monotonic() - started,
            )  # fmt: skip
            # each column's (type code, flags, character set number, length, decimals) as the
            # server describes it: how `judge/in_engine.py` learns the types of a wrapped query
            result.field_types = batches.field_types  # type: ignore[attr-defined]
            try:
                yield result
            finally:
                result.close()  # `_end` below stops the query and drains the result
        finally:
            self._streaming = False
            self._end(batches.cursor, batches.open, batches.watchdog)

    def _check(self, sql: str) -> None:
        """The statement check (module docstring, layer 4), and no query while a stream is open."""
        check_single_select(
            sql,
            self.dialect,
            denied_functions=DENIED_FUNCTIONS,
            forbid_into=True,
            forbid_executable_comments=True,
        )
        self._check_not_streaming()

    def _check_not_streaming(self) -> None:
        """A stream's result holds the connection: any other command would break it."""
        if self._streaming:
            raise RuntimeError(f"a stream is open on {self!r}: close it before the next query")

    def _begin(self, limits: Limits, server_seconds: float | None = None) -> Any:
        """A connection inside a fresh READ ONLY transaction under the query's time limit
        (`server_seconds` for the server's own limit, when not that: a stream's backstop).

        A connection that died while idle is reopened once here, quietly: the query has not
        been sent yet. Session variables are set again on every query, as the reset after the
        previous one put them back to their global values.
        """
        pymysql = self._pymysql
        seconds = limits.timeout if server_seconds is None else server_seconds
        if self._mariadb:
            limit = f"SESSION max_statement_time = {seconds:.6f}"
        else:
            limit = f"SESSION max_execution_time = {max(1, int(seconds * 1000))}"
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

    def _abandon(self, conn: Any) -> None:
        """After an interruption mid-exchange (Ctrl-C's KeyboardInterrupt, pytest's own outcome
        exceptions: a BaseException that is no Exception, raised by a signal handler): stop the
        query on the server, which does not notice a client that left (PyMySQL closes its socket
        on an interrupted read) and would run it to its end, and never reuse the connection."""
        try:
            self._killer(conn.thread_id())()
        finally:
            self._drop_connection()

    def _failure(self, error: Any, conn: Any, watchdog: Watchdog, limits: Limits) -> EngineError:
        """The engine error for a driver error raised by the query."""
        code = error.args[0] if error.args else None
        if self._gone(error, conn):
            self._drop_connection()
            return ConnectionLost(
                f"lost the connection to MySQL at {self.spec.describe()} during the query:"
                f" {_message(error)}"
            )
        timeout = timed_out(limits.timeout)
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

    def schema_types(self) -> dict[str, dict[str, str]]:
        """{table: {column: column type}} as the catalogue names them (`varchar(20)`, `bigint(20)`),
        read once per engine: translating SQLite's comparison affinity needs to know which
        columns hold text."""
        if self._types is None:
            self._types = types_by_table(self._catalogue(_COLUMNS_QUERY))
        return {table: dict(columns) for table, columns in self._types.items()}

    def schema_ddl(self) -> str:
        """CREATE TABLE text with the column types as declared (`decimal(10,2)`, `varchar(50)`),
        NOT NULL, primary, unique and foreign keys (a prompt needs the join keys and what is unique)."""
        columns = self._catalogue(_COLUMNS_QUERY)
        keys = self._catalogue(_KEYS_QUERY)
        unique = self._catalogue(_UNIQUE_QUERY)
        return create_table_ddl(_tables(columns, keys, unique), _quote)

    def _catalogue(self, query: str) -> list[tuple[Any, ...]]:
        """Rows of a catalogue query; a connection that died while idle is reopened once."""
        self._check_not_streaming()
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


# Unique indexes other than the primary key, one row per column in index order (a functional key
# part has no column name: such an index is left out).
_UNIQUE_QUERY = (
    "SELECT table_name, index_name, column_name FROM information_schema.statistics"
    " WHERE table_schema = DATABASE() AND non_unique = 0 AND index_name <> 'PRIMARY'"
    " ORDER BY table_name, index_name, seq_in_index"
)


def _tables(columns: list[tuple[Any, ...]], keys: list[tuple[Any, ...]],
            unique: list[tuple[Any, ...]] = ()) -> list[Table]:  # type: ignore[assignment]
    """`Table`s from (table, column, type, nullable) rows, key-column rows and unique-index rows."""
    indexes: dict[tuple[str, str], list[Any]] = {}
    for table, index, column in unique:
        indexes.setdefault((table, index), []).append(column)
    unique_sets: dict[str, list[tuple[str, ...]]] = {}
    for (table, _), index_columns in indexes.items():
        if all(isinstance(c, str) for c in index_columns):
            unique_sets.setdefault(table, []).append(tuple(index_columns))
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
        Table(name, tuple(cols), tuple(primary.get(name, ())), tuple(by_table.get(name, ())), tuple(unique_sets.get(name, ())))
        for name, cols in shapes.items()
    ]


def stream_server_seconds(timeout: float) -> float:
    """The server's own limit on a streamed statement: a backstop for a client gone silent,
    well past the time limit, since it also counts the consumer's time between batches (the
    watchdog holds the limit itself, counting the database's time only)."""
    return max(2 * timeout, timeout + 60)


class _Batches:
    """The batches of one streamed result, read from an unbuffered cursor under a watchdog
    armed, batch by batch, with the time the query has left."""

    def __init__(self, engine: MysqlEngine, conn: Any, limits: Limits) -> None:
        self._engine = engine
        self._conn = conn
        self._limits = limits
        self._left = limits.max_rows + 1  # rows worth reading: one past the cap shows it
        self.cursor = conn.cursor(engine._pymysql.cursors.SSCursor)
        self.open = False  # a result is on the connection and not read to its end
        self.watchdog = Watchdog(limits.timeout, lambda: None)  # the last one armed
        self.field_types: tuple[tuple[int, int, int, int, int], ...] = ()

    def start(self, sql: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]], bool]:
        """Send the query and read the first batch, within the whole time limit."""

        def send_and_read() -> tuple[tuple[str, ...], list[tuple[Any, ...]], bool]:
            self.cursor.execute(sql)
            self.open = True
            fields = getattr(self.cursor._result, "fields", None) or ()
            self.field_types = tuple((f.type_code, f.flags, f.charsetnr, f.length, f.scale) for f in fields)
            return (tuple(d[0] for d in self.cursor.description or ()), *self._batch())

        return self._timed(self._limits.timeout, send_and_read)

    def more(self, left: float) -> tuple[list[tuple[Any, ...]], bool]:
        if left <= 0:
            raise timed_out(self._limits.timeout)
        return self._timed(left, self._batch)

    def _timed(self, seconds: float, run: Any) -> Any:
        engine = self._engine
        self.watchdog = watchdog = Watchdog(seconds, engine._killer(self._conn.thread_id()))
        try:
            watchdog.start()
            answer = run()
        except engine._pymysql.Error as error:
            self.open = False  # an error packet ends the result
            raise engine._failure(error, self._conn, watchdog, self._limits) from None
        except BaseException as error:
            if not isinstance(error, Exception):  # Ctrl-C: as in `execute`
                self.open = False
                engine._abandon(self._conn)
            raise
        finally:
            watchdog.stop()
        watchdog.raise_if_overran(self._limits.timeout)
        return answer

    def _batch(self) -> tuple[list[tuple[Any, ...]], bool]:
        """Up to `BATCH_ROWS` rows or about `BATCH_BYTES`; done when the result has ended.
        At one row past `max_rows` it stops reading (`BatchStream` raises `TooManyRows`)."""
        rows: list[tuple[Any, ...]] = []
        size = 0
        fetch = self.cursor.fetchone
        while len(rows) < BATCH_ROWS and size < BATCH_BYTES and self._left:
            raw = fetch()
            if raw is None:
                self.open = False
                return rows, True
            row = plain_row(raw)
            rows.append(row)
            size += SizeBudget.ROW_OVERHEAD + sum(map(value_size, row))
            self._left -= 1
        return rows, False



def _message(error: Any) -> str:
    args = getattr(error, "args", ())
    return str(args[1]) if len(args) > 1 else str(error)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
