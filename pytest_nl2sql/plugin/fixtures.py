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

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.judge import explain as render
from pytest_nl2sql.cases.read import Case, CaseFileError, InvalidCase, load_case_file
from pytest_nl2sql.judge.compare import Comparison
from pytest_nl2sql.engines.base import Engine, QueryError, QueryResult, QueryTimeout, TooManyRows
from pytest_nl2sql.judge.execute import GoldOutcome, Judgement, judge, run_gold, to_engine_sql
from pytest_nl2sql.plugin.items import runtime
from pytest_nl2sql.judge.pipeline import Runtime
from pytest_nl2sql.vocab import Kind, Verdict
from pytest_nl2sql.judge.result import CaseResult

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
    def _runtime(self) -> Runtime:
        return runtime(self.config)

    # --- databases -------------------------------------------------------------------------

    def database(self, database: Database) -> Engine:
        """The open, read-only engine for `database` (opened once per process, then cached)."""
        if isinstance(database, Case):
            return database.engine if database.engine is not None else self._runtime.engine_for(database)
        if _is_engine(database):
            return database  # type: ignore[return-value]
        rt = self._runtime
        return rt.engines.get(os.fspath(database), self.base_dir, text_errors=rt.text_errors)  # type: ignore[arg-type]

    def schema(self, database: Database) -> str:
        """The database's DDL text, as the predictor hook receives it in `case.schema`."""
        return self._runtime.schema_ddl(self.database(database))

    def run(self, database: Database, sql: str, *, dialect: str | None = _UNSET) -> QueryResult:
        """Execute one query read-only under the run's limits. `dialect`: the one `sql` is
        written in, translated to the database's (default: a case's dialect, else the database's)."""
        engine = self.database(database)
        written_in = self._dialect(database, dialect)
        return engine.execute(to_engine_sql(sql, written_in, engine), self._runtime.settings.limits)

    def case(self, file: str | os.PathLike[str], case_id: str) -> Case:
        """One case of a case file (`file` relative to the test's file), as the plugin reads it."""
        path = self.base_dir / Path(file)
        settings = self._runtime.settings
        entries = load_case_file(path, db_dir=settings.db_dir, dsn=settings.dsn)
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
        judgement, _, _ = self._judge(database, predicted, gold, order, compare, dialect)
        if judgement.comparison is None:
            raise _prediction_exception(judgement)
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
        judgement, outcome, case = self._judge(database, predicted, gold, order, compare, dialect)
        if judgement.verdict is Verdict.PASS:
            assert judgement.result is not None
            return judgement.result
        result = CaseResult(
            id=case.id, nodeid=self.label, file=str(case.file), position=0, kind=Kind.SQL,
            verdict=judgement.verdict, question=case.question, database=case.database,
            gold=case.gold_value, predicted=predicted, reason=judgement.reason,
        )
        text = render.failure_text(case, result, judgement, outcome, self.config.get_verbosity())
        raise AssertionError(text)

    # --- internals -------------------------------------------------------------------------

    def _dialect(self, database: Database, dialect: str | None) -> str | None:
        if dialect is not _UNSET:
            return dialect
        return database.written_in if isinstance(database, Case) else None

    def _judge(
        self, database: Database, predicted: str, gold: str | Sequence[str] | None,
        order: str, compare: Mapping[str, Any] | None, dialect: str | None,
    ) -> tuple[Judgement, GoldOutcome, Case]:
        rt = self._runtime
        engine = self.database(database)
        case = self._as_case(database, gold)
        if not case.gold and not case.gold_result:
            raise ValueError("nl2sql: no gold to compare with: pass `gold` (SQL, or a list of SQL)")
        written_in = self._dialect(database, dialect)
        settings = rt.settings
        outcome = run_gold(
            case.gold, engine, settings.limits, dialect=written_in,
            order=case.order if order is _UNSET else order,
            spider_compat=settings.spider_compat, gold_result_files=case.gold_result,
        )
        judgement = judge(
            predicted, outcome, engine, settings.limits, dialect=written_in,
            compare=case.compare if compare is _UNSET else compare, spider_compat=settings.spider_compat,
        )
        return judgement, outcome, case

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


def _prediction_exception(judgement: Judgement) -> Exception:
    """A prediction that produced no result, as the exception `run` would have raised."""
    kind = {Verdict.PRED_TIMEOUT: QueryTimeout, Verdict.TOO_MANY_ROWS: TooManyRows}.get(judgement.verdict)
    if kind is not None:
        return kind(judgement.reason)
    if judgement.verdict is Verdict.NO_PREDICTION:
        return ValueError("nl2sql: the prediction is empty")
    return QueryError(judgement.reason)


@pytest.fixture
def nl2sql(request: pytest.FixtureRequest) -> NL2SQL:
    """Run SQL on a case's database, compare two queries, and assert with a failing case's diff,
    under the run's settings (timeout, row cap, compat mode) and engine cache."""
    return NL2SQL(config=request.config, base_dir=request.path.parent, label=request.node.name, test_file=request.path)
