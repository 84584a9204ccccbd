"""Containment that does not depend on recognising the query: wall time and memory stay bounded.

Some SQL holds the CPU inside a single step of the database, where no progress handler or
interrupt is ever looked at (SQLite's `printf('%.*c', 2147483647, 'x')` ~10 s, `instr()` of two
long strings for hours); some makes DuckDB build gigabytes before the first row can be fetched.
The engines run queries in a worker process that is killed when it overruns the deadline, and
whose address space is capped. These tests hold each attack to its bound, and check that the
engine answers normally afterwards and that the database is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import process_gone
from pytest_nl2sql import eval_exec_match
from pytest_nl2sql.engines import EngineError, Limits, QueryError, QueryTimeout, TooManyRows, open_engine
from pytest_nl2sql.engines.base import ConnectionLost, SizeBudget
from pytest_nl2sql.engines.sqlite import HEAP_LIMIT_BYTES, SqliteEngine
from pytest_nl2sql.engines.worker import GRACE_SECONDS
from pytest_nl2sql.engines.worker_child import row_size
from pytest_nl2sql.vocab import Verdict

SHORT = Limits(timeout=0.25)  # for queries that must time out (each burns it in CPU, and the grace after)
NORMAL = Limits(timeout=30.0)  # for queries that must not: a loaded machine is no reason to fail them
ORIGINAL = [(1, "one"), (2, "two"), (3, "three")]

# single VM steps that ignore the progress handler (each would run 10 s or far longer)
PRINTF_ATTACKS = [
    "SELECT printf('%.*c', 2147483647, 'x')",
    "SELECT length(printf('%.*c', 2147483647, 'y')) FROM t",
    "SELECT printf('%.*c%.*c', 2000000000, 'a', 2000000000, 'b') AS s",
]
INSTR_ATTACK = (
    "SELECT instr(printf('%.*c', 10000000, 'a'), printf('%.*c', 5000000, 'a') || 'b')"
)  # ~5e13 character comparisons inside one call


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _peak_rss_mb(pid: int | str = "self") -> int:
    """VmHWM of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) >> 10
    raise AssertionError("no VmHWM")


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("contain") / "contain.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER PRIMARY KEY, s TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ORIGINAL)
    conn.execute("CREATE TABLE big (n INTEGER)")
    conn.executemany("INSERT INTO big VALUES (?)", ((i,) for i in range(2_000)))
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def sqlite_engine(sqlite_db: Path) -> Iterator[SqliteEngine]:
    engine = open_engine(str(sqlite_db))
    assert isinstance(engine, SqliteEngine)
    yield engine
    engine.close()


# random() keeps the query from being served from the SQLite engine's result cache: the worker
# itself must answer
FRESH = "SELECT x, s FROM t WHERE random() IS NOT NULL ORDER BY x"


def _assert_healthy(engine, path: Path, digest: str) -> None:
    assert engine.execute(FRESH, NORMAL).rows == ORIGINAL
    assert _sha256(path) == digest


# -- SQLite: time -------------------------------------------------------------------------------


def test_printf_attacks_end_as_timeouts_within_the_limit(
    sqlite_engine: SqliteEngine, sqlite_db: Path
) -> None:
    digest = _sha256(sqlite_db)
    kills = sqlite_engine._worker.kills
    started = time.monotonic()
    for sql in PRINTF_ATTACKS:
        one = time.monotonic()
        with pytest.raises(QueryTimeout, match="longer than 0.25 s"):
            sqlite_engine.execute(sql, SHORT)
        assert time.monotonic() - one < SHORT.timeout + GRACE_SECONDS + 10.0, sql  # stopped, not left to run (slack for a loaded machine)
    elapsed = time.monotonic() - started
    assert elapsed < 30.0, f"three {SHORT.timeout:g} s printf attacks took {elapsed:.1f} s"
    assert sqlite_engine._worker.kills == kills + 3  # the worker was killed each time...
    _assert_healthy(sqlite_engine, sqlite_db, digest)  # ...and replaced


def test_instr_attack_is_a_timeout(sqlite_engine: SqliteEngine, sqlite_db: Path) -> None:
    digest = _sha256(sqlite_db)
    started = time.monotonic()
    with pytest.raises(QueryTimeout):
        sqlite_engine.execute(INSTR_ATTACK, SHORT)
    assert time.monotonic() - started < 10.0  # stopped, not left to run
    _assert_healthy(sqlite_engine, sqlite_db, digest)


