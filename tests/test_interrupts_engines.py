"""Ctrl-C stops a run at once on every engine: while a prediction's query runs (SQLite in pytest's
own process and in its worker process, DuckDB in its worker, PostgreSQL, MariaDB) and while
neighbours of a PostgreSQL case are generated from its local DuckDB copy.

Each test runs `pytest` on a suite of three cases in a subprocess, the second case's prediction a
query of minutes of real work (no sleep function: the containment refuses those) under a time limit
of 300 s, so that only the interrupt can end it. Once that query runs (seen on the server itself,
or by a marker file that the run's conftest writes as the engine is asked to run it), SIGINT goes
to the run's process group, as a terminal's Ctrl-C does. Then: the run ends within seconds, with
pytest's "interrupted" exit code; the JSON report says `complete: false`, holds the first case with
its verdict and charges nothing to the interrupted one; no traceback of a thread; nothing the run
started still runs (a worker process spinning on the abandoned query would be a local runaway);
and on a server the query is no longer running a few seconds later (no runaway query behind).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers import make_db, read_report, write_suite
from pytest_nl2sql.engines.worker_child import LINEAR_FUNCTIONS
from servers import Scratch, mariadb_database, postgres_schema

TAG = "nl2sql_long_query"  # in the long query's text: how it is recognised, on a server too
STOPPED_WITHIN = 30.0  # seconds from the signal to the end of the run (it would take 300 s)
SETTLED_WITHIN = 10.0  # seconds after the run's end for its processes and server queries to be gone

TABLE = """
CREATE TABLE emp(id INTEGER PRIMARY KEY, name VARCHAR(20) NOT NULL, age INTEGER NOT NULL);
INSERT INTO emp VALUES (1, 'ann', 25), (2, 'bob', 41), (3, 'cy', 35);
"""

# Minutes of work for each engine (under a 300 s limit, only the interrupt ends them), all
# accepted by the engines' containment (no sleep function).
LONG = {
    # every function it calls is bounded per step: it runs in pytest's own process
    "sqlite": f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)"
              f" SELECT count(*) AS {TAG} FROM c",
    # instr() is not bounded per step: the query goes to the worker process
    "sqlite-worker": f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)"
                     f" SELECT count(*) AS {TAG} FROM c WHERE instr('ab', 'b') = 2",
    "duckdb": f"SELECT count(*) AS {TAG} FROM range(10000000000000) r(x) WHERE x % 7 = 0",
    "postgres": f"SELECT count(*) AS {TAG} FROM generate_series(1, 1000000) a, generate_series(1, 1000000) b",
    "mariadb": f"SELECT count(*) AS {TAG} FROM seq_1_to_1000000 a, seq_1_to_1000000 b WHERE a.seq + b.seq > 0",
}

QUICK = "SELECT name FROM emp WHERE age >= 30"


def cases(long_query: str) -> list[dict[str, str]]:
    return [
        {"id": "a", "gold": QUICK, "predicted": "SELECT name FROM emp WHERE 30 <= age"},
        {"id": "b", "gold": QUICK, "predicted": long_query},
        {"id": "c", "gold": QUICK, "predicted": QUICK},
    ]


# The run's conftest for local engines: a marker file appears when the engine is asked to run the
# long query (the test then waits a moment, so that the signal lands inside it).
ENGINE_MARKER_CONFTEST = f"""
import os
from pathlib import Path

from pytest_nl2sql.engines import duckdb, sqlite


def _marking(execute):
    def marked(self, sql, limits):
        if {TAG!r} in sql:
            Path(os.environ["NL2SQL_TEST_MARKER"]).touch()
        return execute(self, sql, limits)
    return marked


for _engine in (sqlite.SqliteEngine, duckdb.DuckdbEngine):
    _engine.execute = _marking(_engine.execute)
"""

# The run's conftest for neighbour generation: a marker file appears when generation runs its
# first query for case `b`, which first runs one without end (its work bound raised to a minute),
# so that the signal lands inside DuckDB's C code for certain (as in test_neighbours_interrupt.py).
NEIGHBOUR_MARKER_CONFTEST = """
import os
from pathlib import Path

from pytest_nl2sql.neighbours import build, distill

_run_query = build.run_query
_current = [None]


def pytest_runtest_logstart(nodeid, location):
    _current[0] = nodeid


def _marked(connection, sql, kind):
    marker = Path(os.environ["NL2SQL_TEST_MARKER"])
    if (_current[0] or "").endswith("::b") and not marker.exists():
        marker.touch()
        bound, distill.DUCKDB_SECONDS = distill.DUCKDB_SECONDS, 60.0
        try:
            _run_query(connection, "SELECT count(*) FROM range(1000000000000) r(x) WHERE x % 7 = 0", kind)
        finally:
            distill.DUCKDB_SECONDS = bound
    return _run_query(connection, sql, kind)


