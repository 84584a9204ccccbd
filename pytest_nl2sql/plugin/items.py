"""pytest collection nodes: a case file is a `pytest.File`, each case a `pytest.Item`.

Each item stores its `CaseResult` as JSON in `user_properties` *before* its outcome is decided, so
the controller can aggregate from reports alone (pytest-xdist safe, as pytest's junitxml does).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_nl2sql.judge import explain as render
from pytest_nl2sql.metrics import termselection
from pytest_nl2sql.cases.read import Case, InvalidCase, load_case_file
from pytest_nl2sql.engines.base import EngineError
from pytest_nl2sql.judge.execute import GoldError, GoldOutcome, Judgement, judge, run_gold
from pytest_nl2sql.judge.pipeline import PredictionOutcome, Runtime
from pytest_nl2sql.vocab import Kind, Verdict
from pytest_nl2sql.judge.result import PROPERTY, CaseResult

RUNTIME_KEY = pytest.StashKey[Runtime]()
JUNIT_PROPERTIES = ("nl2sql_verdict", "nl2sql_hardness", "nl2sql_baseline")
_BASELINE_NOTES = {  # said under a failing case's explanation, so the failure says why it fails the gate
    "regression": "regression: this case passed in the baseline and fails now",
    "new": "new case, not in the baseline: it fails the run until it passes or the baseline is updated",
}


class CaseFailure(Exception):
    """A case's prediction is wrong; `expected` is set when a baseline already records the failure."""

    def __init__(self, result: CaseResult, text: str, expected: str | None = None) -> None:
        super().__init__(result.reason or result.verdict.value)
        self.result, self.text, self.expected = result, text, expected


class CaseError(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """A case is broken (verdict gold_error): reported as a pytest ERROR in setup.

    A `pytest.fail` outcome without a Python traceback: formatting one for every case of a missing
    database would cost more than running the whole suite.
    """

    def __init__(self, result: CaseResult, text: str) -> None:
        super().__init__(msg=text, pytrace=False)
        self.result, self.text = result, text


def runtime(config: pytest.Config) -> Runtime:
    return config.stash[RUNTIME_KEY]


class CaseFile(pytest.File):
    """A YAML or JSONL file of cases (or a suite naming an external data set)."""

    def collect(self) -> Iterator[pytest.Item]:
        settings = runtime(self.config).settings
        entries = load_case_file(self.path, db_dir=settings.db_dir, dsn=settings.dsn)
        self.case_count = len(entries)  # an aligned predictions file must have as many lines
        for entry in entries:
            if isinstance(entry, InvalidCase):
                yield InvalidCaseItem.from_parent(self, name=entry.id, entry=entry)
            elif entry.is_term_selection:
                yield TermSelectionItem.from_parent(self, name=entry.id, case=entry)
            else:
                yield SqlCaseItem.from_parent(self, name=entry.id, case=entry)


class CaseItemBase(pytest.Item):
    """What every nl2sql item shares: position, result recording, failure rendering."""

    collection_index: int = 0  # position among all collected items (Case.position is within its file)

    @property
    def rel_file(self) -> str:
        return self.nodeid.split("::", 1)[0]

    @property
    def file_names(self) -> tuple[str, ...]:
        return (self.rel_file, str(self.path))

    def record(self, result: CaseResult) -> CaseResult:
        """Store the result for the controller (replacing one stored in an earlier phase)."""
        ours = (PROPERTY, *JUNIT_PROPERTIES)
        self.user_properties[:] = [p for p in self.user_properties if p[0] not in ours]
        self.user_properties.append((PROPERTY, result.dumps()))
        # readable properties for --junitxml (it writes every user property of a test)
        for name, value in zip(JUNIT_PROPERTIES, (result.verdict.value, result.hardness, result.baseline)):
            if value is not None:
                self.user_properties.append((name, str(value)))
        return result

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (CaseFailure, CaseError)):
            return excinfo.value.text
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        line = getattr(self, "line", None)
        return self.path, (line - 1 if line else None), f"nl2sql case {self.name}"

    def base_result(self, case: Case, verdict: Verdict, kind: Kind, **fields: Any) -> CaseResult:
        return CaseResult(
            id=case.id, nodeid=self.nodeid, file=self.rel_file, position=self.collection_index, kind=kind,
            verdict=verdict, question=case.question, database=case.database,
            gold=case.gold_value if kind is Kind.SQL else None, hardness=getattr(self, "hardness", None),
            tags=case.tags, **fields,
        )

    @contextmanager
    def results_even_on_crash(self, case: Case, kind: Kind, verdict: Verdict) -> Iterator[None]:
        """An unexpected exception still leaves a result for the reports (then propagates with its
        traceback), so that no case silently drops out of the accuracy."""
        try:
            yield
        except (CaseFailure, CaseError, pytest.skip.Exception):
            raise
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            reason = f"could not be judged: {type(e).__name__}: {e}".splitlines()[0]
            self.record(self.base_result(case, verdict, kind, reason=reason))
            raise

    def refuse_if_misconfigured(self, rt: Runtime, case: Case) -> None:
        """Under xdist a usage problem found at collection is reported by every case."""
        if rt.usage_problem:
            kind = Kind.TERM_SELECTION if case.is_term_selection else Kind.SQL
            result = self.record(self.base_result(case, Verdict.GOLD_ERROR, kind, reason=rt.usage_problem))
            raise CaseError(result, f"usage error: {rt.usage_problem}")

    def fail_or_pass(self, result: CaseResult, text: str) -> None:
        rt = runtime(self.config)
        status = rt.baseline_status(self.rel_file, result.id, result.passed)
        if status is not None:
            result = result.replace(baseline=status.value)
        self.record(result)
        if result.passed:
            return
        expected = None
        if rt.settings.update_baseline:
            expected = "recorded in the new baseline (--nl2sql-update-baseline)"
        elif result.baseline == "known_failure":
            expected = f"known failure (baseline): {result.verdict.value}" + (f": {result.reason}" if result.reason else "")
        elif result.baseline in _BASELINE_NOTES:
            text = f"{text}\nbaseline: {_BASELINE_NOTES[result.baseline]}"
        raise CaseFailure(result, text, expected)


