"""Judging one SQL case: run the gold, run the prediction, compare. Plain code, no pytest.

The plugin's items and the Python API (`eval_exec_match`, `evaluate_predictions`) both go through
`run_gold` and `judge`, so a case gets the same verdict whichever way it is evaluated.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.base import (
    ConnectionLost,
    Engine,
    EngineError,
    Limits,
    QueryResult,
    QueryTimeout,
    ResultTooLarge,
    TooManyRows,
    can_stream,
)
from pytest_nl2sql.judge import compat, ties
from pytest_nl2sql.judge.compare import CompareOptions, Comparison, Mode, compare_results
from pytest_nl2sql.judge.equality import normalise_value, result_fingerprint
from pytest_nl2sql.judge.order import has_top_level_order_by
from pytest_nl2sql.judge.ties import TieGroups
from pytest_nl2sql.judge.translate import translate
from pytest_nl2sql.vocab import Verdict


class GoldError(Exception):
    """The case itself is broken: its gold fails, times out, or its database is missing."""


def gold_error(label: str, error: EngineError, written: str | None = None, executed: str | None = None,
               engine_dialect: str | None = None) -> GoldError:
    """Why a gold query gave nothing to compare with, held or streamed alike. When the engine ran
    a translation (`executed`, of the gold as `written`), the message shows the SQL that failed."""
    ran = ""
    if executed is not None and written is not None and executed.strip() != written.strip():
        ran = f"\n{label} as translated for {engine_dialect or 'the engine'}: {executed}"
    if isinstance(error, QueryTimeout):
        return GoldError(f"{label} timed out: {error}{ran}")
    if isinstance(error, TooManyRows):
        return GoldError(f"{label} is over the row cap (--nl2sql-max-rows): {error}{ran}")
    return GoldError(f"{label} failed: {error}{ran}")


@dataclass(frozen=True)
class GoldOutcome:
    """The executed gold: one result per gold query (any may match).

    `results` hold the gold's own columns and rows only (never the hidden ORDER BY keys the gold
    may have run with). `ties[i]` groups the rows of `results[i]` tied on its ORDER BY keys (None:
    no ORDER BY, or one that could not be read safely; empty: gold CSVs or Spider compat mode).
    `warnings` say where the gold's rows are up to the database (a LIMIT cutting a tie, a LIMIT
    without ORDER BY): short sentences for reports."""

    results: tuple[QueryResult, ...]
    queries: tuple[str, ...]  # as given (compat mode rewrites them); what the efficiency timing re-runs
    order_matters: bool
    ties: tuple[TieGroups | None, ...] = ()
    warnings: tuple[str, ...] = ()
    large: frozenset[int] = frozenset()  # golds with more rows than `Limits.memory_rows`: compared streamed, never held

    def ties_of(self, index: int) -> TieGroups | None:
        return self.ties[index] if index < len(self.ties) else None


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    reason: str | None = None  # for mismatches: row count / column count / values / order; else the error
    comparison: Comparison | None = None  # against the gold that came closest
    gold_index: int = 0  # which gold the comparison is against
    result: QueryResult | None = None  # the prediction's result
    fingerprint: str | None = None
    executed: str | None = None  # the predicted SQL as executed (after compat rewriting / transpiling)
    streamed: bool = False  # compared as streams (`judge.large`): `result` holds the first rows only


def to_engine_sql(sql: str, dialect: str | None, engine: Engine) -> str:
    """SQL written in `dialect` as the engine should run it: transpiled, and SQLite's leniencies
    fixed with the engine's schema (`judge.translate`); identity when the dialects agree."""
    return translate(sql, dialect, engine)


def order_matters_for(case_order: str, gold: Sequence[str], dialect: str | None) -> bool:
    """`order: auto` is ordered iff the (first) gold query has a top-level ORDER BY."""
    if case_order == "ordered":
        return True
    if case_order == "unordered" or not gold:
        return False
    return has_top_level_order_by(gold[0], dialect)


