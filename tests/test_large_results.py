"""Results too big for memory (issue 11): engines stream them, `judge/large.py` compares them in
bounded memory, and its verdicts are those of the in-memory `compare_results`."""

from __future__ import annotations

import importlib.util
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_nl2sql.engines.base import (
    BatchStream,
    Limits,
    QueryError,
    QueryTimeout,
    ResultTooLarge,
    TooManyRows,
    can_stream,
)
from pytest_nl2sql.engines.sqlite import SqliteEngine
from pytest_nl2sql.judge import large
from pytest_nl2sql.judge.compare import CompareOptions, compare_results
from pytest_nl2sql.judge.equality import normalise_value
from pytest_nl2sql.judge.large import Unsupported, compare_large, judge_large, unsupported
from pytest_nl2sql.vocab import Verdict

ROWS = 12_000
LIMITS = Limits(timeout=10.0, max_rows=ROWS * 2, memory_rows=1_000)
EXEC = CompareOptions()


def _build(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, score REAL)")
    conn.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?)",
        ((i, f"name{i * 7 % 5000}", i % 10, (i % 97) / 4) for i in range(ROWS)),
    )
    conn.commit()
    conn.close()
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.mktemp("large") / "large.sqlite")


@pytest.fixture(scope="module")
def engine(db: Path) -> Any:
    engine = SqliteEngine(db)
    yield engine
    engine.close()


def _judge(engine: Any, pred: str, gold: str, *, ordered: bool = False, options: CompareOptions = EXEC,
           limits: Limits = LIMITS) -> Any:
    return judge_large(pred, gold, engine, limits, order_matters=ordered, options=options)


# -- the engines ----------------------------------------------------------------------------------

def test_execute_raises_result_too_large_past_memory_rows_and_too_many_rows_past_the_cap(engine: Any) -> None:
    with pytest.raises(ResultTooLarge):
        engine.execute("SELECT * FROM t", LIMITS)
    with pytest.raises(ResultTooLarge):
        engine.execute_trusted("SELECT * FROM t", LIMITS)
    with pytest.raises(ResultTooLarge):  # a query the worker runs (instr is not bounded per step)
        engine.execute("SELECT id, instr(name, '7') FROM t", LIMITS)
    with pytest.raises(TooManyRows):  # memory_rows at or above max_rows never applies
        engine.execute("SELECT * FROM t", Limits(max_rows=500, memory_rows=1_000))
    assert len(engine.execute("SELECT * FROM t LIMIT 1000", LIMITS).rows) == 1000
    assert can_stream(engine)


@pytest.mark.parametrize("sql", ["SELECT * FROM t", "SELECT id, instr(name, '7') FROM t"], ids=["here", "worker"])
@pytest.mark.parametrize("trusted", [False, True])
def test_stream_gives_every_row_in_bounded_batches(engine: Any, sql: str, trusted: bool) -> None:
    with engine.stream(sql, LIMITS, trusted=trusted) as result:
        sizes = [len(batch) for batch in result]
        assert result.columns[0] == "id"
    assert sum(sizes) == ROWS and max(sizes) <= 2_000
    assert engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(ROWS,)]  # the worker is free again


@pytest.mark.parametrize("sql", ["SELECT * FROM t", "SELECT id, instr(name, '7') FROM t"], ids=["here", "worker"])
def test_stream_counts_max_rows(engine: Any, sql: str) -> None:
    with pytest.raises(TooManyRows), engine.stream(sql, Limits(max_rows=10_000, memory_rows=100)) as result:
        for _ in result:
            pass
    assert engine.execute("SELECT 1", LIMITS).rows == [(1,)]


@pytest.mark.parametrize("sql", ["INSERT INTO t (id) VALUES (-1)", "DELETE FROM t", "CREATE TEMP TABLE x (a)",
                                 "SELECT load_extension('x')"])
def test_stream_refuses_writes(engine: Any, sql: str) -> None:
    with pytest.raises(QueryError), engine.stream(sql, LIMITS) as result:
        list(result)
    assert engine.execute("SELECT count(*) FROM t", LIMITS).rows == [(ROWS,)]


@pytest.mark.parametrize("call", ["", "instr('a', 'b') + "], ids=["here", "worker"])
def test_stream_deadline_holds(engine: Any, call: str) -> None:
    sql = f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT {call}x FROM c WHERE x < 0"
    started = time.monotonic()
    with pytest.raises(QueryTimeout), engine.stream(sql, Limits(timeout=0.5)) as result:
        list(result)
    assert time.monotonic() - started < 3
    judgement = _judge(engine, sql, "SELECT id FROM t LIMIT 100", limits=Limits(timeout=0.5, memory_rows=10))
    assert judgement.verdict is Verdict.PRED_TIMEOUT