class InvalidCaseItem(CaseItemBase):
    """A case entry that could not be read: an ERROR naming the file and line."""

    def __init__(self, *, entry: InvalidCase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.line = entry.line

    def setup(self) -> None:
        message = str(self.entry.error)
        result = self.record(
            CaseResult(
                id=self.entry.id, nodeid=self.nodeid, file=self.rel_file, position=self.collection_index, kind=Kind.SQL,
                verdict=Verdict.GOLD_ERROR, reason=f"invalid case: {message}",
            )
        )
        raise CaseError(result, f"invalid case: {message}")

    def runtest(self) -> None:  # pragma: no cover - setup always raises
        raise AssertionError("unreachable")


class SqlCaseItem(CaseItemBase):
    """A question with gold SQL (or a gold CSV), judged by executing the prediction."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.line = case.line
        self.hardness = case.hardness or _computed_hardness(case, runtime(self.config).spider_schema(case))
        self.gold: GoldOutcome | None = None
        self.extra_keyword_matches.update(k for k in (*case.tags, case.database, self.hardness) if k)

    def setup(self) -> None:
        with self.results_even_on_crash(self.case, Kind.SQL, Verdict.GOLD_ERROR):
            self._run_gold()

    def _run_gold(self) -> None:
        rt = runtime(self.config)
        case = self.case
        self.refuse_if_misconfigured(rt, case)
        try:
            engine = rt.engine_for(case)
            self.gold = run_gold(
                case.gold, engine, rt.settings.limits, dialect=case.written_in, order=case.order,
                spider_compat=rt.spider_mode(case), gold_result_files=case.gold_result,
            )
        except (GoldError, EngineError) as e:
            # a broken case is an error whatever the baseline says: no baseline status
            result = self.record(self.base_result(case, Verdict.GOLD_ERROR, Kind.SQL, reason=str(e), predicted=_plain(case.predicted)))
            raise CaseError(result, render.gold_error_text(case, str(e))) from None

    def runtest(self) -> None:
        with self.results_even_on_crash(self.case, Kind.SQL, Verdict.PRED_ERROR):
            self._judge_prediction()

    def _judge_prediction(self) -> None:
        rt = runtime(self.config)
        case = self.case
        engine = rt.engine_for(case)
        view = case.replace(schema=rt.schema_ddl(engine), engine=engine, dialect=case.written_in)
        prediction = rt.predict(view, self.file_names, rt.prediction_key(view))
        judgement = self._judge(rt, prediction, engine)
        predicted_sql = prediction.value if isinstance(prediction.value, str) else _plain(prediction.value)
        exact = _exact_match(rt, case, predicted_sql) if judgement.verdict is not Verdict.PREDICTOR_ERROR else None
        result = self.base_result(
            case, judgement.verdict, Kind.SQL, predicted=predicted_sql, reason=judgement.reason,
            exact_match=exact.match if exact else None, partial=exact.partial if exact else None,
            fingerprint=judgement.fingerprint, latency=prediction.latency,
            diff=render.diff_json(judgement, self.gold), extra=_prediction_extra(prediction),
        )
        self.fail_or_pass(result, render.failure_text(case, result, judgement, self.gold, self.config.get_verbosity()))

    def _judge(self, rt: Runtime, prediction: PredictionOutcome, engine: Any) -> Judgement:
        if prediction.error is not None:
            return Judgement(Verdict.PREDICTOR_ERROR, prediction.error)
        if prediction.stale:
            return Judgement(Verdict.NO_PREDICTION, "the recorded prediction is stale: the question or schema changed since it was recorded")
        if prediction.value is not None and not isinstance(prediction.value, str):
            return Judgement(Verdict.PREDICTOR_ERROR, f"the prediction must be SQL text, not {type(prediction.value).__name__}")
        assert self.gold is not None
        return judge(
            prediction.value, self.gold, engine, rt.settings.limits, dialect=self.case.written_in,
            compare=self.case.compare, spider_compat=rt.spider_mode(self.case),
            fingerprint=rt.settings.baseline is not None,
        )


class TermSelectionItem(CaseItemBase):
    """A conversation whose user turns carry target term selections, scored by precision/recall."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.line = case.line
        self.hardness = case.hardness
        self.extra_keyword_matches.update(k for k in (*case.tags, case.database, case.hardness) if k)

    def runtest(self) -> None:
        with self.results_even_on_crash(self.case, Kind.TERM_SELECTION, Verdict.PREDICTOR_ERROR):
            self._score()

    def _score(self) -> None:
        rt = runtime(self.config)
        case = self.case
        self.refuse_if_misconfigured(rt, case)
        conversation = list(case.conversation or ())
        turns = termselection.targeted_turns(conversation)
        outcome = self._predict(rt, conversation, turns)
        selections, problem = None, outcome.error
        if problem is None and outcome.value is not None and not outcome.stale:
            try:
                selections = termselection.predictions_per_turn(outcome.value, len(turns))
                for n, selection in enumerate(selections):
                    termselection.validate_selection(selection, where=f"prediction[{n}]")
            except ValueError as e:
                problem = f"malformed prediction: {e}"
        if selections is None or problem is not None:
            verdict = Verdict.PREDICTOR_ERROR if problem is not None else Verdict.NO_PREDICTION
            reason = problem or ("the recorded prediction is stale" if outcome.stale else "no prediction for this case")
            result = self.base_result(case, verdict, Kind.TERM_SELECTION, reason=reason, latency=outcome.latency,
                                      predicted=_plain(outcome.value), extra=_prediction_extra(outcome))
            self.fail_or_pass(result, render.term_selection_error_text(case, result))
            return
        score = termselection.score_term_selection(termselection.targets(conversation), selections)
        min_precision, min_recall = termselection.thresholds(case.compare)
        passed = termselection.passes(score, min_precision, min_recall)
        result = self.base_result(
            case, Verdict.PASS if passed else Verdict.MISMATCH, Kind.TERM_SELECTION,
            reason=None if passed else termselection.reason_text(score, min_precision, min_recall),
            predicted=outcome.value, term_selection=score.to_json(), latency=outcome.latency,
            extra=_prediction_extra(outcome),
        )
        self.fail_or_pass(result, render.term_selection_failure_text(case, result))

    def _predict(self, rt: Runtime, conversation: list[Any], turns: list[int]) -> PredictionOutcome:
        """The hook is asked once per targeted turn, with the conversation up to that turn; a
        stored prediction answers the whole case (one selection, or one per targeted turn)."""
        case = self.case
        key = rt.prediction_key(case)
        answers: list[Any] = []
        latency = 0.0
        for index in turns:
            view = case.replace(conversation=tuple(conversation[: index + 1]), question=conversation[index].get("content"))
            outcome = rt.predict(view, self.file_names, key)
            if outcome.source != "hook" or outcome.error is not None:
                return outcome
            answers.append(outcome.value)
            latency += outcome.latency or 0.0
        value = answers[0] if len(answers) == 1 else answers
        return PredictionOutcome(value, "hook", latency, key=key)


def _prediction_extra(prediction: PredictionOutcome) -> dict[str, Any]:
    extra: dict[str, Any] = {"prediction_source": prediction.source}
    if prediction.source == "hook" and prediction.key:
        extra["key"] = prediction.key
    if prediction.error is not None:
        extra["error"] = prediction.error
        if prediction.traceback:
            extra["traceback"] = prediction.traceback
    return extra


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool, list, dict)) else repr(value)


