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
(tens of microseconds: two processes waking each other), and a killed worker is replaced on the
next query, which re-opens the databases in it.

Results are reused: a query that calls deterministic functions only (the worker's authorizer sees
every function a statement calls) gives the same rows on an unchanged file, so its result is kept
(`RESULT_CACHE_BYTES` for the whole process, small results only) and served again for the same SQL
and limits while the file's inode and SQLite's `PRAGMA data_version` (read on a connection of the
engine's own, it changes with every commit by anyone) are unchanged. In Spider, a third of the
queries repeat one already run (paraphrased questions share their gold; predictions repeat gold).
Each caller gets its own list of rows.

A result of more than `Limits.memory_rows` rows is not held: `execute` raises `ResultTooLarge`,
and the caller reads it again with `stream` (batches, under the same guards and `max_rows`,
never held whole; `judge/large.py` compares results so). A trusted stream, and an untrusted one
whose steps are bounded, run in this process on a connection of their own (a query may run on
the engine meanwhile); any other runs in the worker, which it holds until the stream is closed.
"""

from __future__ import annotations

import codecs
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.base import (
    BatchStream,
    DatabaseMissing,
    Limits,
    QueryError,
    QueryResult,
    SizeBudget,
)
from pytest_nl2sql.engines.worker import REFUSAL_ERRORS, Answer, shared_worker
from pytest_nl2sql.engines.worker_child import (  # noqa: F401  (re-exported)
    ALLOWED_PRAGMAS,
    DENIED_FUNCTIONS,
    HEAP_LIMIT_BYTES,
    Refusal,
    SqliteSession,
    sqlite_uri,
)

# Address space of the SQLite worker: its SQLite heap (HEAP_LIMIT_BYTES) plus Python and one
# batch of rows; a query needing more (a row of huge values) fails there, as too much memory.
ADDRESS_SPACE_BYTES = 2 * 1024**3

RESULT_CACHE_BYTES = 32 * 1024**2  # results kept for reuse, all SQLite engines together; 0: none
RESULT_CACHE_ENTRY_BYTES = 256 * 1024  # larger results are not kept (sizes as SizeBudget counts)


class SqliteEngine:
    """One read-only SQLite database, its connection held in the shared SQLite worker."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, text_errors: str = "backslashreplace", immutable: bool = False) -> None:
        """`immutable`: a file nobody changes while it is open (a generated neighbour database in
        the cache): its results are not kept for reuse, SQLite takes no locks on it, and the
        worker opens it only when a query needs the worker (most run in this process), which
        makes a short-lived engine cheap."""
        codecs.lookup_error(text_errors)  # unknown handler names fail here, not mid-query
        self.path = path
        self.text_errors = text_errors
        self._session_args = (str(path), text_errors, immutable)  # a SqliteSession's, here and in the worker
        self._schema_columns: dict[str, list[str]] | None = None
        if not path.exists():
            raise DatabaseMissing(f"database file not found: {path}")
        if not path.is_file():
            raise DatabaseMissing(f"database path is not a file: {path}")
        self._worker = shared_worker("sqlite", ADDRESS_SPACE_BYTES)
        self._closed = False
        self._handle: int | None = None  # the database's handle in the worker, opened on first need
        self._handle_lock = threading.Lock()  # a prediction asked ahead of its turn may need it first
        self._version = _DataVersion(path) if RESULT_CACHE_BYTES > 0 and not immutable else None
        self._local: InProcess | None = None  # the in-process session of golds and bounded predictions
        if not immutable:
            self._here()  # a missing or unreadable database fails here (DatabaseMissing), not mid-run
            self._worker.start()  # booting meanwhile, for the first query that calls an unbounded function
        self._stream_local: InProcess | None = None  # the in-process session of streams, opened on first use
        self._read_local: SqliteSession | None = None  # the in-process session of `_read`, opened on first use
        self._read_lock = threading.Lock()
        self._streaming = False  # a stream of this engine is open

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        """Untrusted SQL (a prediction): in this process when every function it calls is bounded
        per step (the progress handler then stops it at the deadline), else in the worker, which
        is killed when a single step outlasts the deadline. Which one is told while the statement
        is prepared here: the authorizer refuses another function before any step runs."""
        self._check_open()
        here = self._here()
        try:
            return self._execute(sql, limits, lambda: here.answer(sql, limits, bounded=True))
        except _StepsUnbounded:
            handle = self._live_handle()
            return self._execute(sql, limits, lambda: self._worker.query(handle, sql, limits))

    def execute_trusted(self, sql: str, limits: Limits) -> QueryResult:
        """The suite author's SQL (a gold query, as trusted as conftest.py): in this process, under
        the same guards (read-only, authorizer, deadline, caps), without the round trip to the
        worker; what it cannot have is the kill of a query that holds one step past the deadline."""
        self._check_open()
        return self._execute(sql, limits, lambda: self._here().answer(sql, limits))

    @contextmanager
    def stream(self, sql: str, limits: Limits, *, trusted: bool = False) -> Iterator[BatchStream]:
        """The rows of `sql` batch by batch (`base.StreamingEngine.stream`): in this process when
        trusted or bounded per step, as `execute` decides, else in the worker. One stream per
        engine at a time."""
        self._check_open()
        if self._streaming:
            raise RuntimeError(f"a stream is already open on {self!r}: close it first")
        self._streaming = True
        try:
            if self._stream_local is None:
                self._stream_local = InProcess(_translating_refusals(SqliteSession, *self._session_args))
            try:
                local = self._stream_local.open_stream(sql, limits, bounded=not trusted)
            except _StepsUnbounded:
                local = None
            if local is not None:
                try:
                    yield local
                finally:
                    local.close()
            else:
                with self._worker.stream(self._live_handle(), sql, limits) as result:
                    yield result
        finally:
            self._streaming = False

    def _execute(self, sql: str, limits: Limits, run: Any) -> QueryResult:
        stamp = self._version.stamp() if self._version is not None else None
        key = (str(self.path), self.text_errors, sql, limits)
        if stamp is not None:
            kept = _RESULTS.get(key, stamp)
            if kept is not None:
                return kept
        started = time.perf_counter()
        answer = run()
        result = QueryResult(answer.result.columns, answer.result.rows, time.perf_counter() - started)
        if stamp is not None and answer.deterministic:
            _RESULTS.put(key, stamp, result, answer.size)  # a reused result keeps the time it took to compute
        return result

    def _here(self) -> "InProcess":
        if self._local is None:
            self._local = InProcess(_translating_refusals(SqliteSession, *self._session_args))
        return self._local

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseMissing(f"the engine for {self.path} is closed")

    def _live_handle(self) -> int:
        """The database's handle in the worker, opening it there on first need."""
        self._check_open()
        with self._handle_lock:
            if self._handle is None:
                self._handle = self._worker.add("sqlite", self._session_args)
            return self._handle

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Our own schema queries (trusted, bounded, and they pass the same authorizer): in this
        process, on a session of their own under a lock, since a prediction asked ahead of its
        turn reads the schema from another thread. (In the worker they cost a round trip each,
        and the worker's opening the database: 96 reads and 19 opens on Spider dev, for 17
        queries that needed the worker.)"""
        self._check_open()
        with self._read_lock:
            if self._read_local is None:
                self._read_local = _translating_refusals(partial(SqliteSession, any_thread=True), *self._session_args)
            return _translating_refusals(self._read_local.read, sql, params)

    def schema_ddl(self) -> str:
        """The CREATE statements as written (types, UNIQUE and keys as declared), and the
        CREATE UNIQUE INDEX statements: a unique index is a constraint a prompt should show."""
        rows = self._read(
            "SELECT sql FROM sqlite_master WHERE (type IN ('table', 'view') OR (type = 'index'"
            " AND sql LIKE 'CREATE UNIQUE INDEX%')) AND sql IS NOT NULL"
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
        self._closed = True
        for local in (self._local, self._stream_local):
            if local is not None:
                local.session.close()
        self._local = self._stream_local = None
        with self._read_lock:
            if self._read_local is not None:
                self._read_local.close()
            self._read_local = None
        handle, self._handle = self._handle, None
        if handle is not None:
            self._worker.remove(handle)
        if self._version is not None:
            self._version.close()

    def __repr__(self) -> str:
        return f"SqliteEngine({str(self.path)!r})"


class _StepsUnbounded(Exception):
    """The query calls a function that the progress handler cannot stop mid-step: it runs in the worker."""


class InProcess:
    """A worker-child session run in this process: the same batches, counted against the same caps."""

    def __init__(self, session: SqliteSession) -> None:
        self.session = session

    def answer(self, sql: str, limits: Limits, *, bounded: bool = False) -> Answer:
        """The query's rows; `bounded`: only if its every step is bounded (else `_StepsUnbounded`,
        raised while the statement is prepared, before anything runs)."""
        session = self.session
        budget = SizeBudget(limits, spill=True)
        kept: list[tuple[Any, ...]] = []
        run = session.run_bounded if bounded else session.run
        try:
            columns, rows, done, deterministic = run(
                sql, limits.timeout, limits.timeout, limits.max_rows, limits.max_value_bytes)
            while True:
                budget.add_counted(len(rows), session.batch_bytes)  # raises TooManyRows past a cap
                kept.extend(rows)
                if done:
                    break
                rows, done = session.more()
        except Refusal as refusal:
            raise _raised(refusal) from None
        finally:
            session.stop()
        return Answer(QueryResult(tuple(columns), kept), deterministic, budget.bytes)

    def open_stream(self, sql: str, limits: Limits, *, bounded: bool = False) -> BatchStream:
        """The session's batches as a `BatchStream` (the caller closes it); refusals raised as the
        worker raises them, `bounded` as for `answer`."""
        session = self.session
        started = time.monotonic()
        run = session.run_bounded if bounded else session.run
        columns, rows, done, _ = _translating_refusals(
            run, sql, limits.timeout, limits.timeout, limits.max_rows, limits.max_value_bytes)
        return BatchStream(
            columns, rows, done, lambda left: _translating_refusals(session.more, left), session.stop, limits,
            spent=time.monotonic() - started,
        )


def _raised(refusal: Refusal) -> BaseException:
    """The exception for a session's refusal: the engine error the worker would raise,
    `_StepsUnbounded` for a query that must run in the worker, or KeyboardInterrupt for a query
    stopped by Ctrl-C in this process (Python's sqlite3 swallows the KeyboardInterrupt that the
    signal raises in the progress handler, and reports the query as "interrupted")."""
    if refusal.kind == "unbounded":
        return _StepsUnbounded()
    if refusal.kind == "interrupted":
        return KeyboardInterrupt()
    return REFUSAL_ERRORS.get(refusal.kind, QueryError)(refusal.message)


def _translating_refusals(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Refusal as refusal:
        raise _raised(refusal) from None


class _DataVersion:
    """When a database file may have changed: its inode (a file replaced by another) and
    `PRAGMA data_version` on a read-only connection of our own, which changes whenever another
    connection, in any process, commits to the file (rollback journal and WAL alike)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        try:
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                sqlite_uri(path), uri=True, check_same_thread=False
            )
            self._cursor = self._conn.cursor()
        except sqlite3.Error:
            self._conn = None

    def stamp(self) -> tuple[int, int, int] | None:
        """None when it cannot tell (no result is then reused or kept)."""
        if self._conn is None:
            return None
        try:
            stat = os.stat(self._path)
            with self._lock:
                (version,) = self._cursor.execute("PRAGMA data_version").fetchone()
        except (OSError, sqlite3.Error):
            return None
        return (stat.st_dev, stat.st_ino, version)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class _ResultCache:
    """Results of deterministic queries by (database, text errors, SQL, limits), least recently
    used first out, within `RESULT_CACHE_BYTES`."""

    def __init__(self) -> None:
        self._entries: OrderedDict[Any, tuple[Any, QueryResult, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Any, stamp: Any) -> QueryResult | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            kept_stamp, result, size = entry
            if kept_stamp != stamp:
                del self._entries[key]
                self._bytes -= size
                return None
            self._entries.move_to_end(key)
        return QueryResult(result.columns, list(result.rows), result.seconds)

    def put(self, key: Any, stamp: Any, result: QueryResult, size: int) -> None:
        if size > RESULT_CACHE_ENTRY_BYTES:
            return
        kept = QueryResult(result.columns, tuple(result.rows), result.seconds)  # type: ignore[arg-type]
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (stamp, kept, size)
            self._bytes += size
            while self._bytes > RESULT_CACHE_BYTES and self._entries:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


_RESULTS = _ResultCache()
