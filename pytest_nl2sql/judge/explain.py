"""Text for people: why a case failed (the failure text) and the bounded diff the reports keep."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from typing import Any

from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.judge import nearmiss
from pytest_nl2sql.judge.execute import GoldOutcome, Judgement
from pytest_nl2sql.judge.on_neighbours import NeighbourCheck, NeighbourFailure
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics import termselection
from pytest_nl2sql.vocab import Verdict

ROWS_SHOWN = 5  # rows of each diff side shown by default; -v shows more
ROWS_SHOWN_VERBOSE = 50
JSON_DIFF_ROWS = 20  # rows of each diff side kept in the JSON report
JSON_VALUE_CHARS = 200  # characters of each value kept in a report's diff


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


def _predicted_lines(result: CaseResult) -> list[str]:
    """The predicted SQL; for a Malloy prediction its source first, then the SQL it compiled to
    (none when it did not compile: the reason gives Malloy's line)."""
    if result.predicted_malloy is None:
        return _sql_block("predicted", result.predicted)
    compiled = _sql_block("compiled to", result.predicted) if result.predicted is not None else []
    return _sql_block("predicted (Malloy)", result.predicted_malloy) + compiled


def _where(case: Case, file: str) -> str:
    """`suites/shop.nl2sql.yaml:12`: the case file as its node id spells it, and the case's line."""
    return f"{file}:{case.line}" if case.line else file


def _header(case: Case, file: str, result: CaseResult) -> list[str]:
    reason = f" ({result.reason.splitlines()[0]})" if result.reason else ""
    if result.near_miss:
        reason += f", near miss: {result.near_miss}"
    where = _where(case, file)
    lines = [f"nl2sql case {case.id} [{where}]: {result.verdict.value}{reason}"]
    if case.question:
        lines.append(f"question: {case.question}")
    return lines + _database_lines(case, result.ran_on)


def _database_lines(case: Case, ran_on: str | None) -> list[str]:
    """Where the case ran: under --nl2sql-dsn its `ran_on` (the failure happened there, not on
    the database the case names), else the case's own database."""
    if ran_on:
        return [f"ran on: {ran_on}" + (f" (the case names {case.database})" if case.database else "")]
    return [f"database: {case.database}"] if case.database else []


def _row(row: Sequence[Any]) -> str:
    return "(" + ", ".join(_value(v) for v in row) + ")"


def _value(value: Any) -> str:
    text = repr(_bounded(value, 60))
    return text if len(text) <= 60 else text[:57] + "..."


def gold_error_text(case: Case, file: str, message: str, ran_on: str | None = None) -> str:
    lines = [f"nl2sql case {case.id} is broken (gold_error) [{_where(case, file)}]", message]
    if ran_on:  # the gold failed on the --nl2sql-dsn database, not on the one the case names
        lines += _database_lines(case, ran_on)
    lines += _sql_block("gold", case.gold_value or [str(p) for p in case.gold_result])
    return "\n".join(lines)


def failure_text(case: Case, file: str, result: CaseResult, judgement: Judgement, gold: GoldOutcome | None,
                 verbosity: int = 0) -> str:
    """Why a SQL case failed: queries, reason, the column pairing tried, and the rows that differ."""
    lines = _header(case, file, result)
    lines += _sql_block("gold", case.gold_value or [str(p) for p in case.gold_result])
    lines += [f"gold warning: {warning}" for warning in result.gold_warnings]
    if result.predicted_result:
        lines.append(f"predicted result: {result.predicted_result}")
    else:
        lines += _predicted_lines(result)
    if judgement.executed and result.predicted and judgement.executed.strip() != str(result.predicted).strip():
        lines += _sql_block("executed", judgement.executed)
    if result.verdict is not Verdict.MISMATCH:
        lines.append(f"{result.verdict.value}: {result.reason}")
        return "\n".join(lines + _traceback_lines(result))
    if result.near_miss:
        lines.append(f"near miss: {nearmiss.describe(result.near_miss)}")
    if result.soft_scores:
        lines.append(soft_scores_line(result.soft_scores))
    return "\n".join(lines + result_diff_lines(judgement, gold, verbosity))


def neighbour_failure_text(case: Case, file: str, result: CaseResult, failure: NeighbourFailure, check: NeighbourCheck,
                           verbosity: int = 0) -> str:
    """A prediction right on the case's database and wrong on another: the other database's rows
    that tell the queries apart (a counterexample, every row of it), and both results on it. A
    fragile prediction (failed by `--nl2sql-fragile=fail`) says what the other database shows
    that the case's own never does."""
    lines = _header(case, file, result)
    lines += _sql_block("gold", case.gold_value)
    lines += _predicted_lines(result)
    own = result.ran_on or case.database or "the case database"  # under --nl2sql-dsn it ran on ran_on
    if failure.breaks is None:
        lines.append(f"the prediction matches the gold on {own}, but not on {check.failed} of {check.checked} other "
                     f"database{'s' if check.checked != 1 else ''} where the gold runs (each holds only data {own} could hold);")
    else:
        lines.append(f"the prediction matches the gold on {own} and on every neighbour that holds only data it could hold, "
                     f"but differs from the gold on {check.fragile} that show{'s' if check.fragile == 1 else ''} what it never does: "
                     f"fragile, failed by --nl2sql-fragile=fail;")
        lines.append(f"it differs when {failure.breaks}")
    where = "its rows that tell the two queries apart" if failure.shrunk else "its rows"
    lines.append(f"on {failure.database.label}, {where}:")
    shown = ROWS_SHOWN_VERBOSE if verbosity > 0 else ROWS_SHOWN * 2
    for table, columns, rows in failure.counterexample:
        lines.append(f"  {table} ({', '.join(columns)}): {len(rows)} row{'s' if len(rows) != 1 else ''}")
        limit = len(rows) if failure.shrunk else shown
        lines += [f"    {_row(r)}" for r in rows[:limit]]
        if len(rows) > limit:
            lines.append(f"    ... and {len(rows) - limit} more" + (" (use -v for more)" if verbosity <= 0 else ""))
    gold_result, pred_result = failure.gold.results[failure.judgement.gold_index], failure.judgement.result
    lines.append(f"gold result there: {_rows_inline(gold_result.rows, shown)}")
    if pred_result is not None:
        lines.append(f"predicted result there: {_rows_inline(pred_result.rows, shown)}")
    else:
        lines.append(f"the prediction fails there: {failure.judgement.verdict.value}: {failure.judgement.reason}")
    return "\n".join(lines + result_diff_lines(failure.judgement, failure.gold, verbosity))


def counterexample_json(failure: NeighbourFailure | None) -> dict[str, Any] | None:
    """The JSON item's `neighbours.counterexample`: the distinguishing database's rows (all of
    them), what it breaks, and both results there."""
    if failure is None:
        return None
    gold_rows = failure.gold.results[failure.judgement.gold_index].rows if failure.gold.results else []
    predicted = failure.judgement.result.rows if failure.judgement.result is not None else []
    return {"breaks": failure.breaks,
            "tables": {table: {"columns": list(columns), "rows": [[_jsonable(v) for v in row] for row in rows]}
                       for table, columns, rows in failure.counterexample},
            "gold": [[_jsonable(v) for v in row] for row in gold_rows[:JSON_DIFF_ROWS]],
            "predicted": [[_jsonable(v) for v in row] for row in predicted[:JSON_DIFF_ROWS]]}


def _rows_inline(rows: Sequence[Sequence[Any]], shown: int) -> str:
    text = ", ".join(_row(r) for r in rows[:shown]) or "(no rows)"
    return text + (f" ... ({len(rows)} rows)" if len(rows) > shown else "")


def neighbour_diff_json(failure: NeighbourFailure) -> dict[str, Any] | None:
    """The diff on the distinguishing database, and its counterexample rows, for the reports."""
    diff = diff_json(failure.judgement, failure.gold) or {}
    diff["database"] = failure.database.label
    diff["counterexample"] = [
        {"table": table, "columns": list(columns), "rows": [[_jsonable(v) for v in r] for r in rows[:JSON_DIFF_ROWS]]}
        for table, columns, rows in failure.counterexample
    ]
    return diff


def soft_scores_line(scores: dict[str, float]) -> str:
    """`soft scores: columns P 1.00 R 0.50 F1 0.67; rows P 1.00 R 1.00 F1 1.00`"""
    def part(kind: str) -> str:
        return " ".join(f"{label} {scores[f'{kind}_{key}']:.2f}" for label, key in (("P", "precision"), ("R", "recall"), ("F1", "f1")))
    return f"soft scores: columns {part('column')}; rows {part('row')}"


def result_diff_lines(judgement: Judgement, gold: GoldOutcome | None, verbosity: int = 0) -> list[str]:
    """Sizes, order rule, column pairing and the rows missing from / unexpected in the prediction."""
    comparison = judgement.comparison
    if comparison is None or gold is None:
        return []
    lines: list[str] = []
    gold_result = gold.results[judgement.gold_index]
    pred_result = judgement.result
    order = "ordered (gold has a top-level ORDER BY)" if gold.order_matters else "unordered (compared as multisets)"
    if judgement.streamed:
        lines.append(f"results too large to hold in memory, compared as streams; {order}")
    else:
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
        "missing": [[_jsonable(v) for v in r] for r in comparison.missing[:JSON_DIFF_ROWS]],
        "extra": [[_jsonable(v) for v in r] for r in comparison.extra[:JSON_DIFF_ROWS]],
        "missing_count": comparison.missing_count,
        "extra_count": comparison.extra_count,
        "first_order_difference": comparison.first_order_difference,
    }


