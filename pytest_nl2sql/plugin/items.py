"""pytest collection nodes, as in pytest's non-python example: a case file is a `pytest.File`, each
case a `pytest.Item` that hands its case to the pipeline and turns the outcome into pytest's.

The gold runs in `setup` (a broken case is an ERROR), the prediction in `runtest`. Each item's
`CaseResult` travels to the controller on its test report (attribute `nl2sql`, plain JSON), which
keeps every number identical with and without pytest-xdist.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from _pytest._code.code import ExceptionChainRepr, ReprFileLocation, ReprTraceback, TerminalRepr

from pytest_nl2sql.cases.read import Case, InvalidCase, read_case_file
from pytest_nl2sql.judge.pipeline import CaseLabel, CaseOutcome, Pipeline, PreparedCase
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.plugin.prefetch import Prefetcher, upcoming
from pytest_nl2sql.plugin.settings import Settings
from pytest_nl2sql.shown import ShownWarning, safe_lines
from pytest_nl2sql.vocab import BaselineStatus

RESULT_ATTRIBUTE = "nl2sql"  # the test report attribute carrying a case's result as JSON
UNREADABLE_ATTRIBUTE = "nl2sql_unreadable"  # a collect report's attribute: why its case file could not be read
JUNIT_PROPERTIES = ("nl2sql_verdict", "nl2sql_hardness", "nl2sql_baseline")  # readable, for --junitxml
CASE_DOMAIN = "nl2sql case "  # how a case names itself in its reports' location (`reportinfo`)


class NL2SQLWarning(ShownWarning, pytest.PytestWarning):
    """Something in the input that is probably a mistake (an empty case file, unmatched predictions)."""


@dataclass
class RunState:
    """What each pytest process (controller or xdist worker) keeps in `config.stash`."""

    settings: Settings
    pipeline: Pipeline
    usage_problem: str | None = None  # a misconfiguration found at collection, on an xdist worker
    prefetcher: Prefetcher | None = None  # --nl2sql-concurrency > 1
    unreadable: list[str] = field(default_factory=list)  # node ids of the case files that failed to collect here
    torn_down: int = 0  # cases whose teardown ran here (see `FREEZE_EVERY`)


STATE_KEY = pytest.StashKey[RunState]()

# Every this many cases, what survived them is frozen out of the cyclic collector's sight (after a
# collection of the young generations, so that no garbage is frozen): the kept results, parses and
# query results live to the end, and each full collection walked them all again (Spider dev, 1034
# cases: four full collections of ~65,000 objects, 0.09 of the 0.19 s of CPU the collector took;
# 0.02 s after). Collection and the session's end freeze too (`hooks.py`).
FREEZE_EVERY = 100


def run_state(config: pytest.Config) -> RunState:
    return config.stash[STATE_KEY]


class CaseFailure(Exception):
    """A case's prediction is wrong; `expected` is set when a baseline already records the failure."""

    def __init__(self, text: str, expected: str | None = None) -> None:
        super().__init__(text.splitlines()[0] if text else "")
        self.text, self.expected = text, expected