@pytest.mark.parametrize("sql", ["SELECT * FROM t", "SELECT id, instr(name, '7') FROM t"], ids=["here", "worker"])
def test_the_consumers_time_between_batches_is_not_the_querys(engine: Any, sql: str) -> None:
    with engine.stream(sql, Limits(timeout=0.3, max_rows=ROWS)) as result:
        count = 0
        for batch in result:
            count += len(batch)
            if count <= 8_000:
                time.sleep(0.1)  # 0.4 s in all, past the 0.3 s limit
    assert count == ROWS


def test_a_query_of_the_thread_holding_a_worker_stream_is_refused(engine: Any) -> None:
    with engine.stream("SELECT id, instr(name, '7') FROM t", LIMITS) as result:
        next(iter(result))
        with pytest.raises(RuntimeError, match="close the stream"):
            engine.execute("SELECT instr('a', 'b')", LIMITS)
    assert engine.execute("SELECT instr('ab', 'b')", LIMITS).rows == [(2,)]


def test_a_closed_stream_stops_its_query(engine: Any) -> None:
    with engine.stream("SELECT * FROM t", LIMITS) as result:
        next(iter(result))
    with engine.stream("SELECT id FROM t WHERE id < 3", LIMITS) as result:
        assert [row for batch in result for row in batch] == [(0,), (1,), (2,)]


# -- judging, streamed -----------------------------------------------------------------------------

def test_equal_results_in_another_row_and_column_order_match(engine: Any) -> None:
    judgement = _judge(engine, "SELECT score, name, grp, id FROM t ORDER BY name DESC", "SELECT * FROM t")
    assert judgement.verdict is Verdict.PASS
    assert judgement.comparison.pairing == (3, 1, 2, 0)
    assert len(judgement.result.rows) == large.SAMPLE_ROWS and judgement.result.columns[0] == "score"


def test_one_value_difference_is_found_and_shown(engine: Any) -> None:
    pred = "SELECT id, name, CASE WHEN id = 7337 THEN 99 ELSE grp END, score FROM t"
    judgement = _judge(engine, pred, "SELECT * FROM t")
    comparison = judgement.comparison
    assert judgement.verdict is Verdict.MISMATCH and comparison.reason == "values"
    assert comparison.missing == ((7337, f"name{7337 * 7 % 5000}", 7, (7337 % 97) / 4),)
    assert comparison.extra == ((7337, f"name{7337 * 7 % 5000}", 99, (7337 % 97) / 4),)
    assert (comparison.missing_count, comparison.extra_count) == (1, 1)


def test_row_count_difference(engine: Any) -> None:
    judgement = _judge(engine, "SELECT id, grp FROM t WHERE id NOT IN (5, 6)", "SELECT id, grp FROM t")
    comparison = judgement.comparison
    assert comparison.reason == "row count" and comparison.detail.startswith(f"expected {ROWS} rows, got {ROWS - 2}")
    assert sorted(row[0] for row in comparison.missing) == [5, 6] and comparison.extra == ()
    empty = _judge(engine, "SELECT id FROM t WHERE id < 0", "SELECT id FROM t").comparison
    assert empty.reason == "row count" and empty.missing_count == ROWS and len(empty.missing) == large.DIFF_CAP


def test_ordered_first_difference(engine: Any) -> None:
    gold = "SELECT id, grp FROM t ORDER BY id"
    swapped = "SELECT id, grp FROM t ORDER BY CASE id WHEN 9000 THEN 9001 WHEN 9001 THEN 9000 ELSE id END"
    judgement = _judge(engine, swapped, gold, ordered=True)
    assert judgement.comparison.reason == "order" and judgement.comparison.first_order_difference == 9000
    assert _judge(engine, "SELECT grp, id FROM t ORDER BY id", gold, ordered=True).verdict is Verdict.PASS
    changed = "SELECT id, grp + (id = 2345) FROM t ORDER BY id"
    comparison = _judge(engine, changed, gold, ordered=True).comparison
    assert comparison.reason == "values" and comparison.first_order_difference == 2345


def test_duplicates_are_counted(engine: Any) -> None:
    gold = "SELECT grp FROM t"
    assert _judge(engine, "SELECT grp FROM t ORDER BY grp", gold).verdict is Verdict.PASS
    comparison = _judge(engine, "SELECT DISTINCT grp FROM t", gold).comparison
    assert comparison.reason == "row count" and comparison.missing_count == ROWS - 10
    # the same row count, one duplicate traded for another
    traded = "SELECT CASE WHEN id = 3 THEN 4 ELSE grp END FROM t"
    comparison = _judge(engine, traded, gold).comparison
    assert (comparison.reason, comparison.missing, comparison.extra) == ("values", ((3,),), ((4,),))