def _computed_hardness(case: Case, schema: Any) -> str | None:
    """Spider's bucket of the (first) gold query. With the schema exact match will use, the gold
    is parsed once for both (the parse is cached per query and schema). A gold the official
    parser cannot read gets the same rules counted on sqlglot's tree."""
    if not case.gold:
        return None
    from pytest_nl2sql.metrics.hardness import estimated_hardness, hardness

    for attempt in (schema, None) if schema is not None else (None,):
        try:
            return str(hardness(case.gold[0], attempt))
        except (ValueError, RecursionError):
            continue
    try:
        return str(estimated_hardness(case.gold[0], case.written_in))
    except (ValueError, RecursionError):
        return None


def _exact_match(rt: Runtime, case: Case, predicted: Any) -> Any:
    """Spider exact-set match, for SQL cases whose schema is known and whose gold the parser reads."""
    if not case.gold or not isinstance(predicted, str) or case.written_in != "sqlite":
        return None
    schema = rt.spider_schema(case)
    if schema is None:
        return None
    from pytest_nl2sql.metrics.exact import exact_match

    try:
        return exact_match(case.gold[0], predicted, schema)
    except (ValueError, RecursionError):
        return None


def assign_positions(items: list[pytest.Item]) -> None:
    """Number items in collection order, so reports list them identically under xdist."""
    for index, item in enumerate(items):
        if isinstance(item, CaseItemBase):
            item.collection_index = index


