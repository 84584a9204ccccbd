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
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pytest_nl2sql.copydb.model import ColumnType, Kind, Table
from pytest_nl2sql.malloy.home import SERVER, MalloyUnavailable, pinned_version, require_compiler
from pytest_nl2sql.malloy.model import generated_model
from pytest_nl2sql.malloy.names import malloy_dialect, sql_dialect

START_TIMEOUT = 60.0  # seconds for the child to load the compiler (1.5-2 s on a quiet machine)


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


class _Stopped(Exception):
    """The child ended (or was never reachable) while a request was in flight."""


class _Child:
    """One Node process: requests written to its stdin, its lines read by a thread."""

    def __init__(self, node: str, home: Path) -> None:
        self.stderr: IO[bytes] = tempfile.TemporaryFile()
        self.process = subprocess.Popen([node, str(SERVER), str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, cwd=home)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, name=f"malloy-compiler-{self.process.pid}", daemon=True).start()
        self.sent: set[str] = set()  # schema keys this child holds

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
            self.process.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise _Stopped() from None
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if not line:
            raise _Stopped()
        try:
            answer = json.loads(line)
        except ValueError:
            raise _Stopped() from None
        if not isinstance(answer, dict) or answer.get("id") != message["id"]:
            raise _Stopped()  # out of step: start afresh rather than pair answers with the wrong queries
        return answer

    def stderr_tail(self) -> str:
        try:
            self.stderr.seek(max(0, self.stderr.seek(0, os.SEEK_END) - 1500))
            return self.stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def stop(self, kill: bool = False) -> None:
        """End the child: at the end of its input (it finishes the request in hand), or at once."""
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

    def __init__(self, home: Path | None = None, *, timeout: float = 60.0) -> None:
        self.home = home  # None: `home.compiler_home()`, looked up when the child starts
        self.timeout = timeout  # seconds one compile may take before the child is ended
        self.starts = 0  # children started so far (one per process, unless one died)
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._next_id = 1
        self._schemas: dict[tuple[Table, ...], tuple[str, list[dict[str, Any]]]] = {}
        self._models: dict[tuple[str, str], str] = {}

    @property
    def pid(self) -> int | None:
        """The running child's process id (None before the first compile and after `close()`)."""
        child = self._child
        return child.process.pid if child is not None and child.process.poll() is None else None

    def compile(self, query: str, *, tables: Sequence[Table], dialect: str, model: str | None = None) -> Compiled:
        """`query` (Malloy) as SQL for the engine whose sqlglot name is `dialect`, against `model`
        (Malloy text; None: `generated_model(tables, dialect)`). `MalloyCompileError` when
        Malloy refuses it; `MalloyUnavailable` when Node or the compiler is missing."""
        target = malloy_dialect(dialect)
        key, described = self._schema(tables)
        if model is None:
            model = self._generated(key, tables, dialect)
        with self._lock:
            for attempt in (1, 2):
                child = self._running()
                message = {"id": self._next_id, "query": query, "model": model, "dialect": target, "schema": key}
                self._next_id += 1
                if key not in child.sent:
                    message["tables"] = described
                try:
                    answer = child.request(message, self.timeout)
                except TimeoutError:
                    self._end(kill=True)
                    raise MalloyCompileError(f"the Malloy compiler took more than {self.timeout:g} s on this query") from None
                except _Stopped:
                    why = child.stderr_tail()
                    self._end(kill=True)
                    if attempt == 2:
                        raise MalloyCompileError("the Malloy compiler stopped while compiling this query"
                                                 + (f": {why}" if why else "")) from None
                    continue
                child.sent.add(key)
                error = answer.get("error")
                if error is not None:
                    raise MalloyCompileError(str(error.get("message") or "unknown error"), error.get("line"), error.get("in") == "model")
                return Compiled(answer["sql"], sql_dialect(dialect))
        raise AssertionError("unreachable")

    def close(self) -> None:
        """End the child (a later `compile()` starts another)."""
        with self._lock:
            self._end()

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
        if self._child is not None and self._child.process.poll() is None:
            return self._child
        self._end()
        node, home = require_compiler(self.home)
        child = _Child(node, home)
        self.starts += 1
        try:
            answer = child.request({"id": 0, "hello": True}, START_TIMEOUT)
        except (_Stopped, TimeoutError):
            why = child.stderr_tail()
            child.stop(kill=True)
            raise MalloyUnavailable(f"the Malloy compiler in {home} did not start"
                                    + (f": {why}" if why else "") + "; run `nl2sql malloy-setup` again") from None
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
