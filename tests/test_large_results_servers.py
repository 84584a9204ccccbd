"""Results past `Limits.memory_rows` on the real servers: PostgreSQL and MariaDB engines stream
them (`stream`) under the guards of `execute`, and the pipeline compares them as streams.

The servers, users and scratch databases are those of `test_hostile_servers.py` (a
least-privilege login, the recommended deployment); a test skips, naming the reason, when its
driver or server is missing. Each server gets a table `big` of `ROWS` rows, small enough to be
fast, with `memory_rows` far below it so that every path of a large result is taken.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from test_hostile_servers import MyServer, PgServer, _no_token_check, my, pg  # noqa: F401  (fixtures)

import pytest_nl2sql.engines.mysql as mysql_engine
import pytest_nl2sql.engines.postgres as postgres_engine
from pytest_nl2sql.engines import Limits, QueryError, QueryTimeout, TooManyRows, open_engine
from pytest_nl2sql.engines.base import ResultTooLarge, can_stream
from pytest_nl2sql.vocab import Verdict

pytestmark = pytest.mark.services

ROWS = 8_000
LIMITS = Limits(timeout=10, max_rows=50_000, memory_rows=1_000)
CHANGED = 7337  # the row whose value a wrong prediction changes


@dataclass
class Server:
    """A server with the table `big`: how to open it, and how the admin reads it."""

    url: str
    dialect: str
    module: Any  # the engine's module (to switch its token check off)
    count: Any  # () -> rows of `big`, as the admin sees them
    sessions: Any  # () -> [(state, query)] of the read-only login's sessions
    sleep: str  # a condition that sleeps 10 ms for each row it is evaluated on, and holds


@pytest.fixture(scope="module")
def pg_big(pg: PgServer) -> PgServer:  # noqa: F811
    pg.admin.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, name TEXT, grp INTEGER)")
    pg.admin.execute(
        f"INSERT INTO big SELECT g, 'name' || (g * 7 % 5000), g % 10 FROM generate_series(1, {ROWS}) g"
    )
    return pg


@pytest.fixture(scope="module")
def my_big(my: MyServer) -> MyServer:  # noqa: F811
    my.run(f"CREATE TABLE `{my.database}`.big (id INTEGER PRIMARY KEY, name TEXT, grp INTEGER)")
    with my.admin.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO `{my.database}`.big VALUES (%s, %s, %s)",
            [(i, f"name{i * 7 % 5000}", i % 10) for i in range(1, ROWS + 1)],
        )
    return my


@pytest.fixture(params=["postgres", "mariadb"])
def server(request: pytest.FixtureRequest) -> Server:
    if request.param == "postgres":
        pg: PgServer = request.getfixturevalue("pg_big")
        return Server(
            url=pg.url,
            dialect="postgres",
            module=postgres_engine,
            count=lambda: pg.run("SELECT count(*) FROM big")[0][0],
            sessions=lambda: pg.run(
                "SELECT state, query FROM pg_stat_activity WHERE usename = %s", pg.role
            ),
            sleep="pg_sleep(0.01) IS NOT NULL",
        )
    my: MyServer = request.getfixturevalue("my_big")  # noqa: F811
    return Server(
        url=my.url,
        dialect="mysql",
        module=mysql_engine,
        count=lambda: my.run(f"SELECT count(*) FROM `{my.database}`.big")[0][0],
        sessions=lambda: my.run(
            "SELECT command, info FROM information_schema.processlist WHERE user = %s", my.user
        ),
        sleep="SLEEP(0.01) = 0",
    )


@pytest.fixture
def engine(server: Server) -> Iterator[Any]:
    opened = open_engine(server.url)
    yield opened
    opened.close()


def _idle(server: Server) -> None:
    """The read-only login holds no transaction and runs no query (the stream was ended).

    Polled for up to half a second: the server updates a session's state just after it answers,
    so the watchdog's own `KILL QUERY` connection can still be listed for a moment after its
    client got the answer and closed. A query left running would still be listed at the end
    (every slow query here has seconds left to run when it is stopped)."""
    deadline = time.monotonic() + 0.5
    while True:
        busy = [(state, query) for state, query in server.sessions() if state not in ("idle", "Sleep")]
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not busy


# -- the engines ---------------------------------------------------------------------------------


def test_execute_past_memory_rows_raises_result_too_large(engine: Any, server: Server) -> None:
    assert can_stream(engine)
    with pytest.raises(ResultTooLarge):
        engine.execute("SELECT id FROM big", LIMITS)
    _idle(server)
    # with the default memory_rows (above max_rows) nothing changes: the row cap applies first
    assert len(engine.execute("SELECT id FROM big", Limits(max_rows=50_000)).rows) == ROWS
    with pytest.raises(TooManyRows):
        engine.execute("SELECT id FROM big", Limits(max_rows=5_000))


def test_a_stream_gives_the_rows_execute_gives(engine: Any, server: Server) -> None:
    sql = "SELECT id, name, grp * 1.5 AS half, NULL AS nothing FROM big ORDER BY id"
    held = engine.execute(sql, Limits(max_rows=50_000))
    with engine.stream(sql, LIMITS) as result:
        assert result.columns == held.columns
        batches = list(result)
    assert len(batches) > 1 and all(batches)
    assert [row for batch in batches for row in batch] == held.rows
    assert result.rows == ROWS
    _idle(server)


def test_a_stream_stops_at_the_row_cap(engine: Any, server: Server) -> None:
    with pytest.raises(TooManyRows), engine.stream("SELECT id FROM big", Limits(max_rows=5_000)) as result:
        for _ in result:
            pass
    assert result.rows == 5_001
    _idle(server)
    assert engine.execute("SELECT count(*) FROM big", LIMITS).rows == [(ROWS,)]


def test_a_write_through_stream_is_refused(engine: Any, server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(QueryError), engine.stream("INSERT INTO big VALUES (0, 'zero', 0)", LIMITS):
        pass
    with pytest.raises(QueryError), engine.stream("SELECT 1; DELETE FROM big", LIMITS):
        pass
    # without the token check, the READ ONLY transaction (and the declared cursor) still refuse
    monkeypatch.setattr(server.module, "check_single_select", _no_token_check)
    write = (
        "WITH d AS (DELETE FROM big RETURNING *) SELECT * FROM d"
        if server.dialect == "postgres"
        else "DELETE FROM big"
    )
    with pytest.raises(QueryError), engine.stream(write, LIMITS) as result:
        list(result)
    assert server.count() == ROWS
    _idle(server)
    assert engine.execute("SELECT count(*) FROM big", LIMITS).rows == [(ROWS,)]


def test_the_deadline_holds_on_a_slow_stream(engine: Any, server: Server) -> None:
    limits = Limits(timeout=1, max_rows=50_000, memory_rows=1_000)
    started = time.monotonic()
    with pytest.raises(QueryTimeout), engine.stream(f"SELECT id FROM big WHERE {server.sleep}", limits) as result:
        list(result)
    assert time.monotonic() - started < 4
    # slow only after the first rows: the timeout comes from a later batch
    started = time.monotonic()
    sql = f"SELECT id FROM big WHERE id <= 4000 OR {server.sleep} ORDER BY id"
    with pytest.raises(QueryTimeout), engine.stream(sql, limits) as result:
        for _ in result:
            pass
    assert result.rows >= 2_000 and time.monotonic() - started < 4
    _idle(server)
    assert engine.execute("SELECT count(*) FROM big", LIMITS).rows == [(ROWS,)]


def test_the_time_limit_counts_every_batch(engine: Any, server: Server) -> None:
    # each batch costs about 0.4 s of the database's time, well under the limit; their sum is not
    limits = Limits(timeout=1, max_rows=50_000, memory_rows=1_000)
    started = time.monotonic()
    sql = f"SELECT id FROM big WHERE id % 50 <> 0 OR {server.sleep} ORDER BY id"
    with pytest.raises(QueryTimeout), engine.stream(sql, limits) as result:
        for _ in result:
            pass
    assert result.rows >= 2_000 and time.monotonic() - started < 3
    _idle(server)


def test_the_consumers_time_is_not_the_querys(engine: Any, server: Server) -> None:
    limits = Limits(timeout=1, max_rows=50_000, memory_rows=1_000)
    with engine.stream("SELECT id FROM big WHERE id <= 6000", limits) as result:
        for _ in result:
            time.sleep(0.4)  # three batches or more: longer than the limit in all
    assert result.rows == 6_000


@pytest.mark.parametrize("how", ["closed early", "consumer raised"])
def test_the_connection_works_after_a_stream_ends_early(engine: Any, server: Server, how: str) -> None:
    raised = pytest.raises(KeyError) if how == "consumer raised" else contextlib.nullcontext()
    with raised, engine.stream("SELECT id, name FROM big ORDER BY id", LIMITS) as result:
        for batch in result:
            assert batch[0] == (1, "name7")
            if how == "consumer raised":
                raise KeyError("the consumer failed")
            break
    _idle(server)
    assert engine.execute("SELECT count(*) FROM big", LIMITS).rows == [(ROWS,)]
    with engine.stream("SELECT id FROM big", LIMITS) as result:
        assert sum(map(len, result)) == ROWS


def test_one_stream_at_a_time(engine: Any, server: Server) -> None:
    with engine.stream("SELECT id FROM big", LIMITS) as result:
        with pytest.raises(RuntimeError):
            engine.execute("SELECT 1", LIMITS)
        with pytest.raises(RuntimeError), engine.stream("SELECT 1", LIMITS):
            pass
        assert sum(map(len, result)) == ROWS
    assert engine.execute("SELECT 1", LIMITS).rows == [(1,)]


# -- through the pipeline: a result past memory_rows is compared as a stream ----------------------


@pytest.mark.parametrize("changed", [False, True])
def test_the_pipeline_compares_results_past_memory_rows_as_streams(
    server: Server, tmp_path: Any, changed: bool
) -> None:
    from pytest_nl2sql.cases.model import Case
    from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions

    value = f"CASE WHEN id = {CHANGED} THEN 99 ELSE grp END" if changed else "grp"
    case = Case(
        id="big", file=tmp_path / "big.nl2sql.yaml", line=1, position=0, database=server.url,
        database_target=server.url, dialect=server.dialect, gold=("SELECT id, name, grp FROM big",),
        predicted=f"SELECT {value}, id, name FROM big ORDER BY id DESC",
    )  # fmt: skip
    pipeline = Pipeline(RunOptions(limits=LIMITS, neighbours=0))
    try:
        outcome = pipeline.evaluate(case, CaseLabel("big.nl2sql.yaml::big", "big.nl2sql.yaml"))
    finally:
        pipeline.close()
    assert outcome.gold is not None and outcome.gold.large == frozenset({0})
    assert outcome.judgement is not None and outcome.judgement.streamed
    _idle(server)
    if not changed:
        assert outcome.result.verdict is Verdict.PASS, outcome.explanation
        return
    assert (outcome.result.verdict, outcome.result.reason) == (Verdict.MISMATCH, "values")
    assert "results too large to hold in memory, compared as streams" in outcome.explanation
    assert f"- ({CHANGED}, 'name{CHANGED * 7 % 5000}', {CHANGED % 10})" in outcome.explanation
