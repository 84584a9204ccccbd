"""Per-process state of a run: settings, open databases, predictions, baseline, schema caches.

One `Runtime` lives in `config.stash` of each pytest process (the controller and every xdist
worker build their own from the same options), so nothing is shared through module globals.
"""

from __future__ import annotations

import os
import sqlite3
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pytest

from pytest_nl2sql.gate.baseline import Baseline, BaselineStatus, classify, load_baseline
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.engines import EngineCache
from pytest_nl2sql.engines.base import DatabaseMissing, Engine, EngineError, text_errors_for
from pytest_nl2sql.engines.url import EngineKind, parse_database
from pytest_nl2sql.cases.predictions import PredictionStore, load_predictions, prediction_key
from pytest_nl2sql.plugin.settings import Settings


@dataclass(frozen=True)
class PredictionOutcome:
    """Where a prediction came from, what it is, and how long the predictor took."""

    value: Any
    source: str  # hook | file | case | none
    latency: float | None = None
    error: str | None = None  # a predictor exception, one line: "RuntimeError: model down"
    traceback: str | None = None  # its traceback, from the user's hook down (for the failure text)
    stale: bool = False  # a recorded prediction whose question or schema has changed
    key: str | None = None


@dataclass
class Runtime:
    settings: Settings
    predict_hook: Callable[..., Any]
    engines: EngineCache = field(default_factory=EngineCache)
    _schemas: dict[str, Any] = field(default_factory=dict)
    _ddl: dict[int, str] = field(default_factory=dict)
    usage_problem: str | None = None  # a misconfiguration found at collection (xdist workers)

    @cached_property
    def predictions(self) -> PredictionStore | None:
        return load_predictions(self.settings.predictions) if self.settings.predictions else None

    @cached_property
    def baseline(self) -> Baseline | None:
        if self.settings.baseline is None or self.settings.update_baseline:
            return None
        return load_baseline(self.settings.baseline)

    def check_files(self) -> None:
        """Read the predictions and baseline files now; raises OSError / ValueError on a bad one."""
        _ = self.predictions, self.baseline

    @property
    def text_errors(self) -> str:
        return text_errors_for(self.settings.spider_compat)

    def spider_mode(self, case: Case) -> bool:
        """Official Spider verdicts for this case: `--nl2sql-compat=spider`, or its `compare: {mode: spider}`."""
        return self.settings.spider_compat or (case.compare or {}).get("mode") == "spider"

    def engine_for(self, case: Case) -> Engine:
        """The database a SQL case runs on (the --nl2sql-dsn one when given); DatabaseMissing if absent.
        In Spider mode undecodable text bytes are dropped, as the official evaluator does."""
        target = self.settings.dsn or case.database_target
        if target is None:
            raise DatabaseMissing(f"case {case.id} names no database")
        return self.engines.get(target, None, text_errors=text_errors_for(self.spider_mode(case)))

    def schema_ddl(self, engine: Engine) -> str:
        key = id(engine)
        if key not in self._ddl:
            try:
                self._ddl[key] = engine.schema_ddl()
            except EngineError:
                self._ddl[key] = ""
        return self._ddl[key]

    def spider_schema(self, case: Case) -> Any | None:
        """The Spider-style schema for exact match: tables.json of a source, else the SQLite file."""
        from pytest_nl2sql.metrics.spider_schema import SpiderSchema

        target = case.database_target
        key = f"{case.tables_json}|{case.database}" if case.tables_json else str(target)
        if key not in self._schemas:
            schema = None
            try:
                if case.tables_json is not None and case.database:
                    schema = SpiderSchema.from_tables_json(case.tables_json, case.database)
                elif target:
                    spec = parse_database(target)
                    if spec.kind is EngineKind.SQLITE and spec.path is not None and spec.path.is_file():
                        schema = SpiderSchema.from_sqlite(spec.path)
            except (OSError, ValueError, KeyError, sqlite3.Error, EngineError):  # no usable schema: no exact match
                schema = None
            self._schemas[key] = schema
        return self._schemas[key]

    @staticmethod
    def prediction_key(case: Case) -> str:
        """What a recorded prediction of `case` depends on (question, schema, conversation)."""
        conversation = list(case.conversation) if case.conversation is not None else None
        return prediction_key(case.question, case.schema, conversation)

    def predict(self, case: Case, file_names: tuple[str, ...], key: str) -> PredictionOutcome:
        """The first prediction that applies: the predictor hook, the predictions file, the case.

        `key` is the case's `prediction_key`. A prediction recorded by `--nl2sql-record` for this
        very key is a replay and is used without calling the hook (so CI can re-score without the
        model); a recording with another key is stale: the hook is asked again, and without a hook
        the case has no prediction.
        """
        stored = self.predictions.lookup(case.id, case.position, file_names) if self.predictions else None
        if stored is not None and stored.key is not None and stored.key == key:
            return PredictionOutcome(stored.value, "file", error=stored.error)
        started = time.perf_counter()
        try:
            value = self.predict_hook(case=case)
        except (Exception, pytest.fail.Exception) as e:  # the model failed: a verdict, not a crash
            return PredictionOutcome(None, "hook", time.perf_counter() - started, error=_one_line(e),
                                     traceback=_user_traceback(e), key=key)
        if value is not None:
            return PredictionOutcome(value, "hook", time.perf_counter() - started, key=key)
        if stored is not None:
            return PredictionOutcome(stored.value, "file", stale=stored.key is not None)
        if case.predicted is not None:
            return PredictionOutcome(case.predicted, "case")
        return PredictionOutcome(None, "none")

    def baseline_status(self, file: str, case_id: str, passed: bool) -> BaselineStatus | None:
        if self.baseline is None:
            return None
        return classify(self.baseline.lookup(file, case_id), passed)

    def close(self) -> None:
        self.engines.close_all()


def _one_line(error: BaseException) -> str:
    """`RuntimeError: model down`: the verdict's reason, stable across machines (no paths)."""
    text = "".join(traceback.format_exception_only(error)).strip().splitlines()
    return text[-1] if text else type(error).__name__


def _user_traceback(error: BaseException) -> str:
    """The predictor's traceback without pluggy's frames and ours: it starts in the user's hook."""
    formatted = traceback.TracebackException.from_exception(error)
    internal = (os.sep + "pluggy" + os.sep, __file__)
    formatted.stack = traceback.StackSummary.from_list(
        [frame for frame in formatted.stack if not any(part in frame.filename for part in internal)]
    )
    return "".join(formatted.format())
