"""Text for people: failure explanations of single cases and the terminal summary tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_nl2sql.metrics import termselection
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.judge.execute import GoldOutcome, Judgement
from pytest_nl2sql.judge.result import CaseResult

ROWS_SHOWN = 5  # rows of each diff side shown by default; -v shows more
ROWS_SHOWN_VERBOSE = 50
JSON_DIFF_ROWS = 20  # rows of each diff side kept in the JSON report


def _sql_block(label: str, sql: Any) -> list[str]:
    if sql is None:
        return [f"{label}: (none)"]
    queries = sql if isinstance(sql, (list, tuple)) else [sql]
    lines = []
    for n, q in enumerate(queries):
        head = label if len(queries) == 1 else f"{label} [{n + 1}]"
        text = str(q).strip().splitlines() or [""]
        lines.append(f"{head}: {text[0]}")
        lines.extend(" " * (len(head) + 2) + t for t in text[1:])
    return lines


def _header(case: Case, result: CaseResult) -> list[str]:
    reason = f" ({result.reason.splitlines()[0]})" if result.reason else ""
    where = f"{case.file.name}:{case.line}" if case.line else case.file.name
    lines = [f"nl2sql case {case.id} [{where}]: {result.verdict.value}{reason}"]
    if case.question:
        lines.append(f"question: {case.question}")
    if case.database:
        lines.append(f"database: {case.database}")
    return lines


def _row(row: Sequence[Any]) -> str:
    return "(" + ", ".join(_value(v) for v in row) + ")"


def _value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def gold_error_text(case: Case, message: str) -> str:
    where = f"{case.file}:{case.line}" if case.line else str(case.file)
    lines = [f"nl2sql case {case.id} is broken (gold_error) [{where}]", message]
    lines += _sql_block("gold", case.gold_value or [str(p) for p in case.gold_result])
    return "\n".join(lines)


def failure_text(case: Case, result: CaseResult, judgement: Judgement, gold: GoldOutcome | None, verbosity: int = 0) -> str:
    """Why a SQL case failed: queries, reason, the column pairing tried, and the rows that differ."""
    lines = _header(case, result)
    lines += _sql_block("gold", case.gold_value or [str(p) for p in case.gold_result])
    lines += _sql_block("predicted", result.predicted)
    if judgement.executed and result.predicted and judgement.executed.strip() != str(result.predicted).strip():
        lines += _sql_block("executed", judgement.executed)
    if result.verdict.value in ("pred_error", "pred_timeout", "too_many_rows", "predictor_error", "no_prediction"):
        lines.append(f"{result.verdict.value}: {result.reason}")
        return "\n".join(lines + _traceback_lines(result))
    return "\n".join(lines + result_diff_lines(judgement, gold, verbosity))


def result_diff_lines(judgement: Judgement, gold: GoldOutcome | None, verbosity: int = 0) -> list[str]:
    """Sizes, order rule, column pairing and the rows missing from / unexpected in the prediction."""
    comparison = judgement.comparison
    if comparison is None or gold is None:
        return []
    lines: list[str] = []
    gold_result = gold.results[judgement.gold_index]
    pred_result = judgement.result
    order = "ordered (gold has a top-level ORDER BY)" if gold.order_matters else "unordered (compared as multisets)"
    lines.append(f"rows: gold {len(gold_result.rows)}, predicted {len(pred_result.rows) if pred_result else '?'}; "
                 f"columns: gold {len(gold_result.columns)}, predicted {len(pred_result.columns) if pred_result else '?'}; {order}")
    if comparison.detail:
        lines.append(comparison.detail)
    if comparison.pairing is not None and pred_result is not None:
        pairs = ", ".join(
            f"{gold_result.columns[g] if g < len(gold_result.columns) else g} <-> "
            f"{pred_result.columns[p] if p is not None and p < len(pred_result.columns) else '?'}"
            for g, p in enumerate(comparison.pairing)
        )
        lines.append(f"columns paired (gold <-> predicted): {pairs}")
    shown = ROWS_SHOWN_VERBOSE if verbosity > 0 else ROWS_SHOWN
    for label, sign, rows, count in (
        ("missing from the prediction", "-", comparison.missing, comparison.missing_count),
        ("unexpected in the prediction", "+", comparison.extra, comparison.extra_count),
    ):
        if not count:
            continue
        lines.append(f"{label} ({count} row{'s' if count != 1 else ''}):")
        lines += [f"  {sign} {_row(r)}" for r in rows[:shown]]
        if count > min(shown, len(rows)):
            more = " (use -v for more)" if verbosity <= 0 else ""
            lines.append(f"  ... and {count - min(shown, len(rows))} more{more}")
    if comparison.first_order_difference is not None:
        i = comparison.first_order_difference
        lines.append(f"first row out of order: position {i}")
        if i < len(gold_result.rows):
            lines.append(f"  gold:      {_row(gold_result.rows[i])}")
        if pred_result is not None and i < len(pred_result.rows):
            lines.append(f"  predicted: {_row(pred_result.rows[i])}")
    return lines


def diff_json(judgement: Judgement, gold: GoldOutcome | None) -> dict[str, Any] | None:
    """The failure's diff for reports: pairing and a capped list of missing / unexpected rows."""
    comparison = judgement.comparison
    if comparison is None or comparison.match or gold is None:
        return None
    gold_result = gold.results[judgement.gold_index]
    return {
        "gold_columns": list(gold_result.columns),
        "predicted_columns": list(judgement.result.columns) if judgement.result else None,
        "pairing": list(comparison.pairing) if comparison.pairing is not None else None,
        "missing": [list(map(_jsonable, r)) for r in comparison.missing[:JSON_DIFF_ROWS]],
        "extra": [list(map(_jsonable, r)) for r in comparison.extra[:JSON_DIFF_ROWS]],
        "missing_count": comparison.missing_count,
        "extra_count": comparison.extra_count,
        "first_order_difference": comparison.first_order_difference,
    }


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def term_selection_failure_text(case: Case, result: CaseResult) -> str:
    lines = _header(case, result)
    if result.term_selection:
        lines.append(termselection.details_text(result.term_selection))
    return "\n".join(lines)


