"""DuckDB engines share worker processes (`engines.duckdb._WorkerPool`): a case's databases and the
run's neighbours in one process, not one each, with every database still held apart and every
query still bounded in time and memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import process_gone
from pytest_nl2sql.engines import Limits, QueryError, QueryTimeout, TooManyRows, open_engine
from pytest_nl2sql.engines.duckdb import _POOL, DuckdbEngine, _WorkerPool, neighbour_worker, release_worker

duckdb = pytest.importorskip("duckdb")

NORMAL = Limits(timeout=30.0)


def _database(folder: Path, name: str, table: str, rows: list[tuple[int, str]]) -> Path:
    path = folder / f"{name}.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(f"CREATE TABLE {table} (x INTEGER, s VARCHAR)")
    conn.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
    conn.close()
    return path


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    return (_database(tmp_path, "a", "ta", [(1, "one"), (2, "two")]),
            _database(tmp_path, "b", "tb", [(3, "three")]))


def test_two_databases_and_the_neighbours_share_one_process(two: tuple[Path, Path]) -> None:
    """Before, each engine started a process of its own (an interpreter, duckdb imported, ~0.15 s of
    CPU each) and the neighbours one more."""
    a, b = (open_engine(f"duckdb:///{path}") for path in two)
    neighbours = neighbour_worker()
    try:
        assert a.execute("SELECT s FROM ta ORDER BY x", NORMAL).rows == [("one",), ("two",)]
        assert b.execute("SELECT s FROM tb", NORMAL).rows == [("three",)]
        assert a._worker is b._worker is neighbours
        attached = DuckdbEngine(two[1], worker=neighbours)
        assert attached.execute("SELECT count(*) FROM tb", NORMAL).rows == [(1,)]
        attached.close()
        pid = a._worker.pid
        a.close()
        assert not process_gone(pid)  # b and the neighbours still use it
        assert b.execute("SELECT count(*) FROM tb", NORMAL).rows == [(1,)]
        b.close()
        assert not process_gone(pid)
    finally:
        a.close()
        b.close()
        release_worker(neighbours)
    assert not process_gone(pid)  # the last user gone: kept, idle, for the next engine of this process


def test_an_idle_worker_serves_the_next_engine_and_a_second_idle_one_ends(two: tuple[Path, Path]) -> None:
    """An engine opened per query (`eval_exec_match` in a loop) paid a process start each time
    (~0.16 s of CPU: an interpreter, duckdb imported); the pool keeps one worker, idle, instead."""
    first = open_engine(f"duckdb:///{two[0]}")
    assert first.execute("SELECT count(*) FROM ta", NORMAL).rows == [(2,)]
    pid = first._worker.pid
    first.close()
    again = open_engine(f"duckdb:///{two[1]}")
    try:
        assert again.execute("SELECT count(*) FROM tb", NORMAL).rows == [(1,)]
        assert again._worker.pid == pid  # the idle process, not a new one
        with pytest.raises(QueryError, match="ta"):
            again.execute("SELECT * FROM ta", NORMAL)  # it holds nothing of the engine before
    finally:
        again.close()
    pool = _WorkerPool()
    one, other = pool.acquire("/data/a.duckdb"), pool.acquire("/data/a.duckdb")  # one file: two workers
    assert one is not other
    one.start()
    other.start()
    pids = one.pid, other.pid
    pool.release(one, "/data/a.duckdb")
    pool.release(other, "/data/a.duckdb")
    assert list(pool._users) == [one] and not process_gone(pids[0]) and process_gone(pids[1])
    assert pool.acquire(None) is one
    pool.release(one, None)
    one.shutdown()
    pool._users.clear()


def test_each_database_stays_its_own(two: tuple[Path, Path]) -> None:
    """Two databases in one process are two DuckDB instances: neither sees the other's tables,
    and neither can attach a file or change its settings."""
    a, b = (open_engine(f"duckdb:///{path}") for path in two)
    try:
        assert a._worker is b._worker
        with pytest.raises(QueryError, match="tb"):
            a.execute("SELECT * FROM tb", NORMAL)
        with pytest.raises(QueryError):
            a.execute(f"SELECT * FROM '{two[1]}'", NORMAL)
        assert [row[0] for row in a.execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal", NORMAL).rows] \
            == [two[0].stem]
        for statement in (f"ATTACH '{two[1]}' AS other", "SET memory_limit = '100GB'"):
            with pytest.raises(QueryError):
                a.execute(statement, NORMAL)
    finally:
        a.close()
        b.close()


def test_a_query_past_its_limits_leaves_the_other_database_working(two: tuple[Path, Path]) -> None:
    """A query killed at its deadline, or out of memory, takes the process down: the other
    engine's database re-opens on its next query, and the memory failure is the query's own
    (retried once in a fresh process holding its database alone)."""
    a, b = (open_engine(f"duckdb:///{path}") for path in two)
    try:
        assert b.execute("SELECT count(*) FROM tb", NORMAL).rows == [(1,)]
        worker = a._worker
        with pytest.raises(QueryTimeout):
            a.execute("SELECT count(*) FROM range(1000000000000)", Limits(timeout=0.5))
        assert b.execute("SELECT s FROM tb", NORMAL).rows == [("three",)]
        kills = worker.kills
        with pytest.raises(TooManyRows, match="memory"):
            a.execute("SELECT repeat('x', 10000000) FROM range(300)", Limits(timeout=60.0))
        assert worker.kills == kills + 2  # out of memory with b open, then alone in a fresh process
        assert b.execute("SELECT s FROM tb", NORMAL).rows == [("three",)]
        assert a.execute("SELECT count(*) FROM ta", NORMAL).rows == [(2,)]
    finally:
        a.close()
        b.close()


def test_a_worker_holds_a_few_instances_and_never_two_of_one_file(tmp_path: Path) -> None:
    """Each own instance reserves address space of the capped process: a worker holds at most
    `OWN_PER_WORKER`; two engines of one file (DuckDB keeps one instance per file and process) go
    to two workers."""
    pool = _WorkerPool()
    paths = [f"/data/{i}.duckdb" for i in range(_WorkerPool.OWN_PER_WORKER + 1)]
    workers = [pool.acquire(path) for path in paths]
    assert len({id(w) for w in workers[:-1]}) == 1 and workers[-1] is not workers[0]
    again = pool.acquire(paths[0])
    assert again is workers[-1]
    assert pool.acquire(None) is workers[0]  # the neighbours: the first worker, whatever it holds
    for worker, path in [*zip(workers, paths), (again, paths[0]), (workers[0], None)]:
        pool.release(worker, path)
    assert not pool._users  # none was started: none is kept idle
    assert _POOL is not pool
