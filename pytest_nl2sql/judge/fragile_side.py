"""Which side is fragile: when a prediction differs from the gold only on a stress neighbour (one
invariant of the case's database broken there), is it the gold's result or the prediction's that
shows what breaking it causes? A gold that groups, intersects or excludes by a name where the
prediction uses the key merges two entities once two share the name; a prediction with `NOT IN`
over a column that may hold NULL loses every row once one does. Strict accuracy should hold the
second against the prediction, never the first.

Decided from the results, not from the queries' text: the broken invariant is restored in the
database the two queries differ on (the shrunk counterexample, else the whole neighbour), in the
ways a database that keeps it could hold the same entities, and each query is run again there. A
result that changes under every such restoration shows what the broken invariant caused; one
that stays the same under some restoration does not. Values a restoration invents are read back
as the ones they stand for (a renamed namesake as its name, a fresh value as the NULL it
replaces), so a changed result is a changed meaning, not a changed spelling.

- two rows share a name (unique), or several rows have the gold's literal (once): the namesakes
  after the first (then: before the last) renamed. A query by key stays the same; one that
  groups, intersects or joins by the name changes (its merged group splits, its repeated rows go).
- a column holds a NULL: the NULLs replaced by fresh distinct values, and the rows holding them
  deleted. A query that treats a NULL as unknown (groups by the key, or leaves the row out)
  stays the same under one of them; one that groups, merges or sorts NULLs as a value, or whose
  `NOT IN` a NULL empties, changes under both.
- one value in two spellings: every spelling made the source's. A query that reads the value
  spelling-insensitively, or by the key, stays the same; one that groups or compares by spelling
  changes.
- a reference to no row, a parent without a child, a value outside a category: those rows
  deleted. A query that never shows them stays the same.

`gold` when only the gold's result changes, `prediction` when only the prediction's does, `both`
when both do or neither does (it cannot be told). A difference on a plausible neighbour excused
because the gold's result there holds what its author never saw (`on_neighbours.unseen_by_gold`,
`fragile_gold.why_gold_is_fragile`: NULL or zero rows, repeated rows, a tie the gold's LIMIT
cuts, a set operation merging names) is the gold's by construction. Over several fragile
databases: the sides told, `both` when they disagree.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_nl2sql.engines.base import Engine, EngineError, Limits
from pytest_nl2sql.judge.compare import CompareOptions, compare_results
from pytest_nl2sql.judge.execute import GoldError, judge, run_gold
from pytest_nl2sql.vocab import FragileSide, Verdict

if TYPE_CHECKING:
    from pytest_nl2sql.judge.on_neighbours import JudgingRules, NeighbourFailure, OtherDatabase

Rows = dict[str, list[tuple[Any, ...]]]
FRESH_START = 1000  # fresh numbers start this far past a column's largest value (never a count of a few rows)


@dataclass(frozen=True)
class Restoration:
    """A database's rows with the broken invariant restored, and how to read the values it
    invented back (`canon`: value -> the value it stands for, applied to both results)."""

    rows: Rows
    canon: Mapping[Any, Any]
    choice: bool = False  # one of several equally good choices (which namesake keeps the name), not a reading


def fragile_side(failures: Sequence[NeighbourFailure], predicted: str, rules: JudgingRules, limits: Limits,
                 open_engine: Callable[[OtherDatabase], Engine]) -> FragileSide:
    """The side of a fragile pass, from its fragile databases (the first: the one shown, maybe
    shrunk; the others whole). A side that a database tells alone wins over databases where both
    results show what they break (both read the broken column: a literal's namesakes change both);
    `both` when databases tell different sides alone, or none tells one side alone."""
    told = [_told(f, predicted, rules, limits, open_engine, shown=i == 0) for i, f in enumerate(failures)]
    alone = {side for side in told if side in (FragileSide.GOLD, FragileSide.PREDICTION)}
    return alone.pop() if len(alone) == 1 else FragileSide.BOTH


def _told(failure: NeighbourFailure, predicted: str, rules: JudgingRules, limits: Limits,
          open_engine: Callable[[OtherDatabase], Engine], *, shown: bool) -> FragileSide | None:
    try:
        return side_on(failure, predicted, rules, limits, open_engine, shown=shown)
    except Exception:  # noqa: BLE001 - a side that cannot be told is `both`; it never costs the case its verdict
        return None


def side_on(failure: NeighbourFailure, predicted: str, rules: JudgingRules, limits: Limits,
            open_engine: Callable[[OtherDatabase], Engine], *, shown: bool = False) -> FragileSide | None:
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
    attempts: list[Rows] = []
    if shown and failure.counterexample:
        attempts.append(_counterexample_rows(schema, failure.counterexample))
    attempts.append(whole)
    for rows in attempts:
        side = _side_in(rows, whole, schema, broken, failure, predicted, rules, limits, open_engine)
        if side is not None:
            return side
    return None


def _side_in(rows: Rows, whole: Rows, schema: Any, broken: Any, failure: NeighbourFailure, predicted: str,
             rules: JudgingRules, limits: Limits, open_engine: Callable[[OtherDatabase], Engine]) -> FragileSide | None:
    restorations = restore(broken, schema, rows, whole, rules.golds, rules.dialect)
    if not restorations:
        return None
    with tempfile.TemporaryDirectory(prefix="nl2sql-side-") as folder:
        run = _Runner(Path(folder), schema, failure, predicted, rules, limits, open_engine)
        before = run(rows)
        if before is None:
            return None
        gold_changes, predicted_changes = [], []
        for restoration in restorations:
            after = run(restoration.rows)
            if after is None or not after[2]:
                continue  # they still differ there: the difference is not the broken invariant's doing
            gold_changes.append(run.changed(before[0], after[0], restoration.canon))
            predicted_changes.append(run.changed(before[1], after[1], restoration.canon))
    if not gold_changes:
        return None
    # which namesake keeps the name is the database's choice: a result that changes with it shows the
    # repeated name; a NULL is read as unknown either way: a result that some reading leaves alone does not show it
    shows = any if restorations[0].choice else all
    gold, prediction = shows(gold_changes), shows(predicted_changes)
    if gold and prediction:
        return FragileSide.BOTH
    if gold or prediction:
        return FragileSide.GOLD if gold else FragileSide.PREDICTION
    return None


class _Runner:
    """Writes rows as a database of the neighbour's schema and runs the gold and the prediction on
    it, under the case's rules and limits (the prediction through the engine's guards, as
    anywhere)."""

    def __init__(self, folder: Path, schema: Any, failure: NeighbourFailure, predicted: str, rules: JudgingRules,
                 limits: Limits, open_engine: Callable[[OtherDatabase], Engine]) -> None:
        self.folder, self.schema, self.failure = folder, schema, failure
        self.predicted, self.rules, self.limits, self.open_engine = predicted, rules, limits, open_engine
        self.index = failure.judgement.gold_index
        self.written = 0
        self.options = CompareOptions.from_mapping({**rules.compare, "mode": "exec"})
        self.ordered = failure.gold.order_matters

    def __call__(self, rows: Rows) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]] | None, bool] | None:
        """(the gold's rows, the prediction's rows or None where it failed, whether the prediction
        matches the gold) on `rows`; None when they cannot be written as they are or the gold
        cannot run on them."""
        from pytest_nl2sql.judge.on_neighbours import OtherDatabase
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
        except Exception:  # noqa: BLE001 (sqlite3's or DuckDB's refusal: this database tells nothing; Ctrl-C is no Exception)
            return None
        if kept != every:  # a row the database refused: not the restoration meant
            return None
        try:
            engine = self.open_engine(OtherDatabase(path, database.kind, database.label))
        except EngineError:
            return None
        try:
            rules = self.rules
            gold = run_gold(rules.golds, engine, self.limits, dialect=rules.dialect, order=rules.order,
                            spider_compat=rules.spider_compat, compare=rules.compare)
            judgement = judge(self.predicted, gold, engine, self.limits, dialect=rules.predicted_dialect or rules.dialect,
                              compare=rules.compare, spider_compat=rules.spider_compat)
        except (GoldError, EngineError):
            return None
        finally:
            engine.close()
        if self.index >= len(gold.results):
            return None
        mine = [tuple(r) for r in judgement.result.rows] if judgement.result is not None else None
        return [tuple(r) for r in gold.results[self.index].rows], mine, judgement.verdict is Verdict.PASS

    def changed(self, before: Sequence[tuple[Any, ...]] | None, after: Sequence[tuple[Any, ...]] | None,
                canon: Mapping[Any, Any]) -> bool:
        if before is None or after is None:
            return before is not after
        read = [_read_back(row, canon) for row in before], [_read_back(row, canon) for row in after]
        width = len(read[0][0]) if read[0] else len(read[1][0]) if read[1] else 0
        return not compare_results(*read, self.ordered, self.options, gold_columns=width, pred_columns=width,
                                   explain=False).match


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
    return [Restoration({**rows, table.name: [row for i, row in enumerate(mine) if i not in bad]}, {})]


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
