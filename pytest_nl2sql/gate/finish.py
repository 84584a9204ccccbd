"""The end of a run, without pytest: summary, baseline, history, recording, reports, thresholds.

The controller calls it once the last case has reported; `nl2sql merge-reports` calls it on the
results of several shards' JSON reports, so a suite split across a CI matrix is gated and reported
exactly as one run would be.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.predictions import record_lines
from pytest_nl2sql.files import atomic_write_text
from pytest_nl2sql.gate.baseline import (
    Baseline,
    BaselineError,
    compare_with_baseline,
    key_relative_to,
    load_baseline,
    write_baseline,
)
from pytest_nl2sql.gate.run import HistoryError, RunInfo, append_history, read_history
from pytest_nl2sql.gate.thresholds import Threshold, check_budgets, check_thresholds
from pytest_nl2sql.judge.pipeline import INVALID_CASE
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.summary import build_report, ordered, summarize
from pytest_nl2sql.reports import write_report
from pytest_nl2sql.shown import shown_path
from pytest_nl2sql.vocab import BaselineStatus, Kind, Verdict

TREND_FORMATS = ("md", "xlsx", "html")  # the reports that show the trend over --nl2sql-history
# How the reason of a case whose xdist worker died while judging it begins (its verdict is
# `gold_error`: it could not be judged). A baseline update keeps such a case's entry as it was.
WORKER_DIED = "could not be judged: the worker process judging it died"


@dataclass(frozen=True)
class Gate:
    """What the end of a run is asked to do (the `--nl2sql-…` options that act after the cases)."""

    rootdir: Path  # case files in results are relative to it
    baseline: Baseline | None = None  # compare with it (read once, before the cases ran)
    baseline_path: Path | None = None
    update_baseline: bool = False
    full_run: bool = False  # every case of the files that ran: an update forgets deleted cases
    selected: bool = False  # a partial run: some cases of the files collected (-k, -m, node ids, --lf): no gate, history line marked
    selection: str = ""  # how much was selected, in words ("2 of 3 cases"), for the messages
    record: Path | None = None
    history: Path | None = None
    reports: Sequence[tuple[str, Path]] = ()  # (format, path)
    fail_under: Sequence[Threshold] = ()
    max_cost: float | None = None  # --nl2sql-max-cost: the summary's total usage cost above it fails the run
    max_latency_p95: float | None = None  # --nl2sql-max-latency-p95: the predictor latency p95 above it (seconds)
    unread_files: Sequence[tuple[str, str]] = ()  # (case file relative to rootdir, why): collection errors


@dataclass
class Finished:
    summary: dict[str, Any]
    report: dict[str, Any]
    messages: list[str] = field(default_factory=list)  # files written, baseline notes
    failures: list[str] = field(default_factory=list)  # what fails the session (thresholds, unwritable files)
    usage_error: bool = False  # a file the user named is unreadable (a corrupt history): the exit code says so


def finish_run(results: Sequence[CaseResult], run: RunInfo, gate: Gate) -> Finished:
    results = [_unpredicted_is_no_regression(r) for r in ordered(results)]
    messages: list[str] = []
    failures: list[str] = []
    try:
        summary = summarize(results)
    except Exception as e:  # noqa: BLE001 - one figure that cannot be computed must not cost the reports
        summary = _counts_only(results)
        failures.append(f"nl2sql: the summary's figures could not be computed ({type(e).__name__}: {e}); "
                        "the reports hold the counts of verdicts only")
    summary["engine"] = run.engine  # where the cases ran: the --nl2sql-dsn database (password masked), or "per case"
    if gate.baseline is not None:
        comparison = compare_with_baseline(gate.baseline, [r.to_json() for r in results], gate.rootdir)
        comparison = replace(comparison, path=shown_path(comparison.path, gate.rootdir))  # the hint, the summary, every header
        summary["baseline"] = comparison.to_json()
        messages += comparison.render_lines()
    report = {"run": run.to_json(), **build_report(results, summary)}
    if not run.complete:
        messages.insert(0, f"the run was interrupted: {len(results)} cases were judged and the reports say `complete: false`")
    history: list[dict[str, Any]] = []
    usage_error = False
    if gate.history is not None:
        try:
            append_history(gate.history, run, summary)  # a partial run's line says so (run.partial)
            partial = f", marked partial: {gate.selection or 'some cases only'}; the trend leaves it out" if gate.selected else ""
            messages.append(f"history: {shown_path(gate.history, gate.rootdir)} (+1 run{partial})")
        except OSError as e:
            failures.append(f"nl2sql: cannot append to the history {gate.history}: {e}")
        try:
            # oldest first, this run last: the trend of md, xlsx and html, without partial runs (a
            # trend over different cases would show changes no model made)
            history = [entry for entry in read_history(gate.history) if entry["run"].get("partial") is not True]
        except HistoryError as e:  # the reports are still written, without the trend
            failures.append(f"nl2sql: {e}")
            usage_error = True
    if gate.update_baseline and gate.baseline_path is not None:
        _update_baseline(gate, results, report, messages, failures, full=gate.full_run and run.complete)
    if gate.record is not None:
        _record(gate.record, results, messages, failures, gate.rootdir)
    for fmt, path in gate.reports:
        payload = {**report, "history": history} if history and fmt in TREND_FORMATS else report
        try:
            for written in write_report(fmt, payload, path):
                messages.append(f"{fmt} report: {shown_path(written, gate.rootdir)}")
        except OSError as e:  # one unwritable report must not cost the others or the thresholds
            failures.append(f"nl2sql: {e}")
        except Exception as e:  # noqa: BLE001 - nor one that cannot be rendered
            failures.append(f"nl2sql: the {fmt} report {path} could not be written: {type(e).__name__}: {e}")
    budgets = gate.max_cost is not None or gate.max_latency_p95 is not None
    if gate.selected and (gate.fail_under or budgets):  # a floor for the suite, not for whichever cases were picked
        messages.append(f"thresholds not applied: partial run ({gate.selection or 'some cases only'}); "
                        "they are checked on runs of every case of the files collected")
    else:
        failures += check_thresholds(gate.fail_under, summary)
        over, notes = check_budgets(summary, max_cost=gate.max_cost, max_latency_p95=gate.max_latency_p95)
        failures += over
        messages += notes
    return Finished(summary, report, messages, failures, usage_error)


def _counts_only(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The summary's counts, computed without any figure that could fail: what the reports show
    when `summarize` cannot finish."""
    sql = [r for r in results if r.kind is Kind.SQL]
    errors = sum(1 for r in sql if r.verdict.is_error)
    passed = sum(1 for r in sql if r.passed)
    judged = len(sql) - errors
    by_verdict: dict[str, int] = {}
    for r in results:
        by_verdict[r.verdict.value] = by_verdict.get(r.verdict.value, 0) + 1
    return {"total": len(sql), "passed": passed, "errors": errors, "failed": judged - passed,
            "accuracy": passed / judged if judged else None, "predictor_errors": sum(1 for r in sql if r.verdict is Verdict.PREDICTOR_ERROR),
            "by_hardness": {}, "by_tag": {}, "by_database": {}, "by_verdict": by_verdict, "baseline": None,
            "quarantined": sum(1 for r in results if r.quarantine is not None)}