def adjust_report(report: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """Explain a broken case in setup without a Python traceback, and turn a failure the baseline
    already records into an xfail (the diff stays in the longrepr and the reports)."""
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(error, CaseError):
        report.longrepr = error.text
    elif isinstance(error, CaseFailure) and error.expected:
        report.outcome = "skipped"
        report.wasxfail = error.expected


def aligned_predictions_problem(config: pytest.Config, items: list[pytest.Item]) -> str | None:
    """A one-query-per-line predictions file aligns with exactly one suite, line for case."""
    store = runtime(config).predictions
    if store is None or store.aligned is None:
        return None
    case_items = [item for item in items if isinstance(item, CaseItemBase)]
    files = sorted({item.rel_file for item in case_items})
    if len(files) > 1:
        return (f"--nl2sql-predictions={store.path} has one query per line, aligned with one suite, "
                f"but {len(files)} case files were collected ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}): "
                "run one suite, or use a JSONL file of {\"id\", \"predicted\"}")
    cases = getattr(case_items[0].parent, "case_count", None) if case_items else None
    if cases is not None and cases != len(store.aligned):
        return (f"--nl2sql-predictions={store.path} has {len(store.aligned)} lines for the {cases} cases of "
                f"{files[0]}: one query per line, a blank line for a case without one")
    return None


def check_aligned_predictions(session: pytest.Session) -> None:
    """Refuse a misaligned predictions file before any case runs. An xdist worker cannot stop the
    session cleanly, so there every case reports the problem as an error instead."""
    problem = aligned_predictions_problem(session.config, session.items)
    if problem is None:
        return
    if not hasattr(session.config, "workerinput"):
        raise pytest.UsageError(problem)
    runtime(session.config).usage_problem = problem


def explain_result_comparison(op: str, left: Any, right: Any) -> list[str] | None:
    """`assert pred == gold` on two query results shows the same diff as a failing case."""
    from pytest_nl2sql.judge.compare import compare_results
    from pytest_nl2sql.engines.base import QueryResult

    if op != "==" or not (isinstance(left, QueryResult) and isinstance(right, QueryResult)):
        return None
    comparison = compare_results(right.rows, left.rows, gold_columns=len(right.columns), pred_columns=len(left.columns))
    if comparison.match:
        return ["query results are equal under execution match (same rows up to column and row order), "
                "but not identical: compare them with the nl2sql fixture, or compare sorted rows"]
    judgement = Judgement(Verdict.MISMATCH, comparison.reason, comparison, 0, left)
    gold = GoldOutcome((right,), (), False)
    text = render.result_diff_lines(judgement, gold)
    return [f"query results differ ({comparison.reason}): left is the prediction, right the gold", *text]
