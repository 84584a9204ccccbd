"""Ctrl-C during the generation of DuckDB neighbours, which runs DuckDB in pytest's own thread, stops
the run as any Ctrl-C stops pytest: DuckDB reports the signal as its query's error ("Query
interrupted"), which must neither be swallowed as a bad candidate nor fail the case."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import write_suite

# ~50 ms inside DuckDB's C code per run (gold and mutants, on every candidate), nearly all the time
# of generation: where a Ctrl-C lands, and where DuckDB turns it into an error of the query.
SLOW_GOLD = "SELECT name FROM emp WHERE age >= 30 AND (SELECT count(*) FROM range(10000000) r(x) WHERE x % 7 = 0) > 0"

MAKE_DATABASE = """
import sys, duckdb
connection = duckdb.connect(sys.argv[1])
connection.execute("CREATE TABLE emp(id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, age INTEGER)")
connection.execute("INSERT INTO emp VALUES (1, 'ann', 25), (2, 'bob', 41), (3, 'cy', 35)")
connection.close()
"""

# The run's conftest: a file appears when generation runs its first query, so that the test sends
# Ctrl-C during generation however slowly a loaded machine gets there. With NL2SQL_TEST_HOLD, that
# query is first preceded by one without end (its work bound raised from 0.5 s to a minute), so
# that the Ctrl-C lands inside DuckDB's C code for certain.
MARKING_CONFTEST = """
import os
from pathlib import Path

from pytest_nl2sql.neighbours import build, distill

_run_query = build.run_query


def _marked(connection, sql, kind):
    marker = Path(os.environ["NL2SQL_TEST_MARKER"])
    if not marker.exists():
        marker.touch()
        if os.environ.get("NL2SQL_TEST_HOLD"):
            bound, distill.DUCKDB_SECONDS = distill.DUCKDB_SECONDS, 60.0
            try:
                _run_query(connection, "SELECT count(*) FROM range(1000000000000) r(x) WHERE x % 7 = 0", kind)
            finally:
                distill.DUCKDB_SECONDS = bound
    return _run_query(connection, sql, kind)


build.run_query = _marked
"""


@pytest.mark.skipif(importlib.util.find_spec("duckdb") is None, reason="duckdb is not installed")
@pytest.mark.parametrize("where", ["inside a query", "anywhere in generation"])
def test_ctrl_c_during_duckdb_neighbour_generation_stops_the_run(tmp_path: Path, where: str) -> None:
    """Exit code 2 and pytest's KeyboardInterrupt summary; no case failed or passed by it, no
    traceback of a thread, nothing cached of the neighbours half built."""
    # duckdb is imported in child processes only: a second import in one process aborts it
    subprocess.run([sys.executable, "-c", MAKE_DATABASE, str(tmp_path / "shop.duckdb")], check=True, timeout=120)
    held = where == "inside a query"
    gold = "SELECT name FROM emp WHERE age >= 30" if held else SLOW_GOLD
    write_suite(tmp_path, [{"id": "q", "gold": gold, "predicted": gold.replace(">= 30", ">= 30.0")}],
                database="duckdb:///shop.duckdb")
    (tmp_path / "conftest.py").write_text(MARKING_CONFTEST)
    marker, cache = tmp_path / "generating", tmp_path / "cache"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env.update(NL2SQL_CACHE_DIR=str(cache), NL2SQL_TEST_MARKER=str(marker))  # a cache of its own: generation runs
    if held:
        env["NL2SQL_TEST_HOLD"] = "1"
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "shop.nl2sql.yaml"], cwd=tmp_path,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.exists(), "neighbour generation never started"
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "KeyboardInterrupt" in output, output
    for wrong in ("Query interrupted", "FAILED", "Exception in thread", "passed"):
        assert wrong not in output, output
    assert not list(cache.rglob("manifest.json")), "neighbours built in part were cached"
