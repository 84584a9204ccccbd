"""Verdicts beyond one database: a prediction that matches the gold on the case's database is
judged again on the case's other databases, where the data no longer hides its mistakes.

The other databases are either generated neighbours (`pytest_nl2sql.neighbours`: small databases
derived from the case's own, its gold's literals and the values next to them, duplicates, NULLs)
or, when a case's `database` names a folder (the official test-suite layout), the folder's other
databases. Each is judged exactly as the case's own database is (`run_gold`, `judge`: same
comparison options, tie handling, containment); a database where the gold fails is not counted,
nor one where the gold's answer is not determined (a LIMIT cutting a tie) unless the prediction is
wrong under every reading of it. The first database
where the prediction fails is shrunk towards the few rows that still tell the two queries apart
(within `SHRINK_BUDGET` runs), so that a failure shows a counterexample a person can read.

Only predictions that passed on the case's own database are checked here: a prediction that
fails there fails anyway, and its neighbours would only cost time.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from pytest_nl2sql.engines.base import Engine, EngineError, Limits, QueryTimeout, RowIds
from pytest_nl2sql.engines.url import EngineKind
from pytest_nl2sql.judge import failure_memo, gold_memo
from pytest_nl2sql.judge.compare import CompareOptions, compare_results, row_values_key
from pytest_nl2sql.judge.execute import GoldError, GoldOutcome, Judgement, judge, run_gold
from pytest_nl2sql.judge.fragile_gold import neighbour_keys, why_gold_is_fragile
from pytest_nl2sql.judge.fragile_side import fragile_side
from pytest_nl2sql.vocab import FragileSide, Verdict

SHRINK_BUDGET = 128  # runs of gold + prediction spent shrinking a counterexample (~2 ms each; most stop early, at
# a set from which no single row can go; the rows kept are remembered beside the neighbour, so a warm run replays one)
FOLDER_SUFFIXES = {EngineKind.SQLITE: (".sqlite", ".sqlite3", ".db"), EngineKind.DUCKDB: (".duckdb",)}


@dataclass(frozen=True)
class OtherDatabase:
    """A database a case is judged on besides its own: a generated neighbour or a folder's file."""

    path: Path
    kind: EngineKind
    label: str  # how a failure names it: "neighbour 2 of 3 (duplicated rows)" or the file's name
    generated: Any = None  # the `pytest_nl2sql.neighbours.Neighbour` it is, when generated
    rows: RowIds | None = None  # only these rows of the file (a shrink's attempt, on a DuckDB file); None: all

    @property
    def breaks(self) -> str | None:
        """A stress neighbour: the observed invariant it breaks, in words (None: plausible)."""
        broken = getattr(self.generated, "breaks", None)
        return broken.words() if broken is not None else None


@dataclass(frozen=True)
class DatabaseFolder:
    """A `database:` that names a folder of databases: the case's own one and the others."""

    own: Path
    others: tuple[Path, ...]

    @classmethod
    def read(cls, folder: Path, confine: Path | None = None) -> "DatabaseFolder | None":
        """The official layout: `db/<name>/<name>.sqlite` is the database itself (else the first
        file by name), every other database file in the folder is another database to judge on.
        `confine` (--nl2sql-confine's root): a file that resolves outside it (a symlink out of the
        tree) is not one of them."""
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in _ALL_SUFFIXES
                       and (confine is None or Path(os.path.realpath(p)).is_relative_to(confine)))
        if not files:
            return None
        own = next((p for p in files if p.stem == folder.name), files[0])
        return cls(own, tuple(p for p in files if p != own))


_ALL_SUFFIXES = frozenset(s for suffixes in FOLDER_SUFFIXES.values() for s in suffixes)


def kind_of_file(path: Path) -> EngineKind:
    return EngineKind.DUCKDB if path.suffix.lower() in FOLDER_SUFFIXES[EngineKind.DUCKDB] else EngineKind.SQLITE


