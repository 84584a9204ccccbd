"""Malloy to SQL: one long-lived Node child per `MalloyCompiler`, fed the schema the plugin read.

Starting Node and loading the compiler takes 1.5-2 s; a compile then takes milliseconds. So the
child is started on the first `compile()`, serves every later one (JSON lines over its stdin and
stdout, `node/compile.mjs`), is started again if it dies, and ends with `close()`. Calls are
serialised by a lock: one child, one request at a time.

Node never opens the database. The request carries the tables (`copydb.model.Table`, as
`copydb/sources.py` reads them for every engine: value-based types for SQLite) as Malloy field
types, once per schema and child; the child answers Malloy's schema requests from them under any
connection name, so a model's `duckdb.table('singer')` means the case's `singer` whatever the
engine. A model is compiled once per (schema, dialect, text) and kept (32 at most).

The query is a model's answer, so the child is bounded as a query is: a source over
`SOURCE_LIMIT` bytes is refused unsent; the child's V8 heap is `memory_mb` (`--max-old-space-size`)
and, on Linux, all it writes to memory `memory_mb + NATIVE_MB` (RLIMIT_DATA: V8 reserves far more
address space than it uses, so RLIMIT_AS would stop it starting, not bound it); a compile may take
`timeout` seconds (the case's `--nl2sql-timeout`) before the child is killed (`MalloyTimeout`);
the compiled SQL may have `max_sql_chars`. The child dies with the process that started it
(Linux's parent-death signal, set before Node runs; and it exits when its input closes).

A child that stops while compiling is judged by what can be seen of its end. Out of memory (V8
says so on stderr and aborts): the query's fault, a `MalloyCompileError`, once a fresh child has
run out too (the one that failed may have held other compiles' models). Anything else (killed by
a signal from outside, an exit nobody asked for): tried again in a fresh child, and a second
death is `MalloyCrashed`, which blames neither the query nor the install.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pytest_nl2sql.copydb.model import ColumnType, Kind, Table
from pytest_nl2sql.engines.base import Limits
from pytest_nl2sql.malloy.home import SERVER, MalloyUnavailable, compiler_home, pinned_version, require_compiler
from pytest_nl2sql.malloy.model import generated_model
from pytest_nl2sql.malloy.names import malloy_dialect, sql_dialect

START_TIMEOUT = 60.0  # seconds for the child to load the compiler (1.5-2 s on a quiet machine)
SOURCE_LIMIT = 256 * 1024  # bytes (UTF-8) of one Malloy query; a longer one is refused unsent
MEMORY_MB = 512  # the child's V8 heap; a compile of a Spider query needs 30-60 MB, loading Malloy ~20
NATIVE_MB = 512  # what the child may write to memory besides the heap (Node, buffers, code, young objects)
_OOM_SAID = ("out of memory", "allocation failed", "bad_alloc", "cannot allocate memory")  # V8's and Node's words
_MISSING_SAID = ("cannot find module", "err_module_not_found")  # Node's, when a file of the install is gone
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
SCHEMAS_KEPT = 256  # schemas (and generated models) a compiler remembers before it forgets them all


@dataclass(frozen=True)
class Compiled:
    """A Malloy query's SQL, and the sqlglot dialect it is written in: the engine's own, except
    on SQLite, which Malloy has no dialect for (`duckdb`: run it on a DuckDB copy, or transpile)."""

    sql: str
    dialect: str


@dataclass(frozen=True)
class MalloyCompileError(Exception):
    """Malloy refused the query: its own message, and the 1-based line it points at, in the query
    text, or in the model's when `in_model` (a model with an error fails every query)."""

    message: str
    line: int | None = None
    in_model: bool = False

    def __post_init__(self) -> None:
        Exception.__init__(self, self.message, self.line, self.in_model)

    def __str__(self) -> str:
        where = "model " if self.in_model else ""
        return f"{where}line {self.line}: {self.message}" if self.line is not None else f"{where}{self.message}".strip()

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.line, self.in_model))


_TYPES: dict[Kind, dict[str, str]] = {
    Kind.INTEGER: {"type": "number", "numberType": "integer"},
    Kind.REAL: {"type": "number", "numberType": "float"},
    Kind.DECIMAL: {"type": "number"},
    Kind.TEXT: {"type": "string"},
    Kind.BOOLEAN: {"type": "boolean"},
    Kind.DATE: {"type": "date"},
    Kind.TIMESTAMP: {"type": "timestamp"},
    Kind.TIMESTAMPTZ: {"type": "timestamptz"},
    Kind.TIME: {"type": "sql native", "rawType": "TIME"},
    Kind.BLOB: {"type": "sql native", "rawType": "BLOB"},
}


