"""The `nl2sql` fixture: the plugin's execution and comparison for plain Python tests.

Case files cover "question -> SQL"; some checks are easier to write as code (a view that must
agree with its defining query, a hand-written report query, a model called with test-specific
inputs). The fixture gives those tests the same machinery as the cases, so that they are judged
the same way and fail with the same diff:

    def test_rug_buyers(nl2sql):
        nl2sql.assert_same("shop.sqlite", my_model("Who ordered a rug?"),
                           "SELECT DISTINCT c.name FROM customer c JOIN ... WHERE p.name = 'rug'")

    def test_stored_case(nl2sql):
        case = nl2sql.case("suites/shop.nl2sql.yaml", "count-customers")
        nl2sql.assert_same(case, my_model(case.question))   # the case's gold, order and compare options

Methods (`database` is a SQLite path relative to the requesting test's file, a database URL, a
`Case`, or an open engine such as the `case.engine` a predictor receives):

- `run(database, sql, dialect=None)` -> `QueryResult` (columns, rows); raises the engine's
  `QueryError` / `QueryTimeout` / `TooManyRows`.
- `schema(database)` -> the DDL text a predictor is given.
- `case(file, case_id)` -> the `Case` of a case file (file relative to the test's file).
- `compare(database, predicted, gold=None, order=..., compare=..., dialect=...)` -> `Comparison`
  (truthy iff the results match; `.reason`, `.missing`, `.extra`, `.pairing`), the comparison
  the case items make; a prediction that cannot run raises as `run` does.
- `assert_same(database, predicted, gold=None, ...)` -> the prediction's `QueryResult`, or an
  `AssertionError` whose text is that of a failing case (verdict, reason, queries, column
  pairing, missing and unexpected rows; more rows with `-v`).

`gold` is SQL or a list of SQL of which any may match; with a `Case` it defaults to the case's
gold (or `gold_result` CSV), and `order`, `compare` and `dialect` default to the case's. A gold
that fails raises `GoldError`: the test itself is broken, as a `gold_error` case is.

Every query runs under the run's settings (`--nl2sql-timeout`, `--nl2sql-max-rows`,
`--nl2sql-compat`) on the run's per-process engine cache, read-only like any case. A `Case` runs
on `--nl2sql-dsn` when one is given, as the case items do; a database named explicitly is used
as named.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.cases.read import Case, CaseFileError, InvalidCase, load_case_file
from pytest_nl2sql.engines.base import Engine, QueryError, QueryResult, QueryTimeout, TooManyRows, text_errors_for
from pytest_nl2sql.judge import explain
from pytest_nl2sql.judge.compare import Comparison, compare_results
from pytest_nl2sql.judge.execute import GoldError, GoldOutcome, Judgement, to_engine_sql
from pytest_nl2sql.judge.pipeline import CaseLabel, CaseOutcome, Pipeline, relative_name
from pytest_nl2sql.plugin.items import run_state
from pytest_nl2sql.vocab import Verdict

Database = str | os.PathLike[str] | Case | Engine

_UNSET: Any = object()  # "take it from the case" (None is a meaningful dialect: the engine's own)


@dataclass(frozen=True)
class NL2SQL:
    """What the `nl2sql` fixture returns; see the module's docstring."""

    config: pytest.Config
    base_dir: Path  # relative database and case-file paths start here (the test file's directory)
    label: str  # names the comparison in failure texts (the test's name)
    test_file: Path

    @property
    def _pipeline(self) -> Pipeline:
        return run_state(self.config).pipeline

    # --- databases -------------------------------------------------------------------------

    def database(self, database: Database) -> Engine:
        """The open, read-only engine for `database` (opened once per process, then cached)."""
        pipeline = self._pipeline
        if isinstance(database, Case):
            return pipeline.engine_for(database)
        if _is_engine(database):
            return database  # type: ignore[return-value]
        text_errors = text_errors_for(pipeline.options.spider_compat)
        return pipeline.engines.get(os.fspath(database), self.base_dir, text_errors=text_errors)  # type: ignore[arg-type]

    def schema(self, database: Database) -> str:
        """The database's DDL text, as the predictor hook receives it in `case.schema`."""
        return self._pipeline.schema_ddl(self.database(database))

    def run(self, database: Database, sql: str, *, dialect: str | None = _UNSET) -> QueryResult:
        """Execute one query read-only under the run's limits. `dialect`: the one `sql` is
        written in, translated to the database's (default: a case's dialect, else the database's)."""
        engine = self.database(database)
        written_in = self._dialect(database, dialect)
        return engine.execute(to_engine_sql(sql, written_in, engine), self._pipeline.options.limits)

    def case(self, file: str | os.PathLike[str], case_id: str) -> Case:
        """One case of a case file (`file` relative to the test's file), as the plugin reads it."""
        path = self.base_dir / Path(file)
        options = self._pipeline.options
        entries = load_case_file(path, db_dir=options.db_dir, dsn=options.dsn)
        for entry in entries:
            if entry.id == case_id:
                if isinstance(entry, InvalidCase):
                    raise entry.error
                return entry
        broken = [e for e in entries if isinstance(e, InvalidCase)]
        if broken:  # the case may be in the part of the file that could not be read
            raise broken[0].error
        known = ", ".join(e.id for e in entries[:10]) + (", ..." if len(entries) > 10 else "")
        raise CaseFileError(path, None, f"no case with id {case_id!r} (there are: {known or 'none'})")

    # --- judging ---------------------------------------------------------------------------

    def compare(
        self,
        database: Database,
        predicted: str,
        gold: str | Sequence[str] | None = None,
        *,
        order: str = _UNSET,
        compare: Mapping[str, Any] | None = _UNSET,
        dialect: str | None = _UNSET,
    ) -> Comparison:
        """Compare the prediction's result with the gold's, as a case would be judged.

        `order`: `auto` (ordered iff the gold has a top-level ORDER BY), `ordered`, `unordered`;
        `compare`: a case's `compare:` options (`mode`, `abs_tol`, `case_sensitive`, ...).
        A prediction that cannot run raises `QueryError`, `QueryTimeout` or `TooManyRows`.
        """
        outcome = self._judge(database, predicted, gold, order, compare, dialect)
        judgement = outcome.judgement
        if judgement is None or judgement.comparison is None:
            raise _prediction_exception(outcome)
        return judgement.comparison

    def assert_same(
        self,
        database: Database,
        predicted: str,
        gold: str | Sequence[str] | None = None,
        *,
        order: str = _UNSET,
        compare: Mapping[str, Any] | None = _UNSET,
        dialect: str | None = _UNSET,
    ) -> QueryResult:
        """Assert that the prediction returns the gold's result; return the prediction's result.

        The AssertionError's text is a failing case's: a mismatch shows the column pairing and
        the rows missing / unexpected, a prediction that fails to run its verdict and message.
        """
        __tracebackhide__ = True
        outcome = self._judge(database, predicted, gold, order, compare, dialect)
        if outcome.result.passed:
            assert outcome.judgement is not None and outcome.judgement.result is not None
            return outcome.judgement.result
        raise AssertionError(outcome.explanation)

    # --- internals -------------------------------------------------------------------------

    def _dialect(self, database: Database, dialect: str | None) -> str | None:
        if dialect is not _UNSET:
            return dialect
        return database.written_in if isinstance(database, Case) else None

    def _judge(
        self, database: Database, predicted: str, gold: str | Sequence[str] | None,
        order: str, compare: Mapping[str, Any] | None, dialect: str | None,
    ) -> CaseOutcome:
        """The case a comparison stands for, through the pipeline every case item takes (with the
        run's limits and compat mode, but no baseline and no predictor: the prediction is given)."""
        case = self._as_case(database, gold)
        if not case.gold and not case.gold_result:
            raise ValueError("nl2sql: no gold to compare with: pass `gold` (SQL, or a list of SQL)")
        changes: dict[str, Any] = {"dialect": self._dialect(database, dialect)}
        if order is not _UNSET:
            changes["order"] = order
        if compare is not _UNSET:
            changes["compare"] = compare or {}
        case = case.replace(**changes)
        shared = self._pipeline
        pipeline = Pipeline(dataclasses.replace(shared.options, fingerprints=False), engines=shared.engines)
        label = CaseLabel(self.label, relative_name(case.file, self.config.rootpath))
        outcome = pipeline.evaluate(case, label, engine=self.database(database), predicted=predicted if predicted else "")
        if outcome.broken:
            raise GoldError(outcome.result.reason)
        return outcome

    def _as_case(self, database: Database, gold: str | Sequence[str] | None) -> Case:
        """The case a comparison stands for: the given one (gold overridden when passed), or a
        case named after the test, for the failure text."""
        golds = None if gold is None else ((gold,) if isinstance(gold, str) else tuple(gold))
        if isinstance(database, Case):
            return database if golds is None else database.replace(gold=golds, gold_result=())
        name = os.fspath(database) if isinstance(database, (str, os.PathLike)) else getattr(database, "dialect", "database")
        return Case(id=self.label, file=self.test_file, line=None, position=0, database=str(name), gold=golds or ())


