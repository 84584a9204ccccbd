"""The Python API, usable without pytest (nothing below imports it): a whole case file
(`evaluate_suite`), one query pair (`eval_exec_match`) or a batch of pairs (`evaluate_predictions`),
and a report as a pandas DataFrame (`to_dataframe`).

`evaluate_suite` runs each case through the same pipeline as a pytest item, so its report has the
same verdicts, hardness, exact match and term-selection scores as a pytest run's JSON report.
With `concurrency=N` the model (`predict`) is asked for N cases at once in threads, ahead of
judging, which stays in the calling thread and in case order: the report is that of N=1."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.model import MAX_NEIGHBOURS
from pytest_nl2sql.cases.predictions import load_predictions
from pytest_nl2sql.cases.read import InvalidCase, load_case_file
from pytest_nl2sql.engines import DatabaseMissing, open_engine, probe
from pytest_nl2sql.engines.base import EngineError, Limits, text_errors_for
from pytest_nl2sql.gate.baseline import load_baseline
from pytest_nl2sql.gate.run import CommitLookup, RunInfo, engine_label, utc_now
from pytest_nl2sql.judge.execute import GoldError, judge, run_gold
from pytest_nl2sql.judge.pipeline import DEFAULT_NEIGHBOURS, CaseLabel, Pipeline, RunOptions, relative_name
from pytest_nl2sql.judge.predict import DEFAULT_RETRIES, DEFAULT_RETRY_WAIT, PredictionOutcome, RetryPolicy
from pytest_nl2sql.metrics.soft import synonyms_from
from pytest_nl2sql.metrics.summary import build_report, summarize
from pytest_nl2sql.reports import default_path, write_report
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
    concurrency: int = 1,
    reports: Sequence[str] = (),
    retries: int = DEFAULT_RETRIES,
    retry_wait: float = DEFAULT_RETRY_WAIT,
    repeat: int = 1,
    label: str | None = None,
) -> dict[str, Any]:
    """The JSON report's dict (`run`, `summary`, `items`) for one case file, as a pytest run writes it.

    `predictions`: a predictions file (JSONL, or one query per line); `predict`: a callable given
    each case's `PredictionRequest` (the predictor hook's `case`), returning SQL or a selection;
    `timeout`, `max_rows`, `compat` ("spider"), `db_dir`, `dsn`, `baseline`, `neighbours`, `fragile`
    ("pass" or "fail"): as the options `--nl2sql-…` (a `dsn` that cannot be opened raises `ValueError`, its password masked);
    `synonyms`: as the ini option `nl2sql_synonyms`; `cache_dir`: where generated neighbour
    databases are kept (default `$NL2SQL_CACHE_DIR`, else `~/.cache/pytest-nl2sql`). Items are
    named relative to `rootdir` (default: the current directory), as pytest names them relative
    to its rootdir.

    `concurrency`: how many cases `predict` is asked for at once (threads; an `async def` is awaited
    in each); `retries`, `retry_wait`, `repeat`, `label`: as `--nl2sql-retries`,
    `--nl2sql-retry-wait`, `--nl2sql-repeat`, `--nl2sql-label`; `reports`: `"FORMAT[:PATH]"`
    strings as `--nl2sql-report` takes them (`"xlsx:out/run.xlsx"`, `"md"`), paths relative to the
    current directory, written once the suite has run (an unknown format is a ValueError up front).
    """
    started, clock = utc_now(), time.perf_counter()
    path = Path(path)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency: a whole number >= 1, not {concurrency!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat: a whole number >= 1, not {repeat!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries: a whole number >= 0, not {retries!r}")
    if not retry_wait >= 0:
        raise ValueError(f"retry_wait: seconds >= 0, not {retry_wait!r}")
    written = [_report_target(spec) for spec in ([reports] if isinstance(reports, str) else reports)]
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
        retry=RetryPolicy(retries, retry_wait), repeat=repeat,
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
    root = Path(rootdir) if rootdir is not None else Path.cwd()
    commit = CommitLookup(root)
    file = relative_name(path, root)
    labels = [CaseLabel(f"{file}::{entry.id}", file, position) for position, entry in enumerate(entries)]
    results = []
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="nl2sql-predict") if concurrency > 1 and predict else None
    try:
        asked = _ask_ahead(pipeline, entries, labels, pool) if pool is not None else {}
        for position, entry in enumerate(entries):
            if isinstance(entry, InvalidCase):
                results.append(pipeline.invalid(entry, labels[position]).result)
                continue
            prepared = pipeline.prepare(entry, labels[position])
            future = asked.pop(position, None)
            results.append(pipeline.finish(prepared, prediction=future.result() if future is not None else None).result)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        pipeline.close()
    summary = summarize(results)
    summary["engine"] = engine_label(dsn)  # as a pytest run's summary names it
    run = RunInfo(
        started=started.isoformat(timespec="seconds"), duration_s=round(time.perf_counter() - clock, 3), label=label,
        git_commit=commit.result(), engine=summary["engine"], complete=True,
        options={"timeout": timeout, "max_rows": max_rows, "compat": compat, "concurrency": concurrency,
                 "neighbours": neighbours, "fragile": policy.value, "baseline": baseline is not None,
                 "predictions": Path(predictions).name if predictions is not None else None,
                 "retries": retries, "repeat": repeat},
    )
    report = {"run": run.to_json(), **build_report(results, summary)}
    for fmt, target in written:
        write_report(fmt, report, target)
    return report


def _ask_ahead(pipeline: Pipeline, entries: Sequence[Any], labels: Sequence[CaseLabel],
               pool: ThreadPoolExecutor) -> dict[int, Future[PredictionOutcome]]:
    """Every case's prediction, asked in the pool; each case's schema and sample rows are read
    here first (database connections are not shared across threads)."""
    asked: dict[int, Future[PredictionOutcome]] = {}
    for position, entry in enumerate(entries):
        if not isinstance(entry, InvalidCase) and pipeline.read_ahead(entry):
            asked[position] = pool.submit(pipeline.predict, entry, labels[position])
    return asked


def _report_target(spec: str) -> tuple[str, Path]:
    """`FORMAT[:PATH]` (as `--nl2sql-report` takes it) as (format, path); ValueError if unknown."""
    fmt, _, where = str(spec).partition(":")
    fmt = fmt.strip().lower()
    return fmt, Path(where) if where else default_path(fmt)  # default_path raises ValueError for an unknown format


def to_dataframe(report: Mapping[str, Any]) -> Any:
    """A report's items (`evaluate_suite`'s, or a JSON report read back) as a pandas DataFrame, one
    row per item in report order. The small nested objects are flattened into dotted columns
    (`usage.cost`, `repeats.passed`, `soft_scores.row_f1`, `neighbours.failed`); the others
    (`diff`, `term_selection`, ...) stay objects. pandas is optional: without it, an ImportError
    says how to install it."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError("to_dataframe needs pandas, which pytest-nl2sql does not install: "
                          "python -m pip install pandas") from e
    items = report.get("items") if isinstance(report, Mapping) else None
    if not isinstance(items, list):
        raise ValueError("to_dataframe takes a report: a mapping with \"items\" (what evaluate_suite returns)")
    rows: list[dict[str, Any]] = []
    columns: dict[str, None] = {}
    for item in items:
        row: dict[str, Any] = {}
        for key, value in item.items():
            if key in FLATTENED:
                for sub in FLATTENED[key]:
                    row[f"{key}.{sub}"] = value.get(sub) if isinstance(value, Mapping) else None
            else:
                row[key] = value
        columns.update(dict.fromkeys(row))
        rows.append(row)
    return pandas.DataFrame.from_records(rows, columns=list(columns))


# The item objects `to_dataframe` spreads over columns, and their keys.
FLATTENED = {
    "soft_scores": ("column_precision", "column_recall", "column_f1", "row_precision", "row_recall", "row_f1"),
    "usage": ("prompt_tokens", "completion_tokens", "cost"),
    "repeats": ("k", "passed"),
    "neighbours": ("checked", "failed", "fragile"),
}