def run_gold(
    gold: Sequence[str],
    engine: Engine,
    limits: Limits,
    *,
    dialect: str | None = None,
    order: str = "auto",
    spider_compat: bool = False,
    gold_result_files: Sequence[Path] = (),
    compare: Mapping[str, Any] | None = None,
) -> GoldOutcome:
    """Execute the gold queries (or read the gold CSVs); raise GoldError if any fails, or if
    `compare`'s `condition_cols` names a column that a gold result lacks."""
    if gold_result_files:
        results = tuple(read_gold_csv(p, limits) for p in gold_result_files)
        return _checked(GoldOutcome(results, (), order == "ordered"), compare)
    if spider_compat:
        queries = tuple(compat.spider_prepare("", g)[1] for g in gold)
        order_matters = compat.spider_prepare("", gold[0])[2]
    else:
        queries = tuple(gold)
        order_matters = order_matters_for(order, gold, dialect)
    results, groups, warnings, large = [], [], [], set()
    for number, sql in enumerate(queries, start=1):
        label = f"gold query {number} of {len(queries)}" if len(queries) > 1 else "gold query"
        shape = ties.GoldShape() if spider_compat else ties.shape(sql, dialect or engine.dialect, limits.max_rows)
        plan, raw = shape.plan, None
        if plan is not None and plan.rewritten:
            raw = _run_planned(engine, plan, dialect, limits)
            if raw is None:
                plan = None  # the rewrite failed: the gold as written, compared as without ties
        if raw is None:
            executed = None
            try:
                executed = to_engine_sql(sql, dialect, engine)
                raw = execute_once_more_if_lost(engine, executed, limits, trusted=True)
            except ConnectionLost:
                raise
            except ResultTooLarge:  # held nowhere: compared as a stream when a prediction is judged
                results.append(QueryResult((), []))
                groups.append(None)
                large.add(number - 1)
                continue
            except EngineError as e:
                raise gold_error(label, e, sql, executed, engine.dialect) from e
        found: list[str] = []
        if plan is not None and _fits(plan, raw):
            grouped = ties.group(raw.columns, raw.rows, plan)
            results.append(QueryResult(grouped.columns, grouped.rows, raw.seconds))
            groups.append(grouped.groups)
            found += grouped.warnings
        else:
            results.append(raw)
            groups.append(None)
            if shape.unordered_limit is not None and len(raw.rows) >= shape.unordered_limit:
                found.append(ties.UNORDERED_LIMIT_WARNING)
        prefix = f"{label}: " if len(queries) > 1 else ""
        warnings += [prefix + w for w in dict.fromkeys(found)]
    outcome = GoldOutcome(tuple(results), queries, order_matters, () if spider_compat else tuple(groups), tuple(warnings),
                          frozenset(large))
    return _checked(outcome, compare)


def _run_planned(engine: Engine, plan: ties.TiePlan, dialect: str | None, limits: Limits) -> QueryResult | None:
    """The gold with its ORDER BY keys (and past its LIMIT); None if that fails, for whatever reason:
    the gold then runs as written, so a rewrite can never break a case (only cost a second run)."""
    try:
        result = execute_once_more_if_lost(engine, to_engine_sql(plan.sql, dialect, engine), limits, trusted=True)
    except ConnectionLost:
        raise
    except EngineError:
        return None
    return result if _fits(plan, result) else None


def _fits(plan: ties.TiePlan, result: QueryResult) -> bool:
    """The result has room for the plan's keys (a `SELECT *` is the width the database says)."""
    width = len(result.columns) - plan.hidden
    return width > 0 and all(-plan.hidden <= k < width for k in plan.keys)


def _checked(gold: GoldOutcome, compare: Mapping[str, Any] | None) -> GoldOutcome:
    """`condition_cols` names must be columns of every gold result (the case is broken otherwise)."""
    if not compare or not compare.get("condition_cols"):
        return gold
    try:
        options = CompareOptions.from_mapping(compare)
    except ValueError as e:
        raise GoldError(str(e)) from e
    if options.mode is Mode.COLUMNS and options.names_columns:
        for number, result in enumerate(gold.results, start=1):
            try:
                options.chosen_columns(len(result.columns), result.columns)
            except ValueError as e:
                which = f"gold result {number} of {len(gold.results)}" if len(gold.results) > 1 else "the gold result"
                raise GoldError(f"{e} [{which}]") from e
    return gold


class ResultFileError(ValueError):
    """A CSV result file cannot be read; `str()` names the file and what is wrong."""


def read_gold_csv(path: Path, limits: Limits = Limits()) -> QueryResult:
    """A gold result stored as CSV (`read_result_csv`); a file that cannot be read is a GoldError."""
    try:
        return read_result_csv(path, "gold_result", limits)
    except ResultFileError as e:
        raise GoldError(str(e)) from e


