"""DuckDB neighbours without a statement or a round trip that changes nothing (issue 32): what the
engines and the generator no longer do again, each checked against what it gives."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

duckdb = pytest.importorskip("duckdb")

from pytest_nl2sql.engines import (
    Limits,
    open_engine,
)
from pytest_nl2sql.engines.duckdb import DuckdbEngine, new_worker
from pytest_nl2sql.engines.worker import Worker
from pytest_nl2sql.engines.worker_child import ROW_GROUP_ROWS, Alarm, SharedDuckdb

LIMITS = Limits()


def _database(path: Path, rows: int = 5) -> Path:
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE dept(id INTEGER PRIMARY KEY, name VARCHAR)")
        connection.execute(f"CREATE TABLE emp AS SELECT i AS id, 'e' || i AS name, 1 + i % 3 AS dept_id FROM range({rows}) r(i)")
        connection.execute("INSERT INTO dept VALUES (3, 'lab'), (1, 'sales'), (2, 'ops')")  # rowid order is not key order
    return path


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The requests the parent waits for an answer to (`Worker._ask`), by kind."""
    asked: list[str] = []
    ask = Worker._ask

    def counted(self: Worker, message: tuple[Any, ...], deadline: float) -> Any:
        asked.append(message[0])
        return ask(self, message, deadline)

    monkeypatch.setattr(Worker, "_ask", counted)
    return asked


def test_a_closed_neighbour_engine_costs_no_round_trip_and_is_closed_before_the_next_request(
        tmp_path: Path, requests: list[str]) -> None:
    """A neighbour's engine ends without waiting for the worker (it closed it with a round trip of
    its own, one per neighbour and per shrink attempt); the next request finds it closed."""
    paths = [_database(tmp_path / f"n{i}.duckdb") for i in range(3)]
    worker = new_worker()
    try:
        for path in paths:
            engine = DuckdbEngine(path, worker=worker)
            assert engine.execute("SELECT count(*) FROM emp", LIMITS).rows == [(5,)]
            requests.clear()
            engine.close()
            assert requests == []  # no answer waited for
        last = DuckdbEngine(paths[0], worker=worker)
        assert last.execute("SELECT count(*) FROM dept", LIMITS).rows == [(3,)]
        assert len(worker._opened) == 1  # the others closed in the child too
        last.close()
    finally:
        worker.shutdown()


def test_a_shared_worker_reads_a_files_columns_once(tmp_path: Path, requests: list[str]) -> None:
    """Every neighbour judged and every attempt of a shrink asked the worker for the columns and
    types of the same file (a SQLite gold is translated with them); now once per file, and once per
    set of tables copied, with the same answer."""
    path = _database(tmp_path / "n.duckdb")
    worker = new_worker()
    try:
        first = DuckdbEngine(path, worker=worker)
        whole = first.schema_types()
        first.close()
        assert whole == {"dept": {"id": "INTEGER", "name": "VARCHAR"}, "emp": {"id": "BIGINT", "name": "VARCHAR", "dept_id": "BIGINT"}}
        copies = [DuckdbEngine(path, worker=worker, rows=(("dept", (0, 2)), ("emp", (i,)))) for i in range(4)]
        requests.clear()
        assert all(copy.schema_types() == whole for copy in copies)
        assert requests.count("read") == 1
        again = DuckdbEngine(path, worker=worker)
        assert again.schema_types() == whole and requests.count("read") == 1
        for engine in (*copies, again):
            engine.close()
    finally:
        worker.shutdown()


def test_copies_of_rows_come_from_the_file_attached_once_in_rowid_order(tmp_path: Path) -> None:
    """A shrink's attempts copy rows of one neighbour hundreds of times: the file stays attached
    between copies (it was attached and detached for each), and each copy holds the rows named, in
    rowid order, as a sorted copy did; a table of no rows is made empty."""
    path = _database(tmp_path / "n.duckdb", rows=40)
    config = {"memory_limit": "1GB", "threads": 1, "enable_external_access": False, "lock_configuration": True}
    shared = SharedDuckdb(config)
    try:
        for kept in [(0, 2), (2,), ()]:
            connection, alias = shared.attach(str(path), config, (("dept", kept), ("emp", (5, 1, 30))))
            with duckdb.connect(str(path), read_only=True) as source:
                expected = source.execute("SELECT * FROM dept WHERE rowid IN (SELECT unnest(?::BIGINT[])) ORDER BY rowid",
                                          [list(kept)]).fetchall()
            assert connection.execute("SELECT * FROM dept").fetchall() == expected
            assert connection.execute("SELECT id FROM emp").fetchall() == [(1,), (5,), (30,)]
            assert connection.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'dept'"
                                      " AND database_name = current_database()").fetchall() == [("id", "INTEGER"), ("name", "VARCHAR")]
            connection.close()
            shared.release(alias)
        attached = shared._conn.execute("SELECT count(*) FROM duckdb_databases() WHERE NOT internal"
                                        " AND database_name LIKE 'nl2sql_%'").fetchone()
        assert attached == (1,)  # the file, kept for the next copies; every copy detached
    finally:
        shared.close()


