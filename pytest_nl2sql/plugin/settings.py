"""The plugin's options: one table that declares them, and the frozen `Settings` read from a config.

Every command-line option is also an ini option (without the leading dashes, `-` -> `_`); the
command line wins.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.model import MAX_NEIGHBOURS
from pytest_nl2sql.cases.predictions import load_predictions
from pytest_nl2sql.engines import DatabaseMissing, probe
from pytest_nl2sql.engines.base import Limits
from pytest_nl2sql.gate.baseline import load_baseline
from pytest_nl2sql.gate.reviews import load_reviews
from pytest_nl2sql.gate.thresholds import MAX_COST, MAX_LATENCY_P95, Threshold, parse_budget, parse_fail_unders
from pytest_nl2sql.judge.pipeline import DEFAULT_NEIGHBOURS, Pipeline, RunOptions
from pytest_nl2sql.judge.predict import DEFAULT_RETRIES, DEFAULT_RETRY_WAIT, NO_PREDICTOR, RetryPolicy
from pytest_nl2sql.metrics.soft import parse_synonym_lines
from pytest_nl2sql.reports import default_path
from pytest_nl2sql.vocab import REPORT_FORMATS, FragilePolicy

DEFAULT_FILES = "*.nl2sql.yaml *.nl2sql.yml *.nl2sql.jsonl"
MAX_REPEAT = 100  # answers per case: pass@k is reported for every k up to K


@dataclass(frozen=True)
class Option:
    flag: str
    help: str
    kind: str = "string"  # string | bool | append
    default: Any = None
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def ini_help(self) -> str:
        """The help for the ini option: argparse reads `%%` as `%` in an option's help, the ini
        listing prints it as written."""
        return self.help.replace("%%", "%")


OPTIONS = (
    Option("--nl2sql-predictions", "predictions: JSONL of {id, predicted|selection}, .sql/.txt with one query per line, or a directory of <id>.csv results", metavar="PATH"),
    Option("--nl2sql-db-dir", "directory of `db_id` databases for cases that name no db_dir", metavar="DIR"),
    Option("--nl2sql-dsn", "run every case on this database instead (e.g. a PostgreSQL copy)", metavar="URL"),
    Option("--nl2sql-timeout", "per-query time limit in seconds (default 30)", default="30", metavar="SECONDS"),
    Option("--nl2sql-max-rows", "row cap per result (default 100000)", default="100000", metavar="N"),
    Option("--nl2sql-compat", "`spider`: reproduce the official Spider execution verdicts, bugs included", metavar="spider"),
    Option("--nl2sql-report", "write a report; FORMAT is xlsx, json, csv, md or html (repeatable)", kind="append", metavar="FORMAT[:PATH]"),
    Option("--nl2sql-baseline", "compare with a baseline of per-case verdicts", metavar="PATH"),
    Option("--nl2sql-update-baseline", "write the current verdicts to --nl2sql-baseline, and pass", kind="bool", default=False),
    Option("--nl2sql-fail-under", "fail when accuracy is below RATE (repeatable): 0.8, 80%%, hard=0.6, tag:joins=0.9", kind="append", metavar="[BUCKET=]RATE"),
    Option("--nl2sql-max-cost", "fail when the total cost the predictor hook reported (its usage) is above USD (any unit the hook reports)", metavar="USD"),
    Option("--nl2sql-max-latency-p95", "fail when the 95th percentile of the predictor hook's latency per case is above SECONDS", metavar="SECONDS"),
    Option("--nl2sql-record", "record every prediction made by the predictor hook to this JSONL file", metavar="PATH"),
    Option("--nl2sql-concurrency", "ask the predictor for up to N cases at once, ahead of judging (default 1)", default="1", metavar="N"),
    Option("--nl2sql-label", "name this run (the model, the prompt) in reports and the history", metavar="TEXT"),
    Option("--nl2sql-history", "append one JSON line per run (run metadata and summary) to this file", metavar="PATH"),
    Option("--nl2sql-neighbours", f"neighbour databases generated per SQLite, DuckDB, PostgreSQL or MySQL case (servers: from a local DuckDB copy); a prediction must match on each (default {DEFAULT_NEIGHBOURS}; 0: off)", default=str(DEFAULT_NEIGHBOURS), metavar="N"),
    Option("--nl2sql-fragile", "a prediction that differs from the gold only on stress neighbours (data the case's database never shows): `pass` (marked fragile; default) or `fail` (unless only the gold is fragile there)", default="pass", metavar="pass|fail"),
    Option("--nl2sql-confine", "databases and result files named by case files must lie under the rootdir", kind="bool", default=False),
    Option("--nl2sql-retries", f"ask the predictor hook again up to N times after a transient error (a timeout, a dropped connection, HTTP 429 or 5xx; default {DEFAULT_RETRIES})", default=str(DEFAULT_RETRIES), metavar="N"),
    Option("--nl2sql-retry-wait", f"seconds before the first retry, doubled before each next one (default {DEFAULT_RETRY_WAIT:g})", default=f"{DEFAULT_RETRY_WAIT:g}", metavar="SECONDS"),
    Option("--nl2sql-repeat", f"ask the predictor K times per case: the first answer decides the verdict, all K give pass@k and consistency (default 1, at most {MAX_REPEAT})", default="1", metavar="K"),
    Option("--nl2sql-reviews", "decisions about disputed cases (a YAML file `nl2sql review` writes): gold-wrong and both-right make a case pass while its gold, prediction and database are those decided on", metavar="PATH"),
)


class SettingsError(ValueError):
    """A bad option value; raised as a pytest usage error."""


@dataclass(frozen=True)
class Report:
    format: str
    path: Path


@dataclass(frozen=True)
class Settings:
    predictions: Path | None = None
    db_dir: Path | None = None
    dsn: str | None = None
    limits: Limits = Limits()
    compat: str | None = None
    reports: tuple[Report, ...] = ()
    baseline: Path | None = None
    update_baseline: bool = False
    fail_under: tuple[Threshold, ...] = ()
    max_cost: float | None = None  # --nl2sql-max-cost
    max_latency_p95: float | None = None  # --nl2sql-max-latency-p95, seconds
    record: Path | None = None
    confine: bool = False
    concurrency: int = 1
    synonyms: tuple[tuple[str, str], ...] = ()  # ini nl2sql_synonyms
    label: str | None = None
    history: Path | None = None
    neighbours: int = DEFAULT_NEIGHBOURS
    fragile: FragilePolicy = FragilePolicy.PASS
    retries: int = DEFAULT_RETRIES
    retry_wait: float = DEFAULT_RETRY_WAIT
    repeat: int = 1
    reviews: Path | None = None  # --nl2sql-reviews

    @property
    def spider_compat(self) -> bool:
        return self.compat == "spider"

    def run_options(self) -> dict[str, Any]:
        """The options that shape verdicts, for the report's `run` (no paths, no secrets)."""
        return {"timeout": self.limits.timeout, "max_rows": self.limits.max_rows, "compat": self.compat,
                "concurrency": self.concurrency, "neighbours": self.neighbours, "fragile": self.fragile.value, "baseline": self.baseline is not None,
                "predictions": self.predictions.name if self.predictions else None, "retries": self.retries, "repeat": self.repeat}


