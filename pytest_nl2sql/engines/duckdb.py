"""DuckDB engine: a read-only connection, in a memory-capped worker process of its own, that can
reach no file but its own database.

The connection lives in a child process (`worker.py`; `worker_child.DuckdbSession` there), an
instance of its own shared by a few engines (`_WorkerPool`), because DuckDB cannot be held to a
memory budget from inside: it builds a whole vector
(2048 rows) before the first row is fetched, and its `memory_limit` does not count the strings in
it, so `SELECT repeat('x', 10000000) FROM range(300)` takes 3 GB whatever the limit. The child's
address space is capped (`ADDRESS_SPACE_BYTES`, `RLIMIT_AS`): such a query fails there with an
out-of-memory error, reported as `TooManyRows` naming the memory, and the child is replaced. Rows
come back in bounded batches, counted against the row and size caps as they arrive; a single
value longer than `Limits.max_value_bytes` is refused as SQLite refuses it. A timer in the child
calls `interrupt()` at the deadline; a query still running `GRACE_SECONDS` later is ended by
killing the child, so the time limit holds whatever the query does.

DuckDB parses the SQL itself (`extract_statements`), so the statement check is exact: one
statement, of type SELECT (which includes `FROM t`, `VALUES`, `DESCRIBE`, `SHOW`); the very
statement object that was checked is the one executed. That refusal matters, because a read-only
DuckDB connection still accepts `CREATE TEMP TABLE`, which would shadow tables for later queries.
`READ_ONLY_CONFIG` is locked (`lock_configuration`), so no `SET` can undo it.

A result of more than `Limits.memory_rows` rows is not held: `execute` raises `ResultTooLarge`,
and the caller reads it again with `stream`, batch by batch from the worker, which the stream
holds until it is closed (gold and prediction alike run there: `trusted` changes nothing).
"""

from __future__ import annotations

import importlib.util
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.base import (
    INSTALL_HINT,
    BatchStream,
    DatabaseMissing,
    Limits,
    QueryResult,
    RowIds,
    types_by_table,
)
from pytest_nl2sql.engines.worker import Worker

READ_ONLY_CONFIG = {
    "memory_limit": "1GB",  # a hostile sort or join fails with an out-of-memory error instead
    "max_temp_directory_size": "0GB",  # no spilling to disk either
    "threads": 2,  # DuckDB's buffers grow with its threads: a fixed number keeps within the cap
    # (a file of small tables gets one: `worker_child.closed_instance`)
    "enable_external_access": False,  # no read_csv('/etc/passwd'), COPY ... TO, ATTACH
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,  # no SET can change any of the above
}

# A shared worker's instance, where neighbours and a counterexample's attempts are attached: one
# thread, since a small database gains nothing from two, and one thread gives tied rows (a GROUP BY
# ... ORDER BY count(*) LIMIT 1) the same order from run to run, so a counterexample shrunk once is
# replayed from the cache, not shrunk again.
ATTACHED_CONFIG = {**READ_ONLY_CONFIG, "threads": 1}

# Address space of each DuckDB worker: DuckDB reserves ~0.7 GB on connecting, and its
# memory_limit (1 GB) does not count everything; past this, allocations fail in the child.
ADDRESS_SPACE_BYTES = 2 * 1024**3