build.run_query = _marked
"""


# -- servers: the long query as the server sees it ---------------------------------------------------


def _postgres_running(scratch: Scratch) -> list[int]:
    """The run's backends busy for more than a moment (the engine declares a cursor for the query
    and runs it with FETCH, whose text is all the server shows: the run's connections are named)."""
    rows = scratch.admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND state = 'active'"
        " AND now() - query_start > interval '0.3 seconds'", (TAG,)).fetchall()
    return [pid for (pid,) in rows]


def _postgres_stop(scratch: Scratch, pids: list[int]) -> None:
    for pid in pids:
        scratch.admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def _mariadb_running(scratch: Scratch) -> list[int]:
    with scratch.admin.cursor() as cursor:
        cursor.execute("SELECT ID FROM information_schema.PROCESSLIST"
                       " WHERE ID <> CONNECTION_ID() AND COMMAND = 'Query' AND INFO LIKE %s", (f"%{TAG}%",))
        return [pid for (pid,) in cursor.fetchall()]


def _mariadb_stop(scratch: Scratch, ids: list[int]) -> None:
    with scratch.admin.cursor() as cursor:
        for thread in ids:
            try:
                cursor.execute(f"KILL {int(thread)}")
            except Exception:  # noqa: BLE001 - ended meanwhile
                pass


SERVERS: dict[str, tuple[Callable[..., Any], Callable[[Scratch], list[int]], Callable[[Scratch, list[int]], None]]] = {
    "postgres": (postgres_schema, _postgres_running, _postgres_stop),
    "mariadb": (mariadb_database, _mariadb_running, _mariadb_stop),
}


# -- the run ----------------------------------------------------------------------------------------