def _jsonable(value: Any) -> Any:
    """A diff value as reports keep it: plain JSON, and never longer than `JSON_VALUE_CHARS`
    (a 10 MB value in every diff once made a 1.4 GB report)."""
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int) and value.bit_length() < 4 * JSON_VALUE_CHARS:
        return value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()  # as a reader and a dashboard want it, not `datetime.date(2024, 1, 1)`
    if isinstance(value, decimal.Decimal):
        return str(value)
    return _bounded(value if isinstance(value, str) else repr(_bounded(value, JSON_VALUE_CHARS)), JSON_VALUE_CHARS)


def _bounded(value: Any, limit: int) -> Any:
    """Text and bytes cut to `limit` with a marker that says how long they were."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}... ({len(value)} characters)"
    if isinstance(value, bytes) and len(value) > limit:
        return value[:limit] + f"... ({len(value)} bytes)".encode()
    if isinstance(value, int) and value.bit_length() > 4 * limit:
        return f"{str(value)[:limit]}... ({len(str(value))} digits)"
    return value


def term_selection_failure_text(case: Case, file: str, result: CaseResult) -> str:
    lines = _header(case, file, result)
    if result.term_selection:
        lines.append(termselection.details_text(result.term_selection))
    return "\n".join(lines)


def term_selection_error_text(case: Case, file: str, result: CaseResult) -> str:
    return "\n".join(_header(case, file, result) + [f"{result.verdict.value}: {result.reason}"] + _traceback_lines(result))


def _traceback_lines(result: CaseResult) -> list[str]:
    """A predictor exception's traceback (kept out of `reason`, which baselines store)."""
    text = result.extra.get("traceback")
    return text.rstrip().splitlines() if text else []