def option_value(config: Any, option: Option) -> Any:
    """The command-line value if given, else the ini value, else the default."""
    value = config.getoption(option.dest, default=None)
    if value in (None, [], False):
        ini = config.getini(option.dest)
        if option.kind == "bool":
            value = value or (str(ini).strip().lower() in ("1", "true", "yes", "on") if ini else False)
        elif option.kind == "append":  # several per line or one per line, as the user likes
            value = [part for line in (ini if isinstance(ini, list) else [str(ini)]) for part in line.split()]
        else:
            value = ini or None
    return option.default if value in (None, []) and option.default is not None else value


def parse_report(text: str, invocation_dir: Path) -> Report:
    fmt, _, path = text.partition(":")
    fmt = fmt.strip().lower()
    if fmt not in REPORT_FORMATS:
        raise SettingsError(f"--nl2sql-report: unknown format {fmt!r} (use one of {', '.join(REPORT_FORMATS)})")
    return Report(fmt, invocation_dir / (path or default_path(fmt)))


def read_settings(config: Any) -> Settings:
    values = {o.dest: option_value(config, o) for o in OPTIONS}
    here = Path(config.invocation_params.dir)
    ini_dir = Path(config.inipath).parent if config.inipath else Path(config.rootpath)

    def path(key: str) -> Path | None:
        """A command-line path is relative to where pytest runs, an ini one to the ini file."""
        if not values[key]:
            return None
        on_command_line = config.getoption(key, default=None) not in (None, [], False)
        return (here if on_command_line else ini_dir) / values[key]

    try:
        timeout = float(values["nl2sql_timeout"])
        max_rows = int(values["nl2sql_max_rows"])
        concurrency = int(values["nl2sql_concurrency"])
        neighbours = int(values["nl2sql_neighbours"])
    except ValueError as e:
        raise SettingsError(f"--nl2sql-timeout / --nl2sql-max-rows / --nl2sql-concurrency / --nl2sql-neighbours: {e}") from e
    if timeout <= 0 or max_rows <= 0 or concurrency <= 0:
        raise SettingsError("--nl2sql-timeout, --nl2sql-max-rows and --nl2sql-concurrency must be positive")
    if not 0 <= neighbours <= MAX_NEIGHBOURS:
        raise SettingsError(f"--nl2sql-neighbours must be from 0 (off) to {MAX_NEIGHBOURS}, not {neighbours}")
    retries, retry_wait, repeat = _model_loop_options(values)
    try:
        fragile = FragilePolicy(str(values["nl2sql_fragile"]).strip().lower())
    except ValueError:
        raise SettingsError(f"--nl2sql-fragile: use pass or fail, not {values['nl2sql_fragile']!r}") from None
    compat = values["nl2sql_compat"]
    if compat not in (None, "spider"):
        raise SettingsError(f"--nl2sql-compat: only `spider` is known, not {compat!r}")
    try:
        thresholds = parse_fail_unders(values["nl2sql_fail_under"] or ())
    except ValueError as e:
        raise SettingsError(f"--nl2sql-fail-under: {e}") from e
    try:
        max_cost, max_latency_p95 = (None if values[key] in (None, "") else parse_budget(values[key], option)
                                     for key, option in (("nl2sql_max_cost", MAX_COST), ("nl2sql_max_latency_p95", MAX_LATENCY_P95)))
    except ValueError as e:
        raise SettingsError(str(e)) from None
    try:
        synonyms = tuple(parse_synonym_lines(config.getini("nl2sql_synonyms")).items())
    except ValueError as e:
        raise SettingsError(f"nl2sql_synonyms: {e}") from e
    update = bool(values["nl2sql_update_baseline"])
    if update and not values["nl2sql_baseline"]:
        raise SettingsError("--nl2sql-update-baseline needs --nl2sql-baseline=PATH (where to write it)")
    return Settings(
        predictions=path("nl2sql_predictions"),
        db_dir=path("nl2sql_db_dir"),
        dsn=values["nl2sql_dsn"],
        limits=Limits(timeout=timeout, max_rows=max_rows),
        compat=compat,
        reports=tuple(parse_report(r, here) for r in values["nl2sql_report"] or ()),
        baseline=path("nl2sql_baseline"),
        update_baseline=update,
        fail_under=thresholds,
        max_cost=max_cost,
        max_latency_p95=max_latency_p95,
        record=path("nl2sql_record"),
        confine=bool(values["nl2sql_confine"]),
        concurrency=concurrency,
        synonyms=synonyms,
        label=values["nl2sql_label"],
        history=path("nl2sql_history"),
        neighbours=neighbours,
        fragile=fragile,
        retries=retries,
        retry_wait=retry_wait,
        repeat=repeat,
        reviews=path("nl2sql_reviews"),
    )