class ResultFileTooLarge(ResultFileError):
    """A result file past the byte or row cap: refused before it is held (`too_many_rows`)."""


def read_result_csv(path: Path, what: str = "result file", limits: Limits = Limits()) -> QueryResult:
    """A query result stored as CSV: the header row names the columns; each cell is typed as a user
    would expect (`typed_cell`): an empty cell is NULL, numeric text a number, ISO dates and
    timestamps dates and timestamps, anything else text. In a one-column file a blank line inside
    the file is a NULL row. Raises `ResultFileError` naming the file; `ResultFileTooLarge` for a
    file over `limits.max_bytes` (checked before reading) or a row past `limits.max_rows` (checked
    as the rows are read, so nothing past the cap is held)."""
    try:
        size = os.path.getsize(path)
        if size > limits.max_bytes:
            raise ResultFileTooLarge(f"{what} {path} is {size} bytes, over the size cap of {limits.max_bytes}")
        lines = []
        with open(path, newline="", encoding="utf-8-sig") as handle:
            for line in csv.reader(handle):
                lines.append(line)
                if len(lines) > limits.max_rows + 1:  # the header, then the cap
                    raise ResultFileTooLarge(f"{what} {path} holds more than {limits.max_rows} rows, over the row cap")
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ResultFileError(f"cannot read {what} {path}: {e}") from e
    if not lines:
        raise ResultFileError(f"cannot read {what} {path}: the file is empty (a header row is needed)")
    columns = tuple(lines[0])
    body = lines[1:]
    while body and not body[-1]:
        body.pop()
    rows = []
    for number, line in enumerate(body, start=2):
        if not line:
            if len(columns) == 1:
                rows.append((None,))
            continue
        if len(line) != len(columns):
            raise ResultFileError(f"cannot read {what} {path}: row {number} has {len(line)} cells, the header {len(columns)}")
        rows.append(tuple(typed_cell(cell) for cell in line))
    return QueryResult(columns, rows)


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # over a CSV cell, not over SQL
_ISO_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)?")


def typed_cell(cell: str) -> Any:
    """A CSV cell as a value: '' is NULL; numeric text is an int or float (as the comparison reads
    numeric text anyway; `007` stays text, as written, though it still equals 7); `2024-01-02` a
    date; `2024-01-02T03:04:05` or `2024-01-02 03:04:05` (a fraction, an offset or `Z` allowed) a
    timestamp, with an offset an instant; anything else stays text."""
    if cell == "":
        return None
    value = normalise_value(cell)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        digits = cell.lstrip("+-")
        return cell if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit() else value
    try:
        if _ISO_DATE.fullmatch(cell):
            return datetime.date.fromisoformat(cell)
        if _ISO_TIMESTAMP.fullmatch(cell):
            return datetime.datetime.fromisoformat(cell)
    except ValueError:  # 2024-02-31: not a date after all
        return cell
    return cell


def execute_once_more_if_lost(engine: Engine, sql: str, limits: Limits, *, trusted: bool = False) -> QueryResult:
    """Run a query, timed; a lost connection (the engine re-opens it) is retried once. A second
    loss propagates as `ConnectionLost`: a fault of the run, never of the query. `trusted`: the
    suite's own SQL (gold), which an engine may run without the isolation predictions need."""
    run = getattr(engine, "execute_trusted", engine.execute) if trusted else engine.execute
    started = time.perf_counter()
    try:
        result = run(sql, limits)
    except ConnectionLost:
        started = time.perf_counter()
        result = run(sql, limits)
    if result.seconds is not None:  # the engine timed it (a reused result: the time it took to compute)
        return result
    return dataclasses.replace(result, seconds=time.perf_counter() - started)


