"""The Python API, usable without pytest: execution match of one query pair or of a batch."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines import open_engine
from pytest_nl2sql.engines.base import EngineError, Limits, text_errors_for
from pytest_nl2sql.judge.execute import GoldError, judge, run_gold
from pytest_nl2sql.vocab import Verdict


@dataclass(frozen=True)
class ExecMatch:
    """The outcome of `eval_exec_match`; truthy iff the prediction matches the gold."""

    match: bool
    verdict: Verdict
    error: str | None  # the prediction's (or the gold's) error message, or the mismatch reason
    pred_results: list[tuple[Any, ...]] | None
    gold_results: list[tuple[Any, ...]] | None

    def __bool__(self) -> bool:
        return self.match


def eval_exec_match(
    db_path: str | Path,
    predicted_sql: str,
    gold_sql: str | list[str],
    *,
    limits: Limits | None = None,
    spider_compat: bool = False,
    compare: dict[str, Any] | None = None,
) -> ExecMatch:
    """Execute both queries on `db_path` (a SQLite file or a URL) and compare their results."""
    limits = limits or Limits()
    golds = [gold_sql] if isinstance(gold_sql, str) else list(gold_sql)
    try:
        engine = open_engine(str(db_path), text_errors=text_errors_for(spider_compat))
    except EngineError as e:
        return ExecMatch(False, Verdict.GOLD_ERROR, f"database: {e}", None, None)
    try:
        try:
            gold = run_gold(golds, engine, limits, spider_compat=spider_compat)
        except GoldError as e:
            return ExecMatch(False, Verdict.GOLD_ERROR, str(e), None, None)
        j = judge(predicted_sql, gold, engine, limits, compare=compare, spider_compat=spider_compat)
        error = None if j.verdict is Verdict.PASS else (j.reason or j.verdict.value)
        pred_rows = list(j.result.rows) if j.result is not None else None
        return ExecMatch(j.verdict is Verdict.PASS, j.verdict, error, pred_rows, list(gold.results[j.gold_index].rows))
    finally:
        engine.close()


def evaluate_predictions(
    predictions: Iterable[tuple[str | Path, str, str]], verbose: bool = False, **options: Any
) -> dict[str, Any]:
    """Batch execution accuracy over `(db_path, predicted_sql, gold_sql)` triples.

    Cases whose gold cannot run (or whose database is missing) are counted in `errors` and left out
    of the accuracy, as in the plugin.
    """
    results = []
    for number, (db, pred, gold) in enumerate(predictions):
        r = eval_exec_match(db, pred, gold, **options)
        results.append(r)
        if verbose:
            print(f"[{number}] {r.verdict.value}" + (f": {r.error.splitlines()[0]}" if r.error else ""))
    errors = sum(r.verdict is Verdict.GOLD_ERROR for r in results)
    correct = sum(r.match for r in results)
    judged = len(results) - errors
    return {
        "accuracy": correct / judged if judged else 0.0,
        "correct": correct,
        "total": judged,
        "errors": errors,
        "verdicts": {v.value: sum(r.verdict is v for r in results) for v in Verdict if any(r.verdict is v for r in results)},
        "results": results,
    }
