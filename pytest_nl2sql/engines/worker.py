"""A persistent child process that runs untrusted SQL for an engine, killed when it overruns.

Inside one process nothing can stop a query that holds the CPU in a single step of the database
(SQLite's `printf('%.*c', 2147483647, 'x')` ~10 s, `instr()` of two long strings for hours), nor
return the memory DuckDB takes for one vector of huge strings. So the SQLite and DuckDB engines run
their queries in a `Worker`: a child process (`worker_child.py`) that holds the connections,
answers one request at a time over a pipe, and has its address space capped (`RLIMIT_AS`).

* Time: the child stops a query at its deadline by itself (SQLite's progress handler, DuckDB's
  `interrupt()`), which covers nearly every query. If no answer has come `GRACE_SECONDS` after
  the deadline, the parent kills the child and reports `QueryTimeout`; the next request starts a
  new child, which re-opens the engines' databases. The wall time of a query is so bounded by
  `timeout + GRACE_SECONDS` (plus moving its rows), whatever the query does.
* Memory: a query that needs more than the child may have fails there (SQLite's heap ceiling,
  `MemoryError`, DuckDB's out-of-memory error) and is reported as `TooManyRows`, its message
  naming the memory; the child is then replaced, since its heap may stay reserved. Rows come
  back in bounded batches and the parent counts them with `SizeBudget` as they arrive, saying
  `stop` once a cap is passed, so the parent holds at most the capped result plus one batch.
  A result of more than `Limits.memory_rows` rows is `ResultTooLarge`: the caller reads it as a
  stream instead (`stream`), one batch at a time.
* A child that dies during a request by a crash signal (SIGSEGV, SIGABRT...) crashed on the query:
  `QueryError`. One that ends otherwise (killed from outside, the OOM killer) is `ConnectionLost`,
  which the pipeline retries once.

The process is persistent: one request costs a round trip over a pipe (tens of microseconds,
mostly the two processes waking each other; see `SPIN_SECONDS`), not a process start (~20 ms).
SQLite engines share one worker per process (`shared_worker`), since a SQLite connection is cheap
and the cap on the child covers all of them; a DuckDB worker holds a few engines' instances
(`duckdb._WorkerPool`), since a DuckDB instance reserves much address space of its own.
Requests are serialised by a lock. The worker serves one query at a time: an open stream (`stream`) holds the lock until it is closed, so
another thread's request waits for it, and a request from the thread that holds the stream is a
RuntimeError (it would wait for itself): consume or close a stream before the next query. Messages are
`marshal` dumps of plain values (see `worker_child.py`). A worker inherited through `fork` is left
to the process that started it; the forked process starts its own. At interpreter exit every
worker is shut down; a child also ends by itself when its parent is gone. POSIX only (`poll`).
"""

from __future__ import annotations

import atexit
import marshal
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.base import (
    BatchStream,
    ConnectionLost,
    DatabaseMissing,
    EngineError,
    Limits,
    QueryError,
    QueryResult,
    QueryTimeout,
    ResultTooLarge,
    SizeBudget,
    TooManyRows,
)
from pytest_nl2sql.engines.worker_child import ATTACH_FOLDER_PREFIX, HEADER, encode, timeout_message, write_all

CHILD_SCRIPT = Path(__file__).with_name("worker_child.py")

GRACE_SECONDS = 0.25  # after the deadline, how long the child has to stop the query itself
SETUP_SECONDS = 60.0  # starting the child and opening a database; our own schema queries

# How long the parent yields its CPU (sched_yield) before it sleeps on the pipe. A request wakes
# the child and its answer wakes the parent; waking a CPU that went idle costs tens of
# microseconds (far more in a virtual machine) -- as much as a whole Spider query. Yielding keeps
# this CPU busy, and lets the child run on it at once when the scheduler put it here. Measured on
# a 2-vCPU VM, with the parent busy between queries as in a pytest run: 118 -> 88 us per query.
SPIN_SECONDS = 0.0002