def test_a_timeout_is_the_pred_timeout_verdict_not_a_mismatch(sqlite_db: Path) -> None:
    """printf gives up with NULL once its string is too long: had the query been allowed to
    finish, it would have come back as a (wrong) result."""
    started = time.monotonic()
    result = eval_exec_match(sqlite_db, PRINTF_ATTACKS[0], "SELECT NULL", limits=SHORT)
    assert result.verdict == Verdict.PRED_TIMEOUT
    assert time.monotonic() - started < 10.0  # stopped, not left to run


def test_other_engines_on_the_worker_survive_a_kill(sqlite_db: Path, tmp_path: Path) -> None:
    """SQLite engines share one worker: killing it re-opens every database on the next query."""
    other_path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other_path)
    conn.execute("CREATE TABLE u (y)")
    conn.execute("INSERT INTO u VALUES (7)")
    conn.commit()
    conn.close()
    first, second = open_engine(str(sqlite_db)), open_engine(str(other_path))
    try:
        with pytest.raises(QueryTimeout):
            first.execute(PRINTF_ATTACKS[0], Limits(timeout=0.3))
        assert second.execute("SELECT y FROM u", NORMAL).rows == [(7,)]
        assert first.execute("SELECT count(*) FROM t", NORMAL).rows == [(3,)]
        assert second.schema_columns() == {"u": ["y"]}
    finally:
        first.close()
        second.close()


# -- SQLite: memory -----------------------------------------------------------------------------


def test_a_row_larger_than_the_heap_is_too_much_memory(
    sqlite_engine: SqliteEngine, sqlite_db: Path
) -> None:
    digest = _sha256(sqlite_db)
    parent_before = _peak_rss_mb()
    columns = ", ".join(["CAST(zeroblob(100000000) AS TEXT)"] * 11)  # 1.1 GB in one row
    limits = Limits(timeout=60.0, max_value_bytes=100_000_000)
    with pytest.raises(TooManyRows, match="memory"):
        sqlite_engine.execute(f"SELECT {columns}", limits)
    assert _peak_rss_mb() - parent_before < 200
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10 < HEAP_LIMIT_BYTES * 2 >> 20
    _assert_healthy(sqlite_engine, sqlite_db, digest)


def test_rows_are_counted_as_they_arrive(sqlite_engine: SqliteEngine) -> None:
    """2000 values of 1 MB under a 20 MB size cap: the parent never holds much beyond the cap."""
    parent_before = _peak_rss_mb()
    limits = Limits(timeout=60.0, max_bytes=20_000_000)
    with pytest.raises(TooManyRows, match="20000000 bytes"):
        sqlite_engine.execute("SELECT printf('%.*c', 1000000, 'x') FROM big", limits)
    assert _peak_rss_mb() - parent_before < 100
    assert sqlite_engine.execute("SELECT count(*) FROM big", NORMAL).rows == [(2_000,)]


def test_the_worker_has_a_heap_ceiling_and_a_capped_address_space(
    sqlite_engine: SqliteEngine,
) -> None:
    # LIKE is not bounded per step: the query runs in the worker, which opens the database then
    assert sqlite_engine.execute("SELECT count(*) FROM big WHERE 'x' LIKE 'x'", NORMAL).rows == [(2_000,)]
    info = sqlite_engine._worker.info()
    assert info["heap_limit"] == HEAP_LIMIT_BYTES
    assert info["address_space"] > HEAP_LIMIT_BYTES
    limits = Path(f"/proc/{info['pid']}/limits").read_text()
    assert str(info["address_space"]) in limits  # RLIMIT_AS, "Max address space"


