"""MySQL / MariaDB engine (PyMySQL): every query in a READ ONLY transaction that is rolled back.

MySQL commits implicitly before DDL, even inside a READ ONLY transaction, and `SET`,
`SELECT ... INTO OUTFILE` and `@var := ...` act outside any transaction, so the token check of
`check_single_select` matters more here than anywhere: exactly one statement, starting like a
query, with no INTO, no `:=` and no file or lock functions. Multi-statement packets are off
(PyMySQL's default), so the server itself refuses a second statement too.

The time limit is the server's own (`max_statement_time` on MariaDB, `max_execution_time` on
MySQL) plus a client timer that sends `KILL QUERY` from a second connection at the deadline.
Rows stream through an unbuffered cursor; a result abandoned half-way (row cap) is stopped with
`KILL QUERY` and drained, and a connection left in an unknown state is replaced on next use.

Connect with a user that may only read: a user with the FILE privilege can read server files.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pytest_nl2sql.engines.base import (
    DatabaseMissing,
    EngineError,
    Limits,
    QueryError,
    QueryResult,
    QueryTimeout,
    check_single_select,
    columns_by_table,
    ddl_from_columns,
    fetch_within,
    import_driver,
    plain_row,
)
from pytest_nl2sql.engines.url import DatabaseSpec

CONNECT_TIMEOUT = 10  # seconds

# Server error codes meaning "the statement was interrupted" (KILL QUERY, or the time limit).
_INTERRUPTED = {1317, 1969, 3024}
# Client error codes meaning "no server there".
_UNREACHABLE = {2003, 2005, 2006, 2013}

DENIED_FUNCTIONS = frozenset(
    {"load_file", "get_lock", "release_lock", "release_all_locks", "sys_exec", "sys_eval"}
)


class MysqlEngine:
    """One MySQL/MariaDB connection, opened on first use and reopened when dropped."""

    dialect = "mysql"

    def __init__(self, spec: DatabaseSpec) -> None:
        assert spec.server is not None
        self.spec = spec
        self._pymysql = import_driver("pymysql", "MySQL/MariaDB databases need the PyMySQL driver")
        self._conn: Any = None
        self._mariadb = False
        self._connection()  # fail now (DatabaseMissing) rather than on every case

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
                charset=options.get("charset", "utf8mb4"),
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT,
            )
        except self._pymysql.Error as error:
            raise DatabaseMissing(
                f"cannot connect to MySQL at {self.spec.describe()}: {error}"
            ) from None

    def _connection(self) -> Any:
        if self._conn is None or not self._conn.open:
            self._conn = self._connect()
            self._mariadb = "mariadb" in self._conn.get_server_info().lower()
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
            self._conn = None

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        check_single_select(
            sql, self.dialect, denied_functions=DENIED_FUNCTIONS, forbid_into=True
        )
        pymysql = self._pymysql
        conn = self._connection()
        deadline = time.monotonic() + limits.timeout
        kill = self._killer(conn.thread_id())
        timer = threading.Timer(limits.timeout, kill)
        timer.daemon = True
        cursor = None
        try:
            with conn.cursor() as setup:
                if self._mariadb:
                    setup.execute("SET SESSION max_statement_time = %s", (limits.timeout,))
                else:
                    setup.execute(
                        "SET SESSION max_execution_time = %s", (int(limits.timeout * 1000),)
                    )
                setup.execute("START TRANSACTION READ ONLY")
            timer.start()
            unbuffered = conn.cursor(pymysql.cursors.SSCursor)
            unbuffered.execute(sql)
            cursor = unbuffered  # from here on, rows are streaming in
            columns = tuple(d[0] for d in cursor.description or ())
            rows = fetch_within(cursor, limits)
            cursor.close()
            cursor = None
        except EngineError:
            raise
        except pymysql.Error as error:
            code = error.args[0] if error.args else None
            if code in _INTERRUPTED or time.monotonic() >= deadline:
                raise QueryTimeout(
                    f"the query ran longer than {limits.timeout:g} s and was stopped"
                ) from None
            if code in _UNREACHABLE:
                raise DatabaseMissing(f"lost the MySQL server at {self.spec.describe()}: {error}") from None
            message = error.args[1] if len(error.args) > 1 else str(error)
            raise QueryError(str(message)) from None
        finally:
            timer.cancel()
            timer.join()
            self._finish(cursor, kill)
        return QueryResult(columns, rows)

    def _finish(self, cursor: Any, kill: Any) -> None:
        """Leave the connection idle: stop and drain a result left half-read, roll back."""
        pymysql = self._pymysql
        try:
            if cursor is not None:  # stopped mid-result (row cap, error): stop the server first
                kill()
                try:
                    cursor.close()  # reads what is left of the (now interrupted) result
                except pymysql.Error:
                    pass
            if self._conn is not None:
                self._conn.rollback()
        except Exception:  # noqa: BLE001 - a connection in an unknown state is not reused
            self._drop_connection()

    def _killer(self, thread_id: int) -> Any:
        def run() -> None:
            try:
                killer = self._connect()
            except DatabaseMissing:
                return
            try:
                with killer.cursor() as cursor:
                    cursor.execute(f"KILL QUERY {int(thread_id)}")
            except Exception:  # noqa: BLE001 - the query may have just finished
                pass
            finally:
                killer.close()

        return run

    def schema_columns(self) -> dict[str, list[str]]:
        return columns_by_table(self._schema_rows())

    def schema_ddl(self) -> str:
        return ddl_from_columns(self._schema_rows(), _quote)

    def _schema_rows(self) -> list[tuple[str, str, str]]:
        conn = self._connection()
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT table_name, column_name, column_type FROM information_schema.columns"
                " WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position"
            )
            return [tuple(plain_row(row)) for row in cursor.fetchall()]  # type: ignore[misc]

    def close(self) -> None:
        self._drop_connection()

    def __repr__(self) -> str:
        return f"MysqlEngine({self.spec.describe()!r})"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
