"""Counterexamples small enough to read: delta debugging over a neighbour's rows. Rows are removed
in chunks, then one by one, keeping each removal after which the two queries still differ; a
parent row goes with the children that point at it, so foreign keys stay valid. Every attempt is
a fresh file in a temporary folder, or, where the caller's engine can take them from the
neighbour itself (`differs_on_rows`: a DuckDB file, whose database costs milliseconds to write),
the rowids of the rows kept; the cached neighbour is only read.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pytest_nl2sql.engines.base import RowIds
from pytest_nl2sql.neighbours.generate import Repairer, Rows, create_database, parent_columns, stored_or_none
from pytest_nl2sql.neighbours.interrupts import ctrl_c_stops
from pytest_nl2sql.neighbours.invariants import InvariantKind, Observed
from pytest_nl2sql.neighbours.schema import Schema, open_source, quote


@dataclass(frozen=True)
class Counterexample:
    """The rows that matter: (table, columns, rows) for each table the queries read."""

    tables: tuple[tuple[str, tuple[str, ...], tuple[tuple[Any, ...], ...]], ...]


Item = tuple[str, int]  # (table, row number in the neighbour)
READABLE_ROWS = 10  # a counterexample this small is read at a glance; past it, pairs of rows are tried too
PAIR_BUDGET = 400  # runs spent removing pairs (only counterexamples still over READABLE_ROWS rows)


def _read(path: Path) -> tuple[Schema, Rows, dict[str, list[int]] | None]:
    """The neighbour's schema, its rows, and (a DuckDB file: `differs_on_rows`) their rowids."""
    kind = "duckdb" if path.suffix == ".duckdb" else "sqlite"
    reader = open_source(path, kind)
    try:
        schema = reader.schema()
        rows: Rows = {}
        rowids: dict[str, list[int]] | None = {} if kind == "duckdb" and all(t.has_rowid for t in schema.tables) else None
        for table in schema.tables:
            names = ", ".join(quote(c.name) for c in table.columns)
            if rowids is None:
                order = " ORDER BY rowid" if table.has_rowid else ""
                rows[table.name] = [tuple(r) for r in reader.connection.execute(f"SELECT {names} FROM {quote(table.name)}{order}").fetchall()]
                continue
            read = reader.connection.execute(f"SELECT rowid, {names} FROM {quote(table.name)} ORDER BY rowid").fetchall()
            rowids[table.name] = [r[0] for r in read]
            rows[table.name] = [tuple(r[1:]) for r in read]
        return schema, rows, rowids
    finally:
        reader.close()


