"""The controller-only plugin object: collects every case's result from test reports and finishes
the session (baseline, reports, thresholds, recorded predictions).

Registered only where `config` has no `workerinput` (the xdist controller, or a run without xdist),
like pytest's junitxml: the reports are the truth, worker memory is never read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.plugin import terminal
from pytest_nl2sql.plugin.items import result_of
from pytest_nl2sql.gate.baseline import Baseline, BaselineError, compare_with_baseline, load_baseline, write_baseline
from pytest_nl2sql.cases.predictions import record_lines
from pytest_nl2sql.plugin.settings import Settings
from pytest_nl2sql.files import atomic_write_text
from pytest_nl2sql.reports import write_report
from pytest_nl2sql.metrics.summary import build_report, ordered, summarize
from pytest_nl2sql.gate.run import RunInfo, append_history, engine_label, git_commit, utc_now
from pytest_nl2sql.gate.thresholds import check_thresholds
from pytest_nl2sql.judge.result import CaseResult


class Controller:
    """Collects every case's result from the test reports; finishes the session on the controller."""

    def __init__(self, settings: Settings, baseline: Baseline | None) -> None:
        self.settings = settings
        self.baseline = baseline  # the one the workers classify against, read once at configure
        self.results: dict[str, CaseResult] = {}  # the last result per nodeid, so reruns are safe
        self.summary: dict[str, Any] | None = None
        self.messages: list[str] = []  # files written, baseline notes
        self.failures: list[str] = []  # threshold and baseline problems that fail the session
        self.started = utc_now()
        self.run: RunInfo | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        result = result_of(report)
        if result is not None:
            self.results[report.nodeid] = result

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        settings = self.settings
        if not self.results and not (settings.reports or settings.fail_under):
            return  # no case ran and nothing was asked of us: stay silent
        results = ordered(self.results.values())
        summary = summarize(results)
        complete = exitstatus != pytest.ExitCode.INTERRUPTED and not session.shouldfail and not session.shouldstop
        self.run = RunInfo(
            started=self.started.isoformat(timespec="seconds"), duration_s=round((utc_now() - self.started).total_seconds(), 3),
            label=settings.label, git_commit=git_commit(session.config.rootpath), engine=engine_label(settings.dsn),
            complete=complete, options=settings.run_options(),
        )
        if self.baseline is not None:
            comparison = compare_with_baseline(self.baseline, [r.to_json() for r in results], session.config.rootpath)
            summary["baseline"] = comparison.to_json()
            self.messages += comparison.render_lines()
        self.summary = summary
        report = {"run": self.run.to_json(), **build_report(results, summary)}
        if not complete:
            self.messages.insert(0, f"the run was interrupted: {len(results)} cases were judged and the reports say "
                                    "`complete: false`")
        if settings.history is not None:
            try:
                append_history(settings.history, self.run, summary)
                self.messages.append(f"history: {settings.history} (+1 run)")
            except OSError as e:
                self.failures.append(f"nl2sql: cannot append to the history {settings.history}: {e}")
        if settings.update_baseline and settings.baseline is not None:
            previous = None
            if settings.baseline.exists():
                try:
                    previous = load_baseline(settings.baseline)  # its cases not run now are kept
                except BaselineError as e:
                    self.messages.append(f"the old baseline could not be read ({e}): written from scratch")
            try:
                full = _full_run(session) and complete  # a deleted case leaves the baseline only then
                replaced = sorted({r.file for r in results}) if full else None
                write_baseline(settings.baseline, report["items"], previous=previous,
                               rootdir=session.config.rootpath, replaced_files=replaced)
                self.messages.append(f"baseline written: {settings.baseline} ({len(results)} cases)")
            except OSError as e:  # a BaselineWriteError names the path and what is wrong
                self.failures.append(f"nl2sql: {e}")
        if settings.record is not None:
            records = [_record(r) for r in results if r.extra.get("prediction_source") == "hook"]
            kept = _earlier_records(settings.record, {(r.file, r.id) for r in results})
            try:
                atomic_write_text(settings.record, record_lines(records + kept), errors="backslashreplace",
                                  what="the predictions record")
                self.messages.append(f"predictions recorded: {settings.record} ({len(records)} cases"
                                     + (f", {len(kept)} earlier ones kept" if kept else "") + ")")
            except OSError as e:
                self.failures.append(f"nl2sql: {e}")
        for target in settings.reports:
            try:
                for written in write_report(target.format, report, target.path):
                    self.messages.append(f"{target.format} report: {written}")
            except OSError as e:  # one unwritable report must not cost the others or the thresholds
                self.failures.append(f"nl2sql: {e}")
        self.failures += check_thresholds(settings.fail_under, summary)
        if self.failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if self.summary is None:
            return
        if not self.results:
            self.messages.insert(0, "no nl2sql case ran")
        terminalreporter.section("nl2sql")
        for line in terminal.summary_lines(self.summary, config.get_verbosity()):
            terminalreporter.line(line)
        for line in self.messages:
            terminalreporter.line(line)
        for line in self.failures:
            terminalreporter.line(line, red=True, bold=True)


def _record(result: CaseResult) -> dict[str, Any]:
    record = {"id": result.id, "file": result.file, "key": result.extra.get("key")}
    if "error" in result.extra:  # the predictor raised: replayed as predictor_error
        return {**record, "error": result.extra["error"]}
    key = "selection" if result.kind.value == "term_selection" else "predicted"
    return {**record, key: result.predicted}


def _full_run(session: pytest.Session) -> bool:
    """Every case of the collected files ran: no -k, no -m, no node ids on the command line."""
    option = session.config.option
    named_nodes = any("::" in str(arg) for arg in session.config.args)
    return not getattr(option, "keyword", "") and not getattr(option, "markexpr", "") and not named_nodes


def _earlier_records(path: Path, ran: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """The records of an earlier recording for cases that did not run now (`-k`, another suite):
    a partial run adds to a recording instead of overwriting it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    kept = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and (record.get("file"), str(record.get("id"))) not in ran:
            kept.append(record)
    return kept


CONTROLLER_KEY = pytest.StashKey[Controller]()