def malloy_type(column_type: ColumnType) -> dict[str, str]:
    return _TYPES[column_type.kind]


def schema_json(tables: Sequence[Table]) -> list[dict[str, Any]]:
    """The tables as the child reads them: names and Malloy field types."""
    return [{"name": t.name, "columns": [{"name": c.name, **malloy_type(c.type)} for c in t.columns]} for t in tables]


@dataclass(frozen=True)
class MalloyTimeout(MalloyCompileError):
    """The compile outlived its time limit and the child was killed: `pred_timeout`, as a query
    that outlives its limit."""


class MalloyCrashed(MalloyUnavailable):
    """The compiler died twice on a query, and not by running out of memory (a kill from outside,
    an exit of its own): neither the query's fault nor a sign that the install is broken."""


@dataclass(frozen=True)
class _Death:
    """How a child ended, as far as can be seen from outside."""

    returncode: int | None  # None: still running but answering out of step (it was killed)
    said: str  # what it wrote on stderr since the request began (the first 64 KB)

    @property
    def out_of_memory(self) -> bool:
        """V8 and Node say so on stderr and abort; a kill from outside says nothing."""
        return self.returncode == -signal.SIGABRT and any(word in self.said.lower() for word in _OOM_SAID)

    @property
    def signalled(self) -> bool:
        return self.returncode is not None and self.returncode < 0

    @property
    def missing_files(self) -> bool:
        return any(word in self.said.lower() for word in _MISSING_SAID)

    def last_words(self) -> str:
        """The line that says what happened, shortened: V8's "FATAL ERROR: …" when there is one,
        else the last line that is not a stack frame or one of V8's section headings."""
        lines = [line.strip() for line in self.said.splitlines() if line.strip()]
        fatal = [line for line in lines if line.startswith(("FATAL ERROR", "Fatal", "terminate called"))]
        plain = [line for line in lines if not line.startswith(("<---", "-----", "at ", "Node.js v"))
                 and not line.split(":", 1)[0].strip().isdigit() and not line.startswith("[")]
        chosen = fatal or plain or lines
        return chosen[0 if fatal else -1][:300] if chosen else ""

    def said_with(self) -> str:
        """The death, and its last words when there are any."""
        said = self.last_words()
        return f"{self}: {said}" if said else str(self)

    def __str__(self) -> str:
        if self.returncode is None:
            return "answered out of step"
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                return f"killed by signal {-self.returncode}"
            return f"killed by signal {-self.returncode} ({name})"
        return f"exited with status {self.returncode}"


def _two_deaths(first: _Death, second: _Death) -> str:
    """Both deaths in a few words, and the last thing the child said."""
    both = f"{first}, twice" if str(first) == str(second) else f"{first}, then {second}"
    said = second.last_words() or first.last_words()
    return f"{both}: {said}" if said else both


