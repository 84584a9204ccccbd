"""The process in which the SQLite and DuckDB engines run untrusted SQL (its parent: `worker.py`).

A query can hold the CPU inside one step of the database where no interrupt is ever looked at:
SQLite's `printf('%.*c', 2147483647, 'x')` builds its string for ~10 s and `instr()` of two long
strings compares for hours, none of it reaching a progress handler. DuckDB builds a whole 2048-row
vector before the first row can be fetched, gigabytes for `repeat('x', 10000000)`, whatever its
`memory_limit`. Neither can be stopped from inside the process, so the query runs here, in a child
that the parent kills when it overruns its deadline, and whose address space is capped
(`RLIMIT_AS`) so that a query's memory ends in an error instead of exhausting the machine.

Run as a script, `python worker_child.py KIND ADDRESS_SPACE_BYTES`; it imports only the standard
library at start (DuckDB's child adds `duckdb` when it opens its database, and `base.py` for the
first value that is not a plain int, float, str or bytes), so it starts in ~20 ms. It reads requests from stdin and writes replies to stdout, each a `marshal`
dump behind an 8-byte length (plain values only: marshal is faster than pickle, and loading it
runs no code, should a query ever take over this process); every request but "forget" gets exactly
one reply:

    ("open", handle, kind, args)  -> None         open a database: OPENERS[kind](*args), or
                                                  "duckdb_attached" in the shared instance
    ("run", handle, sql, timeout, stated_timeout, max_rows, max_value_bytes)
                                  -> (columns, rows, done, deterministic)
                                                  start a query, with its first rows, and whether
                                                  it calls deterministic functions only
    ("more", handle[, timeout])   -> (rows, done)             the next rows of the running query
                                                  (a stream's: its deadline re-set `timeout`
                                                  seconds from now, the query's time left)
    ("stop", handle)              -> None         drop the running query's cursor
    ("read", handle, sql, params) -> rows         our own trusted schema queries
    ("close", handle)             -> None
    ("forget", handle)            (no reply)      close, the parent not waiting for it: done before
                                                  the next request, whatever it finds is not the
                                                  parent's concern (a short-lived engine's end
                                                  costs no round trip)
    ("info",)                     -> {...}        pid, heap and address-space limits (for tests)

A reply is ("ok", payload) or ("err", kind, message), kind being one of `ERROR_KINDS`. Rows travel
in batches of at most `BATCH_ROWS` rows / about `BATCH_BYTES`, so neither process ever holds more
than one batch beyond what the parent decided to keep; the parent applies the result caps
(`SizeBudget`) and says `stop` when one is passed. The child stops by itself after `max_rows + 1`
rows (enough for the parent to see that the cap was passed).

The SQLite session also carries the guards that decide what may run at all (see `SqliteSession`).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # Run as a script, the engines directory is sys.path[0]: its duckdb.py would shadow DuckDB.
    del sys.path[0]

import codecs
import marshal
import os
import sqlite3
import struct
import threading
import time
from collections.abc import Callable
from functools import partial

# Only what starts fast is imported here (no pathlib, typing, signal): the child is started on
# the first query of every process, and again after each kill.
Any = object  # annotations only (they are never evaluated: `from __future__ import annotations`)
RowIds = object  # base.RowIds, annotations only
INFINITY = float("inf")

HEADER = struct.Struct("<Q")  # length of the marshal dump that follows
MARSHAL_VERSION = 4

BATCH_ROWS = 2_000  # rows per reply at most
BATCH_BYTES = 4 * 1024 * 1024  # and about this many bytes (estimated as `SizeBudget` does)

ERROR_KINDS = ("query", "timeout", "rows", "memory", "missing", "interrupted")
"""query: QueryError · timeout: QueryTimeout · rows: TooManyRows · memory: the query needed more
memory than the process may use (TooManyRows; the parent restarts the child, whose heap may stay
fragmented) · missing: DatabaseMissing · interrupted: SQLite stopped the query before its
deadline because the progress handler raised, which only a signal's handler makes it do (Ctrl-C's
KeyboardInterrupt, which Python's sqlite3 swallows, leaving the error "interrupted"): never the
query's fault (`sqlite.py` raises KeyboardInterrupt again in the calling process; from the worker,
ConnectionLost)."""

# -- SQLite guards --------------------------------------------------------------------------------

# Every this many virtual-machine steps SQLite calls our deadline check (one short Python call);
# rare enough to cost nothing measurable, often enough to stop within a millisecond or so.
PROGRESS_STEPS = 1_000

# Ceiling on SQLite's heap in the child process (all its connections together). The child is
# ours alone, so it is always set: a row of many huge values fails with "out of memory".
HEAP_LIMIT_BYTES = 1024**3

_ALLOWED_ACTIONS = frozenset(
    getattr(sqlite3, name)
    for name in ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_RECURSIVE")
    if hasattr(sqlite3, name)
)

# Functions that touch the file system, load code, or register C pointers.
DENIED_FUNCTIONS = frozenset(
    {"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit", "fsdir", "zipfile"}
)

# Built-in functions whose result depends on their arguments alone: a query calling no other
# gives the same result on an unchanged file, so its result may be reused (`sqlite.py`). Date and
# time functions are not here ('now'), nor random(), changes() and the like; an unknown name
# (a function of a newer SQLite) only means that the result is not reused.
DETERMINISTIC_FUNCTIONS = frozenset(
    """
    abs avg char coalesce concat concat_ws count format glob group_concat hex ifnull iif instr
    length like likelihood likely lower ltrim max min nullif octet_length printf quote replace
    round rtrim sign soundex string_agg substr substring sum total trim typeof unhex unicode
    unlikely upper zeroblob
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
    nth_value
    acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10
    log2 mod pi pow power radians sin sinh sqrt tan tanh trunc
    json json_array json_array_length json_extract json_insert json_object json_patch
    json_remove json_replace json_set json_type json_valid json_quote json_group_array
    json_group_object json_each json_tree -> ->>
    """.split()
)

# Built-in functions whose one call costs at most time linear in its arguments (every string and
# blob being bounded by SQLITE_LIMIT_LENGTH): between two virtual-machine steps, where the progress
# handler stops a query at its deadline, none can hold the CPU for long. A query that calls only
# these may run in the calling process (`sqlite.py`); any other function (instr, replace, like,
# glob, printf, format, soundex, a newer SQLite's own, ...) sends the query to the worker process,
# which is killed when a single step outlasts the deadline. An allow-list: what it forgets costs
# speed, never containment.
LINEAR_FUNCTIONS = frozenset(
    """
    abs avg char coalesce concat concat_ws count group_concat hex ifnull iif length likelihood
    likely lower ltrim max min nullif octet_length quote round rtrim sign string_agg substr
    substring sum total trim typeof unhex unicode unlikely upper
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
    nth_value
    acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10
    log2 mod pi pow power radians sin sinh sqrt tan tanh trunc
    date time datetime julianday strftime unixepoch
    """.split()
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


class Refusal(Exception):
    """A query (or open) that failed; `kind` (one of `ERROR_KINDS`) says how the parent reports it.
    `run_bounded` raises kind "unbounded" too, in the calling process only (it never travels)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def timeout_message(timeout: float) -> str:
    return f"the query ran longer than {timeout:g} s and was stopped"


