"""Any other database SQLAlchemy can open (Snowflake, BigQuery, Trino, SQL Server, Oracle, ...).

SQLAlchemy gives one way to connect, run a query and read a catalogue on any database; it gives no
way to contain a query. What this engine adds, layer by layer, and how far each reaches:

1. The token check of `check_single_select` (one statement, starting like a query; no `INTO`, no
   `:=`; MySQL-family executable comments refused; on PostgreSQL and MySQL/MariaDB the deny list
   of the native engine for the same server). Defence in depth only.
2. Every query runs in a transaction that is always rolled back, made read-only where the dialect
   has a statement for it (`SET TRANSACTION READ ONLY` on PostgreSQL, MySQL/MariaDB, Oracle;
   `PRAGMA query_only` on SQLite), under the server's own time limit where one is known
   (`statement_timeout`, `max_statement_time` / `max_execution_time`,
   `STATEMENT_TIMEOUT_IN_SECONDS`, `LOCK_TIMEOUT`). Other engines (BigQuery, Trino, SQL Server,
   ...) have no read-only transaction: **there, containment rests on the database role** the URL
   logs in as, which must be allowed to read and nothing else (`nl2sql readonly-role` prints such
   a role for PostgreSQL and MySQL; elsewhere, grant SELECT only).
3. A watchdog at the deadline cancels the query with what the driver offers (`connection.cancel()`,
   `cursor.cancel()`, SQLite's `interrupt()`, MySQL's `KILL QUERY` from a second connection), and
   closes the connection if the query still runs a grace period later; the next query reopens it.
   On PostgreSQL and MySQL/MariaDB the connection is closed after every query (the next one
   opens a fresh session): locks and session values a rollback keeps (`GET_LOCK`,
   `LAST_INSERT_ID(n)`, advisory locks) never reach the next case.
4. Rows are streamed (`stream_results`: a server-side cursor where the dialect has one) and
   counted against `Limits` (rows and bytes) as they arrive.

A connection that breaks under a query raises `ConnectionLost` (the pipeline retries once); one
that died while idle is reopened quietly before the query is sent.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_nl2sql.engines import ForeignKey, Table, create_table_ddl
from pytest_nl2sql.engines.base import (
    ConnectionLost,
    DatabaseMissing,
    EngineError,
    Limits,
    QueryError,
    QueryResult,
    Watchdog,
    check_single_select,
    close_quietly,
    collect_within,
    connect_error,
    timed_out,
)
from pytest_nl2sql.engines.mysql import DENIED_FUNCTIONS as MYSQL_DENIED
from pytest_nl2sql.engines.postgres import DENIED_FUNCTIONS as POSTGRES_DENIED
from pytest_nl2sql.engines.url import SQLALCHEMY_HINT, DatabaseSpec, mask_secrets

GRACE = 2.0  # seconds after a cancel before the connection itself is closed
STREAM_BUFFER = 100  # rows SQLAlchemy buffers at most while streaming (memory within the caps)
_MYSQL_FAMILY = frozenset({"mysql", "doris", "starrocks", "singlestore"})  # sqlglot dialects


@dataclass(frozen=True)
class Containment:
    """What a dialect's server enforces itself, as SQL sent by the engine (never by the query)."""

    on_connect: tuple[str, ...] = ()  # once per connection
    read_only: str | None = None  # the transaction's first statement
    timeout: Callable[[float], tuple[str, ...]] | None = None  # statements for a limit in seconds
    cancel_by_kill: bool = False  # MySQL: KILL QUERY <thread_id> from a second connection
    # The same server's native engine's deny list (`check_single_select`), defence in depth.
    denied_functions: frozenset[str] = frozenset()
    # Reconnect after every query: the session keeps what a rollback does not undo (MySQL's
    # GET_LOCK and LAST_INSERT_ID(n), PostgreSQL's advisory locks) and SQL cannot reset it all.
    fresh_session: bool = False


def _pg_timeout(seconds: float) -> tuple[str, ...]:
    ms = max(1, int(seconds * 1000))
    return f"SET LOCAL statement_timeout = {ms}", f"SET LOCAL lock_timeout = {ms}"


def _mysql_timeout(seconds: float) -> tuple[str, ...]:
    return (f"SET SESSION max_execution_time = {max(1, int(seconds * 1000))}",)


