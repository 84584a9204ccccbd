"""PostgreSQL engine (psycopg 3): untrusted SQL contained by what the session is, not by words.

Containment, layer by layer; none of the first three relies on recognising words in the SQL:

1. A fresh session for every query. After each query the engine rolls back and runs `DISCARD
   ALL` outside any transaction: it releases session advisory locks (which survive a rollback),
   resets every setting to its value at connection time (`set_config(..., false)` and `SET`
   made by a query are undone anyway by the rollback), deallocates prepared statements, closes
   cursors, drops temporary tables, stops listening and resets the role. Nothing a query does
   to its session reaches the next case, whatever function or spelling it used.
2. A READ ONLY transaction with limits set LOCAL to it: `statement_timeout` and `lock_timeout`
   (the case's time limit), `idle_in_transaction_session_timeout` (an orphaned transaction is
   ended by the server); plus a client watchdog that cancels the query at the deadline.
3. Only a query can run: the SQL becomes a server-side cursor (`DECLARE ... CURSOR FOR`, sent
   alone with the extended protocol), which PostgreSQL accepts only for SELECT/VALUES/TABLE and
   refuses with data-modifying CTEs. Rows come through `FETCH` in libpq's single-row mode, one
   row in client memory at a time, counted against `Limits` (rows and bytes) as each arrives:
   a result over a cap is stopped (cancelled, its rest discarded) within one row of the cap.
   One row is the unit: a single value can be as large as PostgreSQL allows (1 GB).
4. The token check of `check_single_select` (one statement, starting like a query, and a deny
   list of file, signal, lock and SQL-in-a-string functions, plus every catalogue function
   PUBLIC may not run; names in `U&"..."` escapes decoded): defence in
   depth only, since SQL can always name a function in ways no list foresees (`query_to_xml`
   runs SQL held in a string).

A result of more than `Limits.memory_rows` rows is not held: `execute` raises `ResultTooLarge`,
and the caller reads it again with `stream` (`judge/large.py` compares results so). A stream
runs under the same layers (the statement check, a READ ONLY transaction, the declared cursor,
the reset afterwards) and reads the cursor one `FETCH` per batch, as many rows as `BATCH_BYTES`
holds at the size of the rows seen last. Each FETCH is a statement of its own, so the server's
`statement_timeout` never counts the consumer's time between batches, and a watchdog armed
with the time still left cancels the FETCH that would pass the query's limit. A consumer idle
longer than `idle_in_transaction_session_timeout` between batches loses the connection.

What a session reset cannot undo needs privilege, so the deployment must be least privilege:
connect as a role that may only read (`CONNECT`, `USAGE` on the schemas, `SELECT` on the
tables), is not a superuser and is not a member of `pg_read_server_files`,
`pg_write_server_files`, `pg_execute_server_program` or `pg_signal_backend`. Log in as that
role itself: a privileged login demoted with `SET ROLE` (or `options=-crole=...`) is promoted
back by any query that calls `set_config('role', 'none', false)`. Also run, in the
benchmark database, `REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer,
bigint), pg_catalog.pg_cancel_backend(integer) FROM PUBLIC` (before PostgreSQL 14:
`pg_terminate_backend(integer)`): PostgreSQL lets any role signal
its own sessions, so with `-n 2` (two workers, one role) a prediction could otherwise end the
other worker's connection. Such a dropped connection is not charged to the model either: it
raises `ConnectionLost` (the pipeline retries), and so does a cancel that did not come from
this engine's time limit. The engine reopens a broken connection on the next query.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlglot
from sqlglot.tokens import TokenType

from pytest_nl2sql.engines import ForeignKey, Table, create_table_ddl
from pytest_nl2sql.engines.base import (
    BatchStream,
    ConnectionLost,
    EngineError,
    Limits,
    QueryError,
    QueryResult,
    SizeBudget,
    TooManyRows,
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
IDLE_IN_TRANSACTION_MIN_MS = 60_000  # the server ends a transaction its client abandoned
BATCH_ROWS = 2_000  # rows per streamed batch at most (as the SQLite and DuckDB workers send)
BATCH_BYTES = 4 * 1024 * 1024  # and about this many bytes (estimated as `SizeBudget` does)

DENIED_FUNCTIONS = frozenset(
    {
        "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "pg_ls_logdir",
        "pg_ls_waldir", "pg_ls_tmpdir", "pg_ls_archive_statusdir", "lo_import", "lo_export",
        "lo_from_bytea", "lo_create", "lo_unlink", "pg_terminate_backend", "pg_cancel_backend",
        "pg_reload_conf", "pg_rotate_logfile", "pg_promote", "pg_advisory_lock",
        "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared",
        "pg_advisory_xact_lock", "pg_advisory_xact_lock_shared", "pg_try_advisory_xact_lock",
        "pg_try_advisory_xact_lock_shared", "pg_advisory_unlock_all", "dblink", "dblink_exec",
        "dblink_connect", "pg_file_write", "pg_logical_emit_message", "pg_switch_wal",
        "pg_create_restore_point", "query_to_xml", "query_to_xmlschema",
        "query_to_xml_and_xmlschema", "cursor_to_xml", "cursor_to_xmlschema",
        # SQL handed over as a string runs unseen by this check (a file read inside `ts_stat`)
        "ts_stat", "ts_rewrite",
        # replication slots and origins outlive the transaction (for logins allowed to make them)
        "pg_create_physical_replication_slot", "pg_create_logical_replication_slot",
        "pg_drop_replication_slot", "pg_copy_physical_replication_slot",
        "pg_copy_logical_replication_slot", "pg_replication_slot_advance",
        "pg_logical_slot_get_changes", "pg_logical_slot_peek_changes",
        "pg_logical_slot_get_binary_changes", "pg_logical_slot_peek_binary_changes",
    }
)  # fmt: skip

# Besides the list above, every pg_catalog function whose EXECUTE the server itself withholds
# from PUBLIC (file reads, backups, statistics resets, ...): read off the catalogue once per
# engine, so what a newer server restricts is refused without this list knowing its name.
_PRIVILEGED_FUNCTIONS_QUERY = """
SELECT DISTINCT p.proname FROM pg_catalog.pg_proc p
WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proacl IS NOT NULL
  AND NOT EXISTS (
    SELECT 1 FROM pg_catalog.aclexplode(p.proacl) a
    WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
"""


class PostgresEngine:
    """One PostgreSQL connection, opened at once and reopened when it breaks."""

    dialect = "postgres"

    def __init__(self, spec: DatabaseSpec) -> None:
        assert spec.url is not None
        self.spec = spec
        self._psycopg = import_driver("psycopg", "PostgreSQL databases need the psycopg driver")
        self._conn: Any = None
        self._columns: dict[str, list[str]] | None = None  # schema_columns(), read on first use
        self._types: dict[str, dict[str, str]] | None = None  # schema_types(), read on first use
        self._opened = False  # once open, failing to reopen is a lost server, not a bad case
        self._cursor_names = itertools.count()
        self._streaming = False  # a stream holds the connection's transaction until closed
        self._connection()  # fail now (DatabaseMissing) rather than on every case
        self._denied = DENIED_FUNCTIONS | self._privileged_functions()

    def _privileged_functions(self) -> frozenset[str]:
        """The catalogue's functions PUBLIC may not run (see `_PRIVILEGED_FUNCTIONS_QUERY`)."""
        try:
            rows = self._conn.execute(_PRIVILEGED_FUNCTIONS_QUERY).fetchall()
        except self._psycopg.Error:
            return frozenset()  # a server without this catalogue: the fixed list only
        return frozenset(str(name).lower() for (name,) in rows)

    # -- connection ---------------------------------------------------------------------------

    def _connection(self) -> Any:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._drop()
        psycopg = self._psycopg
        try:
            # autocommit: the engine writes its own BEGIN READ ONLY, and DISCARD ALL must run
            # outside a transaction. No automatic prepared statements: DISCARD ALL drops them.
            conn = psycopg.connect(
                self.spec.url,
                connect_timeout=CONNECT_TIMEOUT,
                autocommit=True,
                prepare_threshold=None,
            )
        except psycopg.Error as error:
            raise connect_error(self._opened, f"PostgreSQL at {self.spec.describe()}", error) from None
        self._conn = conn
        self._opened = True
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            close_quietly(conn)

    def _lost(self, conn: Any) -> bool:
        return conn.closed or conn.broken

    # -- queries ------------------------------------------------------------------------------

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        check_single_select(sql, self.dialect, denied_functions=self._denied)
        self._check_not_streaming()
        psycopg = self._psycopg
        conn = self._begin(limits)
        watchdog = Watchdog(limits.timeout, _canceller(conn))
        cursor = conn.cursor(name=f"nl2sql_{next(self._cursor_names)}", scrollable=False)
        try:
            watchdog.start()
            cursor.execute(size_guarded(sql, limits))  # DECLARE ... CURSOR FOR: only a query
            columns = tuple(d.name for d in cursor.description or ())[1:]
            rows = _stream_rows(conn, cursor.name, limits)
        except psycopg.Error as error:
            raise self._failure(error, conn, watchdog, limits) from None
        finally:
            watchdog.stop()
            self._end(conn)
            with contextlib.suppress(Exception):
                cursor.close()  # gone with the transaction: no round trip
        watchdog.raise_if_overran(limits.timeout)
        return QueryResult(columns, rows)

    @contextmanager
    def stream(self, sql: str, limits: Limits, *, trusted: bool = False) -> Iterator[BatchStream]:
        """The rows of `sql` batch by batch (`base.StreamingEngine.stream`), under the guards of
        `execute` (module docstring); the transaction ends, and the session is reset, when the
        stream is closed, read to its end or not. `trusted` changes nothing: the gold passes the
        same checks. One stream at a time, and no `execute` while it is open."""
        check_single_select(sql, self.dialect, denied_functions=self._denied)
        self._check_not_streaming()
        conn = self._begin(limits)
        cursor = conn.cursor(name=f"nl2sql_{next(self._cursor_names)}", scrollable=False)
        batches = _Batches(self, conn, cursor.name, limits)
        self._streaming = True
        try:
            started = time.monotonic()
            columns, first, done = batches.start(cursor, size_guarded(sql, limits))
            result = BatchStream(
                columns, first, done, batches.more, lambda: None, limits,
                spent=time.monotonic() - started,
            )  # fmt: skip
            try:
                yield result
            finally:
                result.close()  # the ROLLBACK below drops the cursor: nothing to stop here
        finally:
            self._streaming = False
            self._end(conn)
            with contextlib.suppress(Exception):
                cursor.close()  # gone with the transaction: no round trip

    def _check_not_streaming(self) -> None:
        if self._streaming:
            raise RuntimeError(f"a stream is open on {self!r}: close it before the next query")

    def _begin(self, limits: Limits) -> Any:
        """A connection inside a fresh READ ONLY transaction with the query's limits.

        A connection that died while idle (a server restart, a backend killed between cases)
        is reopened once here, quietly: the query has not been sent yet.
        """
        psycopg = self._psycopg
        timeout_ms = max(1, int(limits.timeout * 1000))
        idle_ms = max(IDLE_IN_TRANSACTION_MIN_MS, 2 * timeout_ms)
        setup = (
            f"BEGIN READ ONLY; SET LOCAL statement_timeout = {timeout_ms};"
            f" SET LOCAL lock_timeout = {timeout_ms};"
            f" SET LOCAL idle_in_transaction_session_timeout = {idle_ms}"
        )
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.execute(setup)  # one round trip (simple protocol: our own text only)
                return conn
            except psycopg.Error as error:
                if not self._lost(conn):
                    self._end(conn)
                    raise QueryError(_message(error)) from None
                self._drop()
                if attempt == 2:
                    raise self._connection_lost(error) from None
        raise AssertionError("unreachable")

    def _end(self, conn: Any) -> None:
        """Roll back and reset the session (`DISCARD ALL`); a connection that cannot be reset
        is dropped, and the next query opens a new one."""
        if self._lost(conn):
            self._drop()
            return
        try:
            if conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
            conn.execute("DISCARD ALL")
        except Exception:  # noqa: BLE001 - unknown state: never reuse it
            self._drop()

    def _failure(self, error: Any, conn: Any, watchdog: Watchdog, limits: Limits) -> EngineError:
        """The engine error for a driver error raised by the query."""
        errors = self._psycopg.errors
        if self._lost(conn):
            return ConnectionLost(
                f"lost the connection to PostgreSQL at {self.spec.describe()} during the"
                f" query: {_message(error)}"
            )
        timeout = timed_out(limits.timeout)
        if isinstance(error, (errors.QueryCanceled, errors.LockNotAvailable)):
            if watchdog.expired():
                return timeout
            if isinstance(error, errors.QueryCanceled):
                return ConnectionLost(
                    "the query was cancelled from outside (not by its time limit):"
                    f" {_message(error)}"
                )
        if isinstance(error, self._psycopg.OperationalError) and watchdog.expired():
            return timeout
        if isinstance(error, errors.InvalidTextRepresentation) and _ROW_TOO_LARGE in _message(error):
            return TooManyRows(
                f"a row of the result is larger than the size cap of {limits.max_value_bytes:,}"
                " bytes a row may have (stopped on the server)"
            )
        return QueryError(_message(error))

    # -- schema -------------------------------------------------------------------------------

    def schema_columns(self) -> dict[str, list[str]]:
        """{table: [column]}, read once per engine: every translated query asks for it, and a
        database under evaluation does not change its tables mid-run."""
        if self._columns is None:
            self._columns = columns_by_table(self._catalogue(_COLUMNS_QUERY))
        return {table: list(columns) for table, columns in self._columns.items()}

    def schema_types(self) -> dict[str, dict[str, str]]:
        """{table: {column: data type}} as the catalogue names them (`text`, `bigint`, ...), read
        once per engine: translating SQLite's comparison affinity needs to know which columns
        hold text."""
        if self._types is None:
            self._types = types_by_table(self._catalogue(_COLUMNS_QUERY))
        return {table: dict(columns) for table, columns in self._types.items()}

    def server_version(self) -> int:
        """The server's version number (150020 for 15.2): which functions a translation may use."""
        return int(self._connection().info.server_version)

    def schema_ddl(self) -> str:
        """CREATE TABLE text with the types as declared (`numeric(10,2)`, `character varying(50)`),
        NOT NULL, primary, unique and foreign keys (a prompt needs the join keys and what is unique)."""
        columns = self._catalogue(_DDL_COLUMNS_QUERY)
        keys = self._catalogue(_KEYS_QUERY)
        unique = self._catalogue(_UNIQUE_QUERY)
        return create_table_ddl(_tables(columns, keys, unique), _quote)

    def _catalogue(self, query: str) -> list[tuple[Any, ...]]:
        """Rows of a catalogue query (a statement of its own: the connection is in autocommit);
        a connection that died while idle is reopened once."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                return conn.execute(query).fetchall()
            except self._psycopg.Error as error:
                if not self._lost(conn):
                    raise QueryError(_message(error)) from None
                self._drop()
                if attempt == 2:
                    raise self._connection_lost(error) from None
        raise AssertionError("unreachable")

    def _connection_lost(self, error: Exception) -> ConnectionLost:
        return ConnectionLost(f"lost the connection to PostgreSQL at {self.spec.describe()}: {_message(error)}")

    def close(self) -> None:
        self._drop()

    def __repr__(self) -> str:
        return f"PostgresEngine({self.spec.describe()!r})"


# The tables and columns the login may see, in the schemas of its search path.
_COLUMNS_QUERY = (
    "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable = 'YES'"
    " FROM information_schema.columns c JOIN information_schema.tables t"
    " ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
    " WHERE c.table_schema = ANY (current_schemas(false))"
    " ORDER BY t.table_name, c.ordinal_position"
)
# The same columns with their types as declared (format_type: precision, length, array brackets).
_DDL_COLUMNS_QUERY = (
    "SELECT c.table_name, c.column_name, format_type(a.atttypid, a.atttypmod), c.is_nullable = 'YES'"
    " FROM information_schema.columns c JOIN information_schema.tables t"
    " ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
    " JOIN pg_namespace n ON n.nspname = c.table_schema"
    " JOIN pg_class k ON k.relnamespace = n.oid AND k.relname = c.table_name"
    " JOIN pg_attribute a ON a.attrelid = k.oid AND a.attname = c.column_name"
    " WHERE c.table_schema = ANY (current_schemas(false))"
    " ORDER BY t.table_name, c.ordinal_position"
)
# Unique column sets other than the primary key (UNIQUE constraints and plain unique indexes; not
# partial or expression indexes, which a column list cannot say), key columns in index order.
_UNIQUE_QUERY = (
    "SELECT cl.relname::text,"
    " ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o)"
    "  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n WHERE k.o <= i.indnkeyatts ORDER BY k.o)"
    " FROM pg_index i JOIN pg_class cl ON cl.oid = i.indrelid"
    " JOIN pg_namespace ns ON ns.oid = cl.relnamespace JOIN pg_class ix ON ix.oid = i.indexrelid"
    " WHERE i.indisunique AND NOT i.indisprimary AND i.indpred IS NULL AND i.indexprs IS NULL"
    " AND ns.nspname = ANY (current_schemas(false))"
    " ORDER BY cl.relname, ix.relname"
)
# Primary ('p') and foreign ('f') keys of those tables, columns in key order.
_KEYS_QUERY = (
    "SELECT cl.relname, con.contype::text,"
    " ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, i)"
    "  JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i),"
    " rcl.relname::text,"
    " ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, i)"
    "  JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i)"
    " FROM pg_constraint con JOIN pg_class cl ON cl.oid = con.conrelid"
    " JOIN pg_namespace ns ON ns.oid = cl.relnamespace"
    " LEFT JOIN pg_class rcl ON rcl.oid = con.confrelid"
    " WHERE con.contype IN ('p', 'f') AND ns.nspname = ANY (current_schemas(false))"
    " ORDER BY cl.relname, con.contype DESC, con.conname"
)


def _tables(columns: list[tuple[Any, ...]], keys: list[tuple[Any, ...]],
            unique: list[tuple[Any, ...]] = ()) -> list[Table]:  # type: ignore[assignment]
    """`Table`s from (table, column, type, nullable), (table, 'p'|'f', columns, referenced
    table, referenced columns) and (table, unique columns) rows."""
    unique_sets: dict[str, list[tuple[str, ...]]] = {}
    for table, own in unique:
        if own:
            unique_sets.setdefault(table, []).append(tuple(own))
    shapes: dict[str, list[tuple[str, str, bool]]] = {}
    for table, column, kind, nullable in columns:
        shapes.setdefault(table, []).append((column, kind, bool(nullable)))
    primary: dict[str, tuple[str, ...]] = {}
    foreign: dict[str, list[ForeignKey]] = {}
    for table, kind, own, referenced, their in keys:
        if kind == "p":
            primary[table] = tuple(own)
        elif referenced:
            foreign.setdefault(table, []).append(ForeignKey(tuple(own), referenced, tuple(their or ())))
    return [
        Table(name, tuple(cols), primary.get(name, ()), tuple(foreign.get(name, ())), tuple(unique_sets.get(name, ())))
        for name, cols in shapes.items()
    ]


def _stream_rows(conn: Any, cursor_name: str, limits: Limits) -> list[tuple[Any, ...]]:
    """The declared cursor's rows, one FETCH read in single-row mode and counted row by row.

    On a cap (`TooManyRows`, or `ResultTooLarge` past `memory_rows`: the caller streams it
    instead) closing the stream cancels the FETCH and discards what is in flight.
    """
    wanted = min(limits.max_rows, limits.memory_rows) + 1
    rows = conn.cursor().stream(f'FETCH FORWARD {wanted} FROM "{cursor_name}"')
    with contextlib.closing(rows):
        return collect_within((row[1:] for row in rows), limits, spill=True)


# What the guard column of `size_guarded` raises: the cast of this text to integer fails.
_ROW_TOO_LARGE = "nl2sql: a row over the size cap"


def size_guarded(sql: str, limits: Limits) -> str:
    """`sql` under a guard that fails, on the server, any row whose text is longer than
    `limits.max_value_bytes`: the driver holds a whole row (and the client two or three copies
    of it) before any cap can count it, so a 1 GB value must never be sent. The guard is the
    first column (NULL, dropped as rows are read): a CASE whose only branch casts a text that
    is no number to integer, so the error names the row's size. The query becomes a derived
    table; a trailing `;` or comment is cut, so the wrapping parenthesis closes it."""
    body = _without_trailing_semicolons(sql)
    size = 'octet_length("nl2sql guard"::text)'
    return (
        f"SELECT (CASE WHEN {size} > {int(limits.max_value_bytes)} THEN '{_ROW_TOO_LARGE}: '"
        f" || {size} || ' bytes' END)::integer AS \"nl2sql guard column\", \"nl2sql guard\".*"
        f" FROM (\n{body}\n) AS \"nl2sql guard\""
    )


def _without_trailing_semicolons(sql: str) -> str:
    """`sql` up to its last token that is not a `;` (what follows is semicolons and comments).
    Parentheses must balance: a `)` that closed the wrapping derived table would change the
    query the guard wraps."""
    tokens = [t for t in sqlglot.tokenize(sql, read="postgres") if t.token_type != TokenType.SEMICOLON]
    depth = 0
    for token in tokens:
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth < 0:
            break
    if depth:
        raise QueryError("syntax error: the query's parentheses do not balance")
    return sql[: tokens[-1].end + 1] if tokens else sql


class _Batches:
    """The batches of one streamed result: a FETCH per batch (two for the first, which learns
    the rows' size from one row), each under a watchdog with the time the query has left."""

    def __init__(self, engine: PostgresEngine, conn: Any, cursor_name: str, limits: Limits) -> None:
        self._engine = engine
        self._conn = conn
        self._name = cursor_name
        self._limits = limits
        self._left = limits.max_rows + 1  # rows still worth fetching: one past the cap shows it
        self._step = 1  # rows of the next FETCH, from the size of the rows seen last

    def start(self, cursor: Any, sql: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]], bool]:
        """Declare the cursor and read the first batch, within the whole time limit."""

        def declare_and_fetch() -> tuple[tuple[str, ...], list[tuple[Any, ...]], bool]:
            cursor.execute(sql)  # DECLARE ... CURSOR FOR <sql>: PostgreSQL takes only a query
            columns = tuple(d.name for d in cursor.description or ())[1:]  # past the guard
            return (columns, *self._fetch())

        return self._timed(self._limits.timeout, declare_and_fetch)

    def more(self, left: float) -> tuple[list[tuple[Any, ...]], bool]:
        if left <= 0:
            raise timed_out(self._limits.timeout)
        return self._timed(left, self._fetch)

    def _timed(self, seconds: float, run: Any) -> Any:
        watchdog = Watchdog(seconds, _canceller(self._conn))
        try:
            watchdog.start()
            answer = run()
        except self._engine._psycopg.Error as error:
            raise self._engine._failure(error, self._conn, watchdog, self._limits) from None
        finally:
            watchdog.stop()
        watchdog.raise_if_overran(self._limits.timeout)
        return answer

    def _fetch(self) -> tuple[list[tuple[Any, ...]], bool]:
        """The next batch, FETCH by FETCH, each read whole (single-row mode: one row in the
        driver at a time); done when a FETCH comes back short or the row cap is passed."""
        rows: list[tuple[Any, ...]] = []
        size = 0
        while len(rows) < BATCH_ROWS and size < BATCH_BYTES:
            want = min(self._step, self._left, BATCH_ROWS - len(rows))
            fetched = self._conn.cursor().stream(f'FETCH FORWARD {want} FROM "{self._name}"')
            got = 0
            chunk_size = 0
            for raw in fetched:
                row = plain_row(raw[1:])  # past the guard column
                rows.append(row)
                chunk_size += _row_size(row)
                got += 1
            size += chunk_size
            self._left -= got
            if got < want or not self._left:
                return rows, True
            per_row = max(1, chunk_size // got)
            self._step = max(1, min(BATCH_ROWS, (BATCH_BYTES - size) // per_row))
        self._step = max(1, min(BATCH_ROWS, BATCH_BYTES * len(rows) // max(1, size)))
        return rows, False


def _row_size(row: tuple[Any, ...]) -> int:
    """The size `SizeBudget` counts for a row (here, to size batches)."""
    return SizeBudget.ROW_OVERHEAD + sum(map(value_size, row))



def _canceller(conn: Any) -> Any:
    cancel = getattr(conn, "cancel_safe", None) or conn.cancel
    return cancel


def _message(error: Any) -> str:
    diag = getattr(error, "diag", None)
    primary = getattr(diag, "message_primary", None)
    return primary or str(error).strip()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
