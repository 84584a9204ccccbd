"""The one path every case takes: case -> (gold, prediction, comparison, scores) -> `CaseOutcome`.

The pytest items, the `nl2sql` fixture and the Python API (`evaluate_suite`) all call `Pipeline`,
so a case gets the same verdict, hardness, exact match, term-selection score and baseline status
whichever way it is evaluated. Nothing here imports pytest.

Two stages, because pytest runs the gold in an item's setup (a broken case is an ERROR) and the
prediction in its call: `prepare` (database, hardness, gold) and `finish` (predict, judge, score).
`evaluate` runs both.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sqlite3
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.predictions import PredictedMalloy, PredictedResult, PredictionStore
from pytest_nl2sql.cases.read import Case, InvalidCase
from pytest_nl2sql.engines import EngineCache
from pytest_nl2sql.engines.base import ConnectionLost, DatabaseMissing, Engine, EngineError, Limits, text_errors_for
from pytest_nl2sql.engines.url import DatabaseSpec, EngineKind, parse_database
from pytest_nl2sql.gate.baseline import Baseline, classify
from pytest_nl2sql.gate.run import engine_label
from pytest_nl2sql.judge import explain, gold_audit, on_neighbours
from pytest_nl2sql.judge.answer import add_usage, extract_sql
from pytest_nl2sql.judge.compare import CompareOptions, Comparison, compare_results
from pytest_nl2sql.judge.execute import (
    GoldError,
    GoldOutcome,
    Judgement,
    ResultFileError,
    ResultFileTooLarge,
    execute_once_more_if_lost,
    judge,
    judge_result,
    read_result_csv,
    run_gold,
    to_engine_sql,
)
from pytest_nl2sql.judge.nearmiss import near_miss
from pytest_nl2sql.judge.on_neighbours import DatabaseFolder, JudgingRules, NeighbourCheck, OtherDatabase
from pytest_nl2sql.judge.predict import (
    DEFAULT_SAMPLE_ROWS,
    Hook,
    PredictionOutcome,
    PredictionRequest,
    PredictionSource,
    Predictor,
    RetryPolicy,
    SampleRows,
)
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics import termselection
from pytest_nl2sql.metrics.efficiency import Efficiency, floor_for, measure
from pytest_nl2sql.metrics.repeats import shown_answers
from pytest_nl2sql.metrics.soft import ColumnNamer, SoftScores, ValueRule, best_soft_scores
from pytest_nl2sql.vocab import BaselineStatus, FragilePolicy, Kind, NearMiss, Reason, Verdict

# Generated neighbour databases per case, by default: enough to catch nearly every accidental pass
# measured (benchmarks/mutations.py), few enough that a Spider dev run stays within the official
# evaluator's time (benchmarks/spider_dev.py).
DEFAULT_NEIGHBOURS = 3
# How the reason of an entry its case file could not give begins: a baseline update keeps that
# file's entries as they were (gate/finish.py), whatever this run made of the file's other cases.
INVALID_CASE = "invalid case"


class MalloySetupError(Exception):
    """A Malloy prediction that cannot be compiled here: no Node or compiler, an engine Malloy has
    no dialect for, an unreadable `malloy_model`. The case is not judged (`gold_error`): neither the
    model nor its answer is to blame."""


@dataclass(frozen=True)
class RunOptions:
    """The settings that change how a case is judged (the pytest options, or the API's keywords)."""

    limits: Limits = Limits()
    spider_compat: bool = False  # --nl2sql-compat=spider
    dsn: str | None = None  # --nl2sql-dsn: every case runs there
    db_dir: Path | None = None  # --nl2sql-db-dir
    fingerprints: bool = False  # keep a hash of each predicted result (baselines want one)
    verbosity: int = 0  # how many diff rows a failure text shows
    synonyms: tuple[tuple[str, str], ...] = ()  # ini `nl2sql_synonyms`: words added to the soft scores' synonym map
    neighbours: int = DEFAULT_NEIGHBOURS  # --nl2sql-neighbours: generated neighbour databases per case (0: none)
    cache_dir: Path | None = None  # where generated neighbours are kept (None: `default_cache_dir()`)
    fragile: FragilePolicy = FragilePolicy.PASS  # --nl2sql-fragile
    confine: Path | None = None  # --nl2sql-confine: the resolved root no file read for a case may lie outside
    retry: RetryPolicy = RetryPolicy()  # --nl2sql-retries, --nl2sql-retry-wait: a hook's transient failures
    repeat: int = 1  # --nl2sql-repeat: answers asked per case (the first decides the verdict)


@dataclass(frozen=True)
class CaseLabel:
    """Where a case sits in a run: its node id, its file as the node id spells it, its position."""

    nodeid: str
    file: str  # relative to the rootdir, as in the node id
    position: int = 0  # collection order, so reports list items identically under xdist


@dataclass(frozen=True)
class CaseOutcome:
    """A judged case: the result every report is made from, and the failure text for people."""

    result: CaseResult
    explanation: str | None = None  # None when the case passed
    judgement: Judgement | None = None  # SQL cases that ran: the comparison behind the verdict
    gold: GoldOutcome | None = None

    @property
    def broken(self) -> bool:
        """The case itself could not be judged (a pytest ERROR, outside the accuracy)."""
        return self.result.verdict.is_error


@dataclass(frozen=True)
class PreparedCase:
    """A case whose database is open and whose gold has run (or which turned out broken)."""

    case: Case
    label: CaseLabel
    hardness: str | None
    engine: Engine | None = None
    gold: GoldOutcome | None = None
    broken: CaseOutcome | None = None


@dataclass
class Pipeline:
    """Per-process state of a run (open databases, schema caches, stored predictions, baseline)
    and the stages every case goes through. One per pytest process (kept in `config.stash`), or
    one per `evaluate_suite` call."""

    options: RunOptions = field(default_factory=RunOptions)
    hook: Hook | None = None  # the model under test
    predictions: PredictionStore | None = None
    baseline: Baseline | None = None
    reviews: Any = None  # gate.reviews.ReviewBook: decisions about disputed cases (--nl2sql-reviews)
    reviewer: Callable[..., Any] | None = None  # the pytest_nl2sql_review hook: suggests decisions
    engines: EngineCache = field(default_factory=EngineCache)
    _schemas: dict[str, Any] = field(default_factory=dict)
    _ddl: dict[int, str] = field(default_factory=dict)
    _timing_floors: dict[int, float] = field(default_factory=dict)  # per engine: `efficiency.floor_for`
    _hardness: dict[tuple[Path, str], str | None] = field(default_factory=dict)
    _namers: dict[tuple[tuple[str, str], ...], ColumnNamer] = field(default_factory=dict)
    _folders: dict[str, DatabaseFolder | None] = field(default_factory=dict)
    _neighbour_cache: Any = None  # pytest_nl2sql.neighbours.NeighbourCache, made on first use
    _duckdb_worker: Any = None  # one DuckDB worker for the short-lived engines of DuckDB neighbours
    _server_copies: Any = None  # pytest_nl2sql.neighbours.servers.ServerCopies, made on first use
    _said_off: set[str] = field(default_factory=set)  # engines whose missing neighbours were warned about
    _malloy_compiler: Any = None  # pytest_nl2sql.malloy.MalloyCompiler, started on the first Malloy prediction
    _malloy_schemas: dict[str, Any] = field(default_factory=dict)  # database key -> its tables, for the compiler
    _malloy_engines: dict[str, Any] = field(default_factory=dict)  # SQLite file key -> where its Malloy predictions run
    _malloy_lock: threading.Lock = field(default_factory=threading.Lock)  # the copies and schemas above, made once
    _rows: dict[tuple[int, str, int], SampleRows] = field(default_factory=dict)  # `sample_rows`, per engine
    _gold_audits: dict[tuple[Any, ...], tuple[Any, ...]] = field(default_factory=dict)  # per engine and gold: `gold_audit` findings

    @property
    def predictor(self) -> Predictor:
        return Predictor(self.hook, self.predictions, self.options.retry)

    # --- the stages ------------------------------------------------------------------------

    def evaluate(self, case: Case | InvalidCase, label: CaseLabel, *, engine: Engine | None = None,
                 predicted: Any = None) -> CaseOutcome:
        """Both stages. `predicted` given: judge it instead of asking the predictor (the fixture)."""
        if isinstance(case, InvalidCase):
            return self.invalid(case, label)
        prepared = self.prepare(case, label, engine=engine)
        if prepared.broken is not None:
            return prepared.broken
        return self.finish(prepared, predicted=predicted)

    def prepare(self, case: Case, label: CaseLabel, *, engine: Engine | None = None) -> PreparedCase:
        """Open the case's database and run its gold. A case that cannot run comes back `broken`."""
        hardness = self.hardness(case)
        if case.is_term_selection:
            return PreparedCase(case, label, hardness)
        try:
            engine = engine or self.engine_for(case)
            gold = run_gold(
                case.gold, engine, self.options.limits, dialect=case.written_in, order=case.order,
                spider_compat=self.spider_mode(case), gold_result_files=case.gold_result, compare=case.compare,
            )
        except (GoldError, EngineError) as e:
            reason = _infrastructure_reason(e) or str(e)
            result = self._result(case, label, hardness, Verdict.GOLD_ERROR, reason=reason, predicted=_plain(case.predicted))
            return PreparedCase(case, label, hardness, broken=CaseOutcome(result, explain.gold_error_text(case, label.file, reason, result.ran_on)))
        return PreparedCase(case, label, hardness, engine, gold)

    def finish(self, prepared: PreparedCase, *, predicted: Any = None,
               prediction: PredictionOutcome | None = None) -> CaseOutcome:
        """Predict (unless `prediction` was asked ahead, or `predicted` is given), judge and score a
        prepared case; apply the baseline."""
        if prepared.broken is not None:
            return prepared.broken
        case = prepared.case
        if predicted is not None:
            prediction = PredictionOutcome(predicted, PredictionSource.CASE)
        elif prediction is None:
            prediction = (self._predict_term_selection(case, prepared.label) if case.is_term_selection
                          else self._predict_sql(case, prepared.label, prepared.engine))
        if case.is_term_selection:
            outcome = self._score_term_selection(prepared, prediction)
        else:
            outcome = self._judge_sql(prepared, prediction)
        return self._reviewed(prepared, self._with_model_figures(prepared, prediction, outcome))

    def predict(self, case: Case, label: CaseLabel) -> PredictionOutcome:
        """Ask for the case's prediction (the first source that applies; with `repeat`, all its
        answers). `finish` does it itself; a caller that wants predictions ahead of judging
        (several at once) calls this first."""
        if case.is_term_selection:
            return self._predict_term_selection(case, label)
        try:
            engine = self.engine_for(case)
        except EngineError:
            engine = None  # the case is broken; prepare says why, and the prediction is never judged
        return self._predict_sql(case, label, engine)

    def _predict_sql(self, case: Case, label: CaseLabel, engine: Engine | None) -> PredictionOutcome:
        schema = functools.partial(self.schema_ddl, engine) if engine is not None else _unreadable_schema
        rows = functools.partial(self.sample_rows, engine) if engine is not None else None
        # the predictor writes for the database the case runs on (its schema is that database's)
        dialect = engine.dialect if engine is not None else case.written_in
        malloy = functools.partial(self.malloy_model, case, engine) if engine is not None else None
        request = PredictionRequest.for_case(case, schema=schema, engine=engine, dialect=dialect, rows=rows, malloy=malloy)
        names = _file_names(case, label)
        first = self.predictor.predict(case, request, names)
        return self._with_samples(first, lambda index: self.predictor.predict(case, request.as_sample(index), names))

    def _predict_term_selection(self, case: Case, label: CaseLabel) -> PredictionOutcome:
        conversation = tuple(case.conversation or ())
        first = self._predict_turns(case, label, conversation)
        return self._with_samples(first, lambda index: self._predict_turns(case, label, conversation, index))

    def _with_samples(self, first: PredictionOutcome, ask: Callable[[int], PredictionOutcome]) -> PredictionOutcome:
        """The first answer, carrying the case's other `repeat - 1` answers, asked in order."""
        if self.options.repeat <= 1:
            return first
        return dataclasses.replace(first, samples=tuple(ask(index) for index in range(1, self.options.repeat)))

    def invalid(self, entry: InvalidCase, label: CaseLabel) -> CaseOutcome:
        """An entry of a case file that could not be read: broken, naming its file and line."""
        where = f"{label.file}:{entry.line}" if entry.line else label.file
        message = f"{INVALID_CASE}: {where}: {entry.message}"  # the JSON item names file and line, as the terminal does
        result = CaseResult(id=entry.id, nodeid=label.nodeid, file=label.file, position=label.position,
                            kind=Kind.SQL, verdict=Verdict.GOLD_ERROR, reason=message)
        return CaseOutcome(result, f"{where}: {entry.message}")

    def unusable(self, case: Case, label: CaseLabel, problem: str) -> CaseOutcome:
        """The run is misconfigured (found where it cannot stop the session): every case says so."""
        kind = Kind.TERM_SELECTION if case.is_term_selection else Kind.SQL
        result = self._result(case, label, self.hardness(case), Verdict.GOLD_ERROR, kind=kind, reason=problem)
        return CaseOutcome(result, f"usage error: {problem}")

    def crashed(self, case: Case | InvalidCase, label: CaseLabel, error: BaseException, *, during_setup: bool) -> CaseResult:
        """An unexpected exception still leaves a result for the reports (no case silently drops
        out of the accuracy); the caller re-raises it with its traceback."""
        reason = f"could not be judged: {type(error).__name__}: {error}".splitlines()[0]
        if isinstance(case, InvalidCase):
            return CaseResult(id=case.id, nodeid=label.nodeid, file=label.file, position=label.position,
                              kind=Kind.SQL, verdict=Verdict.GOLD_ERROR, reason=reason)
        kind = Kind.TERM_SELECTION if case.is_term_selection else Kind.SQL
        verdict = Verdict.GOLD_ERROR if during_setup else (Verdict.PREDICTOR_ERROR if case.is_term_selection else Verdict.PRED_ERROR)
        return self._result(case, label, self._hardness.get((case.file, case.id)), verdict, kind=kind, reason=reason)

    # --- SQL cases ------------------------------------------------------------------------

    def _judge_sql(self, prepared: PreparedCase, prediction: PredictionOutcome | None) -> CaseOutcome:
        case, label, engine, gold = prepared.case, prepared.label, prepared.engine, prepared.gold
        assert engine is not None and gold is not None
        if prediction is None:
            prediction = self._predict_sql(case, label, engine)
        given = prediction.value
        prediction, problem = _sql_of(prediction)
        raw = given.raw if isinstance(given, PredictedMalloy) else given if isinstance(given, str) and given != prediction.value else None
        malloy = given.text if isinstance(given, PredictedMalloy) else None
        try:
            if malloy is not None:  # on a SQLite case, a DuckDB copy (Malloy has no SQLite dialect)
                engine = self._malloy_engine(engine)
                prediction, problem = self._compiled(case, engine, prediction)
            judgement = self._judgement(case, prediction, engine, gold, problem)
        except (ConnectionLost, MalloySetupError) as e:  # the run's fault, not the model's
            reason = _infrastructure_reason(e) if isinstance(e, ConnectionLost) else str(e)
            result = self._result(case, label, prepared.hardness, Verdict.GOLD_ERROR, reason=reason, predicted=_plain(prediction.value),
                                  predicted_malloy=malloy)
            return CaseOutcome(result, explain.gold_error_text(case, label.file, reason or str(e), result.ran_on))
        result_file = prediction.value if isinstance(prediction.value, PredictedResult) else None
        predicted_sql = (None if result_file or isinstance(prediction.value, PredictedMalloy)  # a Malloy query that did not compile
                         else prediction.value if isinstance(prediction.value, str) else _plain(prediction.value))
        predicted_in = prediction.dialect or case.written_in
        beyond = (self._check_beyond(case, predicted_sql, predicted_in, engine, gold)
                  if judgement.verdict is Verdict.PASS and predicted_sql else None)
        off = self._neighbours_off(case, engine) if judgement.verdict is Verdict.PASS and beyond is None else None
        failure = None
        if beyond is not None and beyond.failed:
            failure = beyond.failure
            judgement = dataclasses.replace(judgement, verdict=Verdict.MISMATCH, reason=Reason.NEIGHBOUR.value)
        elif beyond is not None and beyond.fragile_against_prediction and self.options.fragile is FragilePolicy.FAIL:
            failure = beyond.failure
            judgement = dataclasses.replace(judgement, verdict=Verdict.MISMATCH, reason=Reason.FRAGILE.value)
        exact = (self._exact_match(case, predicted_sql, predicted_in)
                 if judgement.verdict is not Verdict.PREDICTOR_ERROR and malloy is None else None)  # compiled SQL has no exact match
        soft, near = self._soft_scores(case, judgement, gold), self._near_miss(case, judgement, gold)
        efficiency = self._efficiency(case, judgement, gold, engine) if judgement.verdict is Verdict.PASS else None
        result = self._result(
            case, label, prepared.hardness, judgement.verdict, predicted=predicted_sql, reason=judgement.reason,
            exact_match=exact.match if exact else None, partial=exact.partial if exact else None,
            fingerprint=gold_audit.failed_fingerprint(judgement, gold.order_matters), latency=prediction.latency,
            diff=explain.neighbour_diff_json(failure) if failure else explain.diff_json(judgement, gold),
            extra={**prediction.report_fields(), **({"neighbours_off": off} if off else {})},
            neighbours={**beyond.to_json(), "counterexample": explain.counterexample_json(beyond.failure)} if beyond is not None else None,
            gold_warnings=gold.warnings,
            soft_scores=soft.to_json() if soft else None, near_miss=near.value if near else None,
            predicted_result=_shown_path(result_file.path, case) if result_file else None, predicted_malloy=malloy,
            execution_time=efficiency.to_json() if efficiency else None, raw_prediction=raw,
        )
        result = self._with_baseline(result.replace(gold_audit=self._gold_audit(prepared, beyond)), case)
        if result.passed:
            text = None
        elif failure is not None:
            text = explain.neighbour_failure_text(case, label.file, result, failure, beyond, self.options.verbosity)
        else:
            text = explain.failure_text(case, label.file, result, judgement, gold, self.options.verbosity)
        return CaseOutcome(result, _with_baseline_note(text, result, self._passed_in_baseline(case, result)), judgement, gold)

    def _gold_audit(self, prepared: PreparedCase, beyond: NeighbourCheck | None) -> dict[str, Any]:
        """The item's `gold_audit`: what the case's own database says against its gold (audited
        once per gold and database), and whether a stress neighbour shows the gold fragile. A
        finding never changes the verdict (judge/gold_audit.py)."""
        case, engine, gold = prepared.case, prepared.engine, prepared.gold
        assert engine is not None and gold is not None
        key = (id(engine), case.written_in, tuple(case.gold), self.spider_mode(case))
        if key not in self._gold_audits:
            results = [None if index in gold.large else result for index, result in enumerate(gold.results)]
            self._gold_audits[key] = gold_audit.audit_gold(case.gold, case.written_in, engine, self.options.limits, results)
        fragile = gold_audit.fragile_finding(beyond, case.gold, case.written_in, engine)
        return gold_audit.audit_json(self._gold_audits[key] + ((fragile,) if fragile else ()))

    # --- Malloy predictions ------------------------------------------------------------------

    def _compiled(self, case: Case, engine: Engine, prediction: PredictionOutcome) -> tuple[PredictionOutcome, str | Judgement | None]:
        """A Malloy prediction as the SQL it compiles to for the case's engine (in the dialect it is
        written in: DuckDB's for a SQLite case, which `judge` then reads as SQLite), or the compile
        error as the problem (`pred_error`, "malloy: line N: ..."; a compile past the case's time
        limit: the `pred_timeout` judgement). `MalloySetupError`: Node or the compiler is not set
        up or keeps dying, or the engine has no Malloy dialect (the case cannot be judged)."""
        from pytest_nl2sql.malloy import MalloyCompileError, MalloyTimeout, MalloyUnavailable

        query = prediction.value.text
        fenced = extract_sql(query)  # a model's Markdown answer: the query in its fenced block
        if fenced.problem is None and fenced.sql is not None:
            query = fenced.sql
        if not query.strip():
            return dataclasses.replace(prediction, value=""), None  # no_prediction, as empty SQL is
        try:
            limits = self.options.limits
            compiled = self._malloy().compile(query, tables=self._malloy_tables(engine), dialect=engine.dialect,
                                              model=self._malloy_model(case), timeout=limits.timeout,
                                              max_sql_chars=limits.max_sql_chars)
        except MalloyTimeout as error:
            return prediction, Judgement(Verdict.PRED_TIMEOUT, f"malloy: {error}")
        except MalloyCompileError as error:
            return prediction, f"malloy: {error}"
        except MalloyUnavailable as error:
            raise MalloySetupError(f"Malloy prediction not judged: {error}") from None
        return dataclasses.replace(prediction, value=compiled.sql, dialect=compiled.dialect), None

    def malloy_model(self, case: Case, engine: Engine) -> str:
        """The model a Malloy prediction of `case` is compiled against (for the hook's prompt)."""
        model = self._malloy_model(case)
        if model is not None:
            return model
        from pytest_nl2sql.malloy import generated_model

        engine = self._malloy_engine(engine)
        return generated_model(self._malloy_tables(engine), engine.dialect)

    def _malloy_engine(self, engine: Engine) -> Engine:
        """Where a Malloy prediction runs: the case's engine, but for a SQLite file its DuckDB copy
        (`copy-db`, exact or not at all; the gold keeps its results from the file, so the verdict
        is on the case's data), where the compiled DuckDB SQL runs as written and neighbours come
        from the copy. A file that cannot be copied: the SQLite file, the SQL translated by sqlglot
        (a sum across a `join_many`, `nest:` and keyless joins do not translate)."""
        if engine.dialect != EngineKind.SQLITE.value or getattr(engine, "path", None) is None:
            return engine
        spec = DatabaseSpec(EngineKind.SQLITE, path=Path(engine.path))
        with self._malloy_lock:  # hooks may read `case.malloy_model` in threads (--nl2sql-concurrency)
            if spec.key not in self._malloy_engines:
                copy = self._copies().copy_of(spec)
                if copy.path is None:
                    self._malloy_engines[spec.key] = engine
                else:
                    if copy.digest is not None:
                        self.neighbour_cache().know_content(copy.path, copy.digest)
                    self._malloy_engines[spec.key] = self._open_other(OtherDatabase(copy.path, EngineKind.DUCKDB, "copy"))
            return self._malloy_engines[spec.key]

    def _copies(self) -> Any:
        """The local DuckDB copies of server databases (and of SQLite files, for Malloy)."""
        if self._server_copies is None:
            from pytest_nl2sql.neighbours.servers import ServerCopies

            self._server_copies = ServerCopies((self.options.cache_dir or default_cache_dir()) / "server-copies")
        return self._server_copies

    def _malloy(self) -> Any:
        """The process's Malloy compiler (a Node child, started on its first compile, kept for the
        process's later runs: `malloy.compiler.shared_compiler`)."""
        if self._malloy_compiler is None:
            from pytest_nl2sql.malloy.compiler import shared_compiler

            self._malloy_compiler = shared_compiler()
        return self._malloy_compiler

    def _malloy_tables(self, engine: Engine) -> Any:
        """The tables the compiler is told about (read once per database, as `copy-db` reads them;
        the compiler never opens the database itself)."""
        spec = getattr(engine, "spec", None)
        if spec is None and getattr(engine, "path", None) is not None:
            spec = DatabaseSpec(EngineKind(engine.dialect), path=Path(engine.path))
        if spec is None or spec.kind not in (EngineKind.SQLITE, EngineKind.DUCKDB, EngineKind.POSTGRES, EngineKind.MYSQL):
            raise MalloySetupError(f"Malloy predictions run on SQLite, DuckDB, PostgreSQL and MySQL/MariaDB cases, not on {engine.dialect}")
        with self._malloy_lock:
            if spec.key not in self._malloy_schemas:
                from pytest_nl2sql.copydb.sources import open_source

                try:
                    source = open_source(spec)
                    try:
                        self._malloy_schemas[spec.key] = tuple(source.tables())
                    finally:
                        source.close()
                except Exception as error:  # noqa: BLE001 - a driver's or copy-db's refusal: the case is not judged
                    raise MalloySetupError(f"cannot read the schema the Malloy compiler needs: {type(error).__name__}: {error}") from None
            return self._malloy_schemas[spec.key]

    @staticmethod
    def _malloy_model(case: Case) -> str | None:
        """The case's `malloy_model` file's text (None: the model generated from the schema)."""
        if case.malloy_model is None:
            return None
        try:
            return case.malloy_model.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise MalloySetupError(f"cannot read malloy_model {case.malloy_model}: {error}") from None

    # --- beyond the case's own database -----------------------------------------------------

    def _beyond_plan(self, case: Case, engine: Engine) -> tuple[DatabaseFolder | None, int]:
        """(the case's folder of databases, or None; how many neighbours to generate): what a case
        is judged on besides its own database. Nothing for servers and CSV golds; a folder's other
        files are used in Spider mode too (the official test-suite layout), generated ones never."""
        wanted = case.neighbours if case.neighbours is not None else self.options.neighbours
        if wanted <= 0 or not case.gold:
            return None, 0
        folder = self._folder(case)
        if folder is not None:
            return folder, 0
        generated = getattr(engine, "path", None) is not None and engine.dialect in (EngineKind.SQLITE.value, EngineKind.DUCKDB.value)
        generated = generated or _server_spec(engine) is not None  # from a local DuckDB copy of the server's database
        return None, wanted if generated and not self.spider_mode(case) else 0

    def _neighbours_off(self, case: Case, engine: Engine) -> str | None:
        """Why a right prediction was checked on no neighbour though its case wants some (None: it
        was, or wants none, or a warning said why already): a SQLAlchemy URL's database is not
        copied, since no local engine is known to mean what the warehouse means (said once per
        engine as a warning too); or no candidate database ran the gold. In the summary."""
        wanted = case.neighbours if case.neighbours is not None else self.options.neighbours
        if wanted <= 0 or not case.gold or self.spider_mode(case) or self._folder(case) is not None:
            return None
        if getattr(engine, "path", None) is not None or _server_spec(engine) is not None:
            source, kind = self._neighbour_source(engine)
            if source is None or self._other_databases(case, engine, None, wanted):  # (both remembered)
                return None  # not copied (said once per database), or checked: not faithful is said per case
            cut = self.neighbour_cache().cut_short(source, case.gold, wanted, dialect=case.written_in, kind=kind)
            return cut or "none could be generated (the gold runs on none of the candidate databases)"
        reason = (f"{engine.dialect} through SQLAlchemy: its database is not copied (no local engine is known to"
                  f" mean what {engine.dialect} means)")
        if reason not in self._said_off:
            self._said_off.add(reason)
            from pytest_nl2sql.neighbours.servers import NoNeighbours

            warnings.warn(NoNeighbours(f"no neighbour databases for {reason}"), stacklevel=2)
        return reason

    def _other_databases(self, case: Case, engine: Engine, folder: DatabaseFolder | None, count: int) -> tuple[OtherDatabase, ...]:
        """The databases of `_beyond_plan`: a folder's other files, else generated neighbours."""
        if folder is not None:
            return tuple(OtherDatabase(p, on_neighbours.kind_of_file(p), p.name) for p in folder.others)
        source, kind = self._neighbour_source(engine)
        if source is None:
            return ()
        neighbours = self.neighbour_cache().neighbours_for(source, case.gold, count, dialect=case.written_in, kind=kind)
        return tuple(
            OtherDatabase(n.path, EngineKind(kind), f"neighbour {n.index + 1} of {len(neighbours)} ({n.note})", n)
            for n in neighbours
        )

    def _neighbour_source(self, engine: Engine) -> tuple[Path | None, str]:
        """(the file neighbours are generated from, its kind): the case's own file, or for a
        PostgreSQL/MySQL server its local DuckDB copy (None: not copied, said once; see
        `neighbours/servers.py`)."""
        spec = _server_spec(engine)
        if spec is None:
            return Path(engine.path), engine.dialect  # type: ignore[attr-defined]
        copy = self._copies().copy_of(spec)
        if copy.path is not None and copy.digest is not None:
            self.neighbour_cache().know_content(copy.path, copy.digest)
        return copy.path, EngineKind.DUCKDB.value

    def _faithful_copy(self, case: Case, predicted: str, predicted_in: str, engine: Engine, gold: GoldOutcome) -> bool:
        """A server case: its gold and prediction mean on the DuckDB copy what they mean on the
        server (else no neighbours for it, said once); so must a SQLite case's gold on the copy
        its Malloy prediction ran on. Any other case: True."""
        from pytest_nl2sql.neighbours.servers import check_faithful, faithful

        spec = _server_spec(engine)
        if spec is None and engine in self._malloy_engines.values() and engine.dialect == EngineKind.DUCKDB.value:
            copy, own = engine, False  # the Malloy copy of a SQLite file, open for the run
        elif spec is None or self._server_copies is None:
            return True
        else:
            path = self._server_copies.copy_of(spec).path
            copy, own = (self._open_other(OtherDatabase(path, EngineKind.DUCKDB, "copy")) if path is not None else None), True
        if copy is None:
            return False
        try:
            why = faithful(copy, gold, case.gold, case.written_in, predicted, predicted_in, limits=self.options.limits,
                           order=case.order, compare=case.compare, spider_compat=self.spider_mode(case))
        finally:
            if own:
                copy.close()
        return check_faithful(case.id, why)

    def _check_beyond(self, case: Case, predicted: str, predicted_in: str, engine: Engine, gold: GoldOutcome,
                      *, shrink_failure: bool = True) -> NeighbourCheck | None:
        """A prediction that passed on the case's database, judged on its other databases. The
        gold's own text is not run again: it matches wherever the gold runs (nothing to generate).
        `shrink_failure=False`: only the verdict is wanted (a repeated answer), not a counterexample."""
        folder, count = self._beyond_plan(case, engine)
        if folder is None and count <= 0:
            return None
        if predicted_in == case.written_in and on_neighbours.same_query(predicted, case.gold, case.written_in):
            return NeighbourCheck(0, 0)
        databases = self._other_databases(case, engine, folder, count)
        if not databases or not self._faithful_copy(case, predicted, predicted_in, engine, gold):
            return None
        rules = JudgingRules(case.gold, case.written_in, case.order, case.compare or {}, self.spider_mode(case), predicted_in)
        shrink = None
        if folder is None and shrink_failure:
            from pytest_nl2sql.neighbours import shrink_counterexample as shrink
        return on_neighbours.check(predicted, databases, rules, self.options.limits, self._open_other, shrink=shrink,
                                   own_gold=gold if folder is None else None)

    def _open_other(self, database: OtherDatabase) -> Engine:
        """A short-lived engine for one of a case's other databases (closed after use)."""
        if database.kind is EngineKind.DUCKDB:
            from pytest_nl2sql.engines.duckdb import DuckdbEngine, neighbour_worker

            if self._duckdb_worker is None:
                self._duckdb_worker = neighbour_worker()
            return DuckdbEngine(database.path, worker=self._duckdb_worker, rows=database.rows)
        from pytest_nl2sql.engines.sqlite import SqliteEngine

        return SqliteEngine(database.path, immutable=True)

    def neighbour_cache(self) -> Any:
        if self._neighbour_cache is None:
            from pytest_nl2sql.neighbours import NeighbourCache

            # generation is bounded by the query time limit (per case: schema, invariants, candidates)
            self._neighbour_cache = NeighbourCache(self.options.cache_dir or default_cache_dir(),
                                                  time_limit=max(self.options.limits.timeout, GENERATION_FLOOR_S))
        return self._neighbour_cache

    def _folder(self, case: Case) -> DatabaseFolder | None:
        """The case's `database` when it names a folder of databases (the official test-suite
        layout); looked at once per target (every case asks for its engine twice)."""
        target = None if self.options.dsn else case.database_target
        if not target or "://" in target:
            return None
        if target not in self._folders:
            path = Path(target)
            self._folders[target] = DatabaseFolder.read(path, self.options.confine) if path.is_dir() else None
        return self._folders[target]

    def _efficiency(self, case: Case, judgement: Judgement, gold: GoldOutcome, engine: Engine) -> Efficiency | None:
        """The right prediction's time against its gold's (BIRD's R-VES); never part of the verdict."""
        pred_result, gold_result = judgement.result, gold.results[judgement.gold_index]
        if judgement.streamed or pred_result is None or pred_result.seconds is None or gold_result.seconds is None or not gold.queries:
            return None
        limits = self.options.limits

        def timed(sql: str, trusted: bool) -> Callable[[], float]:
            repeat = iter(range(1, 1000))

            def run() -> float:  # a comment makes each repeat new text: a result cache cannot answer it
                try:
                    text = f"{sql}\n-- nl2sql timing {next(repeat)}"
                    return execute_once_more_if_lost(engine, text, limits, trusted=trusted).seconds or 0.0
                except EngineError:
                    return float("inf")
            return run

        gold_sql = to_engine_sql(gold.queries[judgement.gold_index], case.written_in, engine)
        floor = self._timing_floors.get(id(engine))
        if floor is None:  # an empty query's fastest of five (each its own text), timed as a prediction is
            empty = timed("SELECT 1", False)
            floor = self._timing_floors[id(engine)] = floor_for(min(empty() for _ in range(5)))
        if max(gold_result.seconds, pred_result.seconds) >= floor and judgement.executed is not None \
                and on_neighbours.same_query(judgement.executed, (gold_sql,), engine.dialect):
            # the gold's own query (Spider: half the right predictions): re-timing it could only add noise
            return Efficiency(gold_result.seconds, pred_result.seconds, 1, floor_s=floor, same_query=True)
        return measure(gold_result.seconds, pred_result.seconds, timed(gold_sql, True), timed(judgement.executed or "", False),
                       floor_s=floor)

    def _judgement(self, case: Case, prediction: PredictionOutcome, engine: Engine, gold: GoldOutcome,
                   problem: str | Judgement | None = None) -> Judgement:
        """`problem`: why no SQL could be taken out of a Markdown answer (`_sql_of`) or a Malloy
        one compiled, or the judgement already reached (a compile past the time limit)."""
        if prediction.error is not None:
            return Judgement(Verdict.PREDICTOR_ERROR, prediction.error)
        if prediction.stale:
            return Judgement(Verdict.NO_PREDICTION, "the recorded prediction is stale: the question or schema changed since it was recorded")
        if isinstance(problem, Judgement):
            return problem
        if problem is not None:
            return Judgement(Verdict.NO_PREDICTION if prediction.value == "" else Verdict.PRED_ERROR, problem)
        if isinstance(prediction.value, PredictedResult):
            return self._judge_result_file(case, prediction.value, gold)
        if prediction.value is not None and not isinstance(prediction.value, str):
            return Judgement(Verdict.PREDICTOR_ERROR, f"the prediction must be SQL text, not {type(prediction.value).__name__}")
        if prediction.value is None or not prediction.value.strip():
            return Judgement(Verdict.NO_PREDICTION, self._no_prediction_reason(case, prediction))
        return judge(
            prediction.value, gold, engine, self.options.limits, dialect=prediction.dialect or case.written_in,
            compare=case.compare, spider_compat=self.spider_mode(case), fingerprint=self.options.fingerprints,
        )

    def _judge_result_file(self, case: Case, predicted: PredictedResult, gold: GoldOutcome) -> Judgement:
        """A prediction given as a CSV result: read (typed, as gold CSVs are) and compared."""
        confine = self.options.confine
        if confine is not None and not Path(os.path.realpath(predicted.path)).is_relative_to(confine):
            return Judgement(Verdict.PRED_ERROR, f"the predicted result {predicted.path} lies outside the rootdir"
                                                 f" {confine} (--nl2sql-confine): {os.path.realpath(predicted.path)}")
        try:
            result = read_result_csv(predicted.path, "predicted_result", self.options.limits)
        except ResultFileTooLarge as e:
            return Judgement(Verdict.TOO_MANY_ROWS, str(e))
        except ResultFileError as e:
            return Judgement(Verdict.PRED_ERROR, str(e))
        spider = self.spider_mode(case)
        options = CompareOptions.from_mapping({**(case.compare or {}), **({"mode": "spider"} if spider else {})})
        return judge_result(result, gold, options, fingerprint=self.options.fingerprints)

    # --- soft scores and near misses -----------------------------------------------------

    def namer(self, case: Case) -> ColumnNamer:
        """The column-name normaliser of a case: the default synonyms, the ini's, the case's."""
        key = self.options.synonyms + tuple(sorted((case.compare or {}).get("synonyms", {}).items()))
        if key not in self._namers:
            self._namers[key] = ColumnNamer.with_extra(dict(self.options.synonyms), (case.compare or {}).get("synonyms"))
        return self._namers[key]

    def _soft_scores(self, case: Case, judgement: Judgement, gold: GoldOutcome) -> SoftScores | None:
        """Soft scores of a prediction that produced a result (None when it did not run)."""
        if judgement.result is None or judgement.streamed or judgement.verdict not in (Verdict.PASS, Verdict.MISMATCH):
            return None  # (a streamed result is not held: only its first rows are)
        rule = ValueRule.of(_compare_options(case))
        golds = [(g.columns, g.rows) for g in gold.results]
        result = judgement.result

        def comparison_of(index: int) -> Comparison | None:
            """The verdict's comparison against gold `index` (row scores compare the columns it pairs):
            the one judged, or the same comparison made again for another gold."""
            if index == judgement.gold_index:
                return judgement.comparison
            other = gold.results[index]
            options = CompareOptions.from_mapping({**(case.compare or {}), **({"mode": "spider"} if self.spider_mode(case) else {})})
            try:
                return compare_results(other.rows, result.rows, gold.order_matters, options, gold_columns=len(other.columns),
                                       pred_columns=len(result.columns), gold_names=other.columns, ties=gold.ties_of(index))
            except ValueError:  # columns mode naming a column this gold lacks
                return None

        return best_soft_scores(golds, result.columns, result.rows, namer=self.namer(case), rule=rule, comparison_of=comparison_of)

    def _near_miss(self, case: Case, judgement: Judgement, gold: GoldOutcome) -> NearMiss | None:
        if judgement.verdict is not Verdict.MISMATCH or judgement.result is None or judgement.streamed:
            return None
        golds = [(g.rows, len(g.columns)) for g in gold.results]
        result = judgement.result
        return near_miss(golds, result.rows, len(result.columns), gold.order_matters, _compare_options(case))

    def _no_prediction_reason(self, case: Case, prediction: PredictionOutcome) -> str:
        """Say where we looked, so that an empty run is easy to diagnose: a hook that answered
        nothing is named only when there is one (a run without a model has none to blame)."""
        places = []
        if prediction.hook_silent or prediction.source is PredictionSource.HOOK:
            places.append("the pytest_nl2sql_predict hook returned nothing")
        else:
            places.append("no pytest_nl2sql_predict hook (a model) in a conftest.py")
        if self.predictions is not None and self.predictions.directory:
            places.append(f"no result file {case.id}.csv in {self.predictions.path}")
        elif self.predictions is not None:
            places.append(f"no entry for id {case.id!r} in {self.predictions.path}")
        places.append("the case has no `predicted` or `predicted_result`")
        return "no prediction for this case (" + "; ".join(places) + ")"

    def _exact_match(self, case: Case, predicted: Any, predicted_in: str) -> Any:
        """Spider exact-set match, for SQL cases whose schema is known and whose gold and prediction
        are SQLite SQL (what Spider's parser reads)."""
        sqlite = EngineKind.SQLITE.value
        if not case.gold or not isinstance(predicted, str) or case.written_in != sqlite or predicted_in != sqlite:
            return None
        schema = self.spider_schema(case)
        if schema is None:
            return None
        from pytest_nl2sql.metrics.exact import exact_match

        try:
            return exact_match(case.gold[0], predicted, schema)
        except (ValueError, RecursionError):
            return None

    # --- term-selection cases --------------------------------------------------------------

    def _score_term_selection(self, prepared: PreparedCase, prediction: PredictionOutcome | None) -> CaseOutcome:
        case, label = prepared.case, prepared.label
        conversation = tuple(case.conversation or ())
        outcome = prediction or self._predict_term_selection(case, label)
        selections, problem = None, outcome.error
        if problem is None and outcome.value is not None and not outcome.stale:
            try:
                selections = termselection.predictions_per_turn(outcome.value, len(termselection.targeted_turns(conversation)))
                for n, selection in enumerate(selections):
                    termselection.validate_selection(selection, where=f"prediction[{n}]")
            except ValueError as e:
                problem = f"malformed prediction: {e}"
        common = dict(kind=Kind.TERM_SELECTION, latency=outcome.latency, extra=outcome.report_fields())
        if selections is None or problem is not None:
            verdict = Verdict.PREDICTOR_ERROR if problem is not None else Verdict.NO_PREDICTION
            reason = problem or ("the recorded prediction is stale" if outcome.stale else self._no_prediction_reason(case, outcome))
            result = self._with_baseline(self._result(case, label, prepared.hardness, verdict, reason=reason,
                                                      predicted=_plain(outcome.value), **common), case)
            text = explain.term_selection_error_text(case, label.file, result)
            return CaseOutcome(result, _with_baseline_note(text, result, self._passed_in_baseline(case, result)))
        score = termselection.score_term_selection(termselection.targets(conversation), selections)
        min_precision, min_recall = termselection.thresholds(case.compare)
        passed = termselection.passes(score, min_precision, min_recall)
        result = self._with_baseline(self._result(
            case, label, prepared.hardness, Verdict.PASS if passed else Verdict.MISMATCH,
            reason=None if passed else termselection.reason_text(score, min_precision, min_recall),
            predicted=outcome.value, term_selection=score.to_json(), **common,
        ), case)
        text = None if passed else explain.term_selection_failure_text(case, label.file, result)
        return CaseOutcome(result, _with_baseline_note(text, result))

    def _predict_turns(self, case: Case, label: CaseLabel, conversation: tuple[Any, ...], sample: int = 0) -> PredictionOutcome:
        """The hook is asked once per targeted turn, with the conversation up to that turn; a
        stored prediction answers the whole case (one selection, or one per targeted turn)."""
        request = PredictionRequest.for_case(case, schema=_no_schema, engine=None, dialect=case.written_in).as_sample(sample)
        answers: list[Any] = []
        latency = 0.0
        attempts, usage, retries = 0, None, 0
        for index in termselection.targeted_turns(conversation):
            outcome = self.predictor.predict(case, request.at_turn(conversation[: index + 1]), _file_names(case, label))
            attempts, usage, retries = attempts + outcome.attempts, add_usage(usage, outcome.usage), retries + outcome.retries
            if outcome.source != PredictionSource.HOOK or outcome.error is not None:
                return dataclasses.replace(outcome, attempts=attempts, usage=usage, retries=retries)
            answers.append(outcome.value)
            latency += outcome.latency or 0.0
        value = answers[0] if len(answers) == 1 else answers
        return PredictionOutcome(value, PredictionSource.HOOK, latency, key=request.key, attempts=attempts, usage=usage, retries=retries)

    # --- the model's figures: attempts, usage, repeated answers ------------------------------------

    def _with_model_figures(self, prepared: PreparedCase, prediction: PredictionOutcome, outcome: CaseOutcome) -> CaseOutcome:
        """The hook's calls and usage over all the case's answers, and (with `repeat`) how each
        of the other answers fared; the verdict stays the first answer's."""
        every = (prediction, *prediction.samples)
        usage = None
        for answer in every:
            usage = add_usage(usage, answer.usage)
        changes: dict[str, Any] = {"attempts": sum(answer.attempts for answer in every), "usage": usage}
        explanation = outcome.explanation
        if prediction.samples and not outcome.broken:
            repeats = changes["repeats"] = self._repeats(prepared, prediction, outcome.result)
            if prediction.source == PredictionSource.HOOK or prediction.hook_silent:  # what --nl2sql-record keeps
                changes["extra"] = {**outcome.result.extra, "samples": [_recorded(answer) for answer in every]}
            if explanation is not None:
                explanation += (f"\nrepeated answers (--nl2sql-repeat={repeats['k']}): {repeats['passed']} of {repeats['k']} "
                                f"passed ({', '.join(repeats['verdicts'])}); the verdict is the first answer's")
        return dataclasses.replace(outcome, result=outcome.result.replace(**changes), explanation=explanation)

    def _repeats(self, prepared: PreparedCase, prediction: PredictionOutcome, first: CaseResult) -> dict[str, Any]:
        """`{"k", "passed", "verdicts", "predicted"}` over the case's answers. Each answer is judged
        as the first was (its own database and neighbours, the same rules), without what only the
        failure text needs (shrunk counterexamples, soft scores, timings); an answer equal to an
        earlier one has that one's verdict without running again."""
        verdicts = [first.verdict]
        predicted = [first.predicted]
        known = {_answer_key(prediction): first.verdict}
        for answer in prediction.samples:
            key = _answer_key(answer)
            if key not in known:
                known[key] = self._verdict_of(prepared, answer)
            verdicts.append(known[key])
            predicted.append(_shown_answer(answer) if not prepared.case.is_term_selection else _plain(answer.value))
        return {"k": len(verdicts), "passed": sum(v is Verdict.PASS for v in verdicts),
                "verdicts": [v.value for v in verdicts], "predicted": shown_answers(predicted)}  # bounded: 100 answers of megabytes

    def _verdict_of(self, prepared: PreparedCase, answer: PredictionOutcome) -> Verdict:
        """The verdict one more answer of a prepared case gets."""
        case, engine, gold = prepared.case, prepared.engine, prepared.gold
        if case.is_term_selection:
            return self._score_term_selection(prepared, answer).result.verdict
        assert engine is not None and gold is not None
        answer, problem = _sql_of(answer)
        try:
            if isinstance(answer.value, PredictedMalloy):
                engine = self._malloy_engine(engine)
                answer, problem = self._compiled(case, engine, answer)
            judgement = self._judgement(case, answer, engine, gold, problem)
        except (ConnectionLost, MalloySetupError):
            return Verdict.GOLD_ERROR  # not the answer's fault: it could not be judged
        if judgement.verdict is not Verdict.PASS or not isinstance(answer.value, str):
            return judgement.verdict
        beyond = self._check_beyond(case, answer.value, answer.dialect or case.written_in, engine, gold, shrink_failure=False)
        if beyond is not None and (beyond.failed or (beyond.fragile_against_prediction and self.options.fragile is FragilePolicy.FAIL)):
            return Verdict.MISMATCH
        return judgement.verdict

    # --- reviews ------------------------------------------------------------------------------

    def _reviewed(self, prepared: PreparedCase, outcome: CaseOutcome) -> CaseOutcome:
        """A person's decision about the case applied (or found stale), or the review hook's
        suggestion recorded (gate/reviews.py); a case a decision makes pass is classified against
        the baseline again, and explains nothing."""
        from pytest_nl2sql.gate.reviews import reviewed

        before = outcome.result
        result = reviewed(before, self.reviews, self.reviewer, lambda: self.database_hash(prepared.engine))
        if result is before:
            return outcome
        if result.passed and not before.passed:
            result = self._with_baseline(result.replace(baseline=None), prepared.case)
            return dataclasses.replace(outcome, result=result, explanation=None)
        return dataclasses.replace(outcome, result=result)

    def database_hash(self, engine: Engine | None) -> str | None:
        """The content hash of a case's database, which a review is tied to: a file's bytes (hashed
        once per process, as the neighbour cache hashes them), a server database's local DuckDB
        copy's data; None when there is none (a SQLAlchemy URL, a server too large to copy)."""
        if engine is None:
            return None
        path = getattr(engine, "path", None)
        try:
            if path is not None:
                digest = self.neighbour_cache().source_hash(Path(path))
                return digest if digest.startswith("content:") else f"sha256:{digest}"
            spec = _server_spec(engine)
            copy = self._copies().copy_of(spec) if spec is not None else None
        except OSError:
            return None
        return copy.digest if copy is not None and copy.path is not None else None

    # --- what every result shares ---------------------------------------------------------

    def _result(self, case: Case, label: CaseLabel, hardness: str | None, verdict: Verdict, *,
                kind: Kind = Kind.SQL, **fields: Any) -> CaseResult:
        return CaseResult(
            id=case.id, nodeid=label.nodeid, file=label.file, position=label.position, kind=kind,
            verdict=verdict, question=case.question, database=case.database,
            gold=case.gold_value if kind is Kind.SQL else None, hardness=hardness, tags=case.tags,
            ran_on=self._ran_on if kind is Kind.SQL else None, quarantine=case.quarantine, **fields,
        )

    @functools.cached_property
    def _ran_on(self) -> str | None:
        """Under --nl2sql-dsn, where every SQL case runs (password masked): the item's `ran_on`."""
        return engine_label(self.options.dsn) if self.options.dsn else None

    def _passed_in_baseline(self, case: Case, result: CaseResult) -> bool:
        entry = self.baseline.lookup_case(case.file, result.id) if self.baseline is not None else None
        return entry is not None and entry.passed

    def _with_baseline(self, result: CaseResult, case: Case) -> CaseResult:
        """The baseline status, decided once, here (the controller only counts them). The case is
        found by its file relative to the baseline file, whatever directory pytest started in.
        A quarantined case is not compared (its verdict is still written to a baseline)."""
        if self.baseline is None or case.quarantine is not None:
            return result
        status = classify(self.baseline.lookup_case(case.file, result.id), result.passed,
                          unpredicted=result.verdict is Verdict.PREDICTOR_ERROR)
        return result if status is None else result.replace(baseline=status.value)

    # --- databases, schemas and hardness (cached per process) ------------------------------

    def spider_mode(self, case: Case) -> bool:
        """Official Spider verdicts: `--nl2sql-compat=spider`, or the case's `compare: {mode: spider}`."""
        return self.options.spider_compat or (case.compare or {}).get("mode") == "spider"

    def engine_for(self, case: Case) -> Engine:
        """The database a SQL case runs on (the --nl2sql-dsn one when given); DatabaseMissing if absent.
        In Spider mode undecodable text bytes are dropped, as the official evaluator does."""
        target = self.options.dsn or case.database_target
        if target is None:
            raise DatabaseMissing(f"case {case.id} names no database")
        folder = self._folder(case)
        if folder is not None:
            target = str(folder.own)
        return self.engines.get(target, None, text_errors=text_errors_for(self.spider_mode(case)))

    def schema_ddl(self, engine: Engine) -> str:
        key = id(engine)
        if key not in self._ddl:
            try:
                self._ddl[key] = engine.schema_ddl()
            except ConnectionLost:  # the engine re-opens its connection: ask once more, keep nothing
                try:
                    return engine.schema_ddl()
                except EngineError:
                    return ""
            except EngineError:
                self._ddl[key] = ""
        return self._ddl[key]

    def sample_rows(self, engine: Engine, table: str, n: int = DEFAULT_SAMPLE_ROWS) -> SampleRows:
        """The first `n` rows of `table` (`PredictionRequest.sample_rows`), read once per engine,
        table and `n` under the run's limits. The name is matched as written, else ignoring case."""
        key = (id(engine), table, n)
        kept = self._rows.get(key)
        if kept is not None:
            return kept
        tables = list(engine.schema_columns())
        name = table if table in tables else next((t for t in tables if t.lower() == str(table).lower()), None)
        if name is None:
            raise ValueError(f"no table {table!r} in this database (it has: {', '.join(tables) or 'none'})")
        from sqlglot import exp

        query = exp.select("*").from_(exp.Table(this=exp.to_identifier(name, quoted=True))).limit(n)
        result = engine.execute(query.sql(dialect=engine.dialect or None), self.options.limits)
        rows = SampleRows(name, tuple(result.columns), tuple(tuple(row) for row in result.rows), n)
        self._rows[key] = rows
        return rows

    def read_ahead(self, case: Case) -> bool:
        """Read what a request may ask of a case's database (its schema, three rows of each table)
        in this thread, before the request is handed to a predictor in another: database
        connections are not shared across threads. False: the case's database cannot be opened
        (the case is broken; nothing is worth predicting)."""
        if case.is_term_selection:
            return True
        try:
            engine = self.engine_for(case)
        except EngineError:
            return False
        self.schema_ddl(engine)
        try:
            for table in engine.schema_columns():
                self.sample_rows(engine, table)
        except (EngineError, ValueError):
            pass  # a table that cannot be read is read (and fails) when a predictor asks for it
        return True

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

    def hardness(self, case: Case) -> str | None:
        """The case's explicit bucket, else Spider's rules on its (first) gold query."""
        key = (case.file, case.id)
        if key not in self._hardness:
            self._hardness[key] = case.hardness or (
                _computed_hardness(case, self.spider_schema(case)) if case.gold else None
            )
        return self._hardness[key]

    def close(self) -> None:
        self.engines.close_all()
        self._malloy_compiler = None  # the process's (`shared_compiler`): kept for its next run
        for engine in self._malloy_engines.values():
            if engine.dialect == EngineKind.DUCKDB.value:  # the copies (a SQLite engine is the cache's)
                engine.close()
        self._malloy_engines.clear()
        if self._duckdb_worker is not None:
            from pytest_nl2sql.engines.duckdb import release_worker

            release_worker(self._duckdb_worker)
            self._duckdb_worker = None


def _server_spec(engine: Engine) -> Any:
    """The `DatabaseSpec` of a native PostgreSQL or MySQL/MariaDB engine, whose neighbours come
    from a local DuckDB copy (None for files and SQLAlchemy URLs, which have none)."""
    spec = getattr(engine, "spec", None)
    kind = getattr(spec, "kind", None)
    return spec if kind in (EngineKind.POSTGRES, EngineKind.MYSQL) and getattr(spec, "url", None) else None


# A case's neighbour generation may take `--nl2sql-timeout` (a bound on one query), but never less
# than this: a generation runs hundreds of queries, and one bounded by a half-second query limit
# would be cut short or not by the machine's load, so the same run would check a prediction on
# neighbours one time and not the next.
GENERATION_FLOOR_S = 10.0

def default_cache_dir() -> Path:
    """Where neighbours are kept when the run names no folder: `$NL2SQL_CACHE_DIR`, else the user's
    cache folder (they are keyed by content, so sharing them between projects is safe)."""
    explicit = os.environ.get("NL2SQL_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()  # `~/...` as a CI file's env block writes it (no shell expands it)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-nl2sql"


def _computed_hardness(case: Case, schema: Any) -> str | None:
    from pytest_nl2sql.metrics.hardness import case_hardness

    return case_hardness(case.gold[0], schema, case.written_in)


def _unreadable_schema() -> str:
    """The schema a model gets when the case's database cannot be opened (the case is broken)."""
    return ""


def _no_schema() -> None:
    """Term-selection cases give a model no database schema."""
    return None


def _compare_options(case: Case) -> CompareOptions | None:
    try:
        return CompareOptions.from_mapping(case.compare)
    except ValueError:  # checked when the case was read; never here
        return None


def relative_name(path: str | Path, folder: str | Path) -> str:
    """`path` as reports and node ids name it: relative to `folder` when it lies there, else whole."""
    try:
        return Path(path).resolve().relative_to(Path(folder).resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _shown_path(path: Path, case: Case) -> str:
    """A result file as reports show it: relative to the case file's folder when it lies there."""
    return relative_name(path, case.file.parent)


def _file_names(case: Case, label: CaseLabel) -> tuple[str, ...]:
    """The spellings a predictions file may use for a case's file (as in the node id, or absolute)."""
    return (label.file, str(case.file))


def _infrastructure_reason(error: BaseException) -> str | None:
    """A lost connection is the run's fault: say so, so nobody reads it as the case's."""
    cause = error if isinstance(error, ConnectionLost) else error.__cause__
    if isinstance(cause, ConnectionLost):
        return f"the database connection was lost (not the prediction's fault; retried once): {cause}"
    return None


def _with_baseline_note(text: str | None, result: CaseResult, passed_before: bool = False) -> str | None:
    """Under a failing case's explanation, say why it fails the gate."""
    note = BASELINE_NOTES.get(result.baseline or "")
    if passed_before and result.verdict is Verdict.PREDICTOR_ERROR:  # an outage, not a worse answer
        note = ("not a regression: this case passed in the baseline and could not be predicted now "
                "(predictor_error), which says nothing of the model's answers; it fails the run until it is answered")
    return f"{text}\nbaseline: {note}" if text is not None and note else text


BASELINE_NOTES = {
    BaselineStatus.REGRESSION.value: "regression: this case passed in the baseline and fails now",
    BaselineStatus.NEW.value: "new case, not in the baseline: it fails the run until it passes or the baseline is updated",
}


def _sql_of(prediction: PredictionOutcome) -> tuple[PredictionOutcome, str | None]:
    """The prediction with the SQL of a Markdown answer as its value (`answer.extract_sql`), and
    why there is none (then the value stays the answer, or "" for an empty fenced block)."""
    if not isinstance(prediction.value, str) or prediction.error is not None:
        return prediction, None
    extracted = extract_sql(prediction.value)
    if extracted.problem is not None:
        return (dataclasses.replace(prediction, value="") if extracted.sql == "" else prediction), extracted.problem
    return (prediction if extracted.sql == prediction.value else dataclasses.replace(prediction, value=extracted.sql)), None


def _shown_answer(answer: PredictionOutcome) -> Any:
    """One of a repeated case's answers as its `repeats.predicted` shows it: the SQL judged."""
    if answer.error is not None:
        return None
    value = _sql_of(answer)[0].value
    return str(value) if isinstance(value, (PredictedResult, PredictedMalloy)) else _plain(value)


def _answer_key(answer: PredictionOutcome) -> tuple[Any, ...]:
    """What an answer's verdict depends on: two answers with the same key get the same verdict."""
    value = answer.value
    shown = f"file:{value.path}" if isinstance(value, PredictedResult) else json.dumps(value, sort_keys=True, default=repr)
    return shown, answer.error, answer.stale, answer.dialect


def _recorded(answer: PredictionOutcome) -> dict[str, Any]:
    """One answer as `--nl2sql-record` keeps it among a repeated case's `samples`, with its usage."""
    if answer.hook_silent:
        return {"no_answer": True}
    usage = {"usage": answer.usage} if answer.usage else {}
    if answer.error is not None:
        return {"error": answer.error, **usage}
    value = _sql_of(answer)[0].value
    if isinstance(value, PredictedMalloy):
        return {"predicted_malloy": value.text, **({"raw_prediction": value.raw} if value.raw is not None else {}), **usage}
    if not isinstance(value, str):
        return {"selection": _plain(value), **usage}
    return {"predicted": value, **({"raw_prediction": answer.value} if value != answer.value else {}), **usage}


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool, list, dict)) else repr(value)