def _mariadb_timeout(seconds: float) -> tuple[str, ...]:
    return (f"SET SESSION max_statement_time = {seconds:.6f}",)


def _snowflake_timeout(seconds: float) -> tuple[str, ...]:
    return (f"ALTER SESSION SET STATEMENT_TIMEOUT_IN_SECONDS = {max(1, math.ceil(seconds))}",)


def _redshift_timeout(seconds: float) -> tuple[str, ...]:
    return (f"SET statement_timeout TO {max(1, int(seconds * 1000))}",)


def _mssql_timeout(seconds: float) -> tuple[str, ...]:
    return (f"SET LOCK_TIMEOUT {max(1, int(seconds * 1000))}",)


# By SQLAlchemy dialect name (`Dialect.name`); "mariadb" is chosen by `is_mariadb`.
CONTAINMENT: dict[str, Containment] = {
    "postgresql": Containment(
        read_only="SET TRANSACTION READ ONLY", timeout=_pg_timeout,
        denied_functions=POSTGRES_DENIED, fresh_session=True,
    ),
    "mysql": Containment(
        read_only="SET TRANSACTION READ ONLY", timeout=_mysql_timeout, cancel_by_kill=True,
        denied_functions=MYSQL_DENIED, fresh_session=True,
    ),
    "mariadb": Containment(
        read_only="SET TRANSACTION READ ONLY", timeout=_mariadb_timeout, cancel_by_kill=True,
        denied_functions=MYSQL_DENIED, fresh_session=True,
    ),
    "oracle": Containment(read_only="SET TRANSACTION READ ONLY"),
    "sqlite": Containment(on_connect=("PRAGMA query_only = ON",)),
    "snowflake": Containment(timeout=_snowflake_timeout),
    "redshift": Containment(timeout=_redshift_timeout),
    "mssql": Containment(timeout=_mssql_timeout),
}


def import_sqlalchemy() -> Any:
    """SQLAlchemy, or `DatabaseMissing` naming the extra to install."""
    try:
        import sqlalchemy
    except ImportError:
        raise DatabaseMissing(f"this database URL runs through SQLAlchemy, which is not installed: {SQLALCHEMY_HINT}") from None
    return sqlalchemy


