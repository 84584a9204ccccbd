"""`--nl2sql-report=md[:PATH]`: a Markdown summary fit for a pull-request comment.

It is rendered from the JSON report's dict (so it can never disagree with it), puts what a
reviewer acts on first (the headline, regressions, fixes), and folds long lists into
`<details>`. On GitHub Actions it is also appended to `$GITHUB_STEP_SUMMARY`.

With `--nl2sql-history`, the report dict also holds `history`: the history's entries, oldest first,
the current run last (`{"run": {...}, "summary": {...}}`, as `gate.run.read_history` reads them).
The "Trend" section shows the last MAX_TREND_RUNS of them; `trend()` turns the entries into rows,
forgiving missing fields and non-numeric values, and the xlsx writer reads them the same way.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pytest_nl2sql.files import atomic_write_text
from pytest_nl2sql.gate.run import PER_CASE
from pytest_nl2sql.gate.stats import SIGNIFICANCE, latency_percentiles
from pytest_nl2sql.metrics.repeats import retries_text
from pytest_nl2sql.metrics.summary import accuracy_interval, accuracy_name
from pytest_nl2sql.reports import ReportWriteError, register
from pytest_nl2sql.shown import escaped
from pytest_nl2sql.vocab import Verdict, hardness_sort_key

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
MAX_FAILURES = 100  # rows in the failures table; a PR comment has a size limit
MAX_REASON = 160  # characters of a reason (a database error can be long)
MAX_FINDING = 400  # characters of a gold audit's finding (it quotes the values it found)
MAX_BUCKETS = 50  # rows of a tag or database table: past it, the worst are shown
FOLD_BUCKETS = 12  # bucket tables longer than this are folded
ENCODING_ERRORS = "backslashreplace"  # a lone surrogate as the text `\\ud800`, not a crash
GOLD_ERROR = Verdict.GOLD_ERROR.value
MAX_TREND_RUNS = 20  # rows of the trend table: the most recent runs of the history
MAX_TREND_BUCKETS = 10  # hardness columns of the trend table (known levels first)
MAX_TREND_TEXT = 40  # characters of a run's label in the trend table
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_MISSING = "·"  # a run without an accuracy
MIN_SPARK_SPAN = 0.10  # the sparkline's scale spans at least 10 points, so noise stays small
INCOMPLETE_MARK = "⚠"


def write_markdown(
    report: Mapping[str, Any],
    path: str | os.PathLike[str],
    environ: Mapping[str, str] = os.environ,
) -> list[Path]:
    """Write the Markdown report, and append it to `$GITHUB_STEP_SUMMARY` when that is set."""
    text = render_markdown(report)
    target = atomic_write_text(
        path, text, errors=ENCODING_ERRORS, what="the md report", error=ReportWriteError
    )
    step_summary = environ.get(STEP_SUMMARY)
    if step_summary and Path(step_summary).resolve() != target.resolve():
        try:
            with open(step_summary, "a", encoding="utf-8", errors=ENCODING_ERRORS) as stream:
                stream.write(text + "\n")
        except OSError as e:
            raise ReportWriteError(
                f"the md report {target} was written, but not appended to ${STEP_SUMMARY} "
                f"({step_summary}): {e.strerror or e}", step_summary, e.errno,
            ) from e
    return [target]


def render_markdown(report: Mapping[str, Any]) -> str:
    summary: Mapping[str, Any] = report.get("summary") or {}
    items: Sequence[Mapping[str, Any]] = report.get("items") or []
    blocks = [
        _headline(summary),
        _run_line(report.get("run")),
        _other_metrics(summary, items),
        _errors(items),
        _baseline(summary.get("baseline")),
        _trend_section(report),
        _buckets("hardness", summary.get("by_hardness"), _hardness_order),
        _buckets("tag", summary.get("by_tag"), sorted),
        _buckets("database", summary.get("by_database"), sorted),
        _partial(summary.get("partial")),
        _failures(items, with_baseline=summary.get("baseline") is not None),
        _fragile_passes(items),
        _reviews(items),
        _suspect_golds(items),
    ]
    return "\n\n".join(block for block in blocks if block) + "\n"


def _headline(summary: Mapping[str, Any]) -> str:
    passed, judged = _counts(summary)
    interval = _interval(summary)
    line = f"### pytest-nl2sql: {accuracy_name(summary)} {_ratio(passed, judged)}" + (f" (95% CI {interval})" if interval else "")
    before = summary.get("passed_before_reviews")
    if isinstance(before, int) and before != passed:
        line += " after reviews"
    notes = _review_notes(summary, judged)
    if summary.get("neighbours") and summary.get("single_db_accuracy") is not None:
        notes.append(f"one-database execution accuracy (the cases' own databases alone, no neighbour databases; not the official "
                     f"Spider figure, which `--nl2sql-compat=spider` gives): {_percent(summary['single_db_accuracy'])}")
        if summary.get("strict_accuracy") is not None:
            sides = summary.get("fragile_by_side") if isinstance(summary.get("fragile_by_side"), Mapping) else {}
            by_side = ", ".join(f"{side} {sides.get(side) or 0}" for side in ("prediction", "both", "gold")) if sides else ""
            notes.append(f"strict (fragile passes counted as failures, unless only the gold is fragile): "
                         f"{_percent(summary['strict_accuracy'])}; {summary.get('fragile') or 0} fragile pass(es)"
                         + (f" (fragile side: {by_side}; see *Fragile passes* below)" if by_side else ""))
    if summary.get("engine") not in (None, PER_CASE):
        notes.append(f"every case ran on `{summary['engine']}`")
    if summary.get("gold_warnings"):
        notes.append(f"{summary['gold_warnings']} case(s) with a nondeterministic gold (see `gold_warnings`)")
    if summary.get("gold_suspects"):
        notes.append(f"{_plural(summary['gold_suspects'], 'suspect gold')} (findings to read, no verdict changed: see "
                     "*Suspect golds* below)")
    unpredicted = summary.get("predictor_errors") or 0
    if unpredicted:
        answered = judged - unpredicted
        notes.append(f"**{_plural(unpredicted, 'case')} could not be predicted** (`predictor_error`: the predictor raised, "
                     f"transient errors retried): counted as failures, but not wrong answers"
                     + (f"; over the {answered} answered: {_ratio(passed, answered)}" if answered > 0 else ""))
    return "\n\n".join([line, *notes])


def _review_notes(summary: Mapping[str, Any], judged: int) -> list[str]:
    """The accuracy before the decisions of --nl2sql-reviews beside the one after, and the
    decisions not applied: a reviewed figure never passes for a plain one."""
    notes = []
    reviewed = summary.get("reviewed")
    if isinstance(reviewed, Mapping) and reviewed:
        decisions = ", ".join(f"{_code(str(decision))} {count}" for decision, count in reviewed.items())
        before = summary.get("passed_before_reviews")
        before = before if isinstance(before, int) else int(summary.get("passed") or 0)
        notes.append(f"**Before reviews: {_ratio(before, judged)}**; after: {_ratio(int(summary.get('passed') or 0), judged)} "
                     f"(decisions of `--nl2sql-reviews` applied: {decisions})")
    stale = summary.get("stale_reviews") or 0
    if stale:
        notes.append(f"{_plural(stale, 'stale review')} not applied (the case's gold, prediction or database changed since the decision)")
    suggested = summary.get("review_suggestions") or 0
    if suggested:
        notes.append(f"{_plural(suggested, 'suggestion')} of the review hook, not applied (`nl2sql review --accept-suggestions`)")
    return notes


def _reviews(items: Sequence[Mapping[str, Any]]) -> str:
    """The reviewed cases and the hook's suggestions: who decided what, and whether it applied."""
    reviewed = [item for item in items if isinstance(item.get("review"), Mapping)]
    if not reviewed:
        return ""
    rows = ["| case | decision | by | verdict before | applied | suggested | note |", "|---|---|---|---|---|---|---|"]
    for item in reviewed[:MAX_FAILURES]:
        review = item["review"]
        suggested = review.get("suggested") if isinstance(review.get("suggested"), Mapping) else {}
        applied = "stale: " + ", ".join(map(str, review.get("stale_because") or [])) if review.get("stale") else (
            "yes" if review.get("decision") else "")
        note = review.get("note") or suggested.get("note")
        rows.append("| " + " | ".join([_code(_label(item), in_table=True), _cell(review.get("decision")), _cell(review.get("by")),
                                        _cell(review.get("verdict_before")), _cell(applied),
                                        _cell(suggested.get("decision")), _cell(note)]) + " |")
    if len(reviewed) > MAX_FAILURES:
        rows.append(f"\n… and {len(reviewed) - MAX_FAILURES} more (see the JSON report).")
    body = "\n".join(rows)
    return f"<details><summary>Reviews ({len(reviewed)})</summary>\n\n{body}\n\n</details>"


