"""The pipeline without pytest: infrastructure faults are never charged to the model, and the
predictor gets a request, not the case."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from helpers import make_shop
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.engines import open_engine
from pytest_nl2sql.engines.base import ConnectionLost, Limits, QueryResult
from pytest_nl2sql.gate.baseline import Baseline, BaselineEntry
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline
from pytest_nl2sql.judge.predict import PredictionRequest
from pytest_nl2sql.vocab import Verdict

LABEL = CaseLabel("shop.nl2sql.yaml::q", "shop.nl2sql.yaml", 0)


class Flaky:
    """An engine whose connection drops under the first `drops` queries that match `when`."""

    dialect = "sqlite"

    def __init__(self, inner: Any, drops: int, when: str = "") -> None:
        self.inner, self.drops, self.when, self.calls = inner, drops, when, 0

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        self.calls += 1
        if self.when in sql and self.drops > 0:
            self.drops -= 1
            raise ConnectionLost("server closed the connection unexpectedly")
        return self.inner.execute(sql, limits)

    def schema_ddl(self) -> str:
        return self.inner.schema_ddl()

    def schema_columns(self) -> dict[str, list[str]]:
        return self.inner.schema_columns()

    def close(self) -> None:
        self.inner.close()


def _case(tmp_path: Path, predicted: str = "SELECT count(id) FROM item") -> Case:
    db = make_shop(tmp_path)
    return Case(id="q", file=tmp_path / "shop.nl2sql.yaml", line=3, position=0, question="How many items?",
                database="shop.sqlite", database_target=str(db), gold=("SELECT count(*) FROM item",), predicted=predicted)


def test_a_connection_lost_once_is_retried_and_the_verdict_stands(tmp_path: Path) -> None:
    case = _case(tmp_path)
    engine = Flaky(open_engine(case.database_target), drops=1, when="count(id)")
    outcome = Pipeline().evaluate(case, LABEL, engine=engine)
    assert outcome.result.verdict is Verdict.PASS


def test_a_connection_lost_twice_is_an_error_of_the_run_not_a_failure_of_the_model(tmp_path: Path) -> None:
    case = _case(tmp_path)
    baseline = Baseline("base.json", {("shop.nl2sql.yaml", "q"): BaselineEntry("pass", True)})
    engine = Flaky(open_engine(case.database_target), drops=2, when="count(id)")
    outcome = Pipeline(baseline=baseline).evaluate(case, LABEL, engine=engine)
    assert outcome.broken and outcome.result.verdict is Verdict.GOLD_ERROR
    assert outcome.result.baseline is None  # not a regression: the model did nothing wrong
    assert "connection was lost" in outcome.result.reason and "not the prediction's fault" in outcome.result.reason


def test_a_connection_lost_under_the_gold_is_an_error_naming_the_cause(tmp_path: Path) -> None:
    case = _case(tmp_path)
    engine = Flaky(open_engine(case.database_target), drops=2, when="count(*)")
    outcome = Pipeline().evaluate(case, LABEL, engine=engine)
    assert outcome.broken and "connection was lost" in outcome.result.reason


def test_the_predictor_gets_a_request_without_the_gold(tmp_path: Path) -> None:
    seen: list[Any] = []

    def model(request: PredictionRequest) -> str:
        seen.append(request)
        return "SELECT count(*) FROM item"

    case = _case(tmp_path, predicted=None)
    outcome = Pipeline(hook=model).evaluate(case, LABEL)
    assert outcome.result.verdict is Verdict.PASS
    (request,) = seen
    assert isinstance(request, PredictionRequest) and not hasattr(request, "gold")
    assert "CREATE TABLE item" in request.schema and request.dialect == "sqlite" and request.question == "How many items?"
    assert request.engine.execute("SELECT 1", Limits()).rows == [(1,)]


def test_the_schema_is_read_only_when_a_model_asks_for_it(tmp_path: Path) -> None:
    """A run scoring a predictions file never reads a database's DDL (a round trip per database)."""

    class Counting(Flaky):
        ddl_reads = 0

        def schema_ddl(self) -> str:
            Counting.ddl_reads += 1
            return super().schema_ddl()

    case = _case(tmp_path)
    engine = Counting(open_engine(case.database_target), drops=0)
    assert Pipeline().evaluate(case, LABEL, engine=engine).result.verdict is Verdict.PASS
    assert Counting.ddl_reads == 0
    asked: list[str] = []
    outcome = Pipeline(hook=lambda request: asked.append(request.schema) or "SELECT count(*) FROM item").evaluate(
        dataclasses.replace(case, predicted=None), LABEL, engine=engine)
    assert outcome.result.verdict is Verdict.PASS and Counting.ddl_reads == 1 and "CREATE TABLE item" in asked[0]


def test_a_prediction_too_long_to_send_is_its_own_error_and_never_runs(tmp_path: Path) -> None:
    """A server drops the connection over a query of a gigabyte (a run error, not the model's):
    a prediction past `Limits.max_sql_chars` is refused before it is sent."""
    padding = "/*" + "x" * (Limits().max_sql_chars + 1) + "*/"
    case = _case(tmp_path, predicted=f"SELECT count(*) FROM item {padding}")
    engine = Flaky(open_engine(case.database_target), drops=0)
    outcome = Pipeline().evaluate(case, LABEL, engine=engine)
    assert outcome.result.verdict is Verdict.PRED_ERROR
    assert "characters long" in outcome.result.reason and "not run" in outcome.result.reason
    assert engine.calls == 1  # the gold only