class SqlalchemyEngine:
    """One SQLAlchemy connection, opened at once and reopened when it breaks."""

    def __init__(self, spec: DatabaseSpec) -> None:
        assert spec.url is not None
        self.spec = spec
        sa = self._sa = import_sqlalchemy()
        try:
            self._engine = sa.create_engine(spec.url, poolclass=sa.pool.NullPool)
        except Exception as error:  # noqa: BLE001 - a bad URL option, a driver refusing an argument
            raise DatabaseMissing(self._masked(f"cannot open {spec.describe()}: {error}")) from None
        self.dialect = spec.dialect  # the sqlglot dialect (url.sqlglot_dialect of the dialect's name)
        self.containment = self._containment()
        self._conn: Any = None
        self._opened = False  # once open, failing to reopen is a lost server, not a bad case
        self._cursor: Any = None  # the DBAPI cursor of the running query, for `cursor.cancel()`
        sa.event.listen(self._engine, "before_cursor_execute", self._saw_cursor)
        self._connection()  # fail now (DatabaseMissing) rather than on every case
        self.containment = self._containment()  # a MySQL dialect knows MariaDB once connected

    def _containment(self) -> Containment:
        dialect = self._engine.dialect
        name = "mariadb" if getattr(dialect, "is_mariadb", False) else dialect.name
        return CONTAINMENT.get(name, Containment())

    # -- connection ---------------------------------------------------------------------------

    def _connection(self) -> Any:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.invalidated:
            return conn
        self._drop()
        try:
            conn = self._engine.connect()
            for statement in self.containment.on_connect:
                conn.exec_driver_sql(statement)
            conn.commit()
        except self._sa.exc.SQLAlchemyError as error:
            raise connect_error(self._opened, self.spec.describe(), self._masked(_message(error))) from None
        self._conn = conn
        self._opened = True
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()  # never back to a pool: its state is unknown
                conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass

    def _lost(self, conn: Any, error: Exception | None = None) -> bool:
        return bool(
            conn.closed or conn.invalidated or getattr(error, "connection_invalidated", False)
        )

    # -- queries ------------------------------------------------------------------------------

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        check_single_select(
            sql,
            self.dialect,
            denied_functions=self.containment.denied_functions,
            forbid_into=True,
            forbid_executable_comments=self.dialect in _MYSQL_FAMILY,
        )
        sa = self._sa
        conn = self._begin(limits)
        dbapi = conn.connection.dbapi_connection
        self._cursor = None
        watchdog = Watchdog(limits.timeout, lambda: self._cancel(dbapi))
        closer = Watchdog(limits.timeout + GRACE, lambda: close_quietly(dbapi))
        try:
            watchdog.start()
            closer.start()
            result = conn.exec_driver_sql(
                sql,
                execution_options={"stream_results": True, "max_row_buffer": STREAM_BUFFER, "no_parameters": True},
            )
            try:
                if not result.returns_rows:
                    raise QueryError("the statement returns no rows (only a read-only query may run)")
                columns = tuple(str(name) for name in result.keys())
                rows = collect_within(result, limits)
            finally:
                result.close()
        except sa.exc.SQLAlchemyError as error:
            raise self._failure(error, conn, watchdog, limits) from None
        finally:
            watchdog.stop()
            closer.stop()
            self._end(conn, lost=closer.fired)
        watchdog.raise_if_overran(limits.timeout)
        return QueryResult(columns, rows)

    def _begin(self, limits: Limits) -> Any:
        """A connection inside a fresh transaction, read-only and time-limited where the dialect
        allows. A connection that died while idle is reopened once here: no query was sent yet."""
        setup = ([self.containment.read_only] if self.containment.read_only else []) + (
            list(self.containment.timeout(limits.timeout)) if self.containment.timeout else []
        )
        for attempt in (1, 2):
            conn = self._connection()
            try:
                conn.begin()
                for statement in setup:
                    conn.exec_driver_sql(statement)
                _driver_timeout(conn.connection.dbapi_connection, limits.timeout)
                return conn
            except self._sa.exc.SQLAlchemyError as error:
                if not self._lost(conn, error):
                    self._end(conn)
                    raise QueryError(
                        f"cannot start a contained transaction: {self._masked(_message(error))}"
                    ) from None
                self._drop()
                if attempt == 2:
                    raise self._connection_lost(error) from None
        raise AssertionError("unreachable")

    def _end(self, conn: Any, *, lost: bool = False) -> None:
        """Roll back (whatever the query did is undone); a connection that cannot roll back, or
        that the watchdog had to close, is dropped and the next query opens a new one."""
        if lost or self._lost(conn) or self.containment.fresh_session:
            self._drop()
            return
        try:
            conn.rollback()
        except Exception:  # noqa: BLE001 - unknown state: never reuse it
            self._drop()

    def _saw_cursor(self, conn: Any, cursor: Any, *_: Any) -> None:
        self._cursor = cursor

    def _cancel(self, dbapi: Any) -> None:
        """Stop the running query with what the driver offers (the watchdog's action)."""
        cancel = getattr(dbapi, "cancel_safe", None) or getattr(dbapi, "cancel", None)
        if callable(cancel):
            cancel()
            return
        cursor_cancel = getattr(self._cursor, "cancel", None)
        if callable(cursor_cancel):
            cursor_cancel()
            return
        interrupt = getattr(dbapi, "interrupt", None)  # sqlite3
        if callable(interrupt):
            interrupt()
            return
        thread_id = getattr(dbapi, "thread_id", None)
        if self.containment.cancel_by_kill and callable(thread_id):
            with self._engine.connect() as killer:
                killer.exec_driver_sql(f"KILL QUERY {int(thread_id())}", execution_options={"no_parameters": True})
            return
        close_quietly(dbapi)

    def _failure(self, error: Exception, conn: Any, watchdog: Watchdog, limits: Limits) -> EngineError:
        """The engine error for a SQLAlchemy error raised by the query."""
        message = self._masked(_message(error))
        if watchdog.expired():
            return timed_out(limits.timeout)
        if self._lost(conn, error):
            return ConnectionLost(
                f"lost the connection to {self.spec.describe()} during the query: {message}"
            )
        if getattr(getattr(error, "orig", None), "sqlstate", None) == "57014":  # PostgreSQL: cancelled
            return ConnectionLost(f"the query was cancelled from outside (not by its time limit): {message}")
        return QueryError(message)

    def _connection_lost(self, error: Exception) -> ConnectionLost:
        return ConnectionLost(
            f"lost the connection to {self.spec.describe()}: {self._masked(_message(error))}"
        )

    def _masked(self, message: str) -> str:
        return mask_secrets(message, self.spec.url or "")

    # -- schema -------------------------------------------------------------------------------

    def schema_columns(self) -> dict[str, list[str]]:
        return {table.name: [column for column, _, _ in table.columns] for table in self._tables()}

    def schema_ddl(self) -> str:
        preparer = self._engine.dialect.identifier_preparer
        return create_table_ddl(self._tables(), preparer.quote_identifier)

    def _tables(self) -> list[Table]:
        """The default schema's tables and views from SQLAlchemy's inspector, in a transaction
        that is rolled back (the inspector's queries are ours, but nothing should linger)."""
        sa = self._sa
        for attempt in (1, 2):
            conn = self._connection()
            try:
                try:
                    return self._inspect(conn)
                finally:
                    self._end(conn)
            except sa.exc.SQLAlchemyError as error:
                if not self._lost(conn, error):
                    raise QueryError(f"cannot read the schema: {self._masked(_message(error))}") from None
                self._drop()
                if attempt == 2:
                    raise self._connection_lost(error) from None
        raise AssertionError("unreachable")

    def _inspect(self, conn: Any) -> list[Table]:
        inspector = self._sa.inspect(conn)
        dialect = conn.dialect
        names = list(inspector.get_table_names())
        views = [name for name in _or_empty(inspector.get_view_names) if name not in names]
        tables = []
        for name in names + views:
            columns = tuple(
                (str(column["name"]), _type_text(column["type"], dialect), bool(column.get("nullable", True)))
                for column in inspector.get_columns(name)
            )
            if name in views:
                tables.append(Table(name, columns))
                continue
            primary = tuple(_or_empty(lambda: inspector.get_pk_constraint(name).get("constrained_columns") or ()))
            foreign = tuple(
                ForeignKey(tuple(key["constrained_columns"]), str(key["referred_table"]), tuple(key["referred_columns"]))
                for key in _or_empty(lambda: inspector.get_foreign_keys(name))
                if key.get("referred_table")
            )
            tables.append(Table(name, columns, primary, foreign, _unique_sets(inspector, name)))
        return tables

    def close(self) -> None:
        self._drop()
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"SqlalchemyEngine({self.spec.describe()!r})"


