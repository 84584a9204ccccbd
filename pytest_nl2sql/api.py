"""The Python API, usable without pytest (nothing below imports it): a whole case file
(`evaluate_suite`), one query pair (`eval_exec_match`) or a batch of pairs (`evaluate_predictions`).

`evaluate_suite` runs each case through the same pipeline as a pytest item, so its report has the
same verdicts, hardness, exact match and term-selection scores as a pytest run's JSON report."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.model import MAX_NEIGHBOURS
from pytest_nl2sql.cases.predictions import load_predictions
from pytest_nl2sql.cases.read import InvalidCase, load_case_file
from pytest_nl2sql.engines import DatabaseMissing, open_engine, probe
from pytest_nl2sql.engines.base import EngineError, Limits, text_errors_for
from pytest_nl2sql.gate.baseline import load_baseline
from pytest_nl2sql.gate.run import engine_label
from pytest_nl2sql.judge.execute import GoldError, judge, run_gold
from pytest_nl2sql.judge.pipeline import DEFAULT_NEIGHBOURS, CaseLabel, Pipeline, RunOptions, relative_name
from pytest_nl2sql.metrics.soft import synonyms_from
from pytest_nl2sql.metrics.summary import build_report, summarize
from pytest_nl2sql.vocab import FragilePolicy, Verdict


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


def evaluate_suite(
    path: str | Path,
    predictions: str | Path | None = None,
    *,
    predict: Callable[[Any], Any] | None = None,
    timeout: float = 30.0,
    max_rows: int = 100_000,
    compat: str | None = None,
    db_dir: str | Path | None = None,
    dsn: str | None = None,
    baseline: str | Path | None = None,
    rootdir: str | Path | None = None,
    synonyms: Mapping[str, str] | None = None,
    neighbours: int = DEFAULT_NEIGHBOURS,
    cache_dir: str | Path | None = None,
    fragile: str = "pass",
) -> dict[str, Any]:
    """The JSON report's dict (`summary`, `items`) for one case file, as a pytest run writes it.

    `predictions`: a predictions file (JSONL, or one query per line); `predict`: a callable given
    each case's `PredictionRequest` (the predictor hook's `case`), returning SQL or a selection;
    `timeout`, `max_rows`, `compat` ("spider"), `db_dir`, `dsn`, `baseline`, `neighbours`, `fragile`
    ("pass" or "fail"): as the options `--nl2sql-…` (a `dsn` that cannot be opened raises `ValueError`, its password masked);
    `synonyms`: as the ini option `nl2sql_synonyms`; `cache_dir`: where generated neighbour
    databases are kept (default `$NL2SQL_CACHE_DIR`, else `~/.cache/pytest-nl2sql`). Items are
    named relative to `rootdir` (default: the current directory), as pytest names them relative
    to its rootdir.
    """
    path = Path(path)
    if not 0 <= neighbours <= MAX_NEIGHBOURS:
        raise ValueError(f"neighbours: from 0 to {MAX_NEIGHBOURS}, not {neighbours}")
    try:
        policy = FragilePolicy(fragile)
    except ValueError:
        raise ValueError(f"fragile: use 'pass' or 'fail', not {fragile!r}") from None
    if compat not in (None, "spider"):
        raise ValueError(f"compat: only 'spider' is known, not {compat!r}")
    if dsn:  # one clear error up front, not the same error on every case
        try:
            probe(dsn)
        except DatabaseMissing as e:
            raise ValueError(f"dsn cannot be used: {e}") from None
    options = RunOptions(
        limits=Limits(timeout=timeout, max_rows=max_rows), spider_compat=compat == "spider", dsn=dsn,
        db_dir=Path(db_dir) if db_dir is not None else None, fingerprints=baseline is not None,
        synonyms=tuple(synonyms_from(synonyms, "synonyms").items()),
        neighbours=neighbours, cache_dir=Path(cache_dir) if cache_dir is not None else None, fragile=policy,
    )
    pipeline = Pipeline(
        options, hook=predict, predictions=load_predictions(Path(predictions)) if predictions is not None else None,
        baseline=load_baseline(baseline) if baseline is not None else None,
    )
    entries = load_case_file(path, db_dir=options.db_dir, dsn=dsn)
    store = pipeline.predictions
    misaligned = store.misalignment(len(entries), str(path)) if store is not None else None
    if misaligned:
        raise ValueError(misaligned)
    file = relative_name(path, rootdir if rootdir is not None else Path.cwd())
    results = []
    try:
        for position, entry in enumerate(entries):
            label = CaseLabel(f"{file}::{entry.id}", file, position)
            outcome = pipeline.invalid(entry, label) if isinstance(entry, InvalidCase) else pipeline.evaluate(entry, label)
            results.append(outcome.result)
    finally:
        pipeline.close()
    summary = summarize(results)
    summary["engine"] = engine_label(dsn)  # as a pytest run's summary names it
    return build_report(results, summary)