def _processes_of(directory: Path) -> list[int]:
    """Live processes started by the run in `directory` (its own, its worker processes, any
    child): they carry its environment. Linux only; elsewhere none are seen."""
    needle = f"NL2SQL_TEST_MARKER={directory / 'marker'}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()  # a zombie's is empty
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _left_behind(directory: Path) -> list[str]:
    """What of the run still runs `SETTLED_WITHIN` seconds after its end (then killed): a worker
    process spinning on an abandoned query would be the local runaway."""
    deadline = time.monotonic() + SETTLED_WITHIN
    while (pids := _processes_of(directory)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = []
    for pid in pids:
        try:
            left.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


@contextmanager
def _run(directory: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`pytest` on the suite in `directory`, in a session of its own (so that SIGINT can go to its
    process group, as a terminal's Ctrl-C does); killed if still running at the end."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(NL2SQL_CACHE_DIR=str(directory / "cache"), NL2SQL_TEST_MARKER=str(directory / "marker"))
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
         "--nl2sql-timeout=300", "--nl2sql-report=json:r.json", "shop.nl2sql.yaml", *args],
        cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        yield run
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.communicate()


def _wait_for(started: Callable[[], bool], run: subprocess.Popen[str], what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not started():
        if run.poll() is not None:
            pytest.fail(f"the run ended before {what}:\n{run.communicate()[0]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} never happened within {seconds:g} s")
        time.sleep(0.05)


def _signal_masks(pid: int) -> str:
    """The run's signal masks as Linux shows them (SigBlk, SigIgn, SigCgt), to say why a Ctrl-C
    went unseen: a SIGINT blocked or ignored is inherited from whatever started the process."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return "signal masks unknown"
    return ", ".join(line.replace("\t", " ") for line in lines if line.startswith(("SigBlk", "SigIgn", "SigCgt")))


def _interrupt(run: subprocess.Popen[str]) -> tuple[str, float]:
    """Ctrl-C as a terminal sends it (to the run's process group; the engines' worker processes
    have groups of their own); the run's output, and how long it took to end after the signal."""
    masks = _signal_masks(run.pid)
    os.killpg(run.pid, signal.SIGINT)
    signalled = time.monotonic()
    try:
        output, _ = run.communicate(timeout=STOPPED_WITHIN)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        output, _ = run.communicate()
        pytest.fail(f"the run did not stop within {STOPPED_WITHIN:g} s of Ctrl-C ({masks}):\n{output}")
    return output, time.monotonic() - signalled


def _assert_stopped(directory: Path, run: subprocess.Popen[str], output: str, first_verdict: str) -> None:
    """Interrupted, reported incomplete, the first case judged, the interrupted one not charged,
    nothing of the run left running."""
    assert not (left := _left_behind(directory)), f"still running after the run ended: {left}"
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output, output
    for wrong in ("Traceback (most recent call last)", "Exception in thread", "Exception ignored", "FAILED"):
        assert wrong not in output, output
    report = read_report(directory / "r.json")
    assert report["run"]["complete"] is False, report["run"]
    items = {item["id"]: item for item in report["items"]}
    assert "a" in items and items["a"]["verdict"] == first_verdict, report["items"]
    assert "c" not in items, report["items"]
    charged = items.get("b")
    assert charged is None, f"the interrupted case was charged: {charged}"
    assert report["summary"]["total"] == 1 and report["summary"]["passed"] == (first_verdict == "pass"), report["summary"]


# -- the tests --------------------------------------------------------------------------------------


def _local_database(directory: Path, kind: str) -> str:
    if kind.startswith("sqlite"):
        make_db(directory / "shop.sqlite", TABLE)
        return "shop.sqlite"
    if importlib.util.find_spec("duckdb") is None:
        pytest.skip("duckdb is not installed")
    # duckdb is imported in child processes only: a second import in one process aborts it
    script = "import sys, duckdb\nconnection = duckdb.connect(sys.argv[1])\n"
    script += "".join(f"connection.execute({s.strip()!r})\n" for s in TABLE.split(";") if s.strip())
    subprocess.run([sys.executable, "-c", script, str(directory / "shop.duckdb")], check=True, timeout=120)
    return "duckdb:///shop.duckdb"


@pytest.mark.parametrize("kind", ["sqlite", "sqlite-worker", "duckdb"])
def test_ctrl_c_during_a_local_query_stops_the_run(tmp_path: Path, kind: str) -> None:
    assert "instr" not in LINEAR_FUNCTIONS  # else "sqlite-worker" runs in pytest's process too
    database = _local_database(tmp_path, kind)
    write_suite(tmp_path, cases(LONG[kind]), database=database)
    (tmp_path / "conftest.py").write_text(ENGINE_MARKER_CONFTEST)
    with _run(tmp_path) as run:
        _wait_for((tmp_path / "marker").exists, run, "the long query started")
        time.sleep(0.5)  # inside the query by now (it runs for minutes; the marker is made as it is sent)
        assert run.poll() is None, run.communicate()[0]
        output, took = _interrupt(run)
    _assert_stopped(tmp_path, run, output, "pass")
    assert took < STOPPED_WITHIN


@pytest.mark.services
@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
def test_ctrl_c_during_a_server_query_stops_the_run_and_the_query(tmp_path: Path, kind: str) -> None:
    make, running, stop = SERVERS[kind]
    with make("nl2sql_int", TABLE) as scratch:
        url = f"{scratch.url}&application_name={TAG}" if kind == "postgres" else scratch.url
        write_suite(tmp_path, cases(LONG[kind]), database=url)
        left: list[int] = []
        try:
            with _run(tmp_path) as run:
                _wait_for(lambda: bool(running(scratch)), run, "the long query ran on the server")
                output, took = _interrupt(run)
            deadline = time.monotonic() + SETTLED_WITHIN
            while (left := running(scratch)) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            stop(scratch, running(scratch))  # never leave one behind, whatever failed
    _assert_stopped(tmp_path, run, output, "pass")
    assert not left, f"the interrupted query still ran on the server {SETTLED_WITHIN:g} s after the run ended:\n{output}"
    assert took < STOPPED_WITHIN


@pytest.mark.services
@pytest.mark.skipif(importlib.util.find_spec("duckdb") is None, reason="duckdb is not installed")
def test_ctrl_c_during_neighbour_generation_for_a_postgres_case_stops_the_run(tmp_path: Path) -> None:
    """Neighbours of a server case come from a local DuckDB copy; Ctrl-C lands in a DuckDB query of
    the second case's generation. Nothing of that case is charged or cached."""
    with postgres_schema("nl2sql_int", TABLE) as scratch:
        # b's own gold: neighbours are kept per gold, and a's would serve b
        b_gold = "SELECT name FROM emp WHERE age < 40"
        suite = cases(QUICK)
        suite[1] = {"id": "b", "gold": b_gold, "predicted": b_gold.replace("< 40", "<= 39")}
        write_suite(tmp_path, suite, database=scratch.url)
        (tmp_path / "conftest.py").write_text(NEIGHBOUR_MARKER_CONFTEST)
        with _run(tmp_path) as run:
            _wait_for((tmp_path / "marker").exists, run, "neighbour generation for case b started")
            time.sleep(0.5)
            output, took = _interrupt(run)
    _assert_stopped(tmp_path, run, output, "pass")
    assert "Query interrupted" not in output, output
    assert took < STOPPED_WITHIN
    cache = tmp_path / "cache"
    assert len(list(cache.rglob("manifest.json"))) == 1, "b's neighbours, built in part, were cached (or a's were not)"
    assert not [p for p in (cache / "server-copies").rglob("*") if p.is_file()], "the server's DuckDB copy was left behind"