def _unpredicted_is_no_regression(result: CaseResult) -> CaseResult:
    """A case the model could not answer is neither a regression nor an excused known failure
    (merged shards are classified here): it fails the run, as `predictor_error` always does."""
    excused = (BaselineStatus.REGRESSION.value, BaselineStatus.KNOWN_FAILURE.value)
    if result.verdict is Verdict.PREDICTOR_ERROR and result.baseline in excused:
        return result.replace(baseline=None)
    return result


def _update_baseline(gate: Gate, results: Sequence[CaseResult], report: dict[str, Any], messages: list[str],
                     failures: list[str], *, full: bool) -> None:
    assert gate.baseline_path is not None
    previous = None
    if gate.baseline_path.exists():
        try:
            previous = load_baseline(gate.baseline_path)  # its cases not run now are kept
        except BaselineError as e:
            messages.append(f"the old baseline could not be read ({e}): written from scratch")
    unread = _unread_files(results, gate.unread_files)
    died = {(r.file, r.id) for r in results if r.verdict is Verdict.GOLD_ERROR and (r.reason or "").startswith(WORKER_DIED)}
    if died:
        messages.append(f"{len(died)} case(s) could not be judged (their worker died): their earlier baseline entries are kept")
    items, kept = _keeping_unpredicted([item for item in report["items"] if item["file"] not in unread
                                        and (item["file"], item["id"]) not in died], previous, gate)
    if kept:
        messages.append(f"{kept} case(s) could not be predicted (predictor_error): their earlier baseline entries are kept")
    for file, why in unread.items():
        count = _entries_of(previous, file, gate.rootdir)
        messages.append(f"baseline: {file} could not be read ({why}): "
                        + (f"its {count} entries are kept as they were; fix the file and update again" if count
                           else "none of its cases is written"))
    try:
        replaced = sorted({r.file for r in results} - set(unread)) if full else None  # a deleted case leaves only then
        untouched = write_baseline(gate.baseline_path, items, previous=previous, rootdir=gate.rootdir, replaced_files=replaced,
                                   unjudged=died)
        note = f"; {untouched} entries of cases not judged in this run kept as they were" if untouched else ""
        messages.append(f"baseline written: {shown_path(gate.baseline_path, gate.rootdir)} ({len(items)} cases{note})")
    except OSError as e:  # a BaselineWriteError names the path and what is wrong
        failures.append(f"nl2sql: {e}")