_SIZED = frozenset({str, bytes})


def row_size(row: tuple[Any, ...]) -> int:
    """About the size `SizeBudget` counts for a row (only used here to size batches)."""
    size = 64
    for value in row:
        size += len(value) if type(value) in _SIZED else 16
    return size


class Alarm:
    """Calls an action once a deadline passes, from one thread kept for the whole process: what a
    `threading.Timer` per query did (a thread started and joined per query, ~0.1-0.3 ms of CPU, as
    much as a small DuckDB query) for queries that run one at a time. `disarm` returns once a firing
    action has finished, so no action reaches a query after it. A process started by fork starts
    a thread and a lock of its own."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._armed: tuple[float, Callable[[], None], int] | None = None  # (deadline, action, token)
        self._tokens = 0
        self._pid = -1

    def arm(self, timeout: float, action: Callable[[], None]) -> int:
        """Run `action` in `timeout` seconds unless disarmed first; the token to disarm it with.
        One action at a time: arming replaces the one armed."""
        if self._pid != os.getpid():  # first use, or a process started by fork: a thread and lock of its own
            self._condition, self._armed, self._pid = threading.Condition(), None, os.getpid()
            threading.Thread(target=self._watch, args=(self._condition,), name="nl2sql-alarm", daemon=True).start()
        with self._condition:
            self._tokens += 1
            self._armed = (time.monotonic() + timeout, action, self._tokens)
            self._condition.notify()
            return self._tokens

    def disarm(self, token: int) -> None:
        with self._condition:
            if self._armed is not None and self._armed[2] == token:
                self._armed = None

    def _watch(self, condition: threading.Condition) -> None:
        with condition:
            while True:
                if self._armed is None:
                    condition.wait()
                    continue
                deadline, action, _ = self._armed
                left = deadline - time.monotonic()
                if left > 0:
                    condition.wait(left)
                    continue
                self._armed = None
                try:
                    action()  # under the lock: `disarm` waits for it
                except Exception:  # noqa: BLE001, S110 - the query may have just finished; nothing to stop
                    pass


ALARM = Alarm()


class Session:
    """One open database in the child, and the query running on it (at most one).

    A database implements `_start`, `_fetch` (or `more` itself), `_finish`, `read` and `close`.
    """

    MAX_STEP = 256  # rows per _fetch call at most

    def __init__(self) -> None:
        self._left = 0  # rows the running query may still send (max_rows + 1 in all)
        self._running = False
        self._stated_timeout = 0.0  # the time limit as the user set it, for messages
        self.deterministic = False  # the running query calls deterministic functions only

    # what each database implements
    def _start(self, sql: str, timeout: float, max_value_bytes: int) -> tuple[str, ...]:
        raise NotImplementedError

    def _fetch(self, count: int) -> list[tuple[Any, ...]]:
        """Up to `count` more rows of the running query; fewer when it has no more."""
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def _extend(self, timeout: float) -> None:
        """Set the running query's deadline `timeout` seconds from now (a stream, between whose
        batches the consumer's time is not the query's)."""
        raise NotImplementedError

    def read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # the protocol
    def run(
        self, sql: str, timeout: float, stated_timeout: float, max_rows: int, max_value_bytes: int
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]], bool, bool]:
        """Start `sql`, to be interrupted `timeout` seconds from now (`stated_timeout` is the limit
        the user set, of which a retry may have less left)."""
        self.stop()
        self.deterministic = False
        self._stated_timeout = stated_timeout
        self._left = max(0, max_rows) + 1
        self._running = True
        try:
            columns = self._start(sql, timeout, max_value_bytes)
        except BaseException:
            self.stop()
            raise
        rows, done = self.more()
        return columns, rows, done, self.deterministic

    def more(self, timeout: float | None = None) -> tuple[list[tuple[Any, ...]], bool]:
        """The next batch. Rows are fetched a few at a time, as many as the rest of the batch
        holds at the size of the rows seen last (one row first), so a batch of huge values is
        not fetched whole before it is measured. `timeout`: see `_extend`."""
        if not self._running:
            return [], True
        if timeout is not None:
            self._extend(timeout)
        rows: list[tuple[Any, ...]] = []
        size = 0
        step = 1
        done = False
        try:
            while len(rows) < BATCH_ROWS and size < BATCH_BYTES:
                want = min(step, self._left, BATCH_ROWS - len(rows))
                chunk = self._fetch(want) if want else []
                self._left -= len(chunk)
                chunk_size = sum(map(row_size, chunk))
                size += chunk_size
                rows.extend(chunk)
                if len(chunk) < want or not self._left:
                    done = True
                    break
                per_row = max(1, chunk_size // len(chunk))
                step = max(1, min(self.MAX_STEP, (BATCH_BYTES - size) // per_row))
        except BaseException:
            self.stop()
            raise
        if done:
            self.stop()
        return rows, done

    def stop(self) -> None:
        if self._running:
            self._running = False
            self._finish()


class SqliteSession(Session):
    """A read-only SQLite connection that can never change its database, with its guards.

    * the file is opened through a `file:` URI with `mode=ro`, so SQLite never creates or writes it;
    * an authorizer (checked when a statement is prepared) lets through only what a SELECT needs:
      reading tables, calling functions other than a few dangerous ones, recursive CTEs, and a
      short list of schema-introspection pragmas (`pragma_table_info(...)`). Writes of any kind
      (TEMP objects too), ATTACH/DETACH (and so VACUUM INTO), other pragmas, transaction control,
      ANALYZE and virtual-table DDL are denied, so no query can leave state behind for the next;
    * `PRAGMA query_only`, `SQLITE_LIMIT_ATTACHED = 0` and disabled extension loading as depth;
    * a progress handler that interrupts the virtual machine at the deadline, during both
      execution and fetching (the parent kills the process when a single step outlasts it);
    * `SQLITE_LIMIT_LENGTH` bounds every string/blob a query builds (`Limits.max_value_bytes`);
      SQLite's default limits on expression depth (1000) and compound SELECT terms (500) stay;
    * `hard_heap_limit` (`HEAP_LIMIT_BYTES`) on the child's SQLite heap, so that a row of many
      huge values fails with "out of memory", and sorts and temp b-trees stay in memory
      (`temp_store = MEMORY`) under that ceiling instead of filling the disk.

    The statement cache is off (`cached_statements=0`): the authorizer runs when a statement is
    prepared, and some of its decisions depend on the statement at hand (a table-valued pragma is
    allowed inside a SELECT, never as a `PRAGMA` statement), which a cached statement would skip.
    """

    def __init__(self, path: str, text_errors: str, immutable: bool = False, *, any_thread: bool = False) -> None:
        """`immutable`: nobody changes the file while it is open (see `sqlite_uri`). `any_thread`:
        used from several threads, one at a time (the caller holds a lock)."""
        super().__init__()
        codecs.lookup_error(text_errors)
        self.path = path
        self._deadline = INFINITY
        self._max_value_bytes = 0
        self._denied: str | None = None  # what the authorizer refused last, for the message
        self._in_select = False  # the statement being prepared began as a SELECT
        self._deterministic = True  # no function outside DETERMINISTIC_FUNCTIONS was prepared
        self._linear = True  # no function outside LINEAR_FUNCTIONS was prepared
        # `run_bounded`: a function outside LINEAR_FUNCTIONS is refused while the statement is
        # prepared (before any step runs), so that the caller can send the query to the worker
        self._bounded_only = False
        self.batch_bytes = 0  # the size of the last batch, counted as `SizeBudget` counts it
        self._cursor: sqlite3.Cursor | None = None
        self._conn = _connect_sqlite(path, immutable, any_thread)
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
            raise Refusal("missing", f"cannot read SQLite database {self.path}: {error}") from None
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute("PRAGMA query_only = 1")
        conn.execute(f"PRAGMA hard_heap_limit = {HEAP_LIMIT_BYTES}")
        if hasattr(conn, "enable_load_extension"):  # absent when Python was built without it
            conn.enable_load_extension(False)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_WORKER_THREADS, 0)
        conn.text_factory = partial(bytes.decode, encoding="utf-8", errors=text_errors)
        conn.set_authorizer(self._authorize)
        conn.set_progress_handler(self._past_deadline, PROGRESS_STEPS)

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
            name = (arg2 or "").lower()
            if name not in DENIED_FUNCTIONS:
                if name not in DETERMINISTIC_FUNCTIONS:
                    self._deterministic = False
                if name not in LINEAR_FUNCTIONS:
                    self._linear = False
                    if self._bounded_only:
                        return sqlite3.SQLITE_DENY
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

    def run_bounded(
        self, sql: str, timeout: float, stated_timeout: float, max_rows: int, max_value_bytes: int
    ) -> tuple[tuple[str, ...], list[tuple[Any, ...]], bool, bool]:
        """`run`, for a query whose every step the progress handler can stop: one calling a
        function outside LINEAR_FUNCTIONS is refused as `Refusal("unbounded")` while the statement
        is prepared, before any step runs."""
        self._bounded_only = True
        try:
            return self.run(sql, timeout, stated_timeout, max_rows, max_value_bytes)
        finally:
            self._bounded_only = False

    def _start(self, sql: str, timeout: float, max_value_bytes: int) -> tuple[str, ...]:
        conn = self._conn
        self._denied = None
        self._in_select = False
        self._deterministic = True
        self._linear = True
        self._max_value_bytes = max_value_bytes
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, max_value_bytes))
        self._deadline = time.monotonic() + timeout
        self._cursor = cursor = conn.cursor()
        try:
            cursor.execute(sql)
        except (sqlite3.Error, sqlite3.Warning, ValueError, MemoryError) as error:
            raise self._translate(error) from None
        if cursor.description is None:
            raise Refusal("query", "the query returns no result: only a SELECT may run")
        self.deterministic = self._deterministic
        return tuple(d[0] for d in cursor.description)

    def more(self, timeout: float | None = None) -> tuple[list[tuple[Any, ...]], bool]:
        """`Session.more`, inlined: this loop runs for every row of every SQLite query. The
        batch's size is left in `batch_bytes` (the in-process caller counts it once)."""
        cursor = self._cursor
        if not self._running or cursor is None:
            self.batch_bytes = 0
            return [], True
        if timeout is not None:
            self._extend(timeout)
        rows: list[tuple[Any, ...]] = []
        append = rows.append
        want = min(self._left, BATCH_ROWS)
        size = 0
        done = True
        try:
            for row in cursor:  # one row at a time: no batch overshoots the caps
                append(row)
                size += 64
                for value in row:
                    size += len(value) if type(value) in _SIZED else 16
                if len(rows) >= want or size >= BATCH_BYTES:
                    done = False
                    break
        except (sqlite3.Error, sqlite3.Warning, ValueError, MemoryError) as error:
            refusal = self._translate(error)  # before stop(), which forgets the deadline
            self.stop()
            raise refusal from None
        except BaseException:
            self.stop()
            raise
        self._left -= len(rows)
        self.batch_bytes = size
        if done or not self._left:
            self.stop()
            done = True
        return rows, done

    def _extend(self, timeout: float) -> None:
        self._deadline = time.monotonic() + timeout

    def _finish(self) -> None:
        self._deadline = INFINITY
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None
        if self._conn.in_transaction:  # cannot happen while BEGIN is denied; cheap to be sure
            self._conn.rollback()

    def _translate(self, error: Exception) -> Refusal:
        message = str(error)
        if self._bounded_only and not self._linear and message.startswith(("not authorized", "authorization denied")):
            return Refusal("unbounded", "the query calls a function whose single step the deadline cannot stop")
        if isinstance(error, MemoryError) or message == "out of memory":
            return Refusal(
                "memory",
                f"the query needed more memory than SQLite may use here"
                f" ({HEAP_LIMIT_BYTES >> 20} MiB heap)",
            )
        if message == "interrupted":
            if time.monotonic() >= self._deadline:
                return Refusal("timeout", timeout_message(self._stated_timeout))
            return Refusal("interrupted", "the query was interrupted from outside (not by its time limit)")
        if message.startswith(("not authorized", "authorization denied")) and self._denied:
            return Refusal(
                "query", f"not allowed: {self._denied} (only a read-only SELECT may run)"
            )
        if message.startswith("string or blob too big"):
            return Refusal(
                "query",
                f"string or blob too big: a value would exceed {self._max_value_bytes} bytes",
            )
        if message.startswith("You can only execute one statement at a time"):
            return Refusal("query", "only one SQL statement may run per query; found more than one")
        return Refusal("query", message)

    def read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Our own schema queries (trusted, but they pass the same authorizer)."""
        self.stop()
        self._in_select = False
        try:
            return self._conn.execute(sql, params).fetchall()
        except (sqlite3.Error, ValueError) as error:
            raise Refusal("query", str(error)) from None

    def close(self) -> None:
        self.stop()
        self._conn.close()


def sqlite_uri(path: str | os.PathLike[str], *, immutable: bool = False) -> str:
    """A read-only `file:` URI for `path` (percent-quoted, so `?`, `#` and `%` in names work).

    `immutable=1` is added where the caller says nobody changes the file while it is open (a
    neighbour database we generated: SQLite then takes no locks), and for a WAL-mode file without
    a `-wal` file beside it: there `mode=ro` would create `-wal`/`-shm` files in the database's
    directory, while `immutable` reads the main file as the whole database. Elsewhere `mode=ro`
    keeps SQLite's locking, so a file rewritten during a session (a fixture regenerating it) is
    read correctly.
    """
    path = os.path.abspath(os.fspath(path))
    params = "mode=ro"
    if immutable or _is_wal_without_log(path):
        params += "&immutable=1"
    return f"{_file_uri(path)}?{params}"


_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def _file_uri(path: str) -> str:
    """`pathlib.Path(path).as_uri()` for an absolute path, without importing pathlib."""
    if os.name == "nt":
        from pathlib import Path

        return Path(path).as_uri()
    quoted = "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in os.fsencode(path))
    return f"file://{quoted}"


def _connect_sqlite(path: str, immutable: bool = False, any_thread: bool = False) -> sqlite3.Connection:
    if not os.path.exists(path):
        raise Refusal("missing", f"database file not found: {path}")
    if not os.path.isfile(path):
        raise Refusal("missing", f"database path is not a file: {path}")
    try:
        return sqlite3.connect(
            sqlite_uri(path, immutable=immutable), uri=True, isolation_level=None, cached_statements=0,
            check_same_thread=not any_thread,
        )
    except sqlite3.Error as error:
        raise Refusal("missing", f"cannot open SQLite database {path}: {error}") from None


def _is_wal_without_log(path: str) -> bool:
    """Header bytes 18-19 are 2 in WAL mode (https://sqlite.org/fileformat.html)."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError:
        return False
    wal = len(header) == 20 and header[18] == 2 and header[19] == 2
    return wal and not os.path.exists(path + "-wal")


# -- DuckDB ---------------------------------------------------------------------------------------


class DuckdbSession(Session):
    """A read-only DuckDB connection: one SELECT statement per query, interrupted at the deadline.

    DuckDB parses the SQL itself (`extract_statements`), so the statement check is exact: one
    statement, of type SELECT (which includes `FROM t`, `VALUES`, `DESCRIBE`, `SHOW`); the very
    statement object that was checked is the one executed. Values become plain Python values
    (`base.plain_row`) here, before they are counted, so a list or struct value is counted at the
    size of the text it becomes; a single value larger than `max_value_bytes` is refused as
    SQLite's `SQLITE_LIMIT_LENGTH` refuses it.
    """

    def __init__(self, path: str, config: dict[str, Any]) -> None:
        super().__init__()
        self.path = path
        self._duckdb = _import_duckdb()
        self._alarm: int | None = None  # the token of the query's alarm (`ALARM`)
        self._interrupted = False  # the alarm fired during the running query
        self._deadline = INFINITY
        self._max_value_bytes = 0
        self._memory_limit = str(config.get("memory_limit", ""))
        if not os.path.isfile(path):
            raise Refusal("missing", f"database file not found: {path}")
        self._conn = self._connect(path, config)

    def _connect(self, path: str, config: dict[str, Any]) -> Any:
        """A DuckDB instance of its own for the file (15-20 ms: DuckDB sets up its catalog)."""
        duckdb = self._duckdb
        try:
            return closed_instance(duckdb, path, config, read_only=True)
        except duckdb.Error as error:
            raise Refusal("missing", f"cannot open DuckDB database {path}: {error}") from None

    def _start(self, sql: str, timeout: float, max_value_bytes: int) -> tuple[str, ...]:
        duckdb, conn = self._duckdb, self._conn
        self._max_value_bytes = max_value_bytes
        try:
            statements = conn.extract_statements(sql)
        except duckdb.Error as error:
            raise Refusal("query", _message(error)) from None
        if not statements:
            raise Refusal("query", "the query contains no SQL statement")
        if len(statements) > 1:
            raise Refusal("query", "only one SQL statement may run per query; found more than one")
        (statement,) = statements
        if statement.type != duckdb.StatementType.SELECT:
            raise Refusal("query", f"only a read-only SELECT may run, not {statement.type.name}")
        self._deadline = time.monotonic() + timeout
        self._interrupted = False
        self._arm(timeout)
        try:
            conn.execute(statement)
        except Exception as error:  # noqa: BLE001 - translated: every DuckDB failure is the query's
            raise self._translate(error) from None
        return tuple(d[0] for d in conn.description or ())

    def _fetch(self, count: int) -> list[tuple[Any, ...]]:
        try:
            rows = [_plain_row(row) for row in self._conn.fetchmany(count)]
        except Exception as error:  # noqa: BLE001
            raise self._translate(error) from None
        limit = self._max_value_bytes
        for row in rows:
            for value in row:
                if isinstance(value, (str, bytes)) and len(value) > limit:
                    raise Refusal(
                        "query", f"string or blob too big: a value would exceed {limit} bytes"
                    )
        return rows

    def _arm(self, timeout: float) -> None:
        self._alarm = ALARM.arm(timeout, self._interrupt)

    def _interrupt(self) -> None:
        self._interrupted = True
        self._conn.interrupt()

    def _disarm(self) -> None:
        token, self._alarm = self._alarm, None
        if token is not None:
            ALARM.disarm(token)

    def _extend(self, timeout: float) -> None:
        self._disarm()
        if self._interrupted:  # fired before it was disarmed: the time was up, it stays up
            return
        self._deadline = time.monotonic() + timeout
        self._arm(timeout)

    def _finish(self) -> None:
        self._disarm()
        self._deadline = INFINITY

    def _translate(self, error: BaseException) -> Refusal:
        duckdb = self._duckdb
        if isinstance(error, MemoryError) or isinstance(error, duckdb.OutOfMemoryException):
            first = _message(error).splitlines()[0] if _message(error) else "out of memory"
            return Refusal(
                "memory",
                f"the query needed more memory than DuckDB may use here (memory_limit"
                f" {self._memory_limit}, its process {_address_space_text()}): {first}",
            )
        if isinstance(error, (duckdb.InterruptException, RuntimeError)):
            if time.monotonic() >= self._deadline:
                return Refusal("timeout", timeout_message(self._stated_timeout))
        return Refusal("query", _message(error))

    def read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        self.stop()
        try:
            return [_plain_row(row) for row in self._conn.execute(sql, params).fetchall()]
        except self._duckdb.Error as error:
            raise Refusal("query", _message(error)) from None

    def close(self) -> None:
        self.stop()
        self._conn.close()


ATTACH_FOLDER_PREFIX = "nl2sql-attach-"  # then the child's pid: a killed child's folder is removed by its parent


# DuckDB's row group: it parallelises a scan by row groups, so a table of fewer rows is read by one
# thread however many it has, and more threads only cost each query their coordination
ROW_GROUP_ROWS = 122_880


def closed_instance(duckdb: Any, target: str, config: dict[str, Any], *, read_only: bool,
                    allowed_folder: str | None = None) -> Any:
    """A DuckDB connection with `config`, its temp directory unset and, after that, external access
    and the configuration lock as `config` says. Unset first, because DuckDB lets every file
    function read its temp directory even with external access off (`<file>.tmp/`, or `.tmp/` in
    the working directory for an in-memory instance), and once access is off the temp directory
    can no longer be changed: passed together in `config`, the lock comes first. `allowed_folder`:
    the one folder DuckDB may still read (`SharedDuckdb`).

    A file none of whose tables holds a whole row group (`ROW_GROUP_ROWS`: every Spider database,
    a warehouse of thousands of rows) gets one thread whatever `config` says: no scan of it can use
    two, and the second cost a small query ~20% of its time (the same results, in an order that no
    longer varies from run to run)."""
    late = ("enable_external_access", "lock_configuration")
    connection = duckdb.connect(target, read_only=read_only, config={k: v for k, v in config.items() if k not in late})
    try:
        (locked,) = connection.execute("SELECT current_setting('lock_configuration')").fetchone()
        if locked:  # DuckDB's instance of this file, open in this process already: closed before
            return connection
        if target != ":memory:" and config.get("threads", 1) != 1:
            (rows,) = connection.execute("SELECT coalesce(max(estimated_size), 0) FROM duckdb_tables()").fetchone()
            if rows < ROW_GROUP_ROWS:
                connection.execute("SET threads = 1")
        connection.execute("SET temp_directory = ''")  # nothing spills anyway: max_temp_directory_size is 0
        if allowed_folder is not None:
            connection.execute(f"SET allowed_directories = [{_quoted(allowed_folder + os.sep)}]")
        for key in late:
            if key in config:
                connection.execute(f"SET {key} = {'true' if config[key] else 'false'}")
    except BaseException:
        connection.close()
        raise
    return connection


class AttachedDuckdbSession(DuckdbSession):
    """A DuckDB file attached read-only to the child's one shared instance (`SharedDuckdb`),
    queried through a connection of its own whose default database it is: about a millisecond to
    open and close, where an instance of its own costs 15-20 ms. For the many short-lived
    databases a case is judged on (neighbours, a counterexample's attempts)."""

    def __init__(self, shared: SharedDuckdb, path: str, config: dict[str, Any],
                 rows: RowIds | None = None) -> None:
        self._shared = shared
        self._alias = ""
        self._rows = rows
        super().__init__(path, config)

    def _connect(self, path: str, config: dict[str, Any]) -> Any:
        if self._rows is None and not self._shared.can_attach(path):
            return super()._connect(path, config)  # an instance of its own, as the case's database has
        connection, self._alias = self._shared.attach(path, config, self._rows)
        return connection

    def close(self) -> None:
        super().close()
        if self._alias:
            self._shared.release(self._alias)


class SharedDuckdb:
    """The child's one DuckDB instance for attached databases, as closed to the outside as an
    instance of its own (`duckdb.READ_ONLY_CONFIG`): no file access, configuration locked.

    DuckDB attaches nothing once external access is off, except from `allowed_directories`, so
    that is set to a private empty folder (`mkdtemp`, mode 0700) before access is switched off
    and the configuration locked. To attach a file, a hard link to it (a copy where the file is on
    another file system) is put in the folder, attached read-only, and removed at once: while a
    query runs the folder is empty, so no function can read any file through it (DuckDB resolves
    symbolic links, and `..`, before it checks a path). Untrusted SQL can attach nothing itself:
    only a SELECT statement runs (`DuckdbSession._start`). A query can name another database
    attached to the instance (by its alias): those are the run's own neighbours, judged meanwhile
    or kept attached to copy rows from (`_source`).

    A file is opened in an instance of its own instead (`can_attach`) when a write-ahead log lies
    beside it (the link would leave it out, and the data read would be old), or when it is on
    another file system than the folder and larger than `COPY_BYTES` (a copy per open)."""

    COPY_BYTES = 16 * 1024 * 1024
    KEPT_SOURCES = 4  # files no session holds that stay attached (`_source`)

    def __init__(self, config: dict[str, Any]) -> None:
        import tempfile

        duckdb = _import_duckdb()
        self.config = dict(config)
        if self.config.get("enable_external_access", True) or not self.config.get("lock_configuration"):
            raise Refusal("query", "a shared DuckDB instance must be closed to files and locked")
        self._folder = tempfile.mkdtemp(prefix=f"{ATTACH_FOLDER_PREFIX}{os.getpid()}-")
        self._device = os.stat(self._folder).st_dev
        self._conn = closed_instance(duckdb, ":memory:", self.config, read_only=False, allowed_folder=self._folder)
        self._names = 0
        self._sources: dict[tuple[Any, ...], list[Any]] = {}  # (path, device, inode, size, time) -> [alias, sessions]

    def can_attach(self, path: str) -> bool:
        try:
            info = os.stat(path)
        except OSError:
            return True  # attaching says why
        if os.path.exists(path + ".wal"):
            return False
        return info.st_dev == self._device or info.st_size <= self.COPY_BYTES

    def attach(self, path: str, config: dict[str, Any],
               rows: RowIds | None = None) -> tuple[Any, str]:
        """(a connection whose default database is `path`, attached read-only; its alias). With
        `rows`, (table, the rowids kept) for every table (`base.RowIds`), the default database is
        a copy in memory of those rows of those tables (each table as `CREATE TABLE AS` makes it:
        the columns and types, in rowid order), taken from the file attached once for all the
        copies of it (`_source`): a shrink's attempt, made here in about a millisecond per table
        where writing a DuckDB file of it takes ten."""
        if dict(config) != self.config:
            raise Refusal("query", "a shared DuckDB instance serves one configuration")
        if os.path.exists(path + ".wal"):
            raise Refusal("missing", f"cannot copy rows of DuckDB database {path}: it has a write-ahead log beside it")
        duckdb = _import_duckdb()
        alias = self._source(path, use=True) if rows is None else self._copy_rows(path, self._source(path), rows)
        connection = self._conn.cursor()
        try:
            connection.execute(f"USE {alias}")
        except duckdb.Error as error:
            connection.close()
            self.release(alias)
            raise Refusal("missing", f"cannot open DuckDB database {path}: {_message(error)}") from None
        return connection, alias

    def release(self, alias: str) -> None:
        """A session of `alias` has closed: a copy of rows is detached; a file stays attached for
        the next session or copy (`_source`) until it is among the oldest unused ones."""
        for entry in self._sources.values():
            if entry[0] == alias:
                entry[1] -= 1
                self._evict()
                return
        self.detach(alias)

    def _attach_file(self, path: str) -> str:
        duckdb = _import_duckdb()
        self._names += 1
        alias = f"nl2sql_{self._names}"
        link = os.path.join(self._folder, f"{alias}.duckdb")
        try:
            try:
                os.link(path, link)
            except OSError:
                import shutil

                shutil.copyfile(path, link)
            self._conn.execute(f"ATTACH {_quoted(link)} AS {alias} (TYPE duckdb, READ_ONLY)")
        except (OSError, duckdb.Error) as error:
            raise Refusal("missing", f"cannot open DuckDB database {path}: {_message(error)}") from None
        finally:  # the folder is empty again, whatever failed (a copy cut short by a full disk too)
            try:
                os.unlink(link)
            except FileNotFoundError:
                pass
        return alias

    def _source(self, path: str, *, use: bool = False) -> str:
        """The alias of `path` attached read-only, kept attached for the next sessions and copies
        of rows (a shrink copies from one neighbour hundreds of times, just after it was judged),
        each file known by its inode, size and time (a file replaced at its path is attached anew).
        `use`: for a session, which holds it until `release`. Of the files no session holds, the
        `KEPT_SOURCES` used last stay attached."""
        try:
            info = os.stat(path)
        except OSError as error:
            raise Refusal("missing", f"cannot open DuckDB database {path}: {error}") from None
        key = (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        entry = self._sources.pop(key, None) or [self._attach_file(path), 0]
        self._sources[key] = entry  # the most recent last
        entry[1] += use
        self._evict()
        return entry[0]

    def _evict(self) -> None:
        idle = [key for key, (_, sessions) in self._sources.items() if not sessions]
        for key in idle[:max(0, len(idle) - self.KEPT_SOURCES)]:
            self.detach(self._sources.pop(key)[0])

    def _copy_rows(self, path: str, source: str, rows: RowIds) -> str:
        """A new in-memory database holding the rows `rows` names of `source`'s tables. A table's
        rows are scanned and inserted in rowid order (DuckDB keeps the order of a single table
        filtered by WHERE, and the insertion order: no sort, which costs half a millisecond a table);
        a table of no rows (one the queries do not read, once a shrink has emptied it) is made
        without a scan, in a third of the time."""
        duckdb = _import_duckdb()
        self._names += 1
        alias = f"nl2sql_{self._names}"
        try:
            self._conn.execute(f"ATTACH ':memory:' AS {alias}")
            for table, rowids in rows:
                name = '"' + table.replace('"', '""') + '"'
                copy = f"CREATE TABLE {alias}.main.{name} AS SELECT * FROM {source}.main.{name}"
                if rowids:
                    self._conn.execute(copy + " WHERE list_contains(?::BIGINT[], rowid)", [list(rowids)])
                else:
                    self._conn.execute(copy + " LIMIT 0")
        except BaseException as error:
            self.detach(alias)
            if isinstance(error, duckdb.Error):
                raise Refusal("missing", f"cannot copy rows of DuckDB database {path}: {_message(error)}") from None
            raise
        return alias

    def detach(self, alias: str) -> None:
        """Detach a database whose connection is closed (DuckDB detaches no connection's
        default database)."""
        try:
            self._conn.execute(f"DETACH DATABASE IF EXISTS {alias}")
        except Exception:  # noqa: BLE001 - an alias left attached costs memory only
            pass

    def close(self) -> None:
        import shutil

        self._conn.close()
        shutil.rmtree(self._folder, ignore_errors=True)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _message(error: BaseException) -> str:
    return str(error).strip()


_ADDRESS_SPACE = 0  # this process's cap (set by serve)


def _address_space_text() -> str:
    return f"{_ADDRESS_SPACE >> 20} MiB of address space" if _ADDRESS_SPACE else "uncapped"


def _import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise Refusal("missing", "DuckDB databases need the duckdb package") from None
    return duckdb


_PLAIN_TYPES = frozenset({int, float, str, bytes, type(None)})


def _plain_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """`base.plain_row`, imported only for a row that needs it (it costs sqlglot's import)."""
    for value in row:
        if type(value) not in _PLAIN_TYPES:
            return _base().plain_row(row)
    return row


_BASE: Any = None


def _base() -> Any:
    """`engines/base.py`, loaded by file name: importing the package would import all of it."""
    global _BASE
    if _BASE is None:
        if __name__ == "__main__":
            import importlib.util

            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "base.py")
            spec = importlib.util.spec_from_file_location("_nl2sql_engine_base", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # dataclasses look their module up
            spec.loader.exec_module(module)
            _BASE = module
        else:  # imported in-process (benchmarks, tests)
            from pytest_nl2sql.engines import base

            _BASE = base
    return _BASE


# -- the server -----------------------------------------------------------------------------------

OPENERS: dict[str, Callable[..., Session]] = {"sqlite": SqliteSession, "duckdb": DuckdbSession}
"""Openers of a database of its own; "duckdb_attached" opens a DuckDB file in the child's shared
instance (`Server.open`)."""


def read_message(read: Callable[[int], bytes]) -> Any:
    """One message; EOFError at the end of the stream."""
    header = _read_exact(read, HEADER.size)
    (length,) = HEADER.unpack(header)
    return marshal.loads(_read_exact(read, length))


def _read_exact(read: Callable[[int], bytes], size: int) -> bytes:
    data = read(size)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        if not data:
            raise EOFError
        data = read(size - got)
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def encode(message: Any) -> bytes:
    data = marshal.dumps(message, MARSHAL_VERSION)
    return HEADER.pack(len(data)) + data


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Server:
    """The child's state: its open sessions by handle."""

    def __init__(self, address_space: int) -> None:
        self.sessions: dict[int, Session] = {}
        self.address_space = address_space
        self._shared_duckdb: SharedDuckdb | None = None

    def open(self, kind: str, args: tuple[Any, ...]) -> Session:
        if kind == "duckdb_attached":  # (path, config[, rows])
            if self._shared_duckdb is None:
                self._shared_duckdb = SharedDuckdb(args[1])
            return AttachedDuckdbSession(self._shared_duckdb, *args)
        return OPENERS[kind](*args)

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        if self._shared_duckdb is not None:
            self._shared_duckdb.close()

    def handle(self, message: tuple[Any, ...]) -> Any:
        op = message[0]
        if op == "run":
            _, handle, sql, timeout, stated_timeout, max_rows, max_value_bytes = message
            return self.sessions[handle].run(sql, timeout, stated_timeout, max_rows, max_value_bytes)
        if op == "more":
            return self.sessions[message[1]].more(*message[2:3])
        if op == "stop":
            self.sessions[message[1]].stop()
            return None
        if op == "read":
            _, handle, sql, params = message
            return self.sessions[handle].read(sql, params)
        if op == "open":
            _, handle, kind, args = message
            old = self.sessions.pop(handle, None)
            if old is not None:
                old.close()
            self.sessions[handle] = self.open(kind, args)
            return None
        if op in ("close", "forget"):
            session = self.sessions.pop(message[1], None)
            if session is not None:
                session.close()
            return None
        if op == "info":
            probe = sqlite3.connect(":memory:")
            try:
                (heap,) = probe.execute("PRAGMA hard_heap_limit").fetchone()
            finally:
                probe.close()
            return {"pid": os.getpid(), "heap_limit": heap, "address_space": self.address_space}
        raise Refusal("query", f"unknown request {op!r}")

    def reply(self, message: tuple[Any, ...]) -> bytes:
        try:
            return encode(("ok", self.handle(message)))
        except Refusal as refusal:
            return encode(("err", refusal.kind, refusal.message))
        except MemoryError:
            return encode(("err", "memory", "the query needed more memory than the worker may use"))
        except Exception as error:  # noqa: BLE001 - a bug here must not end the process silently
            return encode(("err", "query", f"{type(error).__name__}: {error}"))


def _cap_address_space(limit: int) -> None:
    if limit <= 0:
        return
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, ValueError, OSError):  # not on this platform: the parent still kills
        pass


def _leave_with_parent() -> None:
    """A daemon thread that ends the process once its parent is gone (mid-query, when no EOF
    on stdin would be read)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="nl2sql-parent-watch", daemon=True).start()


def serve(kind: str, address_space: int) -> None:
    """Answer requests on stdin until it closes. stdout is kept for replies only: file
    descriptor 1 is pointed at stderr, so that nothing a library prints can corrupt them.
    (`kind` only names the process in `ps`: one child opens whatever it is asked to.)"""
    global _ADDRESS_SPACE
    requests = os.fdopen(os.dup(0), "rb", buffering=1 << 16)  # a request in one read()
    replies = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    _ADDRESS_SPACE = address_space
    _cap_address_space(address_space)
    _leave_with_parent()
    server = Server(address_space)
    read = requests.read
    while True:
        try:
            message = read_message(read)
        except EOFError:
            break
        reply = server.reply(message)
        if message[0] == "forget":
            continue
        try:
            write_all(replies, reply)
        except BrokenPipeError:
            break
    server.close()


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
    # Skip the interpreter's finalization: nothing is left to flush (the connections are closed,
    # replies written), and DuckDB's bindings report "leaked" objects on stderr during it.
    os._exit(0)
