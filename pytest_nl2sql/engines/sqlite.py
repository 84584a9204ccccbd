"""SQLite engine: runs untrusted SQL on a database file that it can never change, in a worker
process that is killed when a query overruns its deadline.

The connection lives in the shared SQLite worker process (`worker.py`, `worker_child.py`), where
`worker_child.SqliteSession` guards it: a read-only `file:` URI, an authorizer that lets through
only what a SELECT needs (no writes, TEMP objects, ATTACH, pragmas, transactions, dangerous
functions), `PRAGMA query_only`, no extensions, a progress handler that interrupts at the
deadline, `SQLITE_LIMIT_LENGTH` = `Limits.max_value_bytes` on every string/blob a query builds,
and a `hard_heap_limit` on the worker's SQLite heap. A query that holds the CPU inside one step
(`printf('%.*c', 2147483647, 'x')`, `instr()` of long strings), where no interrupt is looked at,
is ended by killing the worker `GRACE_SECONDS` after the deadline: it is still a `QueryTimeout`.
The worker's address space is capped (`ADDRESS_SPACE_BYTES`), and rows come back in bounded
batches counted against the row and size caps as they arrive.

All SQLite engines of a process share one worker: a query costs one round trip over a pipe
(a few tens of microseconds), and a killed worker is replaced on the next query, which re-opens
the databases in it.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.base import DatabaseMissing, Limits, QueryResult
from pytest_nl2sql.engines.worker import shared_worker
from pytest_nl2sql.engines.worker_child import (  # noqa: F401  (re-exported)
    ALLOWED_PRAGMAS,
    DENIED_FUNCTIONS,
    HEAP_LIMIT_BYTES,
    sqlite_uri,
)

# Address space of the SQLite worker: its SQLite heap (HEAP_LIMIT_BYTES) plus Python and one
# batch of rows; a query needing more (a row of huge values) fails there, as too much memory.
ADDRESS_SPACE_BYTES = 2 * 1024**3


class SqliteEngine:
    """One read-only SQLite database, its connection held in the shared SQLite worker."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, text_errors: str = "backslashreplace") -> None:
        codecs.lookup_error(text_errors)  # unknown handler names fail here, not mid-query
        self.path = path
        self.text_errors = text_errors
        self._schema_columns: dict[str, list[str]] | None = None
        if not path.exists():
            raise DatabaseMissing(f"database file not found: {path}")
        if not path.is_file():
            raise DatabaseMissing(f"database path is not a file: {path}")
        self._worker = shared_worker("sqlite", ADDRESS_SPACE_BYTES)
        self._handle: int | None = self._worker.add("sqlite", (str(path), text_errors))

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        return self._worker.query(self._live_handle(), sql, limits)

    def _live_handle(self) -> int:
        if self._handle is None:
            raise DatabaseMissing(f"the engine for {self.path} is closed")
        return self._handle

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Our own schema queries (trusted, but they pass the same authorizer)."""
        return self._worker.read(self._live_handle(), sql, params)

    def schema_ddl(self) -> str:
        rows = self._read(
            "SELECT sql FROM sqlite_master WHERE type IN ('table', 'view') AND sql IS NOT NULL"
            " AND name NOT LIKE 'sqlite~_%' ESCAPE '~' ORDER BY rowid"
        )
        return "\n\n".join(f"{sql.strip()};" for (sql,) in rows)

    def schema_columns(self) -> dict[str, list[str]]:
        if self._schema_columns is None:
            tables = self._read(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite~_%' ESCAPE '~' ORDER BY rowid"
            )
            self._schema_columns = {
                name: [
                    column
                    for (column,) in self._read(
                        "SELECT name FROM pragma_table_info(?) ORDER BY cid", (name,)
                    )
                ]
                for (name,) in tables
            }
        return {table: list(columns) for table, columns in self._schema_columns.items()}

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            self._worker.remove(handle)

    def __repr__(self) -> str:
        return f"SqliteEngine({str(self.path)!r})"