def _model_loop_options(values: dict[str, Any]) -> tuple[int, float, int]:
    """--nl2sql-retries, --nl2sql-retry-wait and --nl2sql-repeat, checked."""
    try:
        retries = int(values["nl2sql_retries"])
        wait = float(values["nl2sql_retry_wait"])
        repeat = int(values["nl2sql_repeat"])
    except ValueError as e:
        raise SettingsError(f"--nl2sql-retries / --nl2sql-retry-wait / --nl2sql-repeat: {e}") from e
    try:
        RetryPolicy.check(retries, wait, names=("--nl2sql-retries", "--nl2sql-retry-wait"))
    except ValueError as e:
        raise SettingsError(str(e)) from None
    if not 1 <= repeat <= MAX_REPEAT:
        raise SettingsError(f"--nl2sql-repeat must be from 1 to {MAX_REPEAT}, not {repeat}")
    return retries, wait, repeat


def check_dsn(dsn: str) -> str:
    """Open and close `--nl2sql-dsn` once; its label (password masked) if it works, else one
    `SettingsError` (a usage error) instead of the same error on every case."""
    try:
        return probe(dsn)
    except DatabaseMissing as e:
        raise SettingsError(f"--nl2sql-dsn cannot be used: {e}") from None


def neighbour_cache_dir(config: Any) -> Path | None:
    """Generated neighbours live in pytest's cache (`.pytest_cache/d/nl2sql-neighbours`, cleared
    by `--cache-clear`); `$NL2SQL_CACHE_DIR` overrides it, as it does for the Python API."""
    if os.environ.get("NL2SQL_CACHE_DIR") or getattr(config, "cache", None) is None:
        return None  # the pipeline's default_cache_dir() reads the variable
    return Path(config.cache.mkdir("nl2sql-neighbours"))