def test_prediction_errors_are_verdicts_and_gold_errors_raise(engine: Any) -> None:
    from pytest_nl2sql.judge.execute import GoldError

    assert _judge(engine, "SELECT nope FROM t", "SELECT grp FROM t").verdict is Verdict.PRED_ERROR
    assert _judge(engine, "DELETE FROM t", "SELECT grp FROM t").verdict is Verdict.PRED_ERROR
    with pytest.raises(GoldError, match="row cap"):
        _judge(engine, "SELECT 1", "SELECT * FROM t", limits=Limits(max_rows=ROWS // 2, memory_rows=10))
    pred = _judge(engine, "SELECT t.id FROM t, t AS u", "SELECT grp FROM t")
    assert pred.verdict is Verdict.TOO_MANY_ROWS


def test_unsupported_options_say_so() -> None:
    assert unsupported(CompareOptions(abs_tol=0.01)) and unsupported(CompareOptions(mode="set"))
    assert unsupported(CompareOptions(case_sensitive=False, strip_whitespace=True)) is None
    with pytest.raises(Unsupported, match="tolerance"):
        compare_large(_opener(("a",), [(1,)]), _opener(("a",), [(1,)]), order_matters=False,
                      options=CompareOptions(rel_tol=0.1))


@pytest.mark.skipif(importlib.util.find_spec("duckdb") is None, reason="duckdb is not installed")
def test_duckdb_streams_and_judges(tmp_path: Path) -> None:
    import duckdb

    from pytest_nl2sql.engines.duckdb import DuckdbEngine

    path = tmp_path / "large.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE t AS SELECT range AS id, range % 10 AS grp FROM range(20000)")
    conn.close()
    engine = DuckdbEngine(path)
    try:
        limits = Limits(timeout=10.0, max_rows=50_000, memory_rows=1_000)
        with pytest.raises(ResultTooLarge):
            engine.execute("SELECT * FROM t", limits)
        assert judge_large("SELECT grp, id FROM t ORDER BY grp", "SELECT * FROM t", engine, limits,
                           order_matters=False, options=EXEC).verdict is Verdict.PASS
        comparison = judge_large("SELECT id, CASE WHEN id = 777 THEN 5 ELSE grp END FROM t", "SELECT * FROM t",
                                 engine, limits, order_matters=False, options=EXEC).comparison
        assert (comparison.missing, comparison.extra) == (((777, 7),), ((777, 5),))
        with pytest.raises(TooManyRows), engine.stream("SELECT * FROM t", Limits(max_rows=5_000)) as result:
            list(result)
        with pytest.raises(QueryError), engine.stream("CREATE TABLE u (a INT)", limits) as result:
            list(result)
    finally:
        engine.close()


# -- the key property: the same verdicts as the in-memory comparison ------------------------------

class _ListStream:
    def __init__(self, columns: tuple[str, ...], rows: list[tuple], size: int) -> None:
        self.columns = columns
        self._batches = [rows[k : k + size] for k in range(0, len(rows), size)]

    def __iter__(self) -> Any:
        return iter(self._batches)


def _opener(columns: tuple[str, ...], rows: list[tuple], size: int = 2) -> Any:
    @contextmanager
    def open_() -> Any:
        yield _ListStream(columns, rows, size)

    return open_


# (an integer past 2**53 against the float of the same value is left out: the in-memory comparison's
# fast path takes them as equal by Python equality, its normalised path does not; README, "Results too
# big for memory")
VALUES = st.sampled_from([0, 1, 2, 1.0, 0.5, "1", "a", "A", " a", None, b"a", 2**60])


@st.composite
def result_pairs(draw: Any) -> tuple[list[tuple], list[tuple], int, int]:
    width = draw(st.integers(1, 3))
    gold = draw(st.lists(st.tuples(*[VALUES] * width), max_size=7))
    kind = draw(st.sampled_from(["permuted", "edited", "independent"]))
    if kind == "independent":
        pred_width = draw(st.sampled_from([width, width, width + 1]))
        pred = draw(st.lists(st.tuples(*[VALUES] * pred_width), max_size=7))
        return gold, pred, width, pred_width
    order = draw(st.permutations(range(width)))
    pred = [tuple(row[j] for j in order) for row in draw(st.permutations(gold))]
    if kind == "edited" and pred:
        index = draw(st.integers(0, len(pred) - 1))
        action = draw(st.sampled_from(["drop", "duplicate", "change"]))
        if action == "drop":
            del pred[index]
        elif action == "duplicate":
            pred.append(pred[index])
        else:
            row = list(pred[index])
            row[draw(st.integers(0, width - 1))] = draw(VALUES)
            pred[index] = tuple(row)
    return gold, pred, width, width


def _bag(rows: Any, options: CompareOptions) -> list[str]:
    return sorted(repr(tuple(normalise_value(v, options.case_sensitive, options.strip_whitespace) for v in row))
                  for row in rows)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=result_pairs(), ordered=st.booleans(), case_sensitive=st.booleans(), strip=st.booleans(),
       size=st.integers(1, 4))