@dataclass(frozen=True)
class NeighbourFailure:
    """The first other database where the prediction does not match the gold."""

    database: OtherDatabase
    judgement: Judgement  # the prediction there (a mismatch or an error)
    gold: GoldOutcome  # the gold there
    counterexample: tuple[tuple[str, tuple[str, ...], tuple[tuple[Any, ...], ...]], ...] = ()  # (table, columns, rows)
    shrunk: bool = False  # the counterexample's rows are the shrunk database's (and so are the results)
    breaks: str | None = None  # fragile: what the database shows that the case's own never does, in words


@dataclass(frozen=True)
class NeighbourCheck:
    """How a passing prediction fared on the case's other databases: `failed` counts plausible
    databases where it differs from the gold, `fragile` the databases where it differs only
    because they show what the case's own database never does (a stress neighbour's broken
    invariant, or a gold result of a kind its author never saw)."""

    checked: int  # databases where the gold ran and the prediction was compared
    failed: int
    failure: NeighbourFailure | None = None  # the first plausible failure, else the first fragile one
    total: int = 0  # databases tried (the gold failed on `total - checked` of them)
    fragile: int = 0
    fragile_side: FragileSide | None = None  # a fragile pass: whose result shows the broken invariant (judge/fragile_side.py)

    @property
    def is_fragile(self) -> bool:
        return self.failed == 0 and self.fragile > 0

    @property
    def fragile_against_prediction(self) -> bool:
        """A fragile pass that strict accuracy and `--nl2sql-fragile=fail` hold against the
        prediction: its side is the prediction or both (never the gold alone)."""
        return self.is_fragile and (self.fragile_side is None or self.fragile_side.counts_against_prediction)

    def to_json(self) -> dict[str, Any]:
        """The JSON item's `neighbours`, but its `counterexample` (`explain.counterexample_json`)."""
        side = self.fragile_side.value if self.is_fragile and self.fragile_side is not None else None
        return {"checked": self.checked, "failed": self.failed, "fragile": self.fragile, "fragile_side": side}


@dataclass(frozen=True)
class JudgingRules:
    """How the case is judged (the same on every database)."""

    golds: tuple[str, ...]
    dialect: str | None  # of the golds
    order: str
    compare: Mapping[str, Any] = field(default_factory=dict)
    spider_compat: bool = False
    predicted_dialect: str | None = None  # of the prediction, when not the golds' (a hook writes for the engine)


def check(predicted: str, databases: Sequence[OtherDatabase], rules: JudgingRules, limits: Limits,
          open_engine: Callable[[OtherDatabase], Engine], *, shrink: Callable[..., Any] | None = None,
          own_gold: GoldOutcome | None = None) -> NeighbourCheck:
    """Judge `predicted` on every database of `databases` (plausible ones first); shrink the first
    failure, else the first fragile difference (`shrink`: `pytest_nl2sql.neighbours.shrink_counterexample`,
    for generated neighbours). `own_gold`: the gold on the case's own database, which says what its
    author could see. Once a plausible database fails, stress databases are not run.

    A prediction that matched everywhere is remembered beside generated neighbours (its
    `verdicts/` folder): the same prediction for the same golds and rules on the same neighbours
    (files the cache never rewrites) matches again, so a rerun runs nothing there. So is one
    that did not (`failures/`, `failure_memo`): its counts, counterexample and fragile side."""
    rules_key = _rules_key(rules, predicted, limits)
    remembered = _verdict_path(databases, rules_key)
    recalled = _recall_pass(remembered, len(databases))
    if recalled is not None:
        return recalled
    failed_path = failure_memo.path_for(databases, rules_key, own_gold, shrink is not None) if remembered is not None else None
    recalled = failure_memo.recall(failed_path, databases)
    if recalled is not None:
        return recalled
    trouble: list[BaseException] = []  # errors met on the way: a time-out's outcome is not remembered
    checked = failed = fragile = 0
    first: NeighbourFailure | None = None
    first_fragile: NeighbourFailure | None = None
    fragile_ones: list[NeighbourFailure] = []  # every fragile database, for its side
    for database in databases:
        stress = database.breaks
        if stress is not None and failed:
            continue
        outcome = _judge_on(predicted, database, rules, limits, open_engine, trouble)
        if outcome is None:
            continue
        checked += 1
        gold, judgement = outcome
        if judgement.verdict is Verdict.PASS:
            continue
        why = stress or (not_the_prediction_s_fault(database, own_gold, gold, judgement, rules, limits, open_engine,
                                                    trouble=trouble)
                         if own_gold is not None else None)
        if why is None:
            failed += 1
            first = first or NeighbourFailure(database, judgement, gold)
        else:
            fragile += 1
            fragile_ones.append(NeighbourFailure(database, judgement, gold, breaks=why))
            first_fragile = first_fragile or fragile_ones[0]
    shown = first or first_fragile
    if shown is not None:
        shown = counterexample(shown, predicted, rules, limits, open_engine, shrink, own_gold, trouble=trouble)
    side = None
    if not failed and fragile_ones:
        side = fragile_side(([shown] if shown is not None else []) + fragile_ones[1:], predicted, rules, limits, open_engine,
                            own_gold, trouble=trouble)
    result = NeighbourCheck(checked, failed, shown, len(databases), fragile, side)
    if shown is None and checked == len(databases):  # every database judged it right: nothing to show, nothing timed out
        _remember_pass(remembered, checked)
    elif shown is not None and not any(map(failure_memo.unsure, trouble)):
        failure_memo.remember(failed_path, result, databases)
    return result


