"""The controller-only plugin object: collects every case's result from test reports and finishes
the session (baseline, reports, thresholds, recorded predictions).

Registered only where `config` has no `workerinput` (the xdist controller, or a run without xdist),
like pytest's junitxml: the reports are the truth, worker memory is never read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from pytest_nl2sql.cases.model import Case
from pytest_nl2sql.cases.read import read_case_file
from pytest_nl2sql.gate.baseline import Baseline
from pytest_nl2sql.gate.finish import WORKER_DIED, Gate, finish_run
from pytest_nl2sql.gate.run import CommitLookup, RunInfo, engine_label, git_commit, utc_now
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.plugin import terminal
from pytest_nl2sql.plugin.items import CaseItem, result_of, run_state, unreadable_of
from pytest_nl2sql.plugin.progress import ProgressDisplay
from pytest_nl2sql.plugin.settings import Settings
from pytest_nl2sql.shown import safe_lines
from pytest_nl2sql.vocab import Kind, Verdict

CASE_FILE_SUFFIXES = (".yaml", ".yml", ".jsonl")  # what a case file's node id ends with (plugin/hooks.py collects them)


@dataclass(frozen=True)
class Selected:
    """How much of the collected case files a run selected."""

    cases: int  # cases selected to run
    in_files: int  # cases the collected case files hold (before -k, -m, node ids, --lf)
    skipped_files: int = 0  # case files --lf did not even collect (none of their cases failed last time)

    @property
    def partial(self) -> bool:
        return self.cases < self.in_files or self.skipped_files > 0

    def words(self) -> str:
        skipped = f"; --lf skipped {self.skipped_files} file{'s' if self.skipped_files != 1 else ''}" if self.skipped_files else ""
        return f"{self.cases} of {self.in_files} cases{skipped}"


WORKER_OUTPUT_KEY = "nl2sql_selected"


class Selection:
    """Counts, where cases are collected (the run's process, or each xdist worker), how many cases
    the collected case files hold and how many were selected: a run of fewer (`-k`, `-m`, node
    ids, `--lf`) is partial, and its figures are not the suite's. A worker hands its counts to the
    controller in `workeroutput`."""

    def __init__(self) -> None:
        self.in_files: int | None = None
        self.selected: Selected | None = None

    @pytest.hookimpl(tryfirst=True)  # before -k and -m deselect (and --lf, whose wrapper acts after every hook)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        files = {item.parent.nodeid: item.parent for item in items if isinstance(item, CaseItem) and item.parent is not None}
        self.in_files = sum(getattr(file, "case_count", 0) for file in files.values())

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.in_files is None:
            return
        cases = sum(1 for item in session.items if isinstance(item, CaseItem))
        last_failed = session.config.pluginmanager.get_plugin("lfplugin")
        skipped = getattr(last_failed, "_skipped_files", 0) if last_failed is not None else 0
        self.selected = Selected(cases, max(self.in_files, cases), skipped if isinstance(skipped, int) else 0)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output = getattr(session.config, "workeroutput", None)  # an xdist worker: sent to the controller after this
        if output is not None and self.selected is not None:
            output[WORKER_OUTPUT_KEY] = [self.selected.cases, self.selected.in_files, self.selected.skipped_files]


class Controller:
    """Collects every case's result from the test reports; finishes the session on the controller."""

    def __init__(self, settings: Settings, baseline: Baseline | None, selection: Selection | None = None) -> None:
        self.selection = selection or Selection()  # what this process collected (nothing under xdist)
        self.selected_by_worker: Selected | None = None  # under xdist, what the first worker to finish collected
        self.settings = settings
        self.baseline = baseline  # the one the workers classify against, read once at configure
        self.results: dict[str, CaseResult] = {}  # the last result per nodeid, so reruns are safe
        self.summary: dict[str, Any] | None = None
        self.items: list[dict[str, Any]] = []  # the JSON report's items, for the terminal's fragile passes
        self.messages: list[str] = []  # files written, baseline notes
        self.failures: list[str] = []  # threshold and baseline problems that fail the session
        self.started = utc_now()
        self.run: RunInfo | None = None
        self.progress: ProgressDisplay | None = None
        self.commit: CommitLookup | None = None  # started once cases are collected
        self.unreadable: dict[str, str] = {}  # case files that could not be read: node id -> `file:line: why`
        self.set_up: set[str] = set()  # cases whose setup (their gold) passed
        self.unconcluded: dict[str, pytest.TestReport] = {}  # failed reports of cases that carried no result
        self.collected_ids: dict[str, int] | None = None  # under xdist: node id -> place in collection order

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._show_progress(session.config, sum(1 for item in session.items if isinstance(item, CaseItem)))

    @pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown without xdist
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.progress is None:  # under xdist the controller collects nothing: the first worker tells
            self._show_progress(node.config, len(ids))
        if self.collected_ids is None:  # every worker collects the same, in the same order
            self.collected_ids = {nodeid: index for index, nodeid in enumerate(ids)}

    def _show_progress(self, config: pytest.Config, total: int) -> None:
        """Cases were collected: show their progress, and look up the commit meanwhile."""
        if total and self.commit is None:
            self.commit = CommitLookup(config.rootpath)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and total:
            self.progress = ProgressDisplay(reporter, total, config.get_verbosity())

    @pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown without xdist
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        counts = (getattr(node, "workeroutput", None) or {}).get(WORKER_OUTPUT_KEY)
        if self.selected_by_worker is None and isinstance(counts, list) and len(counts) == 3:
            self.selected_by_worker = Selected(*(int(n) for n in counts))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A case file that could not be read (from an xdist worker too: the controller gets failed
        collect reports): the summary names it, and a baseline update keeps its entries."""
        why = unreadable_of(report)
        if why is not None:
            self.unreadable[report.nodeid] = why

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        result = result_of(report)
        if result is not None:
            first = report.nodeid not in self.results
            self.results[report.nodeid] = result
            if first and self.progress is not None:
                self.progress.add(result.passed, not result.verdict.is_error)
        elif report.when == "setup" and report.passed:
            self.set_up.add(report.nodeid)
        elif report.failed and report.nodeid.split("::", 1)[0].endswith(CASE_FILE_SUFFIXES):
            # a case's report without its result: pytest-xdist's report of a case whose worker died
            # (when "???"), or anything else that kept the case from concluding
            self.unconcluded.setdefault(report.nodeid, report)

    def _unconcluded_results(self, session: pytest.Session) -> list[CaseResult]:
        """A result for every case whose reports carried none, so that it is in every report and
        figure: `gold_error`, its reason saying it could not be judged and why."""
        out = []
        cases = CaseFileIndex(self.settings, session.config)
        for nodeid, report in self.unconcluded.items():
            if nodeid in self.results:
                continue
            file, _, case_id = nodeid.partition("::")
            detail = (report.longreprtext.strip().splitlines() or [""])[0][:300]
            if report.when == "???":  # pytest-xdist: "worker 'gw0' crashed while running '...'"
                stage = ("while its prediction was asked for or judged" if nodeid in self.set_up
                         else "while its database was opened or its gold ran")
                reason = (f"{WORKER_DIED} {stage} ({detail}): killed by a signal (the OOM killer), or a crash in a "
                          "database client library or the predictor hook; its verdict is unknown")
            else:
                reason = f"could not be judged: its {report.when} ended without a verdict ({detail})"
            out.append(cases.unjudged(file, case_id, nodeid, self._position_of(nodeid, session), reason))
        return out

    def _position_of(self, nodeid: str, session: pytest.Session) -> int:
        """Where the case sits in collection order: its item's place, or under xdist its place
        among the collected node ids, after the nearest case before it that has a result."""
        for item in session.items:
            if isinstance(item, CaseItem) and item.nodeid == nodeid:
                return item.collection_index
        ids = self.collected_ids or {}
        index = ids.get(nodeid)
        if index is None:
            return max((r.position for r in self.results.values()), default=-1) + 1
        order = sorted(ids, key=ids.__getitem__)
        for earlier in range(index - 1, -1, -1):
            known = self.results.get(order[earlier])
            if known is not None:  # positions count items before deselection: at least one per id
                return known.position + index - earlier
        return index

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.progress is not None:
            self.progress.close()
        for result in self._unconcluded_results(session):
            self.results[result.nodeid] = result
        settings = self.settings
        if not self.results and not (settings.reports or settings.fail_under or settings.max_cost is not None
                                     or settings.max_latency_p95 is not None):
            return  # no case ran and nothing was asked of us: stay silent
        complete = exitstatus != pytest.ExitCode.INTERRUPTED and not session.shouldfail and not session.shouldstop
        rootdir = session.config.rootpath
        selected = self.selection.selected or self.selected_by_worker
        partial = selected.partial if selected is not None else not _full_run(session)
        self.run = RunInfo(
            started=self.started.isoformat(timespec="seconds"), duration_s=round((utc_now() - self.started).total_seconds(), 3),
            label=settings.label, git_commit=self.commit.result() if self.commit else git_commit(rootdir),
            engine=engine_label(settings.dsn, rootdir),
            complete=complete, options=settings.run_options(), partial=partial,
        )
        gate = Gate(
            rootdir=rootdir, baseline=self.baseline, baseline_path=settings.baseline,
            update_baseline=settings.update_baseline, full_run=not partial, selected=partial,
            selection=selected.words() if selected is not None else "-k, -m or node ids", record=settings.record,
            history=settings.history, reports=[(r.format, r.path) for r in settings.reports], fail_under=settings.fail_under,
            max_cost=settings.max_cost, max_latency_p95=settings.max_latency_p95,
            unread_files=tuple(self.unreadable.items()),
        )
        finished = finish_run(list(self.results.values()), self.run, gate)
        self.summary = finished.summary
        self.items = finished.report.get("items") or []
        self.messages += finished.messages
        self.failures += finished.failures
        if finished.usage_error and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif self.failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        if self.summary is None:
            if self.unreadable:
                terminalreporter.section("nl2sql")
                terminalreporter.line(safe_lines(unreadable_line(self.unreadable)), red=True, bold=True)
            return
        if not self.results:
            self.messages.insert(0, "no nl2sql case ran")
        terminalreporter.section("nl2sql")
        for line in terminal.summary_lines(self.summary, config.get_verbosity(), self.items):
            terminalreporter.line(line)
        for line in self.messages:  # baseline lines, paths, hints: they quote case ids and file names
            terminalreporter.line(safe_lines(line))
        if self.unreadable:
            terminalreporter.line(safe_lines(unreadable_line(self.unreadable)), red=True, bold=True)
        for line in self.failures:  # thresholds name tags, databases
            terminalreporter.line(safe_lines(line), red=True, bold=True)


def unreadable_line(unreadable: dict[str, str]) -> str:
    """The counts above leave out the cases of files that could not be read: say so, naming them."""
    names = sorted(unreadable)
    shown = ", ".join(names[:5]) + (f", ... ({len(names) - 5} more)" if len(names) > 5 else "")
    count = f"{len(names)} case file{'s' if len(names) != 1 else ''}"
    return f"{count} could not be read (collection errors above): none of their cases is in these counts: {shown}"


class CaseFileIndex:
    """The cases of case files read again on the controller, for a case whose result never came
    back (its xdist worker died): its question, database, tags and hardness, for the figures."""

    def __init__(self, settings: Settings, config: pytest.Config) -> None:
        self.settings, self.config = settings, config
        self.files: dict[str, dict[str, Any]] = {}

    def case(self, file: str, case_id: str) -> Any:
        if file not in self.files:
            try:
                contents = read_case_file(self.config.rootpath / file, db_dir=self.settings.db_dir, dsn=self.settings.dsn,
                                          confine=self.config.rootpath if self.settings.confine else None)
                self.files[file] = {entry.id: entry for entry in contents.entries}
            except Exception:  # noqa: BLE001 - the result is made without the case's details, never not at all
                self.files[file] = {}
        entry = self.files[file].get(case_id)
        return entry if isinstance(entry, Case) else None

    def unjudged(self, file: str, case_id: str, nodeid: str, position: int, reason: str) -> CaseResult:
        case = self.case(file, case_id)
        if case is None:
            return CaseResult(id=case_id, nodeid=nodeid, file=file, position=position, kind=Kind.SQL,
                              verdict=Verdict.GOLD_ERROR, reason=reason)
        try:
            hardness = run_state(self.config).pipeline.hardness(case)
        except Exception:  # noqa: BLE001 - computed from the gold's SQL: a detail, not worth a lost case
            hardness = case.hardness
        kind = Kind.TERM_SELECTION if case.is_term_selection else Kind.SQL
        return CaseResult(id=case_id, nodeid=nodeid, file=file, position=position, kind=kind, verdict=Verdict.GOLD_ERROR,
                          question=case.question, database=case.database, gold=case.gold_value if kind is Kind.SQL else None,
                          hardness=hardness, tags=case.tags, reason=reason, quarantine=case.quarantine)


def _full_run(session: pytest.Session) -> bool:
    """Every case of the collected files ran: no -k, no -m, no node ids on the command line (what
    is known when no process counted the cases: every xdist worker died)."""
    option = session.config.option
    named_nodes = any("::" in str(arg) for arg in session.config.args)
    return not getattr(option, "keyword", "") and not getattr(option, "markexpr", "") and not named_nodes


CONTROLLER_KEY = pytest.StashKey[Controller]()