def _confinement(data_mb: int) -> Callable[[], None] | None:
    """What a child does between fork and exec on Linux: ask for SIGKILL when the thread that
    started it ends (the process killed, even by SIGKILL), and write at most `data_mb` to memory.
    Everything it calls is looked up before the fork."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import resource

    try:
        prctl: Any = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        prctl = None
    parent = os.getpid()
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = data_mb * 2**20 if hard == resource.RLIM_INFINITY else min(data_mb * 2**20, hard)
    setrlimit, data, getppid, leave = resource.setrlimit, resource.RLIMIT_DATA, os.getppid, os._exit

    def confine() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if getppid() != parent:  # it died before the request took: no signal will come
                leave(1)
        try:
            setrlimit(data, (limit, limit))
        except (OSError, ValueError):
            pass  # a tighter limit was already set: it holds

    return confine


class _Spawner:
    """Starts children from a thread of its own that lives until `close()`: Linux sends the
    parent-death signal when the thread that forked the child ends, not its process, and the
    thread that asks for a compile may be a short-lived one (a pool's)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[list[str], dict[str, Any], Future[subprocess.Popen[bytes]]] | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def popen(self, args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._serve, name="malloy-compiler-spawner", daemon=True)
            self._thread.start()
        started: Future[subprocess.Popen[bytes]] = Future()
        self._jobs.put((args, kwargs, started))
        return started.result()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            args, kwargs, started = job
            try:
                started.set_result(subprocess.Popen(args, **kwargs))
            except BaseException as error:  # given to the caller
                started.set_exception(error)

    def close(self) -> None:
        """End the thread (its children must have ended: they die with it)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None


class _Stopped(Exception):
    """The child ended (`ended`: its output closed) or answered out of step while a request was in flight."""

    def __init__(self, ended: bool = True) -> None:
        super().__init__(ended)
        self.ended = ended


class _Child:
    """One Node process: requests written to its stdin, its lines read by a thread."""

    def __init__(self, node: str, home: Path, memory_mb: int, spawner: _Spawner) -> None:
        self.stderr: IO[bytes] = tempfile.TemporaryFile()
        self.process = spawner.popen([node, f"--max-old-space-size={memory_mb}", str(SERVER), str(home)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, cwd=home,
                                     preexec_fn=_confinement(memory_mb + NATIVE_MB))
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, name=f"malloy-compiler-{self.process.pid}", daemon=True).start()
        self.sent: set[str] = set()  # schema keys this child holds
        self.served = 0  # queries compiled (or refused) so far
        self.mark = 0  # where on stderr the request in hand began

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            for line in stdout:
                self.lines.put(line)
        finally:
            self.lines.put(b"")  # end of output: the child stopped
            stdout.close()

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.mark = os.fstat(self.stderr.fileno()).st_size
        except (OSError, ValueError):
            self.mark = 0
        try:
            self.process.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise _Stopped() from None
        try:
            line = self.lines.get(timeout=min(timeout, threading.TIMEOUT_MAX))  # `--nl2sql-timeout=inf` waits
        except queue.Empty:
            raise TimeoutError from None
        if not line:
            raise _Stopped()
        try:
            answer = json.loads(line)
        except ValueError:
            raise _Stopped(ended=False) from None
        if not isinstance(answer, dict) or answer.get("id") != message["id"]:
            raise _Stopped(ended=False)  # out of step: start afresh rather than pair answers with the wrong queries
        return answer

    def death(self, stopped: _Stopped) -> _Death:
        """How the child ended (`stopped` in a request): its exit status once it has exited (a
        child that closed its output is exiting), and what it said on stderr since the request."""
        returncode: int | None = None
        if stopped.ended:
            try:
                returncode = self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        if returncode is None:
            self.process.kill()
            self.process.wait()
        try:
            self.stderr.seek(self.mark)
            said = self.stderr.read(64 * 1024).decode("utf-8", "replace")
        except (OSError, ValueError):
            said = ""
        return _Death(returncode, said)

    def stop(self, kill: bool = False) -> None:
        """End the child: at the end of its input (once it is between requests), or at once."""
        if kill:
            self.process.kill()
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass  # it had gone: the unwritten rest of a request is lost with it
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


class MalloyCompiler:
    """Compiles Malloy queries to SQL for a case's engine, with one Node child (see the module)."""

    def __init__(self, home: Path | None = None, *, timeout: float = 60.0, memory_mb: int = MEMORY_MB) -> None:
        self.home = home  # None: `home.compiler_home()`, looked up when the child starts
        self.timeout = timeout  # seconds one compile may take before the child is ended (`compile(timeout=)`)
        self.memory_mb = memory_mb  # the child's V8 heap, in MB
        self.starts = 0  # children started so far (one per process, unless one died)
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._spawner = _Spawner()
        self._next_id = 1
        self._schemas: dict[tuple[Table, ...], tuple[str, list[dict[str, Any]]]] = {}
        self._models: dict[tuple[str, str], str] = {}

    @property
    def pid(self) -> int | None:
        """The running child's process id (None before the first compile and after `close()`)."""
        child = self._child
        return child.process.pid if child is not None and child.process.poll() is None else None

    def compile(self, query: str, *, tables: Sequence[Table], dialect: str, model: str | None = None,
                timeout: float | None = None, max_sql_chars: int = Limits.max_sql_chars) -> Compiled:
        """`query` (Malloy) as SQL for the engine whose sqlglot name is `dialect`, against `model`
        (Malloy text; None: `generated_model(tables, dialect)`), within `timeout` seconds (None:
        `self.timeout`). `MalloyCompileError` when Malloy refuses it, the source is over
        `SOURCE_LIMIT` bytes, its SQL over `max_sql_chars` or the compile over the child's memory;
        `MalloyTimeout` past the time limit; `MalloyUnavailable` when Node or the compiler is
        missing, `MalloyCrashed` when the compiler died twice of something else."""
        size = len(query.encode("utf-8", "surrogatepass"))
        if size > SOURCE_LIMIT:
            raise MalloyCompileError(f"source too large ({size:,} bytes; limit {SOURCE_LIMIT:,} bytes)")
        target = malloy_dialect(dialect)
        limit = self.timeout if timeout is None else timeout
        key, described = self._schema(tables)
        if model is None:
            model = self._generated(key, tables, dialect)
        with self._lock:
            first: _Death | None = None
            while True:
                child = self._running()
                fresh = child.served == 0
                message = {"id": self._next_id, "query": query, "model": model, "dialect": target, "schema": key,
                           "max_sql": max_sql_chars}
                self._next_id += 1
                if key not in child.sent:
                    message["tables"] = described
                try:
                    answer = child.request(message, limit)
                except TimeoutError:
                    self._end(kill=True)
                    raise MalloyTimeout(f"the Malloy compiler took more than {limit:g} s on this query and was stopped") from None
                except _Stopped as stopped:
                    death = child.death(stopped)
                    self._end(kill=True)
                    if death.out_of_memory and fresh:
                        raise MalloyCompileError(f"the Malloy compiler ran out of memory on this query (limit {self.memory_mb} MB"
                                                 f" of heap; {death.last_words()})") from None
                    if first is not None:
                        raise MalloyCrashed(f"the Malloy compiler died twice while compiling this query ({_two_deaths(first, death)});"
                                            " not the prediction's fault") from None
                    first = death
                    continue
                child.sent.add(key)
                child.served += 1
                error = answer.get("error")
                if error is not None:
                    raise MalloyCompileError(str(error.get("message") or "unknown error"), error.get("line"), error.get("in") == "model")
                return Compiled(answer["sql"], sql_dialect(dialect))

    def close(self) -> None:
        """End the child (a later `compile()` starts another)."""
        with self._lock:
            self._end()
            self._spawner.close()

    def __enter__(self) -> MalloyCompiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------------

    def _schema(self, tables: Sequence[Table]) -> tuple[str, list[dict[str, Any]]]:
        """A key naming the schema's content, and the schema as the child reads it."""
        known = tuple(tables)
        found = self._schemas.get(known)
        if found is None:
            if len(self._schemas) >= SCHEMAS_KEPT:  # a shared compiler outlives runs: bounded
                self._schemas.clear()
                self._models.clear()
            described = schema_json(known)
            key = hashlib.sha256(json.dumps(described, sort_keys=True).encode("utf-8")).hexdigest()[:20]
            found = self._schemas[known] = (key, described)
        return found

    def _generated(self, key: str, tables: Sequence[Table], dialect: str) -> str:
        text = self._models.get((key, dialect))
        if text is None:
            text = self._models[(key, dialect)] = generated_model(tables, dialect)
        return text

    def _running(self) -> _Child:
        """The child, started if there is none. A start that a signal ended is tried once more;
        only files missing from the home send the user to `nl2sql malloy-setup`."""
        if self._child is not None and self._child.process.poll() is None:
            return self._child
        self._end()
        node, home = require_compiler(self.home)
        first: _Death | None = None
        while True:
            child = _Child(node, home, self.memory_mb, self._spawner)
            self.starts += 1
            try:
                answer = child.request({"id": 0, "hello": True}, START_TIMEOUT)
            except TimeoutError:
                child.stop(kill=True)
                raise MalloyUnavailable(f"the Malloy compiler in {home} did not start within {START_TIMEOUT:g} s") from None
            except _Stopped as stopped:
                death = child.death(stopped)
                child.stop(kill=True)
                if death.missing_files or not (home / "node_modules" / "@malloydata" / "malloy" / "package.json").is_file():
                    raise MalloyUnavailable(f"the Malloy compiler in {home} did not start ({death.said_with()}):"
                                            " files of it are missing; run `nl2sql malloy-setup` again") from None
                if death.signalled and first is None:
                    first = death
                    continue
                raise MalloyUnavailable(f"the Malloy compiler in {home} did not start ({_two_deaths(first, death) if first else death.said_with()})") from None
            if answer.get("version") != pinned_version():
                child.stop()
                raise MalloyUnavailable(f"the Malloy compiler in {home} is {answer.get('version')}, not {pinned_version()}: "
                                        "run `nl2sql malloy-setup`")
            self._child = child
            return child

    def _end(self, kill: bool = False) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.stop(kill)


_SHARED: dict[tuple[Path, str | None], MalloyCompiler] = {}
_SHARED_LOCK = threading.Lock()


def shared_compiler() -> MalloyCompiler:
    """This process's compiler for the compiler home and `node` it would start now, kept for every
    later run of the process (an in-process pytest session after another, `api.evaluate_suite` in a
    loop): starting Node and loading Malloy costs 1.5-2 s of wall time and ~0.5 s of CPU, which
    each run paid again. Its child ends with the process (its input closes; the parent-death
    signal), or is replaced when it dies or overruns a compile, as any compiler's is; nothing of a
    run is kept in it but schemas and models, looked up by their content."""
    key = (compiler_home(), shutil.which("node"))
    with _SHARED_LOCK:
        compiler = _SHARED.get(key)
        if compiler is None:
            compiler = _SHARED[key] = MalloyCompiler()
        return compiler