class _Shrinker:
    """Delta debugging over rows. `schema` has the neighbour's kept invariants folded in, so that
    removing a parent removes the rows that point at it through an undeclared foreign key too;
    `participation`: (parent, key, child, column) pairs where every parent keeps a child, so that a
    parent whose last child goes goes with it. A shrunk plausible neighbour stays plausible."""

    def __init__(self, schema: Schema, rows: Rows, differs: Callable[[Path], bool], folder: Path, budget: int,
                 participation: Sequence[tuple[str, int, str, int]] = (),
                 differs_on_rows: Callable[[RowIds], bool] | None = None, rowids: dict[str, list[int]] | None = None) -> None:
        self.schema = schema
        self.rows = rows
        self.differs = differs
        self.differs_on_rows = differs_on_rows  # given only with `rowids` (`shrink_counterexample`)
        self.rowids = rowids or {}
        self.folder = folder
        self.budget = budget
        self.participation = participation
        self.attempts = 0
        self.refuted: set[frozenset[Item]] = set()  # sets of rows on which the queries were found not to differ
        self.suffix = "sqlite" if schema.kind == "sqlite" else "duckdb"
        self.links = list(self._links())
        self.pointed = [self._pointers(*entry) for entry in participation]

    def _as_parent(self, value: Any, column: Any) -> Any:
        """A reference's value as the parent's key column compares it: SQLite gives a text '4'
        against an INTEGER key 4 the key's numeric affinity, so the two are equal (so does the
        repair, `plausible.settle`)."""
        return stored_or_none(value, column, self.schema.kind)

    def _links(self) -> Iterator[tuple[str, list[tuple[Any, ...] | None], str, list[tuple[Any, ...] | None]]]:
        """(child table, each of its rows' reference, parent table, each of its rows' key), the
        references as the parent's columns compare them, None for one holding NULL (it points at
        nothing)."""
        for table in self.schema.tables:
            for fk in table.foreign_keys:
                found = parent_columns(self.schema, fk)
                if found is not None:
                    parent, referenced = found
                    pointers = [table.position(c) for c in fk.columns]
                    keys = [parent.position(c) for c in referenced]
                    columns = [parent.columns[k] for k in keys]
                    yield (table.name, [_key(tuple(self._as_parent(row[p], c) for p, c in zip(pointers, columns)))
                                        for row in self.rows[table.name]],
                           parent.name, [_key(tuple(row[k] for k in keys)) for row in self.rows[parent.name]])

    def _pointers(self, parent: str, key: int, child: str, column: int) -> list[Any]:
        """Each row of `child`'s value in `column`, as the parent's key column compares it."""
        table = self.schema.table(parent)
        as_key = table.columns[key] if table is not None else None
        return [self._as_parent(row[column], as_key) if as_key is not None else row[column] for row in self.rows[child]]

    def without_childless(self, kept: list[Item]) -> list[Item]:
        """`kept` less the parents left without a child where the source's parents always have one
        (and what points at them), until none is left."""
        while self.participation:
            chosen = set(kept)
            lonely: set[Item] = set()
            for (parent, key, child, _), pointers in zip(self.participation, self.pointed):
                pointed = {pointers[i] for t, i in chosen if t == child}
                lonely |= {(t, i) for t, i in chosen if t == parent and self.rows[t][i][key] not in pointed}
            if not lonely:
                break
            removed = self.closure(lonely)
            kept = [item for item in kept if item not in removed]
        return kept

    def _grown(self, start: set[Item], towards_children: bool) -> set[Item]:
        """`start` plus, until nothing changes, the rows that point at its rows (children) or the
        rows its rows point at (parents)."""
        rows = set(start)
        while True:
            more = set()
            for child, child_keys, parent, parent_keys in self.links:
                source, source_keys, target, target_keys = (
                    (parent, parent_keys, child, child_keys) if towards_children else (child, child_keys, parent, parent_keys))
                keys = {source_keys[i] for t, i in rows if t == source} - {None}
                if keys:
                    more |= {(target, i) for i, key in enumerate(target_keys) if (target, i) not in rows and key in keys}
            if not more:
                return rows
            rows |= more

    def closure(self, removed: set[Item]) -> set[Item]:
        """The removed rows plus every row that points at a removed row (foreign keys)."""
        return self._grown(removed, towards_children=True)

    def with_parents(self, kept: set[Item]) -> set[Item]:
        """The kept rows plus every row they point at (foreign keys), so the rows stay valid."""
        return self._grown(kept, towards_children=False)

    def still_differs(self, kept: list[Item]) -> bool:
        """Do the queries still differ on the rows `kept`? Each attempt counts against the budget;
        one on a set of rows already found not to differ is answered from memory (removing a parent
        removes its children, so two chunks often leave the same rows: a quarter of the attempts
        on Spider's DuckDB counterexamples). A set found to differ is never asked again: every
        later attempt is a strict subset of it."""
        if self.attempts >= self.budget:
            return False
        self.attempts += 1
        chosen = frozenset(kept)
        if chosen in self.refuted:
            return False
        found = self._differs(chosen)
        if not found:
            self.refuted.add(chosen)
        return found

    def _differs(self, chosen: frozenset[Item]) -> bool:
        if self.differs_on_rows is not None:
            return bool(self.differs_on_rows(tuple(
                (t.name, tuple(rowid for i, rowid in enumerate(self.rowids[t.name]) if (t.name, i) in chosen))
                for t in self.schema.tables)))
        rows = {t.name: [r for i, r in enumerate(self.rows[t.name]) if (t.name, i) in chosen] for t in self.schema.tables}
        path = self.folder / f"attempt-{self.attempts}.{self.suffix}"
        connection, _ = create_database(self.schema, rows, path, Repairer(self.schema, random.Random(0)))  # rows are final
        connection.close()
        try:
            return bool(self.differs(path))
        finally:
            path.unlink(missing_ok=True)

    def shrink(self, read: frozenset[str] | None = None, hints: frozenset[Any] = frozenset()) -> list[Item]:
        """The rows left after delta debugging, starting from the whole neighbour (on which the
        queries differ: the caller has just seen them differ there). `read`: the tables the queries
        read (lower case); the first attempt drops every other table's rows at once. `hints`: values
        of the result rows that differ; the next attempt keeps only the rows holding one of them
        (and the rows they point at), which is often the whole story in one step."""
        items = [(t.name, i) for t in self.schema.tables for i in range(len(self.rows[t.name]))]
        if read is not None:
            unread = self.closure({item for item in items if item[0].lower() not in read})
            trial = self.without_childless([item for item in items if item not in unread])
            if unread and self.still_differs(trial):
                items = trial
        if hints:
            hinted = {(t, i) for t, i in items if any(_hashable(v) in hints for v in self.rows[t][i])}
            kept = self.with_parents(hinted) if hinted else set()
            trial = self.without_childless([item for item in items if item in kept])
            if trial and len(trial) < len(items) and self.still_differs(trial):
                items = trial
        chunk = max(1, len(items) // 2)
        while self.attempts < self.budget:
            progress = False
            start = 0
            while start < len(items) and self.attempts < self.budget:
                removed = self.closure(set(items[start:start + chunk]))
                trial = self.without_childless([item for item in items if item not in removed])
                if len(trial) < len(items) and self.still_differs(trial):
                    items = trial
                    progress = True
                else:
                    start += chunk
            if not progress:
                if chunk == 1:
                    break
                chunk = max(1, chunk // 2)
        return self._pairs_out(items)

    def _pairs_out(self, items: list[Item]) -> list[Item]:
        """Past a set from which no single row can go, two rows at once, while more than
        `READABLE_ROWS` are left (a top-1 question: every single removal makes the leaders tie, a
        pair from two groups does not), with `PAIR_BUDGET` runs of its own."""
        self.budget = self.attempts + PAIR_BUDGET
        while len(items) > READABLE_ROWS and self.attempts < self.budget:
            for first in range(len(items)):
                found = None
                for second in range(first + 1, len(items)):
                    if self.attempts >= self.budget:
                        return items
                    removed = self.closure({items[first], items[second]})
                    trial = self.without_childless([item for item in items if item not in removed])
                    if trial and self.still_differs(trial):
                        found = trial
                        break
                if found is not None:
                    items = found
                    break
            else:
                return items
        return items


def _key(values: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A reference or key as rows are matched by it: None when it holds a NULL (it matches nothing)."""
    return None if None in values else values


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bytes)) else repr(value)


@ctrl_c_stops()  # a DuckDB neighbour is read and rewritten in this thread
def shrink_counterexample(neighbour: Any, differs: Callable[[Path], bool], *, tables: Sequence[str] | None = None,
                          budget: int = 200, hints: Sequence[Any] = (), memo: str | None = None,
                          differs_on_rows: Callable[[RowIds], bool] | None = None) -> Counterexample:
    """The neighbour's rows cut down, while `differs(path)` stays True, until no single row can go
    or `budget` calls of `differs` are spent; the rows of `tables` (or of every non-empty table).
    `differs` must be True on the neighbour itself (it is not asked again). `memo`: a key for the
    two queries; the rows kept are remembered beside the neighbour under it, and a later call with
    the same key checks them with one call of `differs` instead of shrinking again.
    `differs_on_rows`: asked instead of `differs`, with the rowids kept (`engines.base.RowIds`), for
    a DuckDB neighbour of tables only (no view to carry over) that no column named `rowid` hides."""
    schema, rows, rowids = _read(Path(neighbour.path))
    if rowids is None or _has_views(schema) or _names_rowid(schema):
        differs_on_rows = None  # attempts are files
    invariants = tuple(getattr(neighbour, "invariants", ()))
    broken = getattr(neighbour, "breaks", None)
    kept_invariants = Observed(tuple(i for i in invariants if i != broken))
    linked = kept_invariants.schema_with(schema)
    participation = []
    for invariant in kept_invariants.of(InvariantKind.PARTICIPATION):
        parent, child = schema.table(invariant.table), schema.table(invariant.other_table)
        if parent is not None and child is not None and parent is not child:
            participation.append((parent.name, parent.position(invariant.column), child.name, child.position(invariant.other_column)))
    wanted = frozenset(name.lower() for name in tables) if tables is not None else None
    remembered = _memo_path(Path(neighbour.path), memo)
    with tempfile.TemporaryDirectory(prefix="nl2sql-shrink-") as folder:
        shrinker = _Shrinker(linked, rows, differs, Path(folder), budget, participation, differs_on_rows, rowids)
        kept_items = _recall(remembered, rows)
        if kept_items is None or not shrinker.still_differs(kept_items):
            shrinker.attempts = 0
            found = frozenset(_hashable(v) for v in hints if v is not None)
            kept_items = shrinker.shrink(wanted, found)
            _remember(remembered, kept_items)
    kept = set(kept_items)
    result = []
    for table in schema.tables:
        remaining = tuple(r for i, r in enumerate(rows[table.name]) if (table.name, i) in kept)
        if wanted is not None and table.name.lower() not in wanted:
            continue
        if wanted is None and not remaining:
            continue
        result.append((table.name, tuple(c.name for c in table.columns), remaining))
    return Counterexample(tuple(result))


def _names_rowid(schema: Schema) -> bool:
    """Does a table have a column named `rowid` (which hides DuckDB's row identifier)?"""
    return any(c.name.lower() == "rowid" for t in schema.tables for c in t.columns)


def _has_views(schema: Schema) -> bool:
    """Does the schema hold a view (its other statements are unique indexes, which change no result)?"""
    for sql in schema.extra_sql:
        try:
            statement = sqlglot.parse_one(sql, read=schema.kind)
        except SqlglotError:
            return True
        if not isinstance(statement, exp.Create) or str(statement.args.get("kind", "")).upper() != "INDEX":
            return True
    return False


def _memo_path(neighbour: Path, memo: str | None) -> Path | None:
    if memo is None:
        return None
    return neighbour.parent / "shrunk" / f"{neighbour.stem}-{memo[:32]}.json"


def _recall(path: Path | None, rows: Rows) -> list[Item] | None:
    """The rows kept by an earlier shrink of the same two queries, if they still name rows."""
    if path is None:
        return None
    try:
        items = [(str(table), int(index)) for table, index in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return None
    if not all(table in rows and 0 <= index < len(rows[table]) for table, index in items):
        return None
    return items


def _remember(path: Path | None, items: list[Item]) -> None:
    """Written under a temporary name and renamed, so a concurrent reader never sees half a file;
    a cache folder that cannot be written to is only a slower next run."""
    if path is None:
        return
    try:
        path.parent.mkdir(exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        staging.write_text(json.dumps(items))
        os.replace(staging, path)
    except OSError:
        pass