REFUSAL_ERRORS: dict[str, type[EngineError]] = {  # how a refusal of the child is raised
    "query": QueryError,
    "timeout": QueryTimeout,
    "rows": TooManyRows,
    "missing": DatabaseMissing,
    "interrupted": ConnectionLost,  # a signal in the child (never sent there by us): not the query's fault
}

_CRASH_SIGNALS = frozenset(
    getattr(signal, name)
    for name in ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL")
    if hasattr(signal, name)
)

_READ_CHUNK = 1 << 16


def _remove_attach_folders(pid: int) -> None:
    """The empty folder a killed DuckDB child attached its files from (`worker_child.SharedDuckdb`,
    which removes it itself when it ends normally)."""
    import glob
    import tempfile

    for folder in glob.glob(os.path.join(tempfile.gettempdir(), f"{ATTACH_FOLDER_PREFIX}{pid}-*")):
        try:
            os.rmdir(folder)  # empty between attachments; a link being made when the child was killed stays
        except OSError:
            pass


class _Overdue(Exception):
    """No answer by the deadline (the child has been killed)."""


class _Gone(Exception):
    """The child's pipe closed during a request (it has been reaped)."""


class _OutOfMemory(TooManyRows):
    """The query needed more memory than the child may have (the child has been killed)."""


@dataclass(frozen=True)
class Answer:
    """A query's result, and what its engine may want to know to reuse it."""

    result: QueryResult
    deterministic: bool  # it called deterministic functions only (as far as the child knows)
    size: int  # the result's size as `SizeBudget` counts it