def _fragile_passes(items: Sequence[Mapping[str, Any]]) -> str:
    """The fragile passes with their side (judge/fragile_side.py) and the invariant their stress
    neighbour breaks, the prediction's first: which query to fix."""
    rank = {"prediction": 0, "both": 1, "gold": 2}
    fragile = [item for item in items if item.get("verdict") == "pass" and isinstance(item.get("neighbours"), Mapping)
               and (item["neighbours"].get("fragile") or 0) > 0 and not item["neighbours"].get("failed")]
    if not fragile:
        return ""
    fragile.sort(key=lambda item: rank.get(item["neighbours"].get("fragile_side"), 1))
    rows = ["| case | fragile side | what the stress neighbour shows |", "|---|---|---|"]
    for item in fragile[:MAX_FAILURES]:
        example = item["neighbours"].get("counterexample")
        breaks = example.get("breaks") if isinstance(example, Mapping) else None
        rows.append("| " + " | ".join([_code(_label(item), in_table=True), _cell(item["neighbours"].get("fragile_side") or "both"),
                                        _cell(breaks)]) + " |")
    if len(fragile) > MAX_FAILURES:
        rows.append(f"\n… and {len(fragile) - MAX_FAILURES} more (see the JSON report).")
    body = "\n".join(rows)
    return (f"<details><summary>Fragile passes ({len(fragile)})</summary>\n\nRight on every plausible database, different "
            f"from the gold where the data breaks what the case's database shows. The side is the query whose result shows "
            f"it: `gold` ones are not counted in the strict figure.\n\n{body}\n\n</details>")


