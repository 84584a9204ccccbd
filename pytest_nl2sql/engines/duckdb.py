"""DuckDB engine: a read-only connection that can reach no file but its own database.

DuckDB parses the SQL itself (`extract_statements`), so the statement check is exact: one
statement, of type SELECT (which includes `FROM t`, `VALUES`, `DESCRIBE`, `SHOW`); the very
statement object that was checked is the one executed. That refusal matters, because a
read-only DuckDB connection still accepts `CREATE TEMP TABLE`, which would shadow tables for
later queries. `enable_external_access = false` (locked, with extension autoloading off) keeps
`read_csv('/etc/passwd')`, `COPY ... TO` and `ATTACH` from touching files. A timer thread calls
`interrupt()` at the deadline, covering execution and fetching alike.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from pytest_nl2sql.engines.base import (
    DatabaseMissing,
    Limits,
    QueryError,
    QueryResult,
    QueryTimeout,
    columns_by_table,
    fetch_within,
    import_driver,
)


READ_ONLY_CONFIG = {
    "memory_limit": "1GB",  # a hostile sort or join fails with an out-of-memory error instead
    "max_temp_directory_size": "0GB",  # no spilling to disk either
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}


class DuckdbEngine:
    """One read-only DuckDB connection to a database file."""

    dialect = "duckdb"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._duckdb = duckdb = import_driver("duckdb", "DuckDB databases need the duckdb package")
        if not path.is_file():
            raise DatabaseMissing(f"database file not found: {path}")
        try:
            self._conn = duckdb.connect(
                str(path), read_only=True, config=dict(READ_ONLY_CONFIG)
            )
        except duckdb.Error as error:
            raise DatabaseMissing(f"cannot open DuckDB database {path}: {error}") from None

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        duckdb = self._duckdb
        conn = self._conn
        try:
            statements = conn.extract_statements(sql)
        except duckdb.Error as error:
            raise QueryError(_message(error)) from None
        if not statements:
            raise QueryError("the query contains no SQL statement")
        if len(statements) > 1:
            raise QueryError("only one SQL statement may run per query; found more than one")
        (statement,) = statements
        if statement.type != duckdb.StatementType.SELECT:
            kind = statement.type.name
            raise QueryError(f"only a read-only SELECT may run, not {kind}")
        deadline = time.monotonic() + limits.timeout
        timer = threading.Timer(limits.timeout, conn.interrupt)
        timer.daemon = True
        timer.start()
        try:
            cursor = conn.execute(statement)
            columns = tuple(d[0] for d in cursor.description or ())
            rows = fetch_within(cursor, limits)
        except (duckdb.InterruptException, RuntimeError) as error:
            if time.monotonic() >= deadline:
                raise QueryTimeout(
                    f"the query ran longer than {limits.timeout:g} s and was stopped"
                ) from None
            raise QueryError(_message(error)) from None
        except duckdb.Error as error:
            raise QueryError(_message(error)) from None
        finally:
            timer.cancel()
            timer.join()
        return QueryResult(columns, rows)

    def _tables(self) -> list[tuple[str, str]]:
        return self._conn.execute(
            "SELECT table_name, sql FROM duckdb_tables() WHERE NOT internal"
            " AND schema_name = current_schema() ORDER BY table_oid"
        ).fetchall()

    def schema_ddl(self) -> str:
        return "\n\n".join(sql.strip() for _, sql in self._tables())

    def schema_columns(self) -> dict[str, list[str]]:
        rows = self._conn.execute(
            "SELECT table_name, column_name FROM duckdb_columns() WHERE NOT internal"
            " AND schema_name = current_schema() ORDER BY table_oid, column_index"
        ).fetchall()
        return columns_by_table(rows)

    def close(self) -> None:
        self._conn.close()

    def __repr__(self) -> str:
        return f"DuckdbEngine({str(self.path)!r})"


def _message(error: Exception) -> str:
    return str(error).strip()