def _unread_files(results: Sequence[CaseResult], collection_errors: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The case files that could not be read, each with why: a collection error, or an entry the
    file could not give (an invalid case: YAML that does not parse, an unknown key). An update
    keeps their baseline entries as they were: what this run made of them is no verdict."""
    unread = {file: why for file, why in collection_errors}
    prefix = f"{INVALID_CASE}: "
    for result in results:
        if result.verdict is Verdict.GOLD_ERROR and (result.reason or "").startswith(prefix):
            unread.setdefault(result.file, _shortened(result.reason[len(prefix):]))
    return unread


def _entries_of(previous: Baseline | None, file: str, rootdir: Path) -> int:
    if previous is None:
        return 0
    key = key_relative_to(Path(previous.path).resolve().parent, rootdir / file)
    return sum(1 for entry_file, _ in previous.entries if entry_file == key)


def _shortened(text: str, limit: int = 160) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _keeping_unpredicted(items: Sequence[dict[str, Any]], previous: Baseline | None, gate: Gate) -> tuple[list[dict[str, Any]], int]:
    """The items to write as the new baseline: a case the model could not be asked (an outage
    during an update) keeps its earlier entry rather than being recorded as a failure."""
    if previous is None:
        return list(items), 0
    folder = Path(previous.path).resolve().parent
    out, kept = [], 0
    for item in items:
        entry = previous.lookup(key_relative_to(folder, gate.rootdir / item["file"]), item["id"]) \
            if item["verdict"] == Verdict.PREDICTOR_ERROR.value else None
        if entry is not None:
            item = {**item, **entry.to_json()}
            kept += 1
        out.append(item)
    return out, kept


def _record(path: Path, results: Sequence[CaseResult], messages: list[str], failures: list[str], rootdir: Path | None = None) -> None:
    records = [_record_of(r) for r in results
               if r.extra.get("prediction_source") == "hook" or r.extra.get("hook_answered") is False]
    kept = _earlier_records(path, {(r.file, r.id) for r in results})
    try:
        atomic_write_text(path, record_lines(records + kept), errors="backslashreplace", what="the predictions record")
        messages.append(f"predictions recorded: {shown_path(path, rootdir) if rootdir else path} ({len(records)} cases" + (f", {len(kept)} earlier ones kept" if kept else "") + ")")
    except OSError as e:
        failures.append(f"nl2sql: {e}")


def _record_of(result: CaseResult) -> dict[str, Any]:
    record = {"id": result.id, "file": result.file, "key": result.extra.get("key")}
    samples = {"samples": result.extra["samples"]} if result.extra.get("samples") else {}
    # the model's usage, replayed with the answer: the first answer's (each sample keeps its own)
    usage = samples["samples"][0].get("usage") if samples else result.usage
    if usage:
        record["usage"] = usage
    if result.extra.get("hook_answered") is False:  # replayed without asking the hook again
        return {**record, "no_answer": True, **samples}
    if "error" in result.extra:  # the predictor raised: replayed as predictor_error
        return {**record, "error": result.extra["error"], **samples}
    if result.predicted_malloy is not None:  # the model's Malloy, which a replay compiles again
        record["predicted_malloy"] = result.predicted_malloy
    else:
        record["selection" if result.kind.value == "term_selection" else "predicted"] = result.predicted
    if result.raw_prediction is not None:  # the answer as the model gave it: a replay takes the SQL out again
        record["raw_prediction"] = result.raw_prediction
    if result.extra.get("samples"):  # --nl2sql-repeat: every answer, so that a replay judges all K
        record["samples"] = result.extra["samples"]
    return record


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