def make_pipeline(settings: Settings, config: Any) -> Pipeline:
    """The run's pipeline: options, the predictor hook, and the predictions and baseline files,
    read now (a bad one is a usage error, not 1000 failing cases)."""
    predictions = baseline = reviews = None
    try:
        if settings.predictions is not None:
            predictions = load_predictions(settings.predictions)
        if settings.baseline is not None and not settings.update_baseline:
            baseline = load_baseline(settings.baseline)
        if settings.reviews is not None:
            reviews = load_reviews(settings.reviews)  # a malformed file: a usage error naming its line
    except (OSError, ValueError) as e:
        raise SettingsError(f"nl2sql: {e}") from None
    options = RunOptions(
        limits=settings.limits, spider_compat=settings.spider_compat, dsn=settings.dsn, db_dir=settings.db_dir,
        fingerprints=settings.baseline is not None, verbosity=config.get_verbosity(), synonyms=settings.synonyms,
        neighbours=settings.neighbours, cache_dir=neighbour_cache_dir(config), fragile=settings.fragile,
        confine=Path(os.path.realpath(config.rootpath)) if settings.confine else None,
        retry=RetryPolicy(settings.retries, settings.retry_wait), repeat=settings.repeat,
    )
    caller = config.hook.pytest_nl2sql_predict

    def hook(request: Any) -> Any:  # conftest files load during collection: look for a model when asked
        return caller(case=request) if caller.get_hookimpls() else NO_PREDICTOR

    reviewer = config.hook.pytest_nl2sql_review

    def review(case: Any, evidence: Any) -> Any:  # a judge (an LLM, say) suggesting a decision for a disputed case
        return reviewer(case=case, evidence=evidence) if reviewer.get_hookimpls() else None

    return Pipeline(options, hook=hook, predictions=predictions, baseline=baseline, reviews=reviews, reviewer=review)