def _rules_key(rules: JudgingRules, predicted: str, limits: Limits | None = None) -> str:
    """What a verdict on a given database depends on, hashed: the golds, the prediction, the rules."""
    material = [rules.golds, predicted, rules.dialect, rules.predicted_dialect, rules.order,
                sorted(map(str, rules.compare.items())), rules.spider_compat]
    if limits is not None:
        material.append([limits.max_rows, limits.max_bytes, limits.max_value_bytes])
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()


def _gold_path(database: OtherDatabase, rules: JudgingRules) -> Path | None:
    """Where the gold's outcome on a generated neighbour is remembered (None for any other database)."""
    generated = database.generated
    if generated is None or getattr(generated, "path", None) != database.path or database.rows is not None:
        return None
    key = _rules_key(dataclasses.replace(rules, predicted_dialect=None), "")
    return database.path.parent / "gold" / f"{database.path.stem}-{key[:40]}.json"


def _verdict_path(databases: Sequence[OtherDatabase], key: str) -> Path | None:
    """Where a pass on these generated neighbours is remembered (None: not generated, or not one folder)."""
    folders = {database.path.parent for database in databases if database.generated is not None}
    if len(folders) != 1 or any(database.generated is None for database in databases):
        return None
    return folders.pop() / "verdicts" / f"{key[:40]}.json"