def _is_engine(value: Any) -> bool:
    return callable(getattr(value, "execute", None)) and callable(getattr(value, "schema_ddl", None))


def _prediction_exception(outcome: CaseOutcome) -> Exception:
    """A prediction that produced no result, as the exception `run` would have raised."""
    verdict, reason = outcome.result.verdict, outcome.result.reason
    kind = {Verdict.PRED_TIMEOUT: QueryTimeout, Verdict.TOO_MANY_ROWS: TooManyRows}.get(verdict)
    if kind is not None:
        return kind(reason)
    if verdict is Verdict.NO_PREDICTION:
        return ValueError("nl2sql: the prediction is empty")
    return QueryError(reason)


def explain_result_comparison(op: str, left: Any, right: Any) -> list[str] | None:
    """`assert pred == gold` on two query results shows the same diff as a failing case."""
    if op != "==" or not (isinstance(left, QueryResult) and isinstance(right, QueryResult)):
        return None
    comparison = compare_results(right.rows, left.rows, gold_columns=len(right.columns), pred_columns=len(left.columns))
    if comparison.match:
        return ["query results are equal under execution match (same rows up to column and row order), "
                "but not identical: compare them with the nl2sql fixture, or compare sorted rows"]
    judgement = Judgement(Verdict.MISMATCH, comparison.reason, comparison, 0, left)
    text = explain.result_diff_lines(judgement, GoldOutcome((right,), (), False))
    return [f"query results differ ({comparison.reason}): left is the prediction, right the gold", *text]


@pytest.fixture
def nl2sql(request: pytest.FixtureRequest) -> NL2SQL:
    """Run SQL on a case's database, compare two queries, and assert with a failing case's diff,
    under the run's settings (timeout, row cap, compat mode) and engine cache."""
    return NL2SQL(config=request.config, base_dir=request.path.parent, label=request.node.name, test_file=request.path)
