"""SQLite engine: runs untrusted SQL on a database file that it can never change.

Layers of defence, each enough on its own for the common attacks:

* the file is opened through a `file:` URI with `mode=ro`, so SQLite never creates or writes it;
* an authorizer (checked when a statement is prepared) lets through only what a SELECT needs:
  reading tables, calling functions other than a few dangerous ones, recursive CTEs, and a short
  list of schema-introspection pragmas (`pragma_table_info(...)`). Writes of any kind (TEMP
  objects too), ATTACH/DETACH (and so VACUUM INTO), other pragmas, transaction control, ANALYZE
  and virtual-table DDL are denied, so no query can leave state behind for the next one;
* `PRAGMA query_only`, `SQLITE_LIMIT_ATTACHED = 0` and disabled extension loading as depth;
* a progress handler that interrupts the virtual machine at a monotonic deadline, during both
  execution and fetching;
* `SQLITE_LIMIT_LENGTH` bounds every string/blob a query builds (`Limits.max_value_bytes`), and
  rows are fetched one by one against the row cap and a running estimate of the result's size;
  SQLite's default limits on expression depth (1000) and compound SELECT terms (500) stay;
* a process-wide SQLite heap ceiling (`hard_heap_limit`, 4 GiB), set only if none is set, so that
  a row of many huge values fails with "out of memory" instead of exhausting the machine. It
  is process-wide, hence generous; an application that set its own keeps it.

The statement cache is off (`cached_statements=0`): the authorizer runs when a statement is
prepared, and some of its decisions depend on the statement at hand (a table-valued pragma is
allowed inside a SELECT, never as a `PRAGMA` statement), which a cached statement would skip.
Every query is prepared anew, as it would be in a real run where each query is new anyway.

`immutable=1` is used only for a WAL-mode file without a `-wal` file beside it: there `mode=ro`
would create `-wal`/`-shm` files in the database's directory, while `immutable` reads the main file
as the whole database. Elsewhere `mode=ro` keeps SQLite's locking, so a file rewritten during a
session (a fixture regenerating it) is read correctly, which `immutable` would not guarantee.
"""

from __future__ import annotations

import codecs
import math
import sqlite3
import time
from functools import partial
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.base import (
    DatabaseMissing,
    EngineError,
    Limits,
    QueryError,
    QueryResult,
    QueryTimeout,
    SizeBudget,
    TooManyRows,
)

# Every this many virtual-machine steps SQLite calls our deadline check (one short Python call);
# rare enough to cost nothing measurable, often enough to stop within a millisecond or so.
PROGRESS_STEPS = 1_000

# Ceiling on SQLite's heap for the whole process, applied only when nobody set one before us.
HEAP_LIMIT_BYTES = 1024**3  # per process: each xdist worker has its own

_ALLOWED_ACTIONS = frozenset(
    getattr(sqlite3, name)
    for name in ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_RECURSIVE")
    if hasattr(sqlite3, name)
)

# Functions that touch the file system, load code, or register C pointers.
DENIED_FUNCTIONS = frozenset(
    {"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit", "fsdir", "zipfile"}
)

# Pragmas that only describe the schema; reachable as `pragma_table_info('t')` inside a SELECT.
ALLOWED_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "collation_list",
        "database_list",
        "function_list",
        "module_list",
        "pragma_list",
    }
)

_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_temp_master", "sqlite_schema"})

_ACTION_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ")
    for name in (
        "SQLITE_CREATE_INDEX", "SQLITE_CREATE_TABLE", "SQLITE_CREATE_TEMP_INDEX",
        "SQLITE_CREATE_TEMP_TABLE", "SQLITE_CREATE_TEMP_TRIGGER", "SQLITE_CREATE_TEMP_VIEW",
        "SQLITE_CREATE_TRIGGER", "SQLITE_CREATE_VIEW", "SQLITE_DELETE", "SQLITE_DROP_INDEX",
        "SQLITE_DROP_TABLE", "SQLITE_DROP_TEMP_INDEX", "SQLITE_DROP_TEMP_TABLE",
        "SQLITE_DROP_TEMP_TRIGGER", "SQLITE_DROP_TEMP_VIEW", "SQLITE_DROP_TRIGGER",
        "SQLITE_DROP_VIEW", "SQLITE_INSERT", "SQLITE_PRAGMA", "SQLITE_READ", "SQLITE_SELECT",
        "SQLITE_TRANSACTION", "SQLITE_UPDATE", "SQLITE_ATTACH", "SQLITE_DETACH",
        "SQLITE_ALTER_TABLE", "SQLITE_REINDEX", "SQLITE_ANALYZE", "SQLITE_CREATE_VTABLE",
        "SQLITE_DROP_VTABLE", "SQLITE_FUNCTION", "SQLITE_SAVEPOINT", "SQLITE_RECURSIVE",
    )  # fmt: skip
    if hasattr(sqlite3, name)
}