def _recall_pass(path: Path | None, total: int) -> NeighbourCheck | None:
    if path is None:
        return None
    try:
        checked = int(json.loads(path.read_text())["checked"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return NeighbourCheck(checked, 0, None, total, 0)


def _remember_pass(path: Path | None, checked: int) -> None:
    """Written under a temporary name and renamed (xdist workers may write the same key); a cache
    that cannot be written is only a slower rerun."""
    if path is None:
        return
    try:
        path.parent.mkdir(exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        staging.write_text(json.dumps({"checked": checked}))
        os.replace(staging, path)
    except OSError:
        pass


def not_the_prediction_s_fault(database: OtherDatabase, own_gold: GoldOutcome, gold: GoldOutcome, judgement: Judgement,
                               rules: JudgingRules, limits: Limits, open_engine: Callable[[OtherDatabase], Engine],
                               keys: frozenset[tuple[str, str]] | None = None,
                               trouble: list[BaseException] | None = None) -> str | None:
    """Why a difference on a plausible neighbour makes the prediction fragile rather than wrong
    (`unseen_by_gold`, `fragile_gold.why_gold_is_fragile`), or None: it is a failure. `keys`: the
    neighbour's key columns when the caller has them (a shrink asks for every attempt of one schema).
    `trouble`: where an error met is noted (see `check`)."""
    why = unseen_by_gold(own_gold, gold, judgement, rules)
    if why is not None or database.generated is None:
        return why
    try:
        if keys is None:
            keys = neighbour_keys(database.path, database.kind.value, database.generated.invariants)
        engine = open_engine(database)
    except (EngineError, OSError, ValueError) as e:
        _note(trouble, e)
        return None
    try:
        predicted = judgement.result.rows if judgement.result is not None else []
        return why_gold_is_fragile(rules.golds, rules.dialect, engine, limits, keys, _differing_values(judgement),
                                   predicted, rules.compare)
    finally:
        engine.close()


def unseen_by_gold(own: GoldOutcome, gold: GoldOutcome, judgement: Judgement, rules: JudgingRules) -> str | None:
    """Why a difference on a plausible neighbour says nothing about the prediction, or None: the
    gold's result there holds rows of a kind it never returned on the case's own database, where
    its author checked it (rows holding NULL, rows holding 0, copies of a row), the prediction
    lacks some of them, and without those the two results are equal. The gold is evidence only
    for what its author could see; but what the *prediction* adds is its own: a row holding NULL
    or 0 that the gold's result there lacks (`>= 0` for `> 0`, `OR bonus IS NULL`), or more copies
    of a row than the gold has, is never excused."""
    index = judgement.gold_index
    if judgement.result is None or index >= len(own.results) or index >= len(gold.results):
        return None
    seen = own.results[index].rows  # may be empty: its author then saw no NULL and no repeat either
    here, predicted = list(gold.results[index].rows), list(judgement.result.rows)
    options = CompareOptions.from_mapping(rules.compare)
    kinds = [(what, holds) for what, holds in (("NULL", _holds_null), ("zero", _holds_zero))
             if not any(holds(row) for row in seen)]
    repeats_unseen = len(set(map(_hashable_row, seen))) == len(seen)
    key = row_values_key(options)
    here_keys, mine = [key(row) for row in here], [key(row) for row in predicted]
    lacking = Counter(here_keys) - Counter(mine)  # the gold's rows there that the prediction lacks
    if not lacking:
        return None  # the prediction has every row of the gold (and more, or in another order)
    present, example = set(mine), dict(zip(reversed(here_keys), reversed(here)))
    unseen: dict[str, None] = {}
    for row_key in lacking:
        row = example[row_key]
        what = next((what for what, holds in kinds if holds(row)), None)
        if what is None and repeats_unseen and row_key in present:
            what = "repeated rows"  # the prediction has the row, with fewer copies than the gold
        if what is None:
            return None
        unseen.setdefault(what if what == "repeated rows" else f"rows holding {what}")
    kept, at, left = [], 0, Counter(lacking)
    for row, row_key in zip(here, here_keys):  # in order: a row the prediction shows next is kept
        if at < len(mine) and row_key == mine[at]:
            kept.append(row)
            at += 1
        elif left[row_key] > 0:
            left[row_key] -= 1
        else:
            kept.append(row)
    ordered = gold.order_matters and "repeated rows" not in unseen
    same = compare_results(kept, predicted, ordered, options, gold_columns=len(gold.results[index].columns),
                           pred_columns=len(judgement.result.columns), explain=False)
    if not same.match:
        return None
    return f"the results differ only in {' and '.join(unseen)}, which the gold never returns on the case's database"


def _holds_null(row: Sequence[Any]) -> bool:
    return any(v is None for v in row)


def _holds_zero(row: Sequence[Any]) -> bool:
    return any(v == 0 and not isinstance(v, bool) for v in row)


def _hashable_row(row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(v if isinstance(v, (str, int, float, bytes, type(None))) else repr(v) for v in row)


def _note(trouble: list[BaseException] | None, error: BaseException) -> None:
    if trouble is not None:
        trouble.append(error)


def _judge_on(predicted: str, database: OtherDatabase, rules: JudgingRules, limits: Limits,
              open_engine: Callable[[OtherDatabase], Engine],
              trouble: list[BaseException] | None = None) -> tuple[GoldOutcome, Judgement] | None:
    """(the gold, the prediction's judgement) on one database; None when the gold cannot run there.
    `trouble`: where an error met is noted (and a prediction's time-out, as one)."""
    try:
        engine = open_engine(database)
    except EngineError as e:
        _note(trouble, e)
        return None
    try:
        remembered = _gold_path(database, rules)
        gold = gold_memo.recall(remembered)
        if gold is None:
            gold = run_gold(rules.golds, engine, limits, dialect=rules.dialect, order=rules.order,
                            spider_compat=rules.spider_compat, compare=rules.compare)
            gold_memo.remember(remembered, gold)
        judgement = judge(predicted, gold, engine, limits, dialect=rules.predicted_dialect or rules.dialect,
                          compare=rules.compare, spider_compat=rules.spider_compat)
    except (GoldError, EngineError) as e:
        _note(trouble, e)
        return None
    finally:
        engine.close()
    if judgement.verdict is Verdict.PRED_TIMEOUT:
        _note(trouble, QueryTimeout(judgement.reason or "timed out"))
    if not gold.warnings or judgement.verdict is Verdict.PASS:
        return gold, judgement
    # The gold's own answer is not determined there (its LIMIT cuts a tie the neighbour's duplicated
    # values made, or it has a LIMIT without ORDER BY). Counted only when the prediction is wrong
    # under any reading of the gold: it misses a row the gold determines, or shows a row that is
    # neither the gold's nor tied with it (`= (SELECT max(x))` for `ORDER BY x DESC LIMIT 1` passes).
    if not all(gold.ties_of(i) is not None and gold.ties_of(i).cut for i in range(len(gold.results))):
        return None
    if judgement.result is not None and _right_under_some_tie(gold, judgement.result.rows, rules):
        return None
    return gold, judgement


def _right_under_some_tie(gold: GoldOutcome, rows: list[tuple[Any, ...]], rules: JudgingRules) -> bool:
    """The prediction holds every row a gold determines and nothing outside that gold's rows and
    the rows tied with them (each tested up to a column permutation, as multisets)."""
    subset = CompareOptions.from_mapping({**rules.compare, "mode": "subset"})
    for index, result in enumerate(gold.results):
        groups = gold.ties_of(index)
        assert groups is not None
        determined, allowed, at = [], list(result.rows), 0
        for size, spare in zip(groups.sizes, groups.spare):
            if not spare:
                determined += result.rows[at:at + size]
            allowed += spare
            at += size
        width, mine = len(result.columns), len(rows[0]) if rows else len(result.columns)
        covers = compare_results(determined, rows, False, subset, gold_columns=width, pred_columns=mine)
        within = compare_results(rows, allowed, False, subset, gold_columns=mine, pred_columns=width)
        if covers.match and within.match:
            return True
    return False


def counterexample(failure: NeighbourFailure, predicted: str, rules: JudgingRules, limits: Limits,
                   open_engine: Callable[[OtherDatabase], Engine], shrink: Callable[..., Any] | None,
                   own_gold: GoldOutcome | None = None, *, trouble: list[BaseException] | None = None) -> NeighbourFailure:
    """The failing database cut down to the rows that still tell gold and prediction apart (for a
    plausible failure: apart in a way the gold's own database could show), with both results on
    the cut-down database. Without a shrinker, the tables the queries read. `trouble`: where an
    error met is noted (see `check`)."""
    if shrink is None:
        return failure
    tables = [*dict.fromkeys(name for sql in (*rules.golds, predicted) for name in tables_read(sql, rules.dialect))]
    last: list[tuple[tuple[GoldOutcome, Judgement], str | None]] = []  # (both results, why excused) of each kept attempt
    real = failure.breaks is None and own_gold is not None
    # a difference a plausible neighbour shows only where the gold is not to be trusted: the rows
    # kept must still show that, and the reason given is the one they show
    excused = failure.breaks is not None and failure.database.breaks is None and own_gold is not None
    keys: list[frozenset[tuple[str, str]]] = []  # the neighbour's key columns, read once: every attempt has its schema

    def differs(path: Path, rows: RowIds | None = None) -> bool:
        attempt = OtherDatabase(path, failure.database.kind, failure.database.label, rows=rows)
        outcome = _judge_on(predicted, attempt, rules, limits, open_engine, trouble)
        if outcome is None or outcome[1].verdict is Verdict.PASS:
            return False
        shrunk = dataclasses.replace(attempt, generated=failure.database.generated)
        if (real or excused) and shrunk.generated is not None and not keys:
            keys.append(neighbour_keys(failure.database.path, failure.database.kind.value, shrunk.generated.invariants))
        fault = None
        if real or excused:
            fault = not_the_prediction_s_fault(shrunk, own_gold, *outcome, rules, limits, open_engine,  # type: ignore[arg-type]
                                               keys[0] if keys else None, trouble)
            if (fault is not None) if real else (fault is None):
                return False
        last.append((outcome, fault))
        return True

    memo = hashlib.sha256(f"{_rules_key(rules, predicted)}/{real}{'/excused' if excused else ''}".encode()).hexdigest()
    try:
        on_rows = None
        if failure.database.kind is EngineKind.DUCKDB:
            def on_rows(rows: RowIds) -> bool:
                return differs(failure.database.path, rows)
        found = shrink(_as_neighbour(failure.database), differs, tables=tables or None, budget=SHRINK_BUDGET,
                       hints=_differing_values(failure.judgement), memo=memo, differs_on_rows=on_rows)
    except (OSError, EngineError, SqlglotError, ValueError) as e:
        _note(trouble, e if isinstance(e, (OSError, EngineError)) else OSError(str(e)))  # a shrink cut short: not remembered
        return failure
    (gold, judgement), why = last[-1] if last else ((failure.gold, failure.judgement), None)
    return NeighbourFailure(failure.database, judgement, gold, tuple(found.tables), shrunk=bool(last),
                            breaks=why if excused and why is not None else failure.breaks)


def _differing_values(judgement: Judgement) -> tuple[Any, ...]:
    """The values of the result rows that differ (missing from the prediction, or unexpected)."""
    comparison = judgement.comparison
    if comparison is None:
        return ()
    return tuple(v for row in (*comparison.missing, *comparison.extra) for v in row)


def _as_neighbour(database: OtherDatabase) -> Any:
    from pytest_nl2sql.neighbours import Neighbour

    if database.generated is not None:
        return dataclasses.replace(database.generated, path=database.path)
    return Neighbour(path=database.path, index=0, note=database.label)


def same_query(predicted: str, golds: Sequence[str], dialect: str | None) -> bool:
    """The prediction is one of the golds token for token (keywords and names in any case, any
    spacing, a trailing semicolon): it gives the gold's result on every database, so running it on
    neighbours can only cost time. In Spider, half the right predictions are the gold's own text."""
    mine = _tokens(predicted, dialect)
    return mine is not None and any(mine == _tokens(gold, dialect) for gold in golds)


@functools.lru_cache(maxsize=2048)  # a pure function of its text: a gold is compared with every prediction for it
def _tokens(sql: str, dialect: str | None) -> tuple[tuple[str, str], ...] | None:
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except (SqlglotError, RecursionError):
        return None
    while tokens and tokens[-1].token_type is TokenType.SEMICOLON:
        tokens.pop()
    return tuple((t.token_type.name, t.text if t.token_type in _EXACT_TOKENS else t.text.lower()) for t in tokens)


_EXACT_TOKENS = frozenset({TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.BIT_STRING, TokenType.HEX_STRING,
                           TokenType.BYTE_STRING, TokenType.RAW_STRING})


@functools.lru_cache(maxsize=2048)  # a pure function of its text: a gold is read for each of its failures
def tables_read(sql: str, dialect: str | None) -> tuple[str, ...]:
    """The tables a query reads (CTE names excluded), in first-seen order."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except (SqlglotError, RecursionError):
        return ()
    if tree is None:
        return ()
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return tuple(dict.fromkeys(t.name for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes))