class Worker:
    """One child process of `kind` (`"sqlite"` or `"duckdb"`), started on first use and again
    after it was killed; databases are registered as handles and (re)opened in it as needed."""

    def __init__(
        self,
        kind: str,
        address_space: int,
        *,
        retry_memory_in_fresh: bool = False,
    ) -> None:
        self.kind = kind
        self.address_space = address_space
        # retry a query that ran out of memory once in a new child, unless it already ran in one
        self.retry_memory_in_fresh = retry_memory_in_fresh
        self.kills = 0  # children killed (overdue, out of memory): for tests and diagnostics
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0  # pid of the process that started the child
        self._rfd = self._wfd = -1
        self._poller: Any = None
        self._openers: dict[int, tuple[Any, ...]] = {}  # handle -> its "open" request
        self._opened: set[int] = set()  # handles open in the current child
        self._next_handle = 0
        self._served = 0  # queries run in the current child
        self._last_exit: int | None = None
        self._streaming: int | None = None  # the thread whose stream holds the worker
        _LIVE.add(self)

    # -- public ---------------------------------------------------------------------------------

    def add(self, kind: str, args: tuple[Any, ...]) -> int:
        """Register a database (`kind`: a `worker_child.OPENERS` key) and open it now, so that a
        missing or unreadable database fails here (`DatabaseMissing`); returns its handle."""
        self._check_not_streaming()
        with self._lock:
            handle = self._next_handle
            self._next_handle += 1
            self._openers[handle] = ("open", handle, kind, args)
            try:
                self._prepare(handle)
            except BaseException:
                del self._openers[handle]
                raise
            return handle

    def start(self) -> None:
        """Start the child now, without waiting for it: it boots on another core while the caller
        goes on, so the first query that needs it does not wait for an interpreter to start. A
        worker busy with a stream (its child is running) is left alone."""
        if self._lock.acquire(blocking=False):
            try:
                self._ensure()
            finally:
                self._lock.release()

    def remove(self, handle: int) -> None:
        """Forget a database and close its connection in the child, without waiting for it: the
        child closes it before the next request (`forget`: no reply), so the short-lived engines
        of neighbours and of a counterexample's attempts end without a round trip."""
        self._check_not_streaming()
        with self._lock:
            self._openers.pop(handle, None)
            if handle in self._opened and self._running():
                self._opened.discard(handle)
                try:
                    write_all(self._wfd, encode(("forget", handle)))
                except OSError:  # the child is gone: the next request starts another
                    self._reap()

    def query(self, handle: int, sql: str, limits: Limits) -> Answer:
        """Run untrusted SQL on the database `handle` within `limits`."""
        self._check_not_streaming()
        with self._lock:
            self._prepare(handle)  # (re)starting the child is not the query's time
            end = time.monotonic() + limits.timeout
            while True:
                fresh = self._served == 0
                try:
                    return self._run(handle, sql, limits, end)
                except _OutOfMemory as error:
                    # A child that ran other queries may have kept their memory: only a fresh
                    # one's failure is the query's own. The child is gone already; retry once,
                    # within what is left of the time limit.
                    if fresh or not self.retry_memory_in_fresh or time.monotonic() >= end:
                        raise TooManyRows(str(error)) from None
                    self._prepare(handle)

    def _run(self, handle: int, sql: str, limits: Limits, end: float) -> Answer:
        self._served += 1
        deadline = end + GRACE_SECONDS
        request = (
            "run", handle, sql, max(0.0, end - time.monotonic()), limits.timeout,
            limits.max_rows, limits.max_value_bytes,
        )  # fmt: skip
        try:
            columns, rows, done, deterministic = self._ask(request, deadline)
            budget = SizeBudget(limits, spill=True)
            kept: list[tuple[Any, ...]] = []
            while True:
                try:
                    budget.add_all(rows)
                except (TooManyRows, ResultTooLarge):
                    self._ask(("stop", handle), deadline)
                    raise
                kept.extend(rows)
                if done:
                    return Answer(QueryResult(tuple(columns), kept), deterministic, budget.bytes)
                rows, done = self._ask(("more", handle), deadline)
        except _Overdue:
            raise QueryTimeout(timeout_message(limits.timeout)) from None
        except _Gone:
            raise self._lost(during_query=True) from None

    @contextmanager
    def stream(self, handle: int, sql: str, limits: Limits) -> Iterator[BatchStream]:
        """Run untrusted SQL on the database `handle` and give its rows batch by batch; the
        worker is held (its lock) until the stream is closed. The time limit counts the child's
        time (each batch's round trip); the child re-sets its deadline to what is left at each
        batch, so the consumer's time between batches is not the query's."""
        self._check_not_streaming()
        with self._lock:
            self._streaming = threading.get_ident()
            try:
                self._prepare(handle)
                self._served += 1
                timeout = limits.timeout
                started = time.monotonic()
                request = (
                    "run", handle, sql, timeout, timeout, limits.max_rows, limits.max_value_bytes,
                )  # fmt: skip
                columns, rows, done, _ = self._stream_ask(request, started + timeout, timeout)

                def more(left: float) -> tuple[list[tuple[Any, ...]], bool]:
                    return self._stream_ask(("more", handle, left), time.monotonic() + left, timeout)

                def stop() -> None:
                    if self._running() and handle in self._opened:
                        try:
                            self._ask(("stop", handle), time.monotonic() + SETUP_SECONDS)
                        except (EngineError, _Overdue, _Gone):
                            pass

                result = BatchStream(
                    columns, rows, done, more, stop, limits, spent=time.monotonic() - started
                )
                try:
                    yield result
                finally:
                    result.close()
            finally:
                self._streaming = None

    def _stream_ask(self, message: tuple[Any, ...], end: float, timeout: float) -> Any:
        """One request of a stream, due by `end` (plus the grace), its failures as `EngineError`s."""
        try:
            return self._ask(message, end + GRACE_SECONDS)
        except _OutOfMemory as error:
            raise TooManyRows(str(error)) from None
        except _Overdue:
            raise QueryTimeout(timeout_message(timeout)) from None
        except _Gone:
            raise self._lost(during_query=True) from None

    def _check_not_streaming(self) -> None:
        if self._streaming == threading.get_ident():
            raise RuntimeError(
                f"the {self.kind} worker is held by a stream of this thread: close the stream"
                " before the next query"
            )

    def read(self, handle: int, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Our own (trusted) query on the database `handle`, every row."""
        self._check_not_streaming()
        with self._lock:
            self._prepare(handle)
            return self._setup_request(("read", handle, sql, params))

    def info(self) -> dict[str, Any]:
        """The child's pid, SQLite heap limit and address-space cap (starting it if needed)."""
        self._check_not_streaming()
        with self._lock:
            self._ensure()
            return self._setup_request(("info",))

    @property
    def pid(self) -> int | None:
        """The running child's pid, or None."""
        return self._proc.pid if self._running() else None

    def shutdown(self, lock_timeout: float = -1) -> None:
        """End the child: it exits when its stdin closes, and is killed if it has not within
        1 s, or at once when a query holds the worker past `lock_timeout` (at interpreter exit,
        a daemon thread may be in one)."""
        self._close_stdin(lock_timeout)
        self._reap_closed(lock_timeout)

    def _close_stdin(self, lock_timeout: float = -1) -> None:
        if not self._lock.acquire(timeout=lock_timeout):
            proc = self._proc
            if proc is not None and self._owner == os.getpid():
                proc.kill()
            return
        try:
            self._openers.clear()
            proc = self._proc
            if proc is not None and self._owner == os.getpid() and proc.stdin is not None:
                proc.stdin.close()
        finally:
            self._lock.release()

    def _reap_closed(self, lock_timeout: float = -1) -> None:
        if not self._lock.acquire(timeout=lock_timeout):
            return  # killed by _close_stdin; whoever holds the lock finds it dead
        try:
            proc = self._proc
            if proc is not None and self._owner == os.getpid():
                try:
                    proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self._forget()
        finally:
            self._lock.release()

    # -- the child process ----------------------------------------------------------------------

    def _running(self) -> bool:
        return (
            self._proc is not None and self._owner == os.getpid() and self._proc.poll() is None
        )

    def _ensure(self) -> None:
        if self._proc is not None:
            if self._owner == os.getpid() and self._proc.poll() is None:
                return
            self._forget()  # died while idle, or inherited through fork: start our own
        # -S: no site (the SQLite child needs only the standard library; DuckDB needs site-packages)
        flags = ["-S"] if self.kind == "sqlite" else []
        command = [sys.executable, *flags, str(CHILD_SCRIPT), self.kind, str(self.address_space)]
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
                process_group=0,  # Ctrl-C in a terminal is the parent's to handle, not the child's
            )
        except OSError as error:
            raise ConnectionLost(f"cannot start the {self.kind} worker process: {error}") from None
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._owner = os.getpid()
        self._served = 0
        self._wfd = proc.stdin.fileno()
        self._rfd = proc.stdout.fileno()
        self._poller = select.poll()
        self._poller.register(self._rfd, select.POLLIN | select.POLLHUP | select.POLLERR)

    def _forget(self) -> None:
        """Drop the child (already dead, killed, or not ours) and what was open in it."""
        proc, self._proc = self._proc, None
        self._opened.clear()
        self._poller = None
        self._rfd = self._wfd = -1
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
            if self.kind == "duckdb" and proc.returncode is not None:
                _remove_attach_folders(proc.pid)

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and self._owner == os.getpid():
            proc.kill()
            proc.wait()
            self.kills += 1
        self._forget()

    def _lost(self, *, during_query: bool) -> EngineError:
        """The error for a child that ended during a request."""
        code = self._last_exit
        if code is not None and code < 0:
            try:
                how = signal.Signals(-code).name
            except ValueError:
                how = f"signal {-code}"
        else:
            how = f"exit status {code}"
        if during_query and code is not None and -code in _CRASH_SIGNALS:
            return QueryError(f"the database engine crashed running the query ({how})")
        return ConnectionLost(f"the {self.kind} worker process ended ({how}); it is restarted")

    # -- requests -------------------------------------------------------------------------------

    def _prepare(self, handle: int) -> None:
        """A running child with `handle` open in it (on this thread's CPU, if it follows it)."""
        self._ensure()
        if handle not in self._opened:
            self._setup_request(self._openers[handle])
            self._opened.add(handle)

    def _setup_request(self, message: tuple[Any, ...]) -> Any:
        try:
            return self._ask(message, time.monotonic() + SETUP_SECONDS)
        except _Overdue:
            raise ConnectionLost(
                f"the {self.kind} worker process did not answer within {SETUP_SECONDS:g} s"
            ) from None
        except _Gone:
            raise self._lost(during_query=False) from None

    def _ask(self, message: tuple[Any, ...], deadline: float) -> Any:
        """Send one request and return its reply's payload, or raise the error it carries."""
        try:
            write_all(self._wfd, encode(message))
            reply = self._receive(deadline)
        except (BrokenPipeError, _Gone):
            self._reap()
            raise _Gone from None
        except BaseException:  # overdue, or interrupted (Ctrl-C): the exchange is out of step
            self._kill()
            raise
        if reply[0] == "ok":
            return reply[1]
        _, kind, text = reply
        if kind == "memory":
            self._kill()  # whatever the query reserved may stay reserved: start afresh
            raise _OutOfMemory(text)
        raise REFUSAL_ERRORS.get(kind, QueryError)(text)

    def _reap(self) -> None:
        proc = self._proc
        self._last_exit = None
        if proc is not None and self._owner == os.getpid():
            try:
                self._last_exit = proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                self._last_exit = proc.wait()
        self._forget()

    def _receive(self, deadline: float) -> Any:
        data = self._read_some(deadline, _READ_CHUNK)
        while len(data) < HEADER.size:
            data += self._read_some(deadline, _READ_CHUNK)
        (length,) = HEADER.unpack_from(data)
        end = HEADER.size + length
        if len(data) >= end:
            return marshal.loads(memoryview(data)[HEADER.size : end])
        buffer = bytearray(length)
        view = memoryview(buffer)
        got = len(data) - HEADER.size
        view[:got] = memoryview(data)[HEADER.size :]
        while got < length:
            self._wait(deadline)
            count = os.readv(self._rfd, [view[got:]])
            if not count:
                raise _Gone
            got += count
        return marshal.loads(buffer)

    def _read_some(self, deadline: float, size: int) -> bytes:
        self._wait(deadline)
        data = os.read(self._rfd, size)
        if not data:
            raise _Gone
        return data

    def _wait(self, deadline: float) -> None:
        """Return once the child's pipe is readable; `_Overdue` if not by `deadline`.

        For the first `SPIN_SECONDS` the thread yields its CPU instead of sleeping: a typical
        query answers within that, and the CPU neither idles nor needs waking for the answer
        (see `SPIN_SECONDS`)."""
        poll = self._poller.poll
        until = time.monotonic() + SPIN_SECONDS
        while not poll(0):
            now = time.monotonic()
            if now > until or now > deadline:
                break
            os.sched_yield()
        else:
            return
        remaining = deadline - time.monotonic()
        if not poll(max(0, math.ceil(remaining * 1000))):
            raise _Overdue

    def __repr__(self) -> str:
        return f"Worker({self.kind!r}, pid={self.pid})"


_LIVE: weakref.WeakSet[Worker] = weakref.WeakSet()
_SHARED: dict[str, Worker] = {}
_SHARED_LOCK = threading.Lock()


def shared_worker(kind: str, address_space: int, **options: Any) -> Worker:
    """The one worker of `kind` that this process's engines share (`options` as for `Worker`,
    applied when it is created)."""
    with _SHARED_LOCK:
        worker = _SHARED.get(kind)
        if worker is None:
            worker = _SHARED[kind] = Worker(kind, address_space, **options)
        return worker


def _after_fork_in_child() -> None:
    """A forked process starts its own children: the inherited ones (and any lock a thread of
    the parent held at the fork) are the parent's."""
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()
    for worker in list(_LIVE):
        worker._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _shutdown_all() -> None:
    """Close every worker's stdin first, so that they all exit at once, then reap them."""
    workers = list(_LIVE)
    for step in (Worker._close_stdin, Worker._reap_closed):
        for worker in workers:
            try:
                step(worker, 0.5)
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
