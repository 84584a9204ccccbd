"""PostgreSQL engine (psycopg 3): every query in a READ ONLY transaction that is rolled back.

Defences: the token check of `check_single_select` (one statement, starting like a query, no
file-reading or session-lock functions); `BEGIN READ ONLY`; the query runs as a server-side
cursor (`DECLARE ... CURSOR FOR`), which PostgreSQL accepts only for SELECT/VALUES, and rows
come in batches, so a huge result never sits in client memory; `SET LOCAL statement_timeout`
on the server plus a client timer that cancels the query at the deadline (a FETCH is a
statement of its own, so the server limit alone would restart for every batch); and a rollback
after every query, which also undoes any `set_config` the query made.

Connect with a role that may only read (`GRANT SELECT`): a superuser can reach the file system
through functions this engine cannot list exhaustively (`COPY` is refused; `pg_read_file` and
friends are refused by name).
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

from pytest_nl2sql.engines.base import (
    DatabaseMissing,
    Limits,
    QueryError,
    QueryResult,
    QueryTimeout,
    check_single_select,
    columns_by_table,
    ddl_from_columns,
    fetch_within,
    import_driver,
)
from pytest_nl2sql.engines.url import DatabaseSpec

CONNECT_TIMEOUT = 10  # seconds

DENIED_FUNCTIONS = frozenset(
    {
        "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "pg_ls_logdir",
        "pg_ls_waldir", "pg_ls_tmpdir", "pg_ls_archive_statusdir", "lo_import", "lo_export",
        "lo_from_bytea", "lo_create", "lo_unlink", "pg_terminate_backend", "pg_cancel_backend",
        "pg_reload_conf", "pg_rotate_logfile", "pg_promote", "pg_advisory_lock",
        "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared",
        "pg_advisory_unlock_all", "dblink", "dblink_exec", "dblink_connect", "pg_file_write",
        "pg_logical_emit_message", "pg_switch_wal", "pg_create_restore_point",
    }
)  # fmt: skip


class PostgresEngine:
    """One PostgreSQL connection, opened on first use and reopened if it breaks."""

    dialect = "postgres"

    def __init__(self, spec: DatabaseSpec) -> None:
        assert spec.url is not None
        self.spec = spec
        self._psycopg = import_driver("psycopg", "PostgreSQL databases need the psycopg driver")
        self._conn: Any = None
        self._cursor_names = itertools.count()
        self._connection()  # fail now (DatabaseMissing) rather than on every case

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                conn = self._psycopg.connect(
                    self.spec.url, connect_timeout=CONNECT_TIMEOUT, autocommit=False
                )
            except self._psycopg.Error as error:
                raise DatabaseMissing(
                    f"cannot connect to PostgreSQL at {self.spec.describe()}: {error}"
                ) from None
            conn.read_only = True  # psycopg opens each transaction with BEGIN READ ONLY
            self._conn = conn
        return self._conn

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        check_single_select(sql, self.dialect, denied_functions=DENIED_FUNCTIONS)
        psycopg = self._psycopg
        conn = self._connection()
        deadline = time.monotonic() + limits.timeout
        timer = threading.Timer(limits.timeout, _canceller(conn))
        timer.daemon = True
        try:
            conn.execute(
                "SELECT set_config('statement_timeout', %s, true)",
                (f"{max(1, int(limits.timeout * 1000))}ms",),
            )
            timer.start()
            with conn.cursor(name=f"nl2sql_{next(self._cursor_names)}") as cursor:
                cursor.execute(sql)
                columns = tuple(d.name for d in cursor.description or ())
                rows = fetch_within(cursor, limits)
        except psycopg.errors.QueryCanceled:
            raise QueryTimeout(
                f"the query ran longer than {limits.timeout:g} s and was stopped"
            ) from None
        except psycopg.OperationalError as error:
            if time.monotonic() >= deadline:
                raise QueryTimeout(
                    f"the query ran longer than {limits.timeout:g} s and was stopped"
                ) from None
            raise QueryError(_message(error)) from None
        except psycopg.Error as error:
            raise QueryError(_message(error)) from None
        finally:
            timer.cancel()
            timer.join()
            _rollback(conn)
        return QueryResult(columns, rows)

    def schema_columns(self) -> dict[str, list[str]]:
        return columns_by_table(self._schema_rows())

    def schema_ddl(self) -> str:
        return ddl_from_columns(self._schema_rows(), _quote)

    def _schema_rows(self) -> list[tuple[str, str, str]]:
        conn = self._connection()
        try:
            return conn.execute(
                "SELECT c.table_name, c.column_name, c.data_type"
                " FROM information_schema.columns c JOIN information_schema.tables t"
                " ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
                " WHERE c.table_schema = ANY (current_schemas(false))"
                " ORDER BY t.table_name, c.ordinal_position"
            ).fetchall()
        finally:
            _rollback(conn)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        return f"PostgresEngine({self.spec.describe()!r})"


def _canceller(conn: Any) -> Any:
    cancel = getattr(conn, "cancel_safe", None) or conn.cancel

    def run() -> None:
        try:
            cancel()
        except Exception:  # noqa: BLE001 - the query may have just finished; nothing to cancel
            pass

    return run


def _rollback(conn: Any) -> None:
    """End the transaction, whatever state it is in; a broken connection is replaced later."""
    try:
        conn.rollback()
    except Exception:  # noqa: BLE001 - the connection is broken: `_connection` reopens it
        conn.close()


def _message(error: Any) -> str:
    diag = getattr(error, "diag", None)
    primary = getattr(diag, "message_primary", None)
    return primary or str(error).strip()


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