def test_only_a_file_with_a_row_group_to_split_gets_two_threads(tmp_path: Path) -> None:
    """DuckDB splits a scan by row groups: a file of smaller tables (every Spider database) runs
    each query on one thread, which costs a small query ~20% less; a bigger one keeps two."""
    small = _database(tmp_path / "small.duckdb")
    big = _database(tmp_path / "big.duckdb", rows=ROW_GROUP_ROWS + 1)
    for path, threads in ((small, "1"), (big, "2")):
        engine = open_engine(f"duckdb:///{path}")
        try:
            assert engine.execute("SELECT current_setting('threads')::VARCHAR, current_setting('lock_configuration')",
                                  LIMITS).rows == [(threads, True)]
        finally:
            engine.close()


def test_one_alarm_thread_bounds_queries_one_after_another() -> None:
    """The work bound of a DuckDB query was a timer thread started per query (~0.1-0.3 ms of CPU,
    as much as a small query): one thread now fires at each query's deadline, never after the
    query was disarmed."""
    alarm = Alarm()
    fired: list[int] = []
    before = threading.active_count()
    for i in range(200):
        alarm.disarm(alarm.arm(30.0, lambda i=i: fired.append(i)))
    assert threading.active_count() <= before + 1
    token = alarm.arm(0.05, lambda: fired.append(-1))
    deadline = time.monotonic() + 30
    while not fired and time.monotonic() < deadline:
        time.sleep(0.01)
    alarm.disarm(token)
    assert fired == [-1]
    connection = duckdb.connect(":memory:")
    started = time.monotonic()
    token = alarm.arm(0.2, connection.interrupt)
    with pytest.raises(duckdb.InterruptException):
        connection.execute("SELECT count(*) FROM range(1000000000000) r(x) WHERE x % 7 = 0").fetchall()
    alarm.disarm(token)
    assert time.monotonic() - started < 30
    assert connection.execute("SELECT 42").fetchall() == [(42,)]  # nothing fires after the disarm


def test_a_mutant_that_cannot_bind_is_not_run_again_on_candidates_of_the_same_tables() -> None:
    """A mutant DuckDB cannot bind (a column outside the GROUP BY) fails on every candidate of the
    same tables: run on the first only, with the same mutants told apart on each candidate."""
    from pytest_nl2sql.neighbours import distill
    from pytest_nl2sql.neighbours.schema import Schema, Table

    schema = Schema("duckdb", (Table("t", (), (), (), (), "CREATE TABLE t(g INTEGER, x INTEGER)", True),), ())
    gold = "SELECT g, count(*) FROM t GROUP BY g"
    mutants = ["SELECT g, x FROM t GROUP BY g", "SELECT count(*) FROM t", "SELECT g, count(*) FROM t WHERE x > 1 GROUP BY g"]
    ran: list[str] = []

    def run(connection: Any, sql: str, kind: str) -> distill.Outcome | None:
        ran.append(sql)
        return distill.run_query(connection, sql, kind)

    found = []
    for rows in ("(1, 1), (1, 2), (2, 3)", "(1, 5), (2, 7)"):
        connection = duckdb.connect(":memory:")
        connection.execute(schema.tables[0].create_sql)
        connection.execute(f"INSERT INTO t VALUES {rows}")
        found.append(distill.score(connection, [gold], mutants, "duckdb", False, run=run, schema=schema))
        alone = distill.score(connection, [gold], mutants, "duckdb", False)  # no schema: every mutant runs
        assert found[-1] == alone
        connection.close()
    assert ran.count(mutants[0]) == 1 and ran.count(mutants[1]) == 2
    assert [sorted(killed) for _, killed in found] == [[1, 2], [1]]
