"""`--nl2sql-report=md[:PATH]`: a Markdown summary fit for a pull-request comment.

It is rendered from the JSON report's dict (so it can never disagree with it), puts what a
reviewer acts on first (the headline, regressions, fixes), and folds long lists into
`<details>`. On GitHub Actions it is also appended to `$GITHUB_STEP_SUMMARY`.
"""

from __future__ import annotations

import os
from enum import Enum
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_nl2sql.gate.stats import SIGNIFICANCE, latency_percentiles
from pytest_nl2sql.vocab import HARDNESS_ORDER

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
MAX_FAILURES = 100  # rows in the failures table; a PR comment has a size limit
MAX_REASON = 160  # characters of a reason (a database error can be long)
FOLD_BUCKETS = 12  # bucket tables longer than this are folded



def write_markdown(
    report: Mapping[str, Any],
    path: str | os.PathLike[str],
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Write the Markdown report, and append it to `$GITHUB_STEP_SUMMARY` when that is set."""
    text = render_markdown(report)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    step_summary = environ.get(STEP_SUMMARY)
    if step_summary and Path(step_summary).resolve() != target.resolve():
        with open(step_summary, "a", encoding="utf-8") as stream:
            stream.write(text + "\n")


def render_markdown(report: Mapping[str, Any]) -> str:
    summary: Mapping[str, Any] = report.get("summary") or {}
    items: Sequence[Mapping[str, Any]] = report.get("items") or []
    blocks = [
        _headline(summary),
        _other_metrics(summary, items),
        _errors(items),
        _baseline(summary.get("baseline")),
        _buckets("hardness", summary.get("by_hardness"), _hardness_order),
        _buckets("tag", summary.get("by_tag"), sorted),
        _buckets("database", summary.get("by_database"), sorted),
        _failures(items, with_baseline=summary.get("baseline") is not None),
    ]
    return "\n\n".join(block for block in blocks if block) + "\n"


def _headline(summary: Mapping[str, Any]) -> str:
    passed, judged = _counts(summary)
    return f"### pytest-nl2sql: execution accuracy {_ratio(passed, judged)}"


def _errors(items: Sequence[Mapping[str, Any]]) -> str:
    broken = [item for item in items if item.get("verdict") == "gold_error"]
    if not broken:
        return ""
    head = f"**{_plural(len(broken), 'case')} could not be judged** (`gold_error`, outside the accuracy):"
    lines = [head, ""]
    lines += [f"- {_code(_label(item))}: {_text(item.get('reason'))}" for item in broken]
    return "\n".join(lines)


def _other_metrics(summary: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    if summary.get("exact_match") is not None:
        lines.append(f"- exact match (Spider, without values): {_percent(summary['exact_match'])}")
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
    return "\n".join(lines)


def _latency_of(items: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """For reports whose summary lacks `latency`: the same figures from the items."""
    latencies = [item["latency"] for item in items if isinstance(item.get("latency"), (int, float))]
    return {"count": len(latencies), **latency_percentiles(latencies)} if latencies else None


def _baseline(comparison: Mapping[str, Any] | None) -> str:
    if not comparison:
        return ""
    path = comparison.get("path", "")
    paired = comparison.get("paired")
    lines = [f"#### Compared with the baseline {_code(path)}", ""]
    before, now = comparison.get("accuracy_before"), comparison.get("accuracy_now")
    if before is not None and now is not None:
        over = f" over the {paired} cases judged in both runs" if paired is not None else ""
        lines.append(f"Accuracy then **{_percent(before)}**, now **{_percent(now)}**{over}.")
        lines.append("")
    regressions = comparison.get("regressions") or []
    fixed = comparison.get("fixed") or []
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
    return [f"**{title} ({len(labels)}):** " + ", ".join(_code(label) for label in labels), ""]


def _buckets(kind: str, buckets: Mapping[str, Mapping[str, Any]] | None, order: Any) -> str:
    if not buckets:
        return ""
    rows = [f"| {kind} | passed | cases | accuracy |", "|---|--:|--:|--:|"]
    for name in order(buckets):
        passed, judged = _counts(buckets[name])
        total = buckets[name].get("total", judged)
        accuracy = _percent(passed / judged) if judged else "n/a"
        rows.append(f"| {_cell(name)} | {passed} | {total} | {accuracy} |")
    table = "\n".join(rows)
    if len(buckets) > FOLD_BUCKETS:
        return f"<details><summary>By {kind} ({len(buckets)})</summary>\n\n{table}\n\n</details>"
    return f"#### By {kind}\n\n{table}"


def _failures(items: Sequence[Mapping[str, Any]], with_baseline: bool) -> str:
    failed = [i for i in items if not i.get("passed") and i.get("verdict") != "gold_error"]
    if not failed:
        return ""
    header = "| case | verdict | reason |" + (" baseline |" if with_baseline else "")
    rows = [header, "|---|---|---|" + ("---|" if with_baseline else "")]
    for item in failed[:MAX_FAILURES]:
        cells = [_code(_label(item), in_table=True), _cell(item.get("verdict"))]
        cells.append(_cell(item.get("reason")))
        row = "| " + " | ".join(cells) + " |"
        if with_baseline:
            row += f" {_cell(item.get('baseline'))} |"
        rows.append(row)
    if len(failed) > MAX_FAILURES:
        rows.append(f"\n… and {len(failed) - MAX_FAILURES} more (see the JSON report).")
    body = "\n".join(rows)
    return f"<details><summary>Failures ({len(failed)})</summary>\n\n{body}\n\n</details>"


# --- formatting -------------------------------------------------------------------------------


def _counts(bucket: Mapping[str, Any]) -> tuple[int, int]:
    """(passed, judged): judged leaves out gold errors, as the accuracy does."""
    passed = int(bucket.get("passed") or 0)
    judged = int(bucket.get("total") or 0) - int(bucket.get("errors") or 0)
    return passed, judged


def _hardness_order(buckets: Mapping[str, Any]) -> list[str]:
    known = [level for level in HARDNESS_ORDER if level in buckets]
    return known + sorted(name for name in buckets if name not in HARDNESS_ORDER)


def _label(item: Mapping[str, Any]) -> str:
    return str(item.get("nodeid") or f"{item.get('file')}::{item.get('id')}")


def _ratio(passed: int, judged: int) -> str:
    if not judged:
        return f"{passed}/0 (no case judged)"
    return f"{passed}/{judged} = {_percent(passed / judged)}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _number(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _text(value: Any) -> str:
    """One line of plain text, shortened: reasons can hold long database messages."""
    if isinstance(value, Enum):
        value = value.value
    text = " ".join(str(value).split()) if value is not None else ""
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def _cell(value: Any) -> str:
    """Text safe inside a table cell: pipes escaped, HTML-ish characters neutralised."""
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