def _suspect_golds(items: Sequence[Mapping[str, Any]]) -> str:
    """The cases whose gold the audit suspects, each finding on its own line (judge/gold_audit.py)."""
    suspects = [item for item in items if isinstance(item.get("gold_audit"), Mapping) and item["gold_audit"].get("suspect")]
    if not suspects:
        return ""
    rows = ["| case | verdict | finding | detail |", "|---|---|---|---|"]
    for item in suspects[:MAX_FAILURES]:
        findings = [f for f in item["gold_audit"].get("findings") or [] if isinstance(f, Mapping)] or [{}]
        for number, finding in enumerate(findings):
            case = [_code(_label(item), in_table=True), _cell(item.get("verdict"))] if number == 0 else ["", ""]
            detail = escaped(str(finding.get("detail") or ""))[:MAX_FINDING].replace("\n", " ")  # whole: it quotes values
            rows.append("| " + " | ".join([*case, _cell(finding.get("kind")),
                                            detail.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")]) + " |")
    if len(suspects) > MAX_FAILURES:
        rows.append(f"\n… and {len(suspects) - MAX_FAILURES} more (see the JSON report).")
    body = "\n".join(rows)
    return (f"<details><summary>Suspect golds ({len(suspects)})</summary>\n\nWhat the case's own data says against its gold: "
            f"something to read, never a verdict change.\n\n{body}\n\n</details>")


def _interval(bucket: Mapping[str, Any]) -> str:
    """`41.2–58.8%`: the bucket's 95% Wilson interval, when the summary has one."""
    bounds = accuracy_interval(bucket)
    return f"{_percent(bounds[0])}–{_percent(bounds[1])}" if bounds else ""


def _errors(items: Sequence[Mapping[str, Any]]) -> str:
    broken = [item for item in items if item.get("verdict") == GOLD_ERROR]
    if not broken:
        return ""
    head = f"**{_plural(len(broken), 'case')} could not be judged** (`{GOLD_ERROR}`, outside the accuracy):"
    lines = [head, ""]
    lines += [f"- {_code(_label(item))}: {_inline(item.get('reason'))}" for item in broken[:MAX_FAILURES]]
    if len(broken) > MAX_FAILURES:
        lines.append(f"- … and {len(broken) - MAX_FAILURES} more (see the JSON report).")
    return "\n".join(lines)


def _other_metrics(summary: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    if summary.get("exact_match") is not None:
        lines.append(f"- exact match (Spider, without values): {_percent(summary['exact_match'])}")
    soft = summary.get("soft_scores")
    if soft:
        lines.append(
            f"- soft scores (means): columns F1 {_number(soft.get('column_f1'))} "
            f"(precision {_number(soft.get('column_precision'))}, recall {_number(soft.get('column_recall'))}), "
            f"rows F1 {_number(soft.get('row_f1'))} "
            f"(precision {_number(soft.get('row_precision'))}, recall {_number(soft.get('row_recall'))})"
        )
    near = {name: count for name, count in (summary.get("near_miss") or {}).items() if count}
    if near:
        lines.append("- near misses: " + ", ".join(f"{_code(name)} {count}" for name, count in near.items()))
    terms = summary.get("term_selection")
    if terms:
        lines.append(
            f"- term selection: macro precision {_number(terms.get('macro_precision'))}, "
            f"macro recall {_number(terms.get('macro_recall'))}"
        )
    latency = summary.get("latency") or _latency_of(items)
    if latency and latency.get("p50") is not None:
        lines.append(
            f"- predictor latency over {latency['count']} cases: "
            f"p50 {latency['p50']:.3g} s, p95 {latency['p95']:.3g} s"
        )
    lines += _model_metrics(summary)
    return "\n".join(lines)


def _model_metrics(summary: Mapping[str, Any]) -> list[str]:
    """What the model reported it used, and how its repeated answers fared (`--nl2sql-repeat`)."""
    lines = [f"- {retries_text(summary['retries'])}"] if isinstance(summary.get("retries"), Mapping) else []
    usage = summary.get("usage")
    if isinstance(usage, Mapping) and usage.get("total"):
        total, mean = usage["total"], usage.get("mean") or {}
        parts = [f"{name.replace('_', ' ')} {total[name]:,} ({mean.get(name, 0):,.1f} per case)"
                 for name in ("prompt_tokens", "completion_tokens") if name in total]
        if "cost" in total:
            parts.append(f"cost {total['cost']:.4f} ({mean.get('cost', 0):.4f} per case)")
        lines.append(f"- model usage over {usage.get('cases')} cases: " + ", ".join(parts))
    pass_at = summary.get("pass_at_k")
    if isinstance(pass_at, Mapping) and pass_at:
        figures = ", ".join(f"pass@{k} {_percent(v)}" for k, v in pass_at.items())
        consistency = summary.get("consistency")
        lines.append(f"- repeated answers: {figures}" + (f"; consistency {_percent(consistency)}" if consistency is not None else ""))
    return lines


def _latency_of(items: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """For reports whose summary lacks `latency`: the same figures from the items."""
    latencies = [item["latency"] for item in items if isinstance(item.get("latency"), (int, float))]
    return {"count": len(latencies), **latency_percentiles(latencies)} if latencies else None


def _run_line(run: Mapping[str, Any] | None) -> str:
    """Which model and run the comment describes: label, start, commit, engine."""
    if not run:
        return ""
    parts = []
    if run.get("label"):
        parts.append(f"**{_inline(run['label'])}**")
    if run.get("started"):
        parts.append(f"started {_inline(run['started'])}")
    if run.get("git_commit"):
        parts.append(f"commit {_code(str(run['git_commit'])[:12])}")
    if run.get("engine"):
        parts.append(f"engine {_code(str(run['engine']))}")
    if run.get("complete") is False:
        parts.append("**interrupted** (not every case ran)")
    return "Run: " + " · ".join(parts) if parts else ""


def _relative(path: str) -> str:
    """A path as a PR comment should show it: relative to where the run started when it lies
    below it, else the file's name (a runner's absolute path says nothing to a reader)."""
    if not path:
        return path
    try:
        shown = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return os.path.basename(path)
    return os.path.basename(path) if shown.startswith("..") else shown


def _baseline(comparison: Mapping[str, Any] | None) -> str:
    if not comparison:
        return ""
    path = _relative(comparison.get("path", ""))
    paired = comparison.get("paired")
    lines = [f"#### Compared with the baseline {_code(path)}", ""]
    before, now = comparison.get("accuracy_before"), comparison.get("accuracy_now")
    if before is not None and now is not None:
        over = f" over the {paired} cases judged in both runs" if paired is not None else ""
        lines.append(f"Accuracy then **{_percent(before)}**, now **{_percent(now)}**{over}.")
        lines.append("")
    regressions = comparison.get("regressions") or []
    fixed = comparison.get("fixed") or []
    lines += _case_list("Could not be predicted (`predictor_error`: not wrong answers, not counted as regressions)",
                        comparison.get("unpredicted") or [])
    lines += _case_list("Regressions", regressions)
    lines += _case_list("Fixed", fixed)
    known = comparison.get("known_failures")
    known_count = len(known) if isinstance(known, list) else known
    extras = []
    if known_count:
        extras.append(f"{_plural(known_count, 'known failure')} (xfailed)")
    if comparison.get("changed_failures"):
        extras.append(f"{len(comparison['changed_failures'])} of them fail differently now")
    if comparison.get("new"):
        extras.append(_plural(len(comparison["new"]), "new case"))
    if comparison.get("missing"):
        extras.append(f"{_plural(len(comparison['missing']), 'baseline case')} did not run")
    if extras:
        lines += ["; ".join(extras) + ".", ""]
    lines.append(_mcnemar(comparison, len(regressions), len(fixed)))
    if fixed or comparison.get("new"):
        lines += [
            "",
            f"> The baseline is out of date: update it with "
            f"`--nl2sql-update-baseline --nl2sql-baseline={path}`.",
        ]
    return "\n".join(lines)


def _mcnemar(comparison: Mapping[str, Any], worse: int, better: int) -> str:
    p_value = comparison.get("p_value")
    if p_value is None:
        return ""
    if worse + better == 0:
        return "No case changed its verdict (McNemar exact p = 1)."
    distinguishable = comparison.get("significant", p_value < SIGNIFICANCE)
    words = "distinguishable" if distinguishable else "**not** distinguishable"
    return (
        f"McNemar exact test on the paired verdicts ({worse} worse, {better} better): "
        f"p = {p_value:.3g}, the change is {words} from noise at the {SIGNIFICANCE:g} level."
    )


def _case_list(title: str, labels: Sequence[str]) -> list[str]:
    if not labels:
        return []
    listed = ", ".join(_code(label) for label in labels[:MAX_FAILURES])
    if len(labels) > MAX_FAILURES:
        listed += f" and {len(labels) - MAX_FAILURES} more (see the JSON report)"
    return [f"**{title} ({len(labels)}):** " + listed, ""]


def _buckets(
    kind: str, buckets: Mapping[str, Mapping[str, Any]] | None, order: Callable[[Any], list[str]]
) -> str:
    """A table of buckets in `order`; past MAX_BUCKETS rows, only the worst (lowest accuracy, then
    most cases), since those are what a reviewer acts on."""
    if not buckets:
        return ""
    names = list(order(buckets))
    shown = names if len(names) <= MAX_BUCKETS else sorted(names, key=lambda n: _worst_first(n, buckets[n]))
    rows = [f"| {kind} | passed | cases | accuracy | 95% CI |", "|---|--:|--:|--:|--:|"]
    for name in shown[:MAX_BUCKETS]:
        passed, judged = _counts(buckets[name])
        total = buckets[name].get("total", judged)
        accuracy = _percent(passed / judged) if judged else "n/a"
        rows.append(f"| {_cell(name)} | {passed} | {total} | {accuracy} | {_interval(buckets[name])} |")
    if len(shown) > MAX_BUCKETS:
        rows.append(f"\nThe {MAX_BUCKETS} worst of {len(shown)} are shown (see the JSON report).")
    table = "\n".join(rows)
    if len(buckets) > FOLD_BUCKETS:
        return f"<details><summary>By {kind} ({len(buckets)})</summary>\n\n{table}\n\n</details>"
    return f"#### By {kind}\n\n{table}"


def _worst_first(name: str, bucket: Mapping[str, Any]) -> tuple[Any, ...]:
    passed, judged = _counts(bucket)
    if not judged:  # nothing judged: no accuracy to rank, after every bucket that has one
        return (1, 0.0, 0, str(name))
    return (0, passed / judged, -judged, str(name))


def _partial(partial: Mapping[str, Mapping[str, Any]] | None) -> str:
    """Spider's partial component scores. A component that no gold and no prediction has is not
    applicable: the official aggregation prints it as 0.000 0.000 1.000, which reads as a score."""
    if not partial:
        return ""
    rows = ["| component | accuracy | recall | F1 |", "|---|--:|--:|--:|"]
    for name, scores in partial.items():
        if _not_applicable(scores):
            rows.append(f"| {_cell(name)} | n/a | n/a | n/a |")
        else:
            numbers = (_number(scores.get(key)) for key in ("acc", "rec", "f1"))
            rows.append(f"| {_cell(name)} | " + " | ".join(numbers) + " |")
    body = "\n".join(rows)
    if any(_not_applicable(s) for s in partial.values()):
        body += "\n\nn/a: no gold query and no prediction has the component."
    return f"<details><summary>Spider partial matching ({len(partial)} components)</summary>\n\n{body}\n\n</details>"


def _not_applicable(scores: Mapping[str, Any]) -> bool:
    """True when the counts say no item had the component (reports without counts: never)."""
    return scores.get("pred_count") == 0 and scores.get("gold_count") == 0


def _failures(items: Sequence[Mapping[str, Any]], with_baseline: bool) -> str:
    failed = [i for i in items if not i.get("passed") and i.get("verdict") != GOLD_ERROR]
    if not failed:
        return ""
    # the near-miss and row-F1 columns appear when some failure has one (SQL failures that ran)
    with_near = any(i.get("near_miss") for i in failed)
    with_soft = any(i.get("soft_scores") for i in failed)
    extra = (" near miss |" if with_near else "") + (" row F1 |" if with_soft else "")
    header = "| case | verdict | reason |" + extra + (" baseline |" if with_baseline else "")
    rows = [header, "|---|---|---|" + "---|" * (with_near + with_soft) + ("---|" if with_baseline else "")]
    for item in failed[:MAX_FAILURES]:
        cells = [_code(_label(item), in_table=True), _cell(item.get("verdict"))]
        cells.append(_cell(item.get("reason")))
        if with_near:
            cells.append(_cell(item.get("near_miss")))
        if with_soft:
            soft = item.get("soft_scores")
            cells.append(_number(soft.get("row_f1")) if soft else "")
        row = "| " + " | ".join(cells) + " |"
        if with_baseline:
            row += f" {_cell(item.get('baseline'))} |"
        rows.append(row)
    if len(failed) > MAX_FAILURES:
        rows.append(f"\n… and {len(failed) - MAX_FAILURES} more (see the JSON report).")
    body = "\n".join(rows)
    return f"<details><summary>Failures ({len(failed)})</summary>\n\n{body}\n\n</details>"


# --- trend over the history ------------------------------------------------------------------


@dataclass(frozen=True)
class TrendRun:
    """One run of the history, as the trend shows it; None wherever the entry has no usable value."""

    number: int  # position in the history, from 1 (oldest)
    started: str  # "YYYY-MM-DD HH:MM" in UTC, or the entry's text as it is, or ""
    label: str | None
    commit: str | None  # the first 8 characters of the hash, with "+dirty" when the tree was changed
    complete: bool | None  # None when the entry does not say
    current: bool  # the run this report is about
    accuracy: float | None
    by_hardness: Mapping[str, float | None]


@dataclass(frozen=True)
class Trend:
    runs: list[TrendRun]  # the last `limit` runs, oldest first
    hardness: list[str]  # the hardness labels of those runs, in vocabulary order
    total: int  # runs in the history


def trend(report: Mapping[str, Any], limit: int = MAX_TREND_RUNS) -> Trend | None:
    """The trend of `report["history"]` (None when the report has no history or it is empty).

    Entries that are not mappings are skipped; a missing or non-numeric accuracy is None (an
    accuracy is a finite number in [0, 1]; without one, `passed / (total - errors)` when those
    counts are there). The last entry is the current run when its `started` is the report's.
    """
    history = report.get("history")
    if not isinstance(history, Sequence) or isinstance(history, (str, bytes)):
        return None
    entries = [e for e in history if isinstance(e, Mapping)]
    if not entries:
        return None
    this_run = report.get("run")
    this_started = this_run.get("started") if isinstance(this_run, Mapping) else None
    first = max(len(entries) - max(limit, 1), 0)
    runs = []
    for number, entry in enumerate(entries[first:], start=first + 1):
        run = entry.get("run") if isinstance(entry.get("run"), Mapping) else {}
        summary = entry.get("summary") if isinstance(entry.get("summary"), Mapping) else {}
        buckets = summary.get("by_hardness") if isinstance(summary.get("by_hardness"), Mapping) else {}
        started = run.get("started")
        complete = run.get("complete")
        runs.append(TrendRun(
            number=number,
            started=_started_text(started),
            label=_trend_text(run.get("label")),
            commit=_short_commit(run.get("git_commit")),
            complete=complete if isinstance(complete, bool) else None,
            current=number == len(entries) and this_started is not None and started == this_started,
            accuracy=_accuracy(summary),
            by_hardness={str(name): _accuracy(b) for name, b in buckets.items() if isinstance(b, Mapping)},
        ))
    labels = sorted({name for run in runs for name in run.by_hardness}, key=hardness_sort_key)
    return Trend(runs, labels[:MAX_TREND_BUCKETS], len(entries))


def _fraction(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= 1 else None


def _accuracy(bucket: Mapping[str, Any]) -> float | None:
    accuracy = _fraction(bucket.get("accuracy"))
    if accuracy is not None or "accuracy" in bucket and bucket["accuracy"] is None:
        return accuracy  # an explicit null: nothing was judged
    passed, total, errors = (bucket.get(k) for k in ("passed", "total", "errors"))
    errors = 0 if errors is None else errors
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (passed, total, errors)):
        return None
    judged = total - errors
    return passed / judged if judged > 0 and 0 <= passed <= judged else None


def _started_text(value: Any) -> str:
    """An ISO 8601 time as "YYYY-MM-DD HH:MM" in UTC (one without an offset is taken as UTC)."""
    if not isinstance(value, str):
        return ""
    try:
        moment = _dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return _trend_text(value) or ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(_dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M")


def _short_commit(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    head, _, rest = value.strip().partition("+")
    return _trend_text(head[:8] + ("+" + rest if rest else ""))


def _trend_text(value: Any) -> str | None:
    if value is None or isinstance(value, (Mapping, list)):
        return None
    text = " ".join(str(value)[: 4 * MAX_TREND_TEXT].split())
    if not text:
        return None
    return text if len(text) <= MAX_TREND_TEXT else text[: MAX_TREND_TEXT - 1] + "…"


def sparkline(values: Sequence[float | None]) -> str:
    """One block per value, scaled to the values' range (at least MIN_SPARK_SPAN wide, within
    [0, 1]); a missing value is SPARK_MISSING."""
    known = [v for v in values if v is not None]
    if not known:
        return SPARK_MISSING * len(values)
    low, high = min(known), max(known)
    if high - low < MIN_SPARK_SPAN:
        low = min(max((low + high - MIN_SPARK_SPAN) / 2, 0.0), 1.0 - MIN_SPARK_SPAN)
        high = low + MIN_SPARK_SPAN
    top = len(SPARK_BLOCKS) - 1
    return "".join(
        SPARK_MISSING if v is None else SPARK_BLOCKS[min(max(round((v - low) / (high - low) * top), 0), top)]
        for v in values
    )


def _trend_section(report: Mapping[str, Any]) -> str:
    shown = trend(report)
    if shown is None:
        return ""
    runs = shown.runs
    accuracies = [run.accuracy for run in runs]
    known = [a for a in accuracies if a is not None]
    span = f"the last {len(runs)} of {shown.total} runs" if shown.total > len(runs) else _plural(len(runs), "run")
    line = f"Accuracy over {span} (oldest first): `{sparkline(accuracies)}`"
    if known:
        line += f" {_percent(known[0])} → {_percent(known[-1])}"
        if len(known) > 2:
            line += f" (lowest {_percent(min(known))}, highest {_percent(max(known))})"
        line += "."
    header = "| run | started (UTC) | label | commit | accuracy |" + "".join(f" {_cell(h)} |" for h in shown.hardness)
    rows = [header, "|--:|---|---|---|--:|" + "--:|" * len(shown.hardness)]
    for run in runs:
        number = f"**{run.number}**" if run.current else str(run.number)
        started = _cell(run.started) + (" (this run)" if run.current else "")
        accuracy = _percent(run.accuracy) + (f" {INCOMPLETE_MARK}" if run.complete is False else "")
        cells = [number, started, _cell(run.label), _code(run.commit, in_table=True) if run.commit else "", accuracy]
        cells += [_percent(run.by_hardness.get(h)) if h in run.by_hardness else "" for h in shown.hardness]
        rows.append("| " + " | ".join(cells) + " |")
    table = "\n".join(rows)
    notes = []
    if any(run.complete is False for run in runs):
        notes.append(f"{INCOMPLETE_MARK} an incomplete run (interrupted): its accuracy counts only the cases judged before it stopped.")
    if len(runs) > FOLD_BUCKETS:
        table = f"<details><summary>The {len(runs)} runs</summary>\n\n{table}\n\n</details>"
    return "\n\n".join(["#### Trend", line, table, *notes])


# --- formatting -------------------------------------------------------------------------------


def _counts(bucket: Mapping[str, Any]) -> tuple[int, int]:
    """(passed, judged): judged leaves out gold errors, as the accuracy does."""
    passed = int(bucket.get("passed") or 0)
    judged = int(bucket.get("total") or 0) - int(bucket.get("errors") or 0)
    return passed, judged


def _hardness_order(buckets: Mapping[str, Any]) -> list[str]:
    """Spider's levels, then BIRD's, in their order; any other label after them by name."""
    return sorted(buckets, key=hardness_sort_key)


def _label(item: Mapping[str, Any]) -> str:
    return str(item.get("nodeid") or f"{item.get('file')}::{item.get('id')}")


def _ratio(passed: int, judged: int) -> str:
    if not judged:
        return f"{passed}/0 (no case judged)"
    return f"{passed}/{judged} = {_percent(passed / judged)}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "n/a"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _text(value: Any) -> str:
    """One line of plain text, shortened with a visible `…`: reasons can hold long database
    messages, and a value can be megabytes (only the head is ever looked at)."""
    if isinstance(value, Enum):
        value = value.value
    if value is None:
        return ""
    raw = escaped(str(value))  # a prediction's escape sequences shown, not obeyed
    text = " ".join(raw[: 4 * MAX_REASON].split())
    if len(text) <= MAX_REASON and len(raw) <= 4 * MAX_REASON:
        return text
    return text[: MAX_REASON - 1] + "…"


def _inline(value: Any) -> str:
    """Text safe in a paragraph or a list item: no raw HTML (a `<details>` in a reason would
    swallow the rest of the comment)."""
    return _text(value).replace("<", "&lt;")


def _cell(value: Any) -> str:
    """Text safe inside a table cell: on one line, pipes escaped, HTML-ish characters neutralised."""
    return _text(value).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def _code(text: str, in_table: bool = False) -> str:
    """An inline code span that survives backticks in the text (and pipes, inside a table)."""
    text = _text(text)
    fence = "`"
    while fence in text:
        fence += "`"
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    if in_table:  # GitHub splits table cells before reading code spans
        text = text.replace("|", "\\|")
    return f"{fence}{padding}{text}{padding}{fence}"


register("md", write_markdown)
