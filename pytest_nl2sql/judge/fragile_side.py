"""Which side is fragile: when a prediction differs from the gold only on a stress neighbour (one
invariant of the case's database broken there), is it the gold's result or the prediction's that
shows what breaking it causes? A gold that groups, intersects or excludes by a name where the
prediction uses the key merges two entities once two share the name; a prediction with `NOT IN`
over a column that may hold NULL loses every row once one does. Strict accuracy should hold the
second against the prediction, never the first.

Decided from the results, not from the queries' text: the broken invariant is restored in the
stress neighbour (then in its shrunk counterexample, the rows shown), the ways a database that
keeps it could hold the same things, and both queries run again there. Where they then agree
(else the difference is not the invariant's doing), a result shows what breaking it caused when
a row only it showed goes (a merged group, a NULL sorted first, a repeated row), or a row only
the other showed comes back (the rows a `NOT IN` lost). Values a restoration invents are read
back as what they stand for (a renamed namesake as its name, a fresh value as the NULL it
replaces), so only a changed meaning counts.

- two rows share a name (unique), or several have the gold's literal (once): the namesakes after
  the first, then those before the last, renamed. Which keeps the name is the database's choice,
  so either telling counts (a query that picks one namesake shows it under one of them); on the
  whole neighbour the namesakes are near twins (the copy got the original's children), so the
  shrunk rows are read too.
- a column holds a NULL: read in turn as fresh distinct values (an unknown value), then as rows
  that are not there; the first reading that tells decides. A query that groups by the key or
  treats a NULL as unknown shows nothing; one that merges NULLs, sorts one first or counts it as a
  value, or whose `NOT IN` it empties, does.
- one value in two spellings: every spelling made the source's (its first in the neighbour).
- a reference to no row, a parent without a child, a value outside a category: those rows
  deleted. A parent without a child that a result showed with a zero count was asked for (a LEFT
  JOIN counted it): the other query, which dropped it, is the one relying on every parent having
  a child.

`gold` when only the gold's result shows it, `prediction` when only the prediction's does, `both`
when both do or neither does (it cannot be told). A gold that returns nothing on the case's own
database is not blamed for a repeated name or a parent without child (the question may ask for
just that). A difference on a plausible neighbour excused because the gold's result there holds
what its author never saw (`on_neighbours.unseen_by_gold`, `fragile_gold.why_gold_is_fragile`:
NULL or zero rows, repeated rows, a tie the gold's LIMIT cuts, a set operation merging names) is
the gold's by construction. Over several fragile databases, a side one tells alone wins over
databases where both results show it; different sides give `both`.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_nl2sql.engines.base import Engine, EngineError, Limits
from pytest_nl2sql.judge.compare import CompareOptions, row_values_key
from pytest_nl2sql.judge.execute import GoldError, GoldOutcome, judge, run_gold
from pytest_nl2sql.vocab import FragileSide, Verdict

if TYPE_CHECKING:
    from pytest_nl2sql.judge.on_neighbours import JudgingRules, NeighbourFailure, OtherDatabase

Rows = dict[str, list[tuple[Any, ...]]]
FRESH_START = 1000  # fresh numbers start this far past a column's largest value (never a count of a few rows)
CHOICES = frozenset({"unique", "once"})  # invariants whose restorations are choices (which namesake keeps the name)
ASKED_FOR = frozenset({"unique", "once", "participation"})  # what a question may ask for (repeats, parents without child)


@dataclass(frozen=True)
class Restoration:
    """A database's rows with the broken invariant restored, and how to read the values it
    invented back (`canon`: value -> the value it stands for, applied to both results)."""

    rows: Rows
    canon: Mapping[Any, Any]
    choice: bool = False  # one of several equally good choices (which namesake keeps the name): any tells; else readings in turn
    zeros_asked: bool = False  # parents without child deleted: one shown with a zero count was asked for


def fragile_side(failures: Sequence[NeighbourFailure], predicted: str, rules: JudgingRules, limits: Limits,
                 open_engine: Callable[[OtherDatabase], Engine], own_gold: GoldOutcome | None = None, *,
                 trouble: list[BaseException] | None = None) -> FragileSide:
    """The side of a fragile pass, from its fragile databases (the first: the one shown, maybe
    shrunk; the others whole). A side that a database tells alone wins over databases where both
    results show what they break (both read the broken column: a literal's namesakes change both);
    `both` when databases tell different sides alone, or none tells one side alone. `trouble`:
    where an error met is noted (a side decided past a time-out is not remembered:
    `judge/failure_memo.py`)."""
    told = [_told(f, predicted, rules, limits, open_engine, shown=i == 0, trouble=trouble) for i, f in enumerate(failures)]
    if own_gold is not None and not _answers_something(own_gold, failures):
        # the gold returns nothing on the case's database: the question may ask for just what a stress
        # neighbour makes (conductors with two orchestras, continents without a country), so the gold
        # changing there tells nothing against it
        told = [None if side is FragileSide.GOLD and _kind(f) in ASKED_FOR else side for side, f in zip(told, failures)]
    alone = {side for side in told if side in (FragileSide.GOLD, FragileSide.PREDICTION)}
    return alone.pop() if len(alone) == 1 else FragileSide.BOTH


def _kind(failure: NeighbourFailure) -> str | None:
    broken = getattr(failure.database.generated, "breaks", None)
    return broken.kind.value if broken is not None else None


def _answers_something(own_gold: GoldOutcome, failures: Sequence[NeighbourFailure]) -> bool:
    index = failures[0].judgement.gold_index if failures else 0
    return index < len(own_gold.results) and bool(own_gold.results[index].rows)


def _told(failure: NeighbourFailure, predicted: str, rules: JudgingRules, limits: Limits,
          open_engine: Callable[[OtherDatabase], Engine], *, shown: bool,
          trouble: list[BaseException] | None = None) -> FragileSide | None:
    try:
        return side_on(failure, predicted, rules, limits, open_engine, shown=shown, trouble=trouble)
    except Exception as e:  # noqa: BLE001 - a side that cannot be told is `both`; it never costs the case its verdict
        if trouble is not None:
            trouble.append(e if isinstance(e, OSError) else OSError(repr(e)))  # not known to be the data's doing
        return None


def side_on(failure: NeighbourFailure, predicted: str, rules: JudgingRules, limits: Limits,
            open_engine: Callable[[OtherDatabase], Engine], *, shown: bool = False,
            trouble: list[BaseException] | None = None) -> FragileSide | None:
    """The fragile side on one database (None: it cannot be told there). `shown`: its
    counterexample rows, when it has them, are what the reader sees: decided there first, and on
    the whole neighbour only when they cannot tell."""
    database = failure.database
    broken = getattr(database.generated, "breaks", None)
    if database.generated is None:
        return None
    if broken is None:  # a plausible neighbour, the difference excused by what the gold shows there
        return FragileSide.GOLD
    schema, whole = _read(database.path, database.kind.value)
    attempts = [whole]  # the stress neighbour itself; then its shrunk rows (a few, all shown)
    if shown and failure.counterexample:
        attempts.append(_counterexample_rows(schema, failure.counterexample))
    told: list[tuple[bool, bool]] = []
    for rows in attempts:
        flags = _flags_in(rows, whole, schema, broken, failure, predicted, rules, limits, open_engine, trouble)
        if flags is None or not any(flags):
            continue
        told.append(flags)
        if broken.kind.value not in CHOICES:
            break  # a reading: the whole neighbour's context first, the shrunk rows only when it cannot tell
        # which namesake keeps the name: the whole neighbour's namesakes are near twins (its copy has the
        # original's children), so a query that picks one shows it only where they differ, as the shrunk rows may
    gold, prediction = any(g for g, _ in told), any(p for _, p in told)
    if gold and prediction:
        return FragileSide.BOTH
    if gold or prediction:
        return FragileSide.GOLD if gold else FragileSide.PREDICTION
    return None


def _flags_in(rows: Rows, whole: Rows, schema: Any, broken: Any, failure: NeighbourFailure, predicted: str,
              rules: JudgingRules, limits: Limits, open_engine: Callable[[OtherDatabase], Engine],
              trouble: list[BaseException] | None = None) -> tuple[bool, bool] | None:
    """(the gold shows it, the prediction shows it) on `rows`: after a restoration of the
    invariant where gold and prediction then agree, a result shows what breaking it caused when a
    row only it showed goes, or a row only the other showed comes (it had lost it). None: no
    restoration applies to these rows."""
    restorations = restore(broken, schema, rows, whole, rules.golds, rules.dialect)
    if not restorations:
        return None
    flags: list[tuple[bool, bool]] = []
    with tempfile.TemporaryDirectory(prefix="nl2sql-side-") as folder:
        run = _Runner(Path(folder), schema, failure, predicted, rules, limits, open_engine, trouble)
        before = run(rows)
        if before is None or before[1] is None:
            return None
        for restoration in restorations:
            after = run(restoration.rows)
            if after is None or not after[2] or after[1] is None:
                continue  # they still differ there: not the broken invariant's doing
            flags.append(_shows(before[0], before[1], after[0], after[1], restoration, run.key))
            if not restoration.choice and any(flags[-1]):
                break  # readings in turn: the first that tells
    return any(g for g, _ in flags), any(p for _, p in flags)


def _shows(gold: Sequence[tuple[Any, ...]], mine: Sequence[tuple[Any, ...]], gold_after: Sequence[tuple[Any, ...]],
           mine_after: Sequence[tuple[Any, ...]], restoration: Restoration, key: Callable[..., Any]) -> tuple[bool, bool]:
    """(the gold shows it, the prediction shows it) for one restoration; rows compared by their
    values read back (in any column order), as multisets."""
    examples: dict[Any, tuple[Any, ...]] = {}

    def counted(rows: Sequence[tuple[Any, ...]]) -> Counter[Any]:
        found: Counter[Any] = Counter()
        for row in rows:
            read = _read_back(row, restoration.canon)
            examples.setdefault(key(read), read)
            found[key(read)] += 1
        return found

    before, after = (counted(gold), counted(mine)), (counted(gold_after), counted(mine_after))
    only = (before[0] - before[1], before[1] - before[0])  # the rows each shows that the other does not
    gone = [only[side] - after[side] for side in (0, 1)]  # a row only it showed, gone once the invariant holds
    came = [(after[side] - before[side]) & only[1 - side] for side in (0, 1)]  # a row it lacked, back once it holds
    shown = [bool(gone[side] or came[side]) for side in (0, 1)]
    if restoration.zeros_asked and shown.count(True) == 1:
        side = shown.index(True)
        if not came[side] and any(_holds_zero(examples[k]) for k in gone[side]):
            # a parent shown with a zero count was asked for (a LEFT JOIN counted): the other query,
            # which drops a parent without child, is the one relying on every parent having one
            return (True, False) if side == 1 else (False, True)
    return shown[0], shown[1]


def _holds_zero(row: Sequence[Any]) -> bool:
    return any(v == 0 and not isinstance(v, bool) for v in row)


class _Runner:
    """Writes rows as a database of the neighbour's schema and runs the gold and the prediction on
    it, under the case's rules and limits (the prediction through the engine's guards, as
    anywhere)."""

    def __init__(self, folder: Path, schema: Any, failure: NeighbourFailure, predicted: str, rules: JudgingRules,
                 limits: Limits, open_engine: Callable[[OtherDatabase], Engine],
                 trouble: list[BaseException] | None = None) -> None:
        self.folder, self.schema, self.failure = folder, schema, failure
        self.trouble = trouble  # errors met, noted (a time-out's side is not remembered)
        self.predicted, self.rules, self.limits, self.open_engine = predicted, rules, limits, open_engine
        self.index = failure.judgement.gold_index
        self.written = 0
        self.key = row_values_key(CompareOptions.from_mapping({**rules.compare, "mode": "exec"}))  # any column order

    def __call__(self, rows: Rows) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]] | None, bool] | None:
        """(the gold's rows, the prediction's rows or None where it failed, whether the prediction
        matches the gold) on `rows`; None when they cannot be written as they are or the gold
        cannot run on them."""
        from pytest_nl2sql.judge.on_neighbours import OtherDatabase, _right_under_some_tie
        from pytest_nl2sql.neighbours.generate import create_duckdb, create_sqlite
        from pytest_nl2sql.neighbours.interrupts import ctrl_c_stops

        self.written += 1
        database = self.failure.database
        path = self.folder / f"restored-{self.written}{database.path.suffix}"
        create = create_sqlite if self.schema.kind == "sqlite" else create_duckdb
        every = {table.name: rows.get(table.name, []) for table in self.schema.tables}  # a table not read: empty
        try:
            with ctrl_c_stops():
                connection, kept = create(self.schema, every, path)
                connection.close()
        except Exception as e:  # noqa: BLE001 (sqlite3's or DuckDB's refusal: this database tells nothing; Ctrl-C is no Exception)
            if isinstance(e, OSError):
                self._note(e)
            return None
        if kept != every:  # a row the database refused: not the restoration meant
            return None
        try:
            engine = self.open_engine(OtherDatabase(path, database.kind, database.label))
        except EngineError as e:
            self._note(e)
            return None
        try:
            rules = self.rules
            gold = run_gold(rules.golds, engine, self.limits, dialect=rules.dialect, order=rules.order,
                            spider_compat=rules.spider_compat, compare=rules.compare)
            judgement = judge(self.predicted, gold, engine, self.limits, dialect=rules.predicted_dialect or rules.dialect,
                              compare=rules.compare, spider_compat=rules.spider_compat)
        except (GoldError, EngineError) as e:
            self._note(e)
            return None
        finally:
            engine.close()
        if judgement.verdict is Verdict.PRED_TIMEOUT:
            self._note(TimeoutError(judgement.reason))
        if self.index >= len(gold.results):
            return None
        mine = [tuple(r) for r in judgement.result.rows] if judgement.result is not None else None
        cut = all(gold.ties_of(i) is not None and gold.ties_of(i).cut for i in range(len(gold.results)))  # type: ignore[union-attr]
        agree = judgement.verdict is Verdict.PASS or (  # a LIMIT cutting a tie: right under one reading of the gold
            bool(gold.warnings) and cut and mine is not None and _right_under_some_tie(gold, list(mine), rules))
        return [tuple(r) for r in gold.results[self.index].rows], mine, agree


    def _note(self, error: BaseException) -> None:
        if self.trouble is not None:
            self.trouble.append(error)


def _read_back(row: Sequence[Any], canon: Mapping[Any, Any]) -> tuple[Any, ...]:
    return tuple(canon.get(v, v) if _hashable(v) else v for v in row)


def _hashable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bytes)) and not isinstance(value, bool)


def restore(broken: Any, schema: Any, rows: Rows, whole: Rows, golds: Sequence[str], dialect: str | None) -> list[Restoration]:
    """The ways `rows` could hold the broken invariant again (see the module's docstring); empty
    when the rows do not break it (the counterexample kept none of the rows that do) or it is of a
    kind not restored here. `whole`: the neighbour's rows, for the source's spellings."""
    from pytest_nl2sql.neighbours.invariants import InvariantKind
    from pytest_nl2sql.neighbours.plausible import offending

    table = schema.table(broken.table)
    if table is None or table.column(broken.column) is None or not rows.get(table.name):
        return []
    kind, at = broken.kind, table.position(broken.column)
    mine = rows[table.name]
    if kind in (InvariantKind.UNIQUE, InvariantKind.ONCE):
        found = []
        for reverse in (False, True):
            order = list(reversed(mine)) if reverse else mine
            bad = {len(mine) - 1 - i if reverse else i for i in offending({table.name: order}, schema, broken, {})}
            if bad:
                taken = {row[at] for row in mine}
                renamed, canon = list(mine), {}
                for i in sorted(bad):
                    fresh = _fresh(table.columns[at], taken, mine[i][at], len(canon), schema.kind)
                    if fresh is None:
                        return []
                    taken.add(fresh)
                    canon[fresh] = mine[i][at]
                    renamed[i] = _with(mine[i], at, fresh)
                found.append(Restoration({**rows, table.name: renamed}, canon, choice=True))
        return found
    if kind is InvariantKind.NOT_NULL:
        nulls = [i for i, row in enumerate(mine) if row[at] is None]
        if not nulls:
            return []
        taken = {row[at] for row in whole.get(table.name, mine)} | {row[at] for row in mine}
        filled, canon = list(mine), {}
        for i in nulls:
            fresh = _fresh(table.columns[at], taken, None, len(canon), schema.kind)
            if fresh is None:
                break
            taken.add(fresh)
            canon[fresh] = None
            filled[i] = _with(mine[i], at, fresh)
        kept = Restoration({**rows, table.name: [row for row in mine if row[at] is not None]}, {})
        return [Restoration({**rows, table.name: filled}, canon), kept] if len(canon) == len(nulls) else [kept]
    if kind is InvariantKind.SPELLING:
        source: dict[Any, Any] = {}  # a folded value -> its first spelling in the neighbour (the copy comes after)
        for row in whole.get(table.name, mine):
            if isinstance(row[at], str):
                source.setdefault(_fold(row[at]), row[at])
        canon = {row[at]: source[_fold(row[at])] for row in mine
                 if isinstance(row[at], str) and source.get(_fold(row[at]), row[at]) != row[at]}
        if not canon:
            return []
        return [Restoration({**rows, table.name: [_with(row, at, canon.get(row[at], row[at])) if _hashable(row[at]) else row
                                                  for row in mine]}, canon)]
    if kind in (InvariantKind.INCLUSION, InvariantKind.PARTICIPATION):
        other = schema.table(broken.other_table)
        if other is None or other.name not in rows:
            return []  # the queries do not read the other table: the counterexample has none of its rows to tell by
        bad = offending(rows, schema, broken, {})
    elif kind is InvariantKind.CATEGORY:
        bad = offending(rows, schema, broken, {(table.name, broken.column): _literals(golds, dialect)})
    else:
        return []
    if not bad:
        return []
    return [Restoration({**rows, table.name: [row for i, row in enumerate(mine) if i not in bad]}, {},
                        zeros_asked=kind is InvariantKind.PARTICIPATION)]


def _fresh(column: Any, taken: set[Any], like: Any, counter: int, kind: str) -> Any:
    """A value no row holds: a name's namesake as the name with a number, else the column's own
    kind of fresh value, far past its values (on SQLite, any column takes a text)."""
    from pytest_nl2sql.neighbours.schema import DATE, INT, OTHER, REAL, TEXT
    from pytest_nl2sql.neighbours.values import fresh_value

    numeric = column.value_class in (INT, REAL, DATE)
    if isinstance(like, str) or not numeric and (kind == "sqlite" or column.value_class in (TEXT, OTHER)):
        stem = like if isinstance(like, str) else "nl2sql fresh"
        number = counter + 2
        while f"{stem} ({number})" in taken:
            number += 1
        return f"{stem} ({number})"
    value = fresh_value(column, {v for v in taken if v is not None}, FRESH_START + counter)
    return value if value not in taken else None


def _with(row: tuple[Any, ...], at: int, value: Any) -> tuple[Any, ...]:
    return row[:at] + (value,) + row[at + 1:]


def _fold(value: str) -> str:
    from pytest_nl2sql.neighbours.plausible import fold

    return fold(value)


def _literals(golds: Sequence[str], dialect: str | None) -> list[Any]:
    """The gold's string literals (a category keeps them: they are not outside it)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    found: list[Any] = []
    for gold in golds:
        try:
            tree = sqlglot.parse_one(gold, read=dialect)
        except (SqlglotError, RecursionError, ValueError):
            continue
        found += [literal.this for literal in tree.find_all(exp.Literal) if literal.is_string]
    return found


def _read(path: Path, kind: str) -> tuple[Any, Rows]:
    """A neighbour's schema and every row of it (a neighbour is tens of rows a table)."""
    from pytest_nl2sql.neighbours.interrupts import ctrl_c_stops
    from pytest_nl2sql.neighbours.schema import open_source, quote

    with ctrl_c_stops():
        reader = open_source(path, kind)
        try:
            schema = reader.schema()
            rows: Rows = {}
            for table in schema.tables:
                names = ", ".join(quote(c.name) for c in table.columns)
                order = " ORDER BY rowid" if table.has_rowid else ""
                rows[table.name] = [tuple(r) for r in reader.connection.execute(
                    f"SELECT {names} FROM {quote(table.name)}{order}").fetchall()]
        finally:
            reader.close()
    return schema, rows


def _counterexample_rows(schema: Any, counterexample: Sequence[tuple[str, Sequence[str], Sequence[Sequence[Any]]]]) -> Rows:
    """The shrunk database the reader sees: its rows of the tables the queries read (the others
    are left out here, and empty when it is written)."""
    rows: Rows = {}
    for name, _columns, table_rows in counterexample:
        table = schema.table(name)
        if table is not None:
            rows[table.name] = [tuple(r) for r in table_rows]
    return rows
