"""The Malloy compiler child is untrusted work: a source's size, the child's memory and time are
bounded, the child dies with the process that started it, and a compiler that dies for reasons
of its own is not blamed on the prediction (nor sent to be reinstalled). Needs Node and the
compiler (`nl2sql malloy-setup`) except where a stand-in `node` is enough; skipped without."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import make_db, read_report, write_suite
from pytest_nl2sql.copydb.model import Column, ColumnType, Kind, Table
from pytest_nl2sql.malloy import MalloyCompileError, MalloyCompiler, MalloyUnavailable, pinned_version
from pytest_nl2sql.malloy.compiler import schema_json
from pytest_nl2sql.malloy.home import READY, SERVER, require_compiler

TABLES = [Table("t", (Column("a", ColumnType(Kind.INTEGER), False, "INTEGER"), Column("b", ColumnType(Kind.TEXT), False, "TEXT")))]
MODEL = "source: t is duckdb.table('t')\n"
SMALL = "run: t -> { group_by: a; aggregate: n is count() }"


def views(depth: int) -> str:
    """A small source whose SQL doubles with each level (every view nests the one below twice)."""
    lines = [f"  view: v{i} is {{ group_by: a; nest: p is v{i - 1}; nest: q is v{i - 1} }}" for i in range(1, depth + 1)]
    return "run: t extend {\n  view: v0 is { group_by: b }\n" + "\n".join(lines) + f"\n}} -> v{depth}"


def slow(depth: int = 9) -> str:
    """A small source whose compile time grows fourfold with each level (minutes at 9), in little memory."""
    lines = [f"  dimension: d{i} is concat(d{i - 1}, d{i - 1})" for i in range(1, depth + 1)]
    return "run: t extend {\n  dimension: d0 is 'x'\n" + "\n".join(lines) + f"\n}} -> {{ group_by: d{depth} }}"


def _compiler_or_skip() -> None:
    try:
        require_compiler()
    except MalloyUnavailable as error:
        pytest.skip(f"no Malloy compiler here: {error}")


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_gone(pid: int, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def home() -> Path:
    """Where the compiler is set up, found before pytester moves HOME to its own folder."""
    _compiler_or_skip()
    return require_compiler()[1]


@pytest.fixture(scope="module")
def compiler() -> Iterator[MalloyCompiler]:
    _compiler_or_skip()
    with MalloyCompiler() as compiler:
        yield compiler


# -- source size (no Node) ------------------------------------------------------------------------


def test_a_source_over_the_size_cap_is_refused_before_the_compiler_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NL2SQL_MALLOY_HOME", str(tmp_path))  # no compiler: refused before it is looked for
    compiler = MalloyCompiler()
    source = "run: t -> { group_by: a }\n" + "// é\n" * 60_000  # 360,000 bytes (300,000 characters)
    with pytest.raises(MalloyCompileError) as refused:
        compiler.compile(source, tables=TABLES, dialect="duckdb", model=MODEL)
    assert str(refused.value) == "source too large (360,026 bytes; limit 262,144 bytes)"
    assert compiler.starts == 0 and compiler.pid is None


# -- memory ---------------------------------------------------------------------------------------


def test_the_child_s_memory_is_capped(compiler: MalloyCompiler) -> None:
    compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL)
    pid = compiler.pid
    assert pid is not None
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert f"--max-old-space-size={compiler.memory_mb}".encode() in cmdline
    limits = {line[:26].strip(): line[26:].split() for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]}
    data = int(limits["Max data size"][0])
    assert compiler.memory_mb * 2**20 < data <= 4 * 2**30


def test_a_source_that_blows_the_memory_cap_is_an_error_and_the_next_compiles() -> None:
    _compiler_or_skip()
    with MalloyCompiler(memory_mb=32) as compiler:
        compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL)  # a child that served a query
        with pytest.raises(MalloyCompileError) as blown:
            compiler.compile(views(12), tables=TABLES, dialect="duckdb", model=MODEL)
        assert str(blown.value).startswith("the Malloy compiler ran out of memory on this query (limit 32 MB")
        assert compiler.starts == 2  # a second try in a fresh child (the first had compiled before)
        assert "SELECT" in compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL).sql
        assert compiler.starts == 3


# -- the child dies with its parent ---------------------------------------------------------------


def test_the_child_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    _compiler_or_skip()
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_malloy_limits import MODEL, SMALL, TABLES, slow
        from pytest_nl2sql.malloy import MalloyCompiler

        compiler = MalloyCompiler(timeout=3600)

        def start():  # from a thread that ends: the child must outlive it, not its parent process
            compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL)

        starter = threading.Thread(target=start)
        starter.start()
        starter.join()
        print(compiler.pid, flush=True)
        compiler.compile(slow(), tables=TABLES, dialect="duckdb", model=MODEL)  # minutes
        print("compiled", flush=True)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        child = int(line)
        time.sleep(1.0)
        assert _alive(child), "the child died with the thread that started it"
        time.sleep(1.0)  # compiling the slow source by now
        parent.kill()
        parent.wait()
        assert _wait_gone(child), "the Malloy child outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()


def test_the_child_ends_when_its_input_closes_without_compiling_what_is_queued() -> None:
    _compiler_or_skip()
    node, home = require_compiler()
    child = subprocess.Popen([node, str(SERVER), str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=home)
    requests = [{"id": 1, "query": SMALL, "model": MODEL, "dialect": "duckdb", "schema": "k", "tables": schema_json(TABLES)}]
    requests += [{"id": n, "query": slow(5), "model": MODEL, "dialect": "duckdb", "schema": "k"} for n in range(2, 12)]
    out, _ = child.communicate(b"".join(json.dumps(r).encode() + b"\n" for r in requests), timeout=600)
    assert len(out.splitlines()) < 3  # before: every queued request compiled (ten slow ones) after its input closed


# -- time -----------------------------------------------------------------------------------------


def test_a_compile_past_the_case_s_time_limit_is_pred_timeout(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                             home: Path) -> None:
    monkeypatch.setenv("NL2SQL_MALLOY_HOME", str(home))
    make_db(pytester.path / "t.sqlite", "CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'x');")
    write_suite(pytester.path, [{"id": "slow", "gold": "SELECT 1", "predicted_malloy": slow()},
                                {"id": "quick", "gold": "SELECT a, count(*) FROM t GROUP BY a", "predicted_malloy": SMALL}],
                database="t.sqlite")
    # 2 s: the slow source compiles (and burns a core) until then; the quick one, in the fresh child
    # after it, compiles in ~0.2 s
    result = pytester.runpytest("--nl2sql-report=json:r.json", "--nl2sql-timeout=2", "--nl2sql-neighbours=0", "-p", "no:randomly")
    items = {i["id"]: i for i in read_report(pytester.path / "r.json")["items"]}
    assert items["slow"]["verdict"] == "pred_timeout", items["slow"]
    assert items["slow"]["reason"] == "malloy: the Malloy compiler took more than 2 s on this query and was stopped"
    assert items["quick"]["verdict"] == "pass", items["quick"]  # a fresh child after the one that was stopped
    result.assert_outcomes(passed=1, failed=1)


# -- a compiler that dies for reasons of its own ---------------------------------------------------


def test_a_compiler_killed_twice_is_not_the_prediction_s_fault(compiler: MalloyCompiler) -> None:
    compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL)
    first = compiler.pid
    assert first is not None
    raised: list[BaseException] = []

    def compile_slowly() -> None:
        try:
            compiler.compile(slow(), tables=TABLES, dialect="duckdb", model=MODEL)
        except BaseException as error:  # checked below
            raised.append(error)

    worker = threading.Thread(target=compile_slowly)
    worker.start()
    time.sleep(0.5)
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 120
    second = None
    while second in (None, first) and time.monotonic() < deadline:  # the retry, in a child of its own
        second = compiler.pid
        time.sleep(0.05)
    assert second not in (None, first)
    time.sleep(0.5)
    os.kill(second, signal.SIGKILL)
    worker.join(120)
    assert len(raised) == 1 and isinstance(raised[0], MalloyUnavailable), raised
    message = str(raised[0])
    assert "the Malloy compiler died twice while compiling this query (killed by signal 9" in message
    assert "not the prediction's fault" in message and "malloy-setup" not in message
    assert "SELECT" in compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL).sql


def _stand_in_home(tmp_path: Path, script: str) -> Path:
    """A home that reads as set up, and a `node` on PATH that runs `script` as the server."""
    home = tmp_path / "home"
    (home / "node_modules/@malloydata/malloy").mkdir(parents=True)
    (home / "node_modules/@malloydata/malloy/package.json").write_text("{}")
    (home / READY).write_text(pinned_version() + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    node = bin_dir / "node"
    node.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo v20.0.0; exit 0; fi\n{script}\n')
    node.chmod(0o755)
    return home


def test_a_compiler_killed_while_starting_does_not_say_to_reinstall_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _stand_in_home(tmp_path, "kill -9 $$")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    compiler = MalloyCompiler(home)
    with pytest.raises(MalloyUnavailable) as failed:
        compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL)
    message = str(failed.value)
    assert f"the Malloy compiler in {home} did not start (killed by signal 9 (SIGKILL), twice)" in message
    assert "malloy-setup" not in message and compiler.starts == 2
    (home / "node_modules/@malloydata/malloy/package.json").unlink()  # now its files are missing
    with pytest.raises(MalloyUnavailable, match="run `nl2sql malloy-setup`"):
        compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL)


def test_compiled_sql_over_the_query_cap_is_an_error(compiler: MalloyCompiler) -> None:
    sql = compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL).sql
    with pytest.raises(MalloyCompileError) as refused:
        compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL, max_sql_chars=len(sql) - 1)
    assert str(refused.value) == f"the compiled SQL is {len(sql):,} characters long, over the {len(sql) - 1:,} a query may have"
    starts = compiler.starts
    assert compiler.compile(SMALL, tables=TABLES, dialect="duckdb", model=MODEL, timeout=float("inf")).sql == sql
    assert compiler.starts == starts  # answers, not deaths