def judge(
    predicted: str,
    gold: GoldOutcome,
    engine: Engine,
    limits: Limits,
    *,
    dialect: str | None = None,
    compare: Mapping[str, Any] | None = None,
    spider_compat: bool = False,
    fingerprint: bool = False,
) -> Judgement:
    """Execute the prediction and compare it with every gold result; the best comparison wins.

    `fingerprint` asks for a hash of the predicted result (baselines keep one); it costs a pass
    over every value, so it is computed only when wanted."""
    if predicted is None or not str(predicted).strip():
        return Judgement(Verdict.NO_PREDICTION, "no prediction for this case")
    if len(str(predicted)) > limits.max_sql_chars:  # a server would drop the connection over it
        return Judgement(Verdict.PRED_ERROR, f"the prediction is {len(str(predicted)):,} characters long,"
                         f" over the {limits.max_sql_chars:,} a query may have; it was not run")
    options = CompareOptions.from_mapping({**(compare or {}), **({"mode": "spider"} if spider_compat else {})})
    if options.mode == "spider":
        sql = compat.spider_prepare(str(predicted), gold.queries[0] if gold.queries else "")[0]
    else:
        sql = str(predicted)
    try:
        sql = to_engine_sql(sql, dialect, engine)
        if gold.large:
            return judge_streamed(sql, gold, engine, limits, options, dialect)
        result = execute_once_more_if_lost(engine, sql, limits)
    except ConnectionLost:
        raise
    except ResultTooLarge:
        return judge_streamed(sql, gold, engine, limits, options, dialect)
    except EngineError as e:
        return prediction_failed(e, sql)
    return judge_result(result, gold, options, fingerprint=fingerprint, executed=sql)


def prediction_failed(error: EngineError, sql: str) -> Judgement:
    """A prediction the engine could not run is judged by why, held or streamed alike."""
    verdict = (Verdict.PRED_TIMEOUT if isinstance(error, QueryTimeout)
               else Verdict.TOO_MANY_ROWS if isinstance(error, TooManyRows) else Verdict.PRED_ERROR)
    return Judgement(verdict, str(error), executed=sql)


def judge_streamed(sql: str, gold: GoldOutcome, engine: Engine, limits: Limits, options: CompareOptions,
                   dialect: str | None) -> Judgement:
    """A result too large to hold (gold or prediction past `Limits.memory_rows`): both queries are
    streamed and compared in bounded memory (`judge.large`), gold by gold; the first match wins."""
    from pytest_nl2sql.judge import large

    problem = (large.unsupported(options) or (None if can_stream(engine) else f"the {engine.dialect} engine cannot stream results")
               or (None if gold.queries else "the gold is a result file"))
    if problem is not None:
        return Judgement(Verdict.TOO_MANY_ROWS, f"a result has more than {limits.memory_rows} rows, too many to hold in "
                         f"memory, and comparing it as a stream is not possible here: {problem}", executed=sql)
    best: Judgement | None = None
    for index, query in enumerate(gold.queries):
        try:
            judgement = large.judge_large(sql, to_engine_sql(query, dialect, engine), engine, limits,
                                          order_matters=gold.order_matters, options=options)
        except large.Unsupported as e:
            return Judgement(Verdict.TOO_MANY_ROWS, str(e), executed=sql)
        judgement = dataclasses.replace(judgement, gold_index=index, streamed=True)
        if judgement.verdict is Verdict.PASS or judgement.comparison is None:
            return judgement
        if best is None or _closeness(judgement.comparison) > _closeness(best.comparison):
            best = judgement
    assert best is not None
    return best


def judge_result(result: QueryResult, gold: GoldOutcome, options: CompareOptions, *, fingerprint: bool = False,
                 executed: str | None = None) -> Judgement:
    """Compare a predicted result (executed, or read from a result file) with every gold result;
    the best comparison wins."""
    digest = result_fingerprint(result.rows, gold.order_matters) if fingerprint else None
    best: tuple[int, Comparison] | None = None
    for index, gold_result in enumerate(gold.results):
        comparison = compare_results(
            gold_result.rows, result.rows, order_matters=gold.order_matters, options=options,
            gold_columns=len(gold_result.columns), pred_columns=len(result.columns), gold_names=gold_result.columns,
            ties=gold.ties_of(index),
        )
        if comparison.match:
            return Judgement(Verdict.PASS, None, comparison, index, result, digest, executed)
        if best is None or _closeness(comparison) > _closeness(best[1]):
            best = (index, comparison)
    assert best is not None
    index, comparison = best
    return Judgement(Verdict.MISMATCH, comparison.reason, comparison, index, result, digest, executed)


def _closeness(comparison: Comparison) -> tuple[int, int]:
    """Which failed comparison to show when several golds exist: the one with the smallest diff."""
    rank = {"order": 3, "values": 2, "row count": 1, "column count": 0}.get(comparison.reason or "", 0)
    return rank, -(comparison.missing_count + comparison.extra_count)