def test_batches_are_sized_as_the_parent_counts(sqlite_engine: SqliteEngine) -> None:
    """The child sizes its batches with the formula of `SizeBudget`; the caps hold exactly."""
    rows = [(1, "abc", None, b"\x00\x01", 2.5)]
    budget = SizeBudget(Limits())
    budget.add(rows[0])
    assert row_size(rows[0]) == budget.bytes
    exact = Limits(timeout=5.0, max_rows=2_000)
    assert len(sqlite_engine.execute("SELECT n FROM big", exact).rows) == 2_000
    with pytest.raises(TooManyRows, match="more than 1999 rows"):
        sqlite_engine.execute("SELECT n FROM big", Limits(timeout=5.0, max_rows=1_999))
    # the size cap holds to the byte, in this process (batches the session sized) and in the worker
    size = 2_000 * row_size((1,))
    for sql in ("SELECT n FROM big", "SELECT n FROM big WHERE 'x' LIKE 'x'"):
        assert len(sqlite_engine.execute(sql, Limits(timeout=5.0, max_bytes=size)).rows) == 2_000
        with pytest.raises(TooManyRows, match="size cap"):
            sqlite_engine.execute(sql, Limits(timeout=5.0, max_bytes=size - 1))


# -- the worker process itself ------------------------------------------------------------------


def test_a_worker_killed_while_idle_is_replaced(sqlite_engine: SqliteEngine) -> None:
    pid = sqlite_engine._worker.info()["pid"]
    os.kill(pid, signal.SIGKILL)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # dead (a kill mid-request: next test)
    assert sqlite_engine.execute(FRESH, NORMAL).rows == ORIGINAL
    assert sqlite_engine._worker.pid not in (None, pid)


def _kill_worker_soon(engine: SqliteEngine, signum: int) -> threading.Thread:
    pid = engine._worker.info()["pid"]

    def kill() -> None:
        time.sleep(0.3)
        os.kill(pid, signum)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread


def test_a_worker_killed_from_outside_mid_query_is_connection_lost(
    sqlite_engine: SqliteEngine,
) -> None:
    """Not the query's fault (the OOM killer, an operator): the pipeline retries it once."""
    thread = _kill_worker_soon(sqlite_engine, signal.SIGKILL)
    with pytest.raises(ConnectionLost, match="SIGKILL"):
        sqlite_engine.execute(PRINTF_ATTACKS[0], Limits(timeout=5.0))
    thread.join()
    assert sqlite_engine.execute("SELECT count(*) FROM t", NORMAL).rows == [(3,)]


def test_a_worker_that_crashes_mid_query_is_a_query_error(sqlite_engine: SqliteEngine) -> None:
    thread = _kill_worker_soon(sqlite_engine, signal.SIGSEGV)
    with pytest.raises(QueryError, match="crashed.*SIGSEGV"):
        sqlite_engine.execute(PRINTF_ATTACKS[0], Limits(timeout=5.0))
    thread.join()
    assert sqlite_engine.execute("SELECT count(*) FROM t", NORMAL).rows == [(3,)]