class SqliteEngine:
    """One read-only connection to a SQLite file, reused for every query on it."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, text_errors: str = "backslashreplace") -> None:
        codecs.lookup_error(text_errors)  # unknown handler names fail here, not mid-query
        self.path = path
        self.text_errors = text_errors
        self._deadline = math.inf
        self._denied: str | None = None  # what the authorizer refused last, for the message
        self._in_select = False  # the statement being prepared began as a SELECT
        self._schema_columns: dict[str, list[str]] | None = None
        self._conn = _connect(path)
        try:
            self._configure(text_errors)
        except BaseException:
            self._conn.close()
            raise

    def _configure(self, text_errors: str) -> None:
        conn = self._conn
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as error:
            raise DatabaseMissing(f"cannot read SQLite database {self.path}: {error}") from None
        # sorts and temporary b-trees of a hostile query stay in memory, under the heap ceiling,
        # instead of filling the disk with temp files
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA query_only = 1")
        _cap_process_heap(conn)
        if hasattr(conn, "enable_load_extension"):  # absent when Python was built without it
            conn.enable_load_extension(False)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_WORKER_THREADS, 0)
        conn.text_factory = partial(bytes.decode, encoding="utf-8", errors=text_errors)
        conn.set_authorizer(self._authorize)
        conn.set_progress_handler(self._past_deadline, PROGRESS_STEPS)

    # -- guards -------------------------------------------------------------------------------

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None
    ) -> int:
        """SQLite asks this for every operation a statement being prepared would perform.

        Some operations are allowed only inside a statement that began as a SELECT: the
        table-valued pragmas, and the internal `sqlite_master` bookkeeping SQLite does when a
        SELECT first uses an eponymous virtual table (`json_each`, `pragma_table_info`).
        """
        if action in _ALLOWED_ACTIONS:
            if action == sqlite3.SQLITE_SELECT:
                self._in_select = True
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() not in DENIED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            self._denied = f"function {arg2}()"
            return sqlite3.SQLITE_DENY
        if self._in_select:
            if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in ALLOWED_PRAGMAS:
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_UPDATE and arg1 in _SCHEMA_TABLES:
                return sqlite3.SQLITE_OK
        what = _ACTION_NAMES.get(action, f"operation {action}")
        self._denied = f"{what} {arg1}" if arg1 else what
        return sqlite3.SQLITE_DENY

    def _past_deadline(self) -> bool:
        return time.monotonic() > self._deadline

    # -- Engine protocol ----------------------------------------------------------------------

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        conn = self._conn
        self._denied = None
        self._in_select = False
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, limits.max_value_bytes))
        self._deadline = time.monotonic() + limits.timeout
        cursor = conn.cursor()
        try:
            cursor.execute(sql)
            if cursor.description is None:
                raise QueryError("the query returns no result: only a SELECT may run")
            columns = tuple(d[0] for d in cursor.description)
            rows = _fetch(cursor, limits)
        except (sqlite3.Error, sqlite3.Warning, ValueError, MemoryError) as error:
            raise self._translate(error, limits) from None
        finally:
            self._deadline = math.inf
            cursor.close()
            if conn.in_transaction:  # cannot happen while BEGIN is denied; cheap to be sure
                conn.rollback()
        return QueryResult(columns, rows)

    def _translate(self, error: Exception, limits: Limits) -> EngineError:
        message = str(error)
        if isinstance(error, MemoryError):
            return TooManyRows("the query needed more memory than SQLite may use in this process")
        if message == "interrupted" and time.monotonic() >= self._deadline:
            return QueryTimeout(f"the query ran longer than {limits.timeout:g} s and was stopped")
        if message.startswith(("not authorized", "authorization denied")) and self._denied:
            return QueryError(f"not allowed: {self._denied} (only a read-only SELECT may run)")
        if message.startswith("string or blob too big"):
            return QueryError(
                f"string or blob too big: a value would exceed {limits.max_value_bytes} bytes"
            )
        if message.startswith("You can only execute one statement at a time"):
            return QueryError("only one SQL statement may run per query; found more than one")
        return QueryError(message)

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Our own schema queries (trusted, but they pass the same authorizer)."""
        self._in_select = False
        return self._conn.execute(sql, params).fetchall()

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
        self._conn.close()

    def __repr__(self) -> str:
        return f"SqliteEngine({str(self.path)!r})"


def _fetch(cursor: sqlite3.Cursor, limits: Limits) -> list[tuple[Any, ...]]:
    """Rows one at a time, so neither the row cap nor the byte budget is overshot by a batch."""
    rows: list[tuple[Any, ...]] = []
    budget = SizeBudget(limits)
    for row in cursor:
        budget.add(row)
        rows.append(row)
    return rows


def sqlite_uri(path: Path) -> str:
    """A read-only `file:` URI for `path` (percent-quoted, so `?`, `#` and `%` in names work)."""
    params = "mode=ro"
    if _is_wal_without_log(path):
        params += "&immutable=1"
    return f"{path.as_uri()}?{params}"


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise DatabaseMissing(f"database file not found: {path}")
    if not path.is_file():
        raise DatabaseMissing(f"database path is not a file: {path}")
    try:
        return sqlite3.connect(
            sqlite_uri(path), uri=True, isolation_level=None, cached_statements=0
        )
    except sqlite3.Error as error:
        raise DatabaseMissing(f"cannot open SQLite database {path}: {error}") from None


def _is_wal_without_log(path: Path) -> bool:
    """Header bytes 18-19 are 2 in WAL mode (https://sqlite.org/fileformat.html)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    wal = len(header) == 20 and header[18] == 2 and header[19] == 2
    return wal and not path.with_name(path.name + "-wal").exists()


def _cap_process_heap(conn: sqlite3.Connection) -> None:
    """Set SQLite's process-wide heap ceiling unless the application already chose one."""
    (current,) = conn.execute("PRAGMA hard_heap_limit").fetchone()
    if current == 0:
        conn.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT_BYTES}")