class CaseError(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """A case is broken (verdict gold_error): a pytest ERROR in setup, without a Python traceback
    (formatting one for every case of a missing database would cost more than the whole run)."""

    def __init__(self, text: str) -> None:
        super().__init__(msg=text, pytrace=False)
        self.text = text


class CaseFile(pytest.File):
    """A YAML or JSONL file of cases (or a suite naming an external data set)."""

    unreadable: str | None = None  # why the file could not be read as a whole (its collection error)

    def collect(self) -> Iterator[pytest.Item]:
        settings = run_state(self.config).settings
        confine = self.config.rootpath if settings.confine else None
        contents = read_case_file(self.path, db_dir=settings.db_dir, dsn=settings.dsn, confine=confine)
        if contents.error is not None:  # a collection error of the file: no item pretends to be one of its cases
            error = contents.error
            where = f"{self.nodeid}:{error.line}" if error.line else self.nodeid
            self.unreadable = safe_lines(f"{where}: {error.message}")
            raise self.CollectError(self.unreadable)
        self.case_count = len(contents.entries)  # an aligned predictions file must have as many lines
        for warning in contents.warnings:  # an empty file, `cases: []`: probably a mistake
            where = f"{self.nodeid}:{warning.line}" if warning.line else self.nodeid
            self.warn(NL2SQLWarning(f"{where}: {warning.message}"))
        for entry in contents.entries:
            yield CaseItem.from_parent(self, name=entry.id, entry=entry)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """An unreadable file's error, with its first line as the short summary's message."""
        if self.unreadable is not None and isinstance(excinfo.value, self.CollectError):
            return UnreadableRepr(self.unreadable, self.nodeid)
        return super().repr_failure(excinfo, style=style)


class UnreadableRepr(TerminalRepr):
    """The collection error of a case file that could not be read: where and why, and that none
    of its cases ran (`reprcrash` gives pytest's short summary its message)."""

    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.reprcrash = ReprFileLocation(file, 0, text.splitlines()[0] if text else "")

    def toterminal(self, tw: Any) -> None:
        tw.line(self.text, red=True)
        tw.line("(this case file could not be read: none of its cases ran)", red=True)


class CaseItem(pytest.Item):
    """One case: its setup runs the gold, its call the prediction; the pipeline decides."""

    collection_index: int = 0  # position among all collected items (Case.position is within its file)

    def __init__(self, *, entry: Case | InvalidCase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.line = entry.line
        self.prepared: PreparedCase | None = None
        self.result: CaseResult | None = None
        self.concluded_in: str | None = None  # the phase whose report carries the result
        if isinstance(entry, Case):  # -k selects by id, tag, database or hardness
            hardness = run_state(self.config).pipeline.hardness(entry)
            self.extra_keyword_matches.update(k for k in (*entry.tags, entry.database, hardness) if k)

    @property
    def label(self) -> CaseLabel:
        return CaseLabel(self.nodeid, self.nodeid.split("::", 1)[0], self.collection_index)

    def setup(self) -> None:
        state = run_state(self.config)
        with self._result_even_on_crash("setup"):
            if isinstance(self.entry, InvalidCase):
                self._conclude(state.pipeline.invalid(self.entry, self.label), "setup")
            elif state.usage_problem:
                self._conclude(state.pipeline.unusable(self.entry, self.label, state.usage_problem), "setup")
            else:
                if state.prefetcher is not None:
                    state.prefetcher.submit(upcoming(self, self.session, state.prefetcher.ahead))
                self.prepared = state.pipeline.prepare(self.entry, self.label)
                if self.prepared.broken is not None:
                    self._conclude(self.prepared.broken, "setup")

    def runtest(self) -> None:
        assert self.prepared is not None
        prepared, self.prepared = self.prepared, None  # results are not kept once judged
        state = run_state(self.config)
        with self._result_even_on_crash("call"):
            prediction = state.prefetcher.take(self) if state.prefetcher is not None else None
            self._conclude(state.pipeline.finish(prepared, prediction=prediction), "call")

    def teardown(self) -> None:
        self.prepared = None
        state = run_state(self.config)
        state.torn_down += 1
        if state.torn_down % FREEZE_EVERY == 0:
            gc.collect(1)
            gc.freeze()

    def _conclude(self, outcome: CaseOutcome, phase: str) -> None:
        """Record the result for the controller, then pass, fail, xfail or error as pytest does. A
        quarantined case's failure, a broken case's included, is an xfail naming the reason."""
        self._record(outcome.result, phase)
        result = outcome.result
        if result.quarantine is not None and not result.passed:
            raise CaseFailure(outcome.explanation or result.reason or result.verdict.value, f"quarantined: {result.quarantine}")
        if outcome.broken:
            raise CaseError(outcome.explanation or result.reason or result.verdict.value)
        if result.passed:
            return
        expected = None
        if run_state(self.config).settings.update_baseline:
            expected = "recorded in the new baseline (--nl2sql-update-baseline)"
        elif result.baseline == BaselineStatus.KNOWN_FAILURE.value:
            expected = f"known failure (baseline): {result.verdict.value}" + (f": {result.reason}" if result.reason else "")
        raise CaseFailure(outcome.explanation or result.verdict.value, expected)

    def _record(self, result: CaseResult, phase: str) -> None:
        self.result, self.concluded_in = result, phase
        self.user_properties[:] = [p for p in self.user_properties if p[0] not in JUNIT_PROPERTIES]
        for name, value in zip(JUNIT_PROPERTIES, (result.verdict.value, result.hardness, result.baseline)):
            if value is not None:
                self.user_properties.append((name, str(value)))

    @contextmanager
    def _result_even_on_crash(self, phase: str) -> Iterator[None]:
        """An unexpected exception still leaves a result for the reports, then propagates with its
        traceback, so that no case silently drops out of the accuracy."""
        try:
            yield
        except (CaseFailure, CaseError, pytest.skip.Exception, KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:
            self._record(run_state(self.config).pipeline.crashed(self.entry, self.label, e, during_setup=phase == "setup"), phase)
            raise

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (CaseFailure, CaseError)):
            return self.failure_repr(excinfo.value.text)
        return super().repr_failure(excinfo, style=style)

    def failure_repr(self, text: str) -> Any:
        """The failure text, shaped by `--tb`: `line` gives one line per case, `short` the verdict
        and reason, any other style the whole explanation."""
        style = self.config.getoption("tbstyle", "auto")
        text = safe_lines(text)  # a prediction's escape sequences and CI commands, made visible and inert
        first = text.splitlines()[0] if text else ""
        if style == "line":
            location = ReprFileLocation(self.nodeid.split("::", 1)[0], self.line or 0, first)
            return ExceptionChainRepr([(ReprTraceback([], None, "line"), location, None)])
        if style == "short":
            notes = [line for line in text.splitlines()[1:] if line.startswith("baseline: ")]
            return "\n".join([first, *notes])
        return text

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, (self.line - 1 if self.line else None), f"{CASE_DOMAIN}{self.name}"


def mark_unreadable(collector: pytest.Collector, report: pytest.CollectReport) -> None:
    """Tag the collection error of a case file that could not be read, so that the controller
    (through xdist too: the tag is plain text) can tell it from other collection errors."""
    if isinstance(collector, CaseFile) and collector.unreadable is not None and report.failed:
        setattr(report, UNREADABLE_ATTRIBUTE, collector.unreadable)
        run_state(collector.config).unreadable.append(report.nodeid)


def unreadable_of(report: pytest.CollectReport) -> str | None:
    """Why a collect report's case file could not be read (`file:line: what`), else None."""
    value = getattr(report, UNREADABLE_ATTRIBUTE, None)
    return value if isinstance(value, str) else None


def go_on_past_unreadable_files(session: pytest.Session) -> None:
    """pytest runs nothing once collection failed, unless `--continue-on-collection-errors`; a case
    file that cannot be read must not keep the other files' cases from running. When every
    collection error is such a file, the run goes on as that option makes it (the errors stay
    errors, and the exit status says so); any other collection error stops the run as before."""
    count = len(run_state(session.config).unreadable)
    if count and session.testsfailed == count:
        session.config.option.continue_on_collection_errors = True


def has_cases(session: pytest.Session) -> bool:
    return any(isinstance(item, CaseItem) for item in session.items)


def forget_quiet_reports(config: pytest.Config) -> None:
    """Drop the cases' passed setup and teardown reports without output from the terminal
    reporter's list of them (`stats[""]`), before its summary: pytest scans that whole list once
    per failed item for teardown output, O(failures x items) (157 Spider failures of 1034 cases:
    ~0.1 s; a weaker model's 600: ~0.4 s). Such a report shows nothing anywhere (a case's teardown
    prints nothing; `-rP` shows sections), so no output changes. Cases are told by their report's
    location (`reportinfo`), which travels from xdist workers too."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    quiet = getattr(reporter, "stats", {}).get("")
    if not quiet:
        return
    reporter.stats[""] = [report for report in quiet if not _case_without_output(report)]


def _case_without_output(report: Any) -> bool:
    location = getattr(report, "location", None)
    return (getattr(report, "when", None) in ("setup", "teardown") and getattr(report, "passed", False)
            and not getattr(report, "sections", None) and isinstance(location, tuple) and len(location) == 3
            and isinstance(location[2], str) and location[2].startswith(CASE_DOMAIN))


def assign_positions(items: list[pytest.Item]) -> None:
    """Number items in collection order, so reports list them identically under xdist."""
    for index, item in enumerate(items):
        if isinstance(item, CaseItem):
            item.collection_index = index


def adjust_report(item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]) -> None:
    """Attach the case's result to the report of the phase that decided it; explain a broken case
    without a Python traceback; turn a failure the baseline already records into an xfail (the
    diff stays in the longrepr and the reports)."""
    if isinstance(item, CaseItem) and item.result is not None and item.concluded_in == call.when:
        setattr(report, RESULT_ATTRIBUTE, item.result)  # JSON only when the report leaves the process
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(error, CaseError) and isinstance(item, CaseItem):
        report.longrepr = item.failure_repr(error.text)
    elif isinstance(error, CaseFailure) and error.expected:
        report.outcome = "skipped"
        report.wasxfail = safe_lines(error.expected)  # a baseline's reason or a quarantine's: text from the data


def result_of(report: pytest.TestReport) -> CaseResult | None:
    """The case result a report carries: the object in this process, its JSON from an xdist worker."""
    value = getattr(report, RESULT_ATTRIBUTE, None)
    if isinstance(value, CaseResult):
        return value
    return CaseResult.loads(value) if isinstance(value, str) else None


def serializable(report: Any, data: Any) -> Any:
    """A report on its way to another process (pytest-xdist) carries its result as plain JSON."""
    value = getattr(report, RESULT_ATTRIBUTE, None)
    if isinstance(data, dict) and isinstance(value, CaseResult):
        data[RESULT_ATTRIBUTE] = value.dumps()
    return data


def aligned_predictions_problem(config: pytest.Config, items: list[pytest.Item]) -> str | None:
    """A one-query-per-line predictions file aligns with exactly one suite, line for case."""
    store = run_state(config).pipeline.predictions
    if store is None or store.aligned is None:
        return None
    case_items = [item for item in items if isinstance(item, CaseItem)]
    files = sorted({item.label.file for item in case_items})
    if len(files) > 1:
        return (f"--nl2sql-predictions={store.path} has one query per line, aligned with one suite, "
                f"but {len(files)} case files were collected ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}): "
                "run one suite, or use a JSONL file of {\"id\", \"predicted\"}")
    cases = getattr(case_items[0].parent, "case_count", None) if case_items else None
    problem = store.misalignment(cases, files[0]) if cases is not None else None
    return f"--nl2sql-predictions={problem}" if problem else None


def check_predictions(session: pytest.Session) -> None:
    """Refuse a misaligned predictions file before any case runs (an xdist worker cannot stop the
    session cleanly, so there every case reports the problem as an error instead), and warn when a
    JSONL predictions file matches none of the collected cases."""
    problem = aligned_predictions_problem(session.config, session.items)
    if problem is not None:
        if not hasattr(session.config, "workerinput"):
            raise pytest.UsageError(problem)
        run_state(session.config).usage_problem = problem
        return
    store = run_state(session.config).pipeline.predictions
    cases = [item for item in session.items if isinstance(item, CaseItem)]
    if store is not None and store.aligned is None and cases and not hasattr(session.config, "workerinput"):
        if not any(item.entry.id in store.by_id for item in cases):
            warnings.warn(NL2SQLWarning(
                f"--nl2sql-predictions={store.path}: none of its {len(store.by_id)} ids matches one of the "
                f"{len(cases)} collected cases (is it the predictions file of another suite?)"
            ))