def _unique_sets(inspector: Any, name: str) -> tuple[tuple[str, ...], ...]:
    """A table's UNIQUE constraints and unique indexes as column tuples (an expression index,
    whose columns include None, is left out), each once."""
    found: list[tuple[str, ...]] = []
    for entry in [*_or_empty(lambda: inspector.get_unique_constraints(name)),
                  *(i for i in _or_empty(lambda: inspector.get_indexes(name)) if i.get("unique"))]:
        columns = tuple(entry.get("column_names") or ())
        if columns and all(isinstance(c, str) for c in columns) and columns not in found:
            found.append(columns)
    return tuple(found)


def _or_empty(read: Callable[[], Any]) -> Any:
    """An inspector call a dialect does not implement (views, keys) as nothing."""
    try:
        return read()
    except NotImplementedError:
        return ()


def _type_text(kind: Any, dialect: Any) -> str:
    try:
        return str(kind.compile(dialect=dialect))
    except Exception:  # noqa: BLE001 - a type the dialect cannot render (NullType): its Python name
        return "" if type(kind).__name__ == "NullType" else str(kind)


def _driver_timeout(dbapi: Any, seconds: float) -> None:
    """Drivers with a per-call time limit of their own: python-oracledb's `call_timeout` (ms)."""
    if hasattr(dbapi, "call_timeout") and type(dbapi).__module__.startswith("oracledb"):
        dbapi.call_timeout = max(1, int(seconds * 1000))


def _message(error: Exception) -> str:
    """The driver's own message, without SQLAlchemy's statement echo and background link."""
    orig = getattr(error, "orig", None)
    if orig is not None:
        diag = getattr(orig, "diag", None)
        primary = getattr(diag, "message_primary", None)
        if primary:
            return str(primary)
        args = getattr(orig, "args", ())
        if len(args) > 1 and isinstance(args[0], int):  # PyMySQL: (code, message)
            return str(args[1])
        return str(orig).strip()
    return str(error).split("\n(Background on this error")[0].strip()