def test_same_verdicts_as_the_in_memory_comparison(pair: Any, ordered: bool, case_sensitive: bool, strip: bool,
                                                   size: int) -> None:
    # tiny buckets and windows, so that small results take every path of the large ones
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(large, "ROW_BUCKETS", 4)
        patch.setattr(large, "FANOUT", 2)
        patch.setattr(large, "LEAF", 2)
        gold, pred, gold_width, pred_width = pair
        options = CompareOptions(case_sensitive=case_sensitive, strip_whitespace=strip)
        expected = compare_results(gold, pred, ordered, options, gold_columns=gold_width, pred_columns=pred_width)
        got = compare_large(_opener(tuple("g" * gold_width), gold, size), _opener(tuple("p" * pred_width), pred, size),
                            order_matters=ordered, options=options).comparison
    assert got.match == expected.match
    assert got.reason == expected.reason
    if got.match or got.pairing != expected.pairing:
        return  # a mismatch's diff depends on the best-effort pairing, which may differ
    assert (got.missing_count, got.extra_count) == (expected.missing_count, expected.extra_count)
    assert _bag(got.missing, options) == _bag(expected.missing, options)
    assert _bag(got.extra, options) == _bag(expected.extra, options)
    assert got.first_order_difference == expected.first_order_difference


def test_counts_are_estimated_past_the_round(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(large, "ROUND_ROWS", 200)
    gold = [(i,) for i in range(5000)]
    pred = [(i + 10_000,) for i in range(5000)]
    comparison = compare_large(_opener(("a",), gold, 500), _opener(("a",), pred, 500), order_matters=False).comparison
    assert comparison.reason == "values" and "counts estimated" in comparison.detail
    assert 4000 <= comparison.missing_count <= 5000 and 0 < len(comparison.missing) <= large.DIFF_CAP


def test_a_batch_stream_counts_rows_and_stops_once() -> None:
    stops: list[int] = []
    batches = iter([([(3,), (4,)], False), ([(5,)], False)])  # the cap passes before the query ends
    stream = BatchStream(("a",), [(1,), (2,)], False, lambda left: next(batches), lambda: stops.append(1),
                         Limits(max_rows=4))
    with pytest.raises(TooManyRows):
        list(stream)
    stream.close()
    assert stops == [1]


# --- through the pipeline: a result past memory_rows is compared as a stream -----------------

def _pipeline_case(db: Path, gold: str, predicted: str) -> Any:
    from pytest_nl2sql.cases.read import Case

    return Case(id="big", file=db.parent / "big.nl2sql.yaml", line=1, position=0, database=db.name,
                database_target=str(db), gold=(gold,), predicted=predicted)


@pytest.mark.parametrize("changed", [False, True])
def test_the_pipeline_compares_results_past_memory_rows_as_streams(db: Path, changed: bool) -> None:
    from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions

    value = "CASE WHEN id = 7337 THEN 99 ELSE grp END" if changed else "grp"
    case = _pipeline_case(db, "SELECT id, name, grp FROM t", f"SELECT {value}, id, name FROM t ORDER BY id DESC")
    pipeline = Pipeline(RunOptions(limits=LIMITS, neighbours=0))
    try:
        outcome = pipeline.evaluate(case, CaseLabel("big.nl2sql.yaml::big", "big.nl2sql.yaml"))
    finally:
        pipeline.close()
    assert outcome.gold is not None and outcome.gold.large == frozenset({0})
    assert outcome.judgement is not None and outcome.judgement.streamed
    if not changed:
        assert outcome.result.verdict is Verdict.PASS
        return
    assert (outcome.result.verdict, outcome.result.reason) == (Verdict.MISMATCH, "values")
    assert "results too large to hold in memory, compared as streams" in outcome.explanation
    assert f"- (7337, 'name{7337 * 7 % 5000}', 7)" in outcome.explanation
    assert outcome.result.soft_scores is None  # only the first rows are held: no soft scores from them