def term_selection_error_text(case: Case, result: CaseResult) -> str:
    return "\n".join(_header(case, result) + [f"{result.verdict.value}: {result.reason}"] + _traceback_lines(result))


def _traceback_lines(result: CaseResult) -> list[str]:
    """A predictor exception's traceback (kept out of `reason`, which baselines store)."""
    text = result.extra.get("traceback")
    return text.rstrip().splitlines() if text else []


# --- terminal summary --------------------------------------------------------------------------


def percent(passed: int, total: int) -> str:
    return f"{passed}/{total} = {100.0 * passed / total:.1f}%" if total else f"{passed}/0"


def bucket_table(title: str, buckets: dict[str, dict[str, Any]], limit: int | None = None) -> list[str]:
    if not buckets:
        return []
    names = list(buckets)
    shown = names if limit is None else names[:limit]
    width = max(len(n) for n in shown)
    lines = [f"{title}:"]
    for name in shown:
        b = buckets[name]
        errors = f"  ({b['errors']} error{'s' if b['errors'] != 1 else ''})" if b.get("errors") else ""
        lines.append(f"  {name:<{width}}  {percent(b['passed'], b['total'] - b.get('errors', 0))}{errors}")
    if len(names) > len(shown):
        lines.append(f"  ... {len(names) - len(shown)} more (all of them in --nl2sql-report=json)")
    return lines


def summary_lines(summary: dict[str, Any], verbosity: int = 0) -> list[str]:
    """The `nl2sql` section of the terminal summary; its first line names the metric."""
    judged = summary["total"] - summary["errors"]
    lines = []
    if summary["total"]:
        lines.append(f"execution accuracy {percent(summary['passed'], judged)}")
        lines.append(f"SQL cases: {summary['total']} ({summary['passed']} passed, {summary['failed']} failed, "
                     f"{summary['errors']} error{'s' if summary['errors'] != 1 else ''})")
    if summary.get("exact_match") is not None:
        lines.append(f"exact set match {summary['exact_match_passed']}/{summary['exact_match_total']} = {100 * summary['exact_match']:.1f}%")
    if summary["errors"]:
        by_db = summary.get("errors_by_database") or {}
        where = ", ".join(f"{db} ({n})" for db, n in by_db.items())
        lines.append(f"errors: {summary['errors']} case(s) could not be judged (gold_error, not in the accuracy)"
                     + (f": {where}" if where else ""))
    ts = summary.get("term_selection")
    if ts:
        lines.append(
            f"term selection: macro precision {ts['macro_precision']:.2f}, macro recall {ts['macro_recall']:.2f} "
            f"({ts['passed']}/{ts['total']} cases pass)"
        )
        for dim, d in (ts.get("by_dimension") or {}).items():
            p = "-" if d.get("precision") is None else f"{d['precision']:.2f}"
            r = "-" if d.get("recall") is None else f"{d['recall']:.2f}"
            lines.append(f"  {dim}: precision {p}, recall {r}")
    verdicts = summary.get("by_verdict") or {}
    if verdicts:
        lines.append("verdicts: " + ", ".join(f"{v} {n}" for v, n in verdicts.items()))
    lines += bucket_table("by hardness", summary.get("by_hardness") or {})
    lines += bucket_table("by tag", summary.get("by_tag") or {}, None if verbosity > 0 else 15)
    lines += bucket_table("by database", summary.get("by_database") or {}, None if verbosity > 0 else 15)
    latency = summary.get("latency")
    if latency:
        lines.append(f"prediction latency: total {latency['total']:.2f}s, p50 {latency['p50']:.3f}s, p95 {latency['p95']:.3f}s "
                     f"over {latency['count']} case(s)")
    partial = summary.get("partial")
    if partial and verbosity > 0:
        lines.append("partial component match (Spider):")
        lines.append(f"  {'component':<16} {'acc':>6} {'rec':>6} {'f1':>6}")
        for comp, s in partial.items():
            lines.append(f"  {comp:<16} {s['acc']:>6.3f} {s['rec']:>6.3f} {s['f1']:>6.3f}")
    return lines