class DuckdbEngine:
    """One read-only DuckDB database, its connection held in a worker process of its own."""

    dialect = "duckdb"

    def __init__(self, path: Path, *, worker: Worker | None = None,
                 rows: RowIds | None = None) -> None:
        """`worker`: a DuckDB worker to open the database in, shared with other engines and kept
        by the caller (the short-lived engines of neighbour databases), where it is attached to the
        worker's one DuckDB instance (`worker_child.SharedDuckdb`); by default, an instance of its
        own, in a worker of the pool (`_WorkerPool`). `rows`: with a shared worker, a database of only these rows of the
        file (`base.RowIds`), copied in memory in the worker."""
        self.path = path
        if importlib.util.find_spec("duckdb") is None:  # the parent never imports duckdb itself
            raise DatabaseMissing(f"DuckDB databases need the duckdb package: {INSTALL_HINT}")
        if not path.is_file():
            raise DatabaseMissing(f"database file not found: {path}")
        own = worker is None
        self._shared = worker
        self._rows = rows
        if own and rows is not None:
            raise ValueError("a DuckDB engine of some rows of a file needs a shared worker")
        self._worker = worker = worker or _POOL.acquire(str(path))
        try:
            # a shared worker's databases are attached to one DuckDB instance (~1 ms against 15-20)
            args = (str(path), dict(READ_ONLY_CONFIG if own else ATTACHED_CONFIG), *(() if rows is None else (rows,)))
            self._handle = worker.add("duckdb" if own else "duckdb_attached", args)
        except BaseException:
            if own:
                _POOL.release(worker, str(path))
            raise
        if own:
            self._finalizer = weakref.finalize(self, _close_own, worker, self._handle, str(path))
        else:
            self._finalizer = weakref.finalize(self, worker.remove, self._handle)

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        return self._worker.query(self._live_handle(), sql, limits).result

    @contextmanager
    def stream(self, sql: str, limits: Limits, *, trusted: bool = False) -> Iterator[BatchStream]:
        """The rows of `sql` batch by batch (`base.StreamingEngine.stream`), from the worker."""
        with self._worker.stream(self._live_handle(), sql, limits) as result:
            yield result

    def _live_handle(self) -> int:
        if not self._finalizer.alive:
            raise DatabaseMissing(f"the engine for {self.path} is closed")
        return self._handle

    def _read(self, sql: str) -> list[tuple[Any, ...]]:
        return self._worker.read(self._live_handle(), sql)

    def schema_ddl(self) -> str:
        """DuckDB's CREATE TABLE text (types with precision, UNIQUE, keys), then its unique
        indexes. (DuckDB keeps no VARCHAR length: `VARCHAR(50)` reads back as VARCHAR.)"""
        rows = self._read(
            "SELECT table_name, sql FROM duckdb_tables() WHERE NOT internal"
            " AND database_name = current_database() AND schema_name = current_schema() ORDER BY table_oid"
        )
        indexes = self._read(
            "SELECT table_name, sql FROM duckdb_indexes() WHERE is_unique AND sql IS NOT NULL"
            " AND database_name = current_database() AND schema_name = current_schema() ORDER BY table_oid, index_oid"
        )
        return "\n\n".join(sql.strip() for _, sql in [*rows, *indexes])

    def schema_columns(self) -> dict[str, list[str]]:
        return {table: list(columns) for table, columns in self.schema_types().items()}

    def schema_types(self) -> dict[str, dict[str, str]]:
        """{table: {column: data type}} (`VARCHAR`, `BIGINT`, ...), read once per engine (the file is
        opened read-only), and once per file for the short-lived engines of a shared worker
        (`_KNOWN_TYPES`): translating SQLite's comparison affinity needs to know which columns
        hold text."""
        types = getattr(self, "_types", None)
        if types is None:
            key = self._types_key()
            types = _KNOWN_TYPES.get(key) if key is not None else None
            if types is None:
                rows = self._read(
                    "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE NOT internal"
                    " AND database_name = current_database() AND schema_name = current_schema() ORDER BY table_oid, column_index"
                )
                types = types_by_table(rows)
                if key is not None:
                    with _KNOWN_TYPES_LOCK:
                        while len(_KNOWN_TYPES) >= _KNOWN_TYPES_MAX:
                            del _KNOWN_TYPES[next(iter(_KNOWN_TYPES))]
                        _KNOWN_TYPES[key] = types
            self._types = types
        return {table: dict(columns) for table, columns in types.items()}

    def _types_key(self) -> tuple[Any, ...] | None:
        """What the columns of a shared worker's database follow from: the file (its path, inode,
        size and time: written once, as neighbours are, or replaced) and, for some of its rows,
        their tables (each copied with its columns and types). None for an engine of its own,
        which reads them once anyway."""
        if self._shared is None:
            return None
        try:
            info = self.path.stat()
        except OSError:
            return None
        tables = None if self._rows is None else tuple(table for table, _ in self._rows)
        return (str(self.path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, tables)

    def close(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        return f"DuckdbEngine({str(self.path)!r})"


# {(file, inode, size, time, tables copied): {table: {column: type}}} of the shared workers'
# databases: a neighbour judged for several cases, a shrink's hundreds of attempts on one neighbour
_KNOWN_TYPES: dict[tuple[Any, ...], dict[str, dict[str, str]]] = {}
_KNOWN_TYPES_MAX = 512
_KNOWN_TYPES_LOCK = threading.Lock()


def new_worker() -> Worker:
    """A DuckDB worker process (started on its first query), for one engine or several."""
    return Worker("duckdb", ADDRESS_SPACE_BYTES, retry_memory_in_fresh=True)


def neighbour_worker() -> Worker:
    """A worker for the short-lived engines of a run's neighbours (`DuckdbEngine(worker=...)`):
    the process that holds the case databases' own instances where there is one, so that a run
    starts one DuckDB process, not one more (each costs ~0.15 s of CPU: an interpreter, importing
    duckdb, an instance). Give it back with `release_worker`."""
    return _POOL.acquire(None)


def release_worker(worker: Worker) -> None:
    """Give back a worker `neighbour_worker` gave; the last user's release ends its process."""
    _POOL.release(worker, None)


def _close_own(worker: Worker, handle: int, path: str) -> None:
    worker.remove(handle)
    _POOL.release(worker, path)


class _WorkerPool:
    """The DuckDB workers of this process's own engines (a case's database, each an instance of
    its own) and of the neighbours' shared instance, several to a process: a worker process and
    its DuckDB import cost ~0.15 s of CPU, which a suite on three databases paid four times.

    A worker holds at most `OWN_PER_WORKER` own instances (each reserves ~70 MB of the
    process's `ADDRESS_SPACE_BYTES` after the first's ~0.7 GB), and never two of one file (DuckDB
    keeps one instance per file and process: they would be one). The memory cap still holds each
    query: one that runs out of memory in a worker that ran others is retried once in a fresh
    worker process, where only its own database is open (`Worker.retry_memory_in_fresh`), as in
    a worker of its own; a query killed at its deadline takes the other databases' connections
    with it, and they re-open on their next query.

    When its last user releases it (an engine closed, the run's neighbours done), one worker is
    kept, idle and holding no database of its own, for the next engine of this process: a caller
    that opens an engine per query (`api.eval_exec_match` in a loop, a session after another in
    one process) paid a process start each time, 180 ms a call on DuckDB against 1 ms on SQLite.
    Any other worker ends then; the idle one ends with the process (its input closes)."""

    OWN_PER_WORKER = 4
    IDLE_KEPT = 1  # workers kept, with no user, for the next acquire

    def __init__(self) -> None:
        # re-entrant: an engine's finalizer (`_close_own`) may run, by garbage collection, while
        # this thread holds the lock
        self._lock = threading.RLock()
        self._users: dict[Worker, list[str | None]] = {}  # worker -> the files of its own engines, None for other users

    def acquire(self, path: str | None) -> Worker:
        """A worker for an own engine of `path`, or (None) for a run's neighbours."""
        with self._lock:
            for worker, users in list(self._users.items()):
                own = [user for user in users if user is not None]
                if path is None or (len(own) < self.OWN_PER_WORKER and path not in own):
                    users.append(path)
                    return worker
            worker = new_worker()
            self._users[worker] = [path]
            return worker

    def release(self, worker: Worker, path: str | None) -> None:
        with self._lock:
            users = self._users.get(worker)
            if users is not None and path in users:
                users.remove(path)
            if users:
                return
            idle = sum(1 for other, others in self._users.items() if not others and other is not worker)
            if users is not None and idle < self.IDLE_KEPT and worker.pid is not None:
                return  # kept, idle (`users` empty), for the next acquire
            self._users.pop(worker, None)
        worker.shutdown()

    def after_fork(self) -> None:
        """A forked process starts its own workers (`worker._after_fork_in_child`): the pool's
        entries are the parent's engines', still counted there."""
        self._lock = threading.RLock()


_POOL = _WorkerPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.after_fork)