def test_the_worker_ends_with_its_parent_even_mid_query(sqlite_db: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal, sys, threading, time
        from pytest_nl2sql.engines import Limits, open_engine
        engine = open_engine({str(sqlite_db)!r})
        print(engine._worker.info()["pid"], flush=True)
        threading.Thread(
            target=engine.execute,
            args=("SELECT printf('%.*c', 2147483647, 'x')", Limits(timeout=60)),
            daemon=True,
        ).start()
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    pid = int(done.stdout.split()[0])
    waited = time.monotonic()
    while not process_gone(pid) and time.monotonic() - waited < 5.0:
        time.sleep(0.05)
    assert process_gone(pid), "the worker outlived its parent"


# -- DuckDB -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def duck_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path_factory.mktemp("duck") / "contain.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE t (x INTEGER, s VARCHAR)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ORIGINAL)
    conn.close()
    return path


@pytest.fixture(scope="module")
def duck_engine(duck_db: Path) -> Iterator[object]:
    engine = open_engine(f"duckdb:///{duck_db}")
    yield engine
    engine.close()


def test_duckdb_huge_values_are_contained(duck_engine, duck_db: Path) -> None:
    """300 values of 10 MB: DuckDB builds all 3 GB before the first row. The worker's address
    space is capped, so the query ends with a clear error and memory stays bounded."""
    digest = _sha256(duck_db)
    listing = sorted(p.name for p in duck_db.parent.iterdir())
    parent_before = _peak_rss_mb()
    with pytest.raises(TooManyRows, match="memory"):
        duck_engine.execute("SELECT repeat('x', 10000000) FROM range(300)", Limits(timeout=60.0))
    parent_growth = _peak_rss_mb() - parent_before
    child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10  # killed workers
    assert parent_growth < 200, f"parent grew {parent_growth} MiB"
    assert child_peak < 1536, f"a worker reached {child_peak} MiB"
    _assert_healthy(duck_engine, duck_db, digest)
    assert sorted(p.name for p in duck_db.parent.iterdir()) == listing


def test_duckdb_results_are_capped_as_they_arrive(duck_engine) -> None:
    parent_before = _peak_rss_mb()
    with pytest.raises(TooManyRows, match="10000000 bytes"):
        duck_engine.execute(
            "SELECT repeat('x', 1000000) FROM range(200)",
            Limits(timeout=60.0, max_bytes=10_000_000),
        )
    assert _peak_rss_mb() - parent_before < 100
    with pytest.raises(QueryError, match="string or blob too big"):
        duck_engine.execute("SELECT repeat('x', 200000)", Limits(max_value_bytes=100_000))
    assert duck_engine.execute("SELECT count(*) FROM t", NORMAL).rows == [(3,)]


def test_duckdb_settings_are_capped_and_locked(duck_engine) -> None:
    settings = dict(
        duck_engine.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('memory_limit', 'threads',"
            " 'max_temp_directory_size', 'enable_external_access', 'lock_configuration')",
            NORMAL,
        ).rows
    )
    assert settings["enable_external_access"] == "false"
    assert settings["lock_configuration"] == "true"
    assert settings["threads"] == "1"  # a file of small tables: one thread (its queries gain nothing from two)
    assert settings["memory_limit"].endswith(("MiB", "GiB", "MB", "GB"))
    assert settings["max_temp_directory_size"].startswith("0")
    for statement in ("SET memory_limit = '100GB'", "SET threads = 64", "RESET memory_limit"):
        with pytest.raises(QueryError):
            duck_engine.execute(statement, NORMAL)


def test_duckdb_timeout_and_then_normal_work(duck_engine) -> None:
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match="longer than 0.25 s"):
        duck_engine.execute("SELECT count(*) FROM range(1000000000000)", SHORT)
    assert time.monotonic() - started < SHORT.timeout + GRACE_SECONDS + 10.0  # stopped, not left to run
    assert duck_engine.execute("SELECT s FROM t WHERE x = 2", NORMAL).rows == [("two",)]


def test_duckdb_values_are_plain(duck_engine) -> None:
    rows = duck_engine.execute(
        "SELECT 1.50::DECIMAL(4, 2), 3::DECIMAL(4, 1), DATE '2020-01-02', [1, 2], true",
        NORMAL,
    ).rows
    assert rows == [(1.5, 3, "2020-01-02", "[1, 2]", 1)]


def test_every_error_is_an_engine_error(sqlite_engine: SqliteEngine) -> None:
    """Nothing from the worker machinery leaks as another exception type."""
    for sql in ("", "SELEC 1", "SELECT 1; SELECT 2", PRINTF_ATTACKS[0]):
        with pytest.raises(EngineError):
            sqlite_engine.execute(sql, Limits(timeout=0.3))


def test_a_forked_process_starts_its_own_worker(sqlite_engine: SqliteEngine) -> None:
    """After fork (multiprocessing's default start on Linux) the child process must not talk to
    its parent's worker: both would read the same pipe."""
    parent_pid = sqlite_engine._worker.info()["pid"]
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked process
        try:
            rows = sqlite_engine.execute(FRESH, NORMAL).rows
            os.write(write_end, f"{rows == ORIGINAL} {sqlite_engine._worker.pid}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as report:
        ok, worker_pid = report.read().split()
    os.waitpid(child, 0)
    assert ok == "True" and int(worker_pid) != parent_pid
    assert sqlite_engine._worker.info()["pid"] == parent_pid
    assert sqlite_engine.execute(FRESH, NORMAL).rows == ORIGINAL


def test_a_closed_duckdb_engine_says_so(duck_db: Path) -> None:
    engine = open_engine(f"duckdb:///{duck_db}")
    engine.close()
    with pytest.raises(EngineError, match="closed"):
        engine.execute("SELECT 1", NORMAL)
