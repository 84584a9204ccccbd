"""Building one candidate neighbour: rows sampled from the source, rows made to sit on and next to
the gold's literals, duplicated rows, several rows per group, NULLs, chains of joined rows (one per
boundary value, through every table the gold reads), groups on a HAVING bound, values on both sides
of a set operation, NULL references where the source has them, a ranking's top untied where the
gold's LIMIT cuts it (tied where the gold settles ties itself, and in one flavour where a
subquery's LIMIT cuts it: the gold's answer there is the database's pick); then repaired so that every
primary key, UNIQUE, NOT NULL and foreign key holds (Spider's own data does not always), and
written into a fresh database with the source's CREATE statements.

A candidate is plain data (`Rows`: table -> rows), built only from the seeded `random.Random`
and the source's content, so the same inputs give the same rows on every machine.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import operator
import random
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pytest_nl2sql.neighbours import budget
from pytest_nl2sql.neighbours.interrupts import raise_if_interrupt
from pytest_nl2sql.neighbours.literals import GoldFacts, Hint, Top
from pytest_nl2sql.neighbours.schema import (
    DATE,
    DUCKDB_HOST,
    INT,
    OTHER,
    REAL,
    TEXT,
    TIMESTAMP,
    Column,
    ForeignKey,
    Schema,
    Table,
    quote,
)
from pytest_nl2sql.neighbours.values import (
    SQLITE_AS_IS,
    FreshValues,
    Unstorable,
    fresh_value,
    hint_holds,
    hint_values,
    satisfying,
    sort_key,
    step_away,
    stored,
)

Rows = dict[str, list[tuple[Any, ...]]]  # table name -> rows in column order


@dataclass(frozen=True)
class Flavour:
    """What one candidate emphasises."""

    note: str
    real_rows: tuple[int, int]  # how many sampled rows per table the gold reads (min, max)
    hints: bool = True
    duplicates: bool = False
    groups: bool = False
    nulls: bool = False
    sparse: bool = False  # most tables nearly empty
    chains: bool = False  # one joined row in every table the gold reads per boundary value
    cut_tie: bool = False  # a tie where a subquery's LIMIT cuts its ranking (the only such candidate of eight)


FLAVOURS = (
    Flavour("boundary values of the gold's literals", (6, 10)),
    Flavour("boundary values, duplicated rows and values, several rows per group", (6, 10), duplicates=True, groups=True),
    Flavour("boundary values, NULLs where allowed, duplicated rows", (5, 9), duplicates=True, nulls=True, cut_tie=True),
    Flavour("nearly empty tables with boundary values", (0, 2), sparse=True),
    Flavour("sampled rows only, duplicated values", (10, 16), hints=False, duplicates=True, groups=True),
    Flavour("boundary values, several rows per group, NULLs", (4, 8), groups=True, nulls=True),
    Flavour("a joined row through every table the gold reads per boundary value", (1, 4), chains=True),
    Flavour("joined rows per boundary value, some twice, duplicated values", (2, 5), chains=True, duplicates=True),
)

OTHER_TABLE_ROWS = 3  # rows of tables the gold does not read
HINT_ROWS_CAP = 18
MAX_GROUP_BOUND = 12  # HAVING count(...) > n: groups of n-1, n and n+1 joined rows up to this n  # synthetic rows per table for the gold's literals


def topological(schema: Schema, links: dict[str, list[ForeignKey]] | None = None) -> list[Table]:
    """Parents before children; a cycle is broken where it is met (depth-first, schema order).
    `links`: foreign keys by table name, when more than the declared ones count. Iterative: a
    chain of thousands of tables, children created first, is deeper than Python's recursion.
    The declared order is worked out once per schema (each candidate asks for it several times)."""
    if links is None:
        order = schema.derived.get("topological")
        if order is None:
            order = schema.derived["topological"] = tuple(_topological(schema, None))
        return list(order)
    return _topological(schema, links)


def _topological(schema: Schema, links: dict[str, list[ForeignKey]] | None) -> list[Table]:
    order: list[Table] = []
    state: dict[str, int] = {}

    def parents(table: Table) -> Iterator[Table]:
        for fk in (links[table.name] if links is not None else table.foreign_keys):
            parent = schema.table(fk.parent)
            if parent is not None and parent is not table:
                yield parent

    for root in schema.tables:
        if state.get(root.name.lower()):
            continue
        budget.check()
        state[root.name.lower()] = 1
        stack = [(root, parents(root))]
        while stack:
            table, pending = stack[-1]
            parent = next(pending, None)
            if parent is None:
                stack.pop()
                state[table.name.lower()] = 2
                order.append(table)
            elif not state.get(parent.name.lower()):
                state[parent.name.lower()] = 1
                stack.append((parent, parents(parent)))
    return order


def parent_columns(schema: Schema, fk: ForeignKey) -> tuple[Table, tuple[str, ...]] | None:
    """The parent table and the referenced columns (its primary key when none are named).
    Remembered per schema and foreign key (asked for per row and per candidate)."""
    memo = schema.derived["parent_columns"]
    entry = memo.get(id(fk))
    if entry is not None and entry[0] is fk:
        return entry[1]  # type: ignore[no-any-return]
    found = _parent_columns(schema, fk)
    memo[id(fk)] = (fk, found)  # the key kept alive with its entry: its id is never another's
    return found


def _parent_columns(schema: Schema, fk: ForeignKey) -> tuple[Table, tuple[str, ...]] | None:
    parent = schema.table(fk.parent)
    if parent is None:
        return None
    columns = fk.parent_columns or parent.primary_key
    if len(columns) != len(fk.columns) or any(parent.column(c) is None for c in columns):
        return None
    return parent, tuple(parent.column(c).name for c in columns)  # type: ignore[union-attr]


class CandidateBuilder:
    """Builds the rows of one candidate from a source, the gold's facts and a seeded rng."""

    def __init__(self, schema: Schema, source: Any, facts: GoldFacts, rng: random.Random, flavour: Flavour) -> None:
        self.schema = schema
        self.source = source
        self.facts = facts
        self.rng = rng
        self.flavour = flavour
        self.read_by_gold = {name.lower() for name in facts.tables}
        self.fresh_counter = 0
        # the draws of the steps for ties, shared values and NULL references: their own, so that a
        # gold without those shapes gets the rows it always got
        self.extra = random.Random(hashlib.sha256(repr(rng.getstate()).encode()).digest())
        self.seen: set[str] = set()  # tables whose source sample held rows
        self._hints: dict[str, list[Hint]] = {}  # `_hints_of`

    def build(self) -> Rows:
        rows: Rows = {}
        order = topological(self.schema)
        for table in self.schema.tables:
            budget.check()
            if table.name.lower() in self.read_by_gold:
                low, high = self.flavour.real_rows
                wanted = self.rng.randint(low, high)
            else:
                wanted = 0 if self.flavour.sparse else OTHER_TABLE_ROWS
            rows[table.name] = [self._stored_row(table, row) for row in self.source.sample(table, wanted, self.rng)] if wanted else []
            if rows[table.name]:
                self.seen.add(table.name)
            if not rows[table.name] and wanted and table.name.lower() in self.read_by_gold:  # the source's table is empty
                rows[table.name] = [tuple(self._synthetic(table, self.rng)) for _ in range(wanted)]
        self._pull_parents(rows, order)
        self.links = self._links()
        self._soft_joins(rows)
        self.good: dict[str, list[tuple[Any, ...]]] = {}
        self.reachable: dict[str, list[tuple[Any, ...]]] = {}  # good rows and boundary rows
        self.boundary: dict[str, list[tuple[Any, ...]]] = {}  # the rows made for the gold
        for table in topological(self.schema, self.links):
            budget.check()
            if table.name.lower() not in self.read_by_gold:
                continue
            made = []
            if self.flavour.hints:
                made += self._hint_rows(table, rows)
            made += self._adopting_rows(table, rows)
            current = rows[table.name] + made
            if self.flavour.duplicates:
                made += self._duplicates(table, current)
            if self.flavour.groups:
                made += self._group_rows(table, current)
            made = self._rekeyed(table, rows[table.name], made)
            rows[table.name] = rows[table.name] + made
            self.good[table.name] = [row for row in rows[table.name] if self._satisfies(table, row)]
            self.reachable[table.name] = list(dict.fromkeys(self.good[table.name] + made))
            self.boundary[table.name] = made
        if self.flavour.chains:
            self._chains(rows)
        if self.flavour.groups:
            self._spread(rows)
        main, self.rng = self.rng, self.extra  # the steps below draw from their own rng
        try:
            self._shared_values(rows)
            if self.flavour.hints:
                self._bound_groups(rows)
        finally:
            self.rng = main
        self._empty_parents(rows, order)
        if self.flavour.nulls:
            self._nulls(rows)
        main, self.rng = self.rng, self.extra
        try:
            self._null_references(rows)
            for top in self.facts.tops:
                if top.determined and self.flavour.duplicates:
                    self._tie_at_top(rows, top)
                elif not top.determined and self.flavour.cut_tie and self._in_subquery(top):
                    self._tie_at_cut(rows, top)
                elif not top.determined:
                    self._untie_at_cut(rows, top)
                if not top.extreme and top.key is not None:
                    self._past_the_top(rows, top)
        finally:
            self.rng = main
        return rows

    # ------------------------------------------------------------------ ties, shared values, NULL references

    def _gold_tables(self) -> list[Table]:
        return [t for t in (self.schema.table(name) for name in self.facts.tables) if t is not None]

    def _shared_values(self, rows: Rows) -> None:
        """A value on both sides of each set operation of the gold over two tables' columns
        (`SELECT name FROM teacher EXCEPT SELECT name FROM student`): a joined row whose right-hand
        column holds a value of the left-hand one, so that an EXCEPT left out (or an INTERSECT
        that never holds a row) shows."""
        tables = self._gold_tables()
        for (left_table, left_column), (right_table, right_column) in self.facts.shared:
            left, right = self.schema.table(left_table), self.schema.table(right_table)
            if left is None or right is None or left is right or not rows[left.name] or right not in tables:
                continue
            at, to = left.position(left_column), right.position(right_column)
            held = {row[to] for row in rows[right.name]}
            values = [v for v in dict.fromkeys(row[at] for row in rows[left.name] if self._satisfies(left, row))
                      if v is not None and stored_or_none(v, right.columns[to], self.schema.kind) not in held | {None}]
            for value in self.rng.sample(values, min(2, len(values))):
                value = stored_or_none(value, right.columns[to], self.schema.kind)
                self._chain(rows, tables, Hint((right.name, right.columns[to].name), "=", value), value, random.Random(self.rng.random()))
        for left_hints, right_hints in self.facts.sides:  # one table on both sides, other conditions
            for mine, theirs in ((left_hints, right_hints), (right_hints, left_hints)):
                pairs = [(hint, value) for hint in mine for value in self._values_of(hint)]
                for hint, value in self.rng.sample(pairs, min(4, len(pairs))):
                    other = self.rng.choice(theirs)
                    answers = self._values_of(other, satisfying)
                    if not answers:
                        continue
                    seed = self.rng.random()  # the same seed: the same template rows, so the same values shown
                    self._chain(rows, tables, hint, value, random.Random(seed))
                    self._chain(rows, tables, other, self.rng.choice(answers), random.Random(seed))

    def _values_of(self, hint: Hint, values: Callable[[Hint, str], list[Any]] = hint_values) -> list[Any]:
        """The hint's values (`hint_values`, or `satisfying`) as its column stores them."""
        table = self.schema.table(hint.column[0])
        column = table.column(hint.column[1]) if table is not None else None
        if column is None:
            return []
        stored_values = (stored_or_none(v, column, self.schema.kind) for v in values(hint, column.value_class))
        return [v for v in dict.fromkeys(stored_values) if v is not None]

    def _bound_groups(self, rows: Rows) -> None:
        """For each `HAVING max/min/avg/sum(x) op v` of the gold, joined rows of their own at v and
        next to it (texts tagged, keys fresh: a group of one where the gold groups by a key or a
        name), whose aggregate then sits on the bound: `>=` for `>` shows."""
        tables = self._gold_tables()
        for bound in self.facts.bounds:
            table = self.schema.table(bound.column[0])
            column = table.column(bound.column[1]) if table is not None else None
            if table is None or column is None or table not in tables:
                continue
            for value in hint_values(bound, column.value_class):
                value = stored_or_none(value, column, self.schema.kind)
                if value is not None:
                    self._chain(rows, tables, Hint((table.name, column.name), "=", value), value,
                                random.Random(self.rng.random()), tagged=True, fresh=self.facts.grouped)

    def _null_references(self, rows: Rows) -> None:
        """A NULL in a column the gold joins on, in a row that meets the gold's conditions on its
        table, where the source holds NULLs in that column (a warehouse's orders without a
        customer): plausible data, on which `LEFT JOIN` for `JOIN` shows."""
        for table_name, column_name in dict.fromkeys(ref for pair in self.facts.equated for ref in pair):
            table = self.schema.table(table_name)
            column = table.column(column_name) if table is not None else None
            if table is None or column is None or table.name not in self.seen or column.not_null or column.name in table.primary_key:
                continue  # the source shows no NULL there (or nothing at all)
            position = table.position(column.name)
            chosen = [i for i, row in enumerate(rows[table.name]) if row[position] is not None and self._satisfies(table, row)]
            for i in self.rng.sample(chosen, min(2 if self.flavour.duplicates else 1, len(chosen))):
                row = rows[table.name][i]
                rows[table.name][i] = row[:position] + (None,) + row[position + 1:]

    def _tie_at_top(self, rows: Rows, top: Top) -> None:
        """Rows tied at the top of a ranking whose ties the gold settles itself (`x = (SELECT max(x)
        ...)` keeps them all, a further ORDER BY key orders them): two joined rows at the greatest
        (least) value the column holds where the gold's conditions hold, or two groups one row
        larger than any, so that `ORDER BY x DESC LIMIT 1`, or another tie-break, shows."""
        tables = self._gold_tables()
        if not tables:
            return
        if top.key is None:
            sizes = self._group_sizes(rows, top)
            if sizes is None:
                return
            size = max((len(members) for members in sizes[2].values()), default=0) + 1
            for _ in range(2):  # as `_chains` makes a HAVING's groups: the group's row shared, texts tagged
                self._chain(rows, tables, None, None, random.Random(self.rng.random()), tagged=True, fanout=size)
            return
        table = self.schema.table(top.key[0])
        if table is None or table not in tables or any(key == (top.key[1],) for key in table.uniques):
            return
        position = table.position(top.key[1])
        values = [row[position] for row in rows[table.name] if row[position] is not None and self._satisfies(table, row)]
        if not values:
            return
        extreme = (max if top.descending else min)(values, key=sort_key)
        for _ in range(2):
            self._chain(rows, tables, Hint((table.name, table.columns[position].name), "=", extreme), extreme,
                        random.Random(self.rng.random()))

    def _in_subquery(self, top: Top) -> bool:
        """Does `top` rank the rows of a subquery the gold compares a column with (`id = (SELECT id
        FROM employee ORDER BY bonus LIMIT 1)`), rather than the gold's own rows? A tie at the cut
        there leaves the gold's answer to the database, which the judge tells as the gold's
        fragility (`judge.fragile_gold`); at the top level it is the tie handling's, and such a
        neighbour tells nothing. (An `IN (SELECT ... LIMIT k)` is not among the computed
        subqueries the gold's facts keep: it is left untied.)"""
        for _, _, sql in self.facts.computed:
            try:
                tree = sqlglot.parse_one(sql)
            except (SqlglotError, RecursionError, ValueError):
                continue
            for select in tree.find_all(exp.Select):
                order, limit = select.args.get("order"), select.args.get("limit")
                count = limit.expression if limit is not None else None
                if order is None or not order.expressions or not isinstance(count, exp.Literal) or not count.is_int \
                        or int(count.this) != top.limit:
                    continue
                first = order.expressions[0]
                key = first.this if isinstance(first, exp.Ordered) else first
                if bool(first.args.get("desc")) != top.descending:
                    continue
                if top.key is None and isinstance(key, exp.Count):
                    return True
                if top.key is not None and isinstance(key, exp.Column) and key.name.lower() == top.key[1].lower() \
                        and top.key[0].lower() in {table.name.lower() for table in select.find_all(exp.Table)}:
                    return True
        return False

    def _tie_at_cut(self, rows: Rows, top: Top) -> None:
        """A tie where a subquery's `LIMIT k` cuts its ranking (`_in_subquery`), in the one flavour
        of eight that makes it (the others untie it, so that a wrong pick inside a tie still fails
        on them): one more joined row at the k-th row's value, or the smaller of the groups on
        either side of the cut grown to the other's size. The gold's answer there is the database's
        pick: a right prediction passes flagged fragile, the gold the fragile side, and the rows
        shown hold the tie."""
        tables = self._gold_tables()
        if not tables:
            return
        if top.key is None:
            found = self._group_sizes(rows, top)
            if found is None:
                return
            counted, _, members = found
            ranked = sorted(members, key=lambda g: (len(members[g]), sort_key(g)), reverse=top.descending)
            if len(ranked) <= top.limit:
                return
            smaller, larger = sorted(ranked[top.limit - 1:top.limit + 1], key=lambda g: len(members[g]))
            missing = len(members[larger]) - len(members[smaller])
            if not 0 < missing <= MAX_GROUP_BOUND:
                return  # tied there already, or too far apart
            copied = [i for i in members[smaller] if self._satisfies(counted, rows[counted.name][i])] or members[smaller]
            made = [rows[counted.name][copied[n % len(copied)]] for n in range(missing)]
            rows[counted.name] = rows[counted.name] + self._rekeyed(counted, rows[counted.name], made)
            return
        table = self.schema.table(top.key[0])
        if table is None or table not in tables or any(key == (top.key[1],) for key in table.uniques):
            return
        position = table.position(top.key[1])
        _, _, slots = self._ranking(rows, table, position, top)
        if len(slots) < top.limit:
            return
        value = rows[table.name][slots[top.limit - 1]][position]
        if len(slots) > top.limit and rows[table.name][slots[top.limit]][position] == value:
            return  # tied there already
        self._chain(rows, tables, Hint((table.name, table.columns[position].name), "=", value), value, random.Random(self.rng.random()))

    def _ranking(self, rows: Rows, table: Table, position: int,
                 top: Top) -> tuple[list[int], dict[int, list[tuple[str, int, list[int], list[int]]]] | None, list[int]]:
        """The table's rows that meet the gold's conditions there, in the gold's order; their
        joined children (`_children`); and the result's rows in the gold's order (roughly), each
        as the number of its row of `table`."""
        order = sorted((i for i, row in enumerate(rows[table.name]) if row[position] is not None and self._satisfies(table, row)),
                       key=lambda i: sort_key(rows[table.name][i][position]), reverse=top.descending)
        children = self._children(rows, table)
        counts = [len(children[i]) if children is not None else 1 for i in order]
        return order, children, [i for i, n in zip(order, counts) for _ in range(n)]

    def _untie_at_cut(self, rows: Rows, top: Top) -> None:
        """No tie where the gold's `LIMIT k` cuts its ranking (`ORDER BY height DESC LIMIT 1`), as
        far as the rows tell it without running the gold: its answer there is then determined, and
        the neighbour is counted (a tie at the cut leaves the gold's pick to the database, and such
        a neighbour tells nothing). Rows tied with the k-th past the cut move one step away from
        the top; a parent at the cut with more joined children than the cut leaves room for gives
        the others to a parent far from the top; groups tied at the cut get one more member on the
        side of the cut they are on."""
        if top.key is None:
            self._untie_groups(rows, top)
            return
        table = self.schema.table(top.key[0])
        if table is None or table.name not in rows or any(key == (top.key[1],) for key in table.uniques):
            return
        position = table.position(top.key[1])
        order, children, slots = self._ranking(rows, table, position, top)
        if len(slots) <= top.limit:
            return
        last, next_ = slots[top.limit - 1], slots[top.limit]
        if last == next_ and children is not None:
            kept = top.limit - slots.index(last)  # children of the row at the cut that fit before it
            elsewhere = [i for i in reversed(order) if i != last]
            if elsewhere:
                child, pointer, referenced = children[last][0][0], children[last][0][2], children[last][0][3]
                far = rows[table.name][elsewhere[0]]
                for _, index, _, _ in children[last][kept:]:
                    row = list(rows[child][index])
                    for p, r in zip(pointer, referenced):
                        row[p] = far[r]
                    rows[child][index] = tuple(row)
            return
        value = rows[table.name][last][position]
        if rows[table.name][next_][position] != value:
            return
        moved = step_away(value, top.descending)
        moved = stored_or_none(moved, table.columns[position], self.schema.kind) if moved is not None else None
        if moved is None:
            return
        before = set(slots[:top.limit])
        for i in order:
            row = rows[table.name][i]
            if i not in before and row[position] == value:
                rows[table.name][i] = row[:position] + (moved,) + row[position + 1:]

    def _past_the_top(self, rows: Rows, top: Top) -> None:
        """A row past the top of what the gold ranks by that the gold's joins leave out: a parent
        with no joined child (the tallest person, who plays no poker), or a child whose parent
        misses the gold's conditions, so that the greatest of the whole table (`= (SELECT
        max(height) FROM people)`) is told from the gold's top."""
        table = self.schema.table(top.key[0]) if top.key is not None else None
        tables = self._gold_tables()
        if table is None or table not in tables:
            return
        position = table.position(top.key[1])  # type: ignore[index]
        values = [row[position] for row in rows[table.name] if row[position] is not None]
        good = [row for row in rows[table.name] if self._satisfies(table, row)]
        if not values or not good:
            return
        beyond = step_away((max if top.descending else min)(values, key=sort_key), not top.descending)
        beyond = stored_or_none(beyond, table.columns[position], self.schema.kind) if beyond is not None else None
        if beyond is None:
            return
        row = list(self.rng.choice(good))
        row[position] = beyond
        referenced = {c for child in tables if child is not table for fk in self.links.get(child.name, [])
                      if (found := parent_columns(self.schema, fk)) is not None and found[0] is table for c in found[1]}
        if referenced:  # a parent of its own key: no joined row points at it
            for name in referenced:
                at = table.position(name)
                self.fresh_counter += 1
                row[at] = stored_or_none(fresh_value(table.columns[at], {r[at] for r in rows[table.name]}, self.fresh_counter),
                                         table.columns[at], self.schema.kind)
            if any(row[table.position(name)] is None for name in referenced):
                return
        else:  # a child of a parent the gold's conditions leave out
            missed = [(fk, found, other) for fk in self.links.get(table.name, [])
                      if (found := parent_columns(self.schema, fk)) is not None and found[0] in tables and self._hints_of(found[0])
                      for other in rows[found[0].name] if not self._satisfies(found[0], other)]
            if not missed:
                return
            fk, (parent, keys), other = self.rng.choice(missed)
            for column, key in zip(fk.columns, keys):
                row[table.position(column)] = other[parent.position(key)]
        rows[table.name] = rows[table.name] + self._rekeyed(table, rows[table.name], [tuple(row)])

    def _children(self, rows: Rows, table: Table) -> dict[int, list[tuple[str, int, list[int], list[int]]]] | None:
        """For each row of `table`, the rows of the one other table the gold reads that point at it
        (child table, row number, pointer positions, referenced positions); None when no such
        table or more than one (each row of the table is then one row of the result, roughly)."""
        found = []
        for child in self._gold_tables():
            if child is table:
                continue
            for fk in self.links.get(child.name, []):
                parent = parent_columns(self.schema, fk)
                if parent is not None and parent[0] is table:
                    found.append((child, [child.position(c) for c in fk.columns], [table.position(c) for c in parent[1]]))
        if len(found) != 1:
            return None
        child, pointer, referenced = found[0]
        by_key: dict[tuple[Any, ...], list[int]] = {}
        for index, row in enumerate(rows[child.name]):
            by_key.setdefault(tuple(row[p] for p in pointer), []).append(index)
        return {i: [(child.name, index, pointer, referenced) for index in by_key.get(tuple(row[r] for r in referenced), [])]
                for i, row in enumerate(rows[table.name])}

    def _group_sizes(self, rows: Rows, top: Top) -> tuple[Table, Callable[[tuple[Any, ...]], Any], dict[Any, list[int]]] | None:
        """The gold's groups as the rows tell them: the table whose rows are counted, the group of
        one of its rows, and each group's member rows (a child table the gold joins to the grouped
        column's table is counted per parent; else the grouped table's own rows)."""
        grouped = self.schema.table(top.grouped[0][0]) if top.grouped else None
        if grouped is None or grouped.name not in rows:
            return None
        at = grouped.position(top.grouped[0][1])
        for child in self._gold_tables():
            if child is grouped:
                continue
            for fk in self.links.get(child.name, []):
                parent = parent_columns(self.schema, fk)
                if parent is None or parent[0] is not grouped:
                    continue
                pointer, referenced = [child.position(c) for c in fk.columns], [grouped.position(c) for c in parent[1]]
                group_of = {tuple(row[r] for r in referenced): row[at] for row in rows[grouped.name]}

                def of_child(row: tuple[Any, ...], pointer: list[int] = pointer, group_of: dict = group_of) -> Any:
                    return group_of.get(tuple(row[p] for p in pointer))
                return child, of_child, _members(rows[child.name], of_child)

        def of_row(row: tuple[Any, ...]) -> Any:
            return row[at]
        return grouped, of_row, _members(rows[grouped.name], of_row)

    def _untie_groups(self, rows: Rows, top: Top) -> None:
        found = self._group_sizes(rows, top)
        if found is None:
            return
        table, _, members = found
        ranked = sorted(members, key=lambda g: (len(members[g]), sort_key(g)), reverse=top.descending)
        sizes = [len(members[g]) for g in ranked]
        if len(ranked) <= top.limit or sizes[top.limit - 1] != sizes[top.limit]:
            return
        tied = sizes[top.limit]
        grow = [g for n, g in enumerate(ranked) if sizes[n] == tied and (n < top.limit) == top.descending]
        made = [rows[table.name][members[g][0]] for g in grow]
        rows[table.name] = rows[table.name] + self._rekeyed(table, rows[table.name], made)

    def _chains(self, rows: Rows) -> None:
        """For each boundary value of each literal (and twice for none), a row in every table the
        gold reads, joined along the gold's join conditions and with keys of their own: a
        boundary row that reaches the result however many joins sit between (the sampled rows
        and the per-table boundary rows often do not line up across two joins)."""
        tables = [t for t in (self.schema.table(name) for name in self.facts.tables) if t is not None]
        if not tables:
            return
        focuses: list[tuple[Hint | None, Any]] = []
        for hint in self.facts.hints:
            table = self.schema.table(hint.column[0])
            column = table.column(hint.column[1]) if table is not None else None
            if column is not None:
                focuses += [(hint, value) for value in hint_values(hint, column.value_class)]
        if len(focuses) > 10:
            focuses = self.rng.sample(focuses, 10)
        focuses += [(None, None), (None, None)]
        for focus, value in focuses:
            seed = self.rng.random()
            fanout = 1
            if self.flavour.duplicates:  # groups of several (ORDER BY count(*)); the biggest on a range's own literal
                on_bound = focus is not None and focus.op in ("<", "<=", ">", ">=") and value == focus.value
                fanout = 7 if on_bound else self.rng.choice((1, 2))
            self._chain(rows, tables, focus, value, random.Random(seed), fanout=fanout)
            roll = self.rng.random()
            if self.flavour.duplicates and roll < 0.4:  # a copy: the same values, keys of its own (DISTINCT)
                self._chain(rows, tables, focus, value, random.Random(seed))
            elif self.flavour.duplicates and roll < 0.8:  # the same values but for another literal's (INTERSECT, groups)
                other, other_value = self.rng.choice(focuses)
                self._chain(rows, tables, other, other_value, random.Random(seed))
        if self.flavour.duplicates:  # groups just under, at and over a HAVING count's bound
            for bound in self.facts.counts:
                if 0 < bound <= MAX_GROUP_BOUND:
                    for size in (bound - 1, bound, bound + 1):
                        seed = self.rng.random()
                        for _ in range(size):  # texts tagged per group, so that groups stay apart
                            self._chain(rows, tables, None, None, random.Random(seed), tagged=True)
                        self._chain(rows, tables, None, None, random.Random(seed + 1), tagged=True, fanout=size)

    def _empty_parents(self, rows: Rows, order: list[Table]) -> None:
        """Rows for a parent table left empty (the source's own data may break its foreign keys:
        films pointing at a language table shipped empty), so that the repair does not drop
        every child along a NOT NULL foreign key (children first, so grandparents follow)."""
        for table in reversed(order):
            budget.check()
            for fk in table.foreign_keys:
                found = parent_columns(self.schema, fk)
                if found is None or found[0] is table or rows[found[0].name] or not rows[table.name]:
                    continue
                parent, referenced = found
                positions = [table.position(c) for c in fk.columns]
                wanted = list(dict.fromkeys(tuple(row[p] for p in positions) for row in rows[table.name]
                                            if all(row[p] is not None for p in positions)))[:4]
                made = []
                for values in wanted:
                    row = self._synthetic(parent, self.rng)
                    for column, value in zip(referenced, values):
                        position = parent.position(column)
                        row[position] = stored_or_none(value, parent.columns[position], self.schema.kind)
                    made.append(tuple(row))
                rows[parent.name] = self._rekeyed(parent, [], made)

    def _spread(self, rows: Rows) -> None:
        """Other values in the columns the gold aggregates or orders by, in some rows: a column
        that holds one value throughout the source (MAX = MIN, every row tied) hides mistakes."""
        for table_name, column_name in dict.fromkeys(self.facts.aggregated + self.facts.ordered):
            table = self.schema.table(table_name)
            column = table.column(column_name) if table is not None else None
            if table is None or column is None or column.value_class not in (INT, REAL, TEXT):
                continue
            fixed = {c for fk in self.links[table.name] for c in fk.columns} | {c for key in table.uniques for c in key} \
                | {hint.column[1] for hint in self._hints_of(table)}
            if column.name in fixed:
                continue
            position = table.position(column.name)
            changed = []
            for row in rows[table.name]:
                value = row[position]
                if value is not None and self.rng.random() < 0.35:
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        value = value + self.rng.choice((-2, -1, 1, 3))
                    elif isinstance(value, str):
                        value = value + self.rng.choice(("a", "z"))
                    row = tuple(stored_or_none(value, column, self.schema.kind) if i == position else v for i, v in enumerate(row))
                changed.append(row)
            rows[table.name] = changed

    def at_computed(self, rows: Rows, column_ref: tuple[str, str], value: Any) -> Rows:
        """`rows` plus joined rows whose column holds exactly `value`, the value a subquery of the
        gold computes (an AVG, MAX or MIN stays about what it was), so that `>` and `>=` against
        it differ."""
        tables = [t for t in (self.schema.table(name) for name in self.facts.tables) if t is not None]
        table = self.schema.table(column_ref[0])
        if table is None or table.column(column_ref[1]) is None or table not in tables:
            return rows
        rows = {name: list(table_rows) for name, table_rows in rows.items()}
        self._chain(rows, tables, Hint(column_ref, "=", value), value, random.Random(self.rng.random()))
        return rows

    def _chain(self, rows: Rows, tables: list[Table], focus: Hint | None, value: Any, rng: random.Random,
               tagged: bool | None = None, fanout: int = 1, shared: dict[str, list[Any]] | None = None,
               fresh: tuple[tuple[str, str], ...] = ()) -> None:
        """One joined row per table (`shared`: rows of an earlier chain to join instead); with
        `fanout` n, n-1 more chains that share the row the gold groups by: a group of n. `fresh`:
        columns given a value of their own, as keys are (a group of its own)."""
        shared = shared or {}
        made: dict[str, list[Any]] = dict(shared)
        for table in tables:
            if table.name in shared:
                continue
            row = list(rng.choice(rows[table.name])) if rows[table.name] else self._synthetic(table, rng)
            hinted = set()
            hints = self._hints_of(table) + ([focus] if focus is not None and focus not in self.facts.hints and focus.column[0] == table.name else [])
            for hint in hints:
                column = table.column(hint.column[1])
                assert column is not None
                hinted.add(column.name)
                if focus is not None and hint != focus and hint.column == focus.column:
                    continue  # the focus's own value wins over the column's other conditions
                options = [value] if hint == focus else satisfying(hint, column.value_class)
                if options:
                    row[table.position(column.name)] = stored_or_none(self.rng.choice(options), column, self.schema.kind)
            if (not self.flavour.duplicates) if tagged is None else tagged:  # texts of its own: each chain reaches the result apart
                joined = {c for (t, c) in (e for pair in self.facts.joins for e in pair) if t == table.name}
                tag = rng.randint(2, 99)
                for position, column in enumerate(table.columns):
                    if column.value_class == TEXT and isinstance(row[position], str) and column.name not in hinted | joined:
                        row[position] = f"{row[position]} {tag}"
            own = tuple((name,) for t, name in fresh if t == table.name and name not in hinted)
            for key in table.uniques + own:
                free = [name for name in key if name not in hinted]
                if len(free) > 1:  # a composite key: one column of its own is enough (copies share the rest)
                    free = [rng.choice(free)]
                for name in free:
                    position = table.position(name)
                    taken = {r[position] for r in rows[table.name]} | {row[position]}
                    self.fresh_counter += 1
                    row[position] = stored_or_none(fresh_value(table.columns[position], taken, self.fresh_counter),
                                                    table.columns[position], self.schema.kind)
            made[table.name] = row
        edges = [(a, b) for a, b in self.facts.joins if a[0] != b[0] and a[0] in made and b[0] in made]
        visited = {focus.column[0] if focus is not None else tables[0].name}
        for _ in range(len(tables)):
            for (left_table, left_column), (right_table, right_column) in edges:
                if (left_table in visited) == (right_table in visited):
                    continue
                if right_table in visited:
                    left_table, left_column, right_table, right_column = right_table, right_column, left_table, left_column
                self._link(made, left_table, left_column, right_table, right_column)
                visited.add(right_table)
        for (left_table, left_column), (right_table, right_column) in edges:
            left, right = self.schema.table(left_table), self.schema.table(right_table)
            assert left is not None and right is not None
            if made[left_table][left.position(left_column)] != made[right_table][right.position(right_column)]:
                self._link(made, left_table, left_column, right_table, right_column)  # a cycle: best effort
        for table in tables:
            if table.name not in shared:
                rows[table.name] = rows[table.name] + [tuple(made[table.name])]
        anchors = self._group_anchors(tables) if fanout > 1 else {}
        for _ in range(fanout - 1 if anchors else 0):  # the group's own row shared, the rest made again
            self._chain(rows, tables, focus, value, random.Random(rng.random()), tagged, 1,
                        {name: made[name] for name in anchors})
        for table in tables:  # parents outside the gold's tables, or the repair would re-point the chain
            for fk in table.foreign_keys:
                found = parent_columns(self.schema, fk)
                if found is None or found[0].name in made:
                    continue
                parent, referenced = found
                values = [made[table.name][table.position(c)] for c in fk.columns]
                positions = [parent.position(c) for c in referenced]
                if None in values or any(tuple(row[p] for p in positions) == tuple(values) for row in rows[parent.name]):
                    continue
                row = list(rng.choice(rows[parent.name])) if rows[parent.name] else self._synthetic(parent, rng)
                for position, value in zip(positions, values):
                    row[position] = stored_or_none(value, parent.columns[position], self.schema.kind)
                rows[parent.name] = rows[parent.name] + self._rekeyed(parent, rows[parent.name], [tuple(row)])

    def _group_anchors(self, tables: list[Table]) -> list[str]:
        """The tables whose row a GROUP BY column names: its own table, or the parent its
        value points at (GROUP BY match.winning_pilot groups by a pilot)."""
        names = {table.name for table in tables}
        anchors: list[str] = []
        for table_name, column_name in self.facts.grouped:
            if table_name not in names:
                continue
            anchor = table_name
            for fk in self.links[table_name]:
                parent = self.schema.table(fk.parent)
                if column_name in fk.columns and parent is not None and parent.name in names and parent.name != table_name:
                    anchor = parent.name
            anchors.append(anchor)
        return list(dict.fromkeys(anchors))

    def _link(self, made: dict[str, list[Any]], known: str, known_column: str, other: str, other_column: str) -> None:
        """Make the two columns equal: a child takes its parent's (fresh) key, else `other`
        takes the value of `known`."""
        known_table, other_table = self.schema.table(known), self.schema.table(other)
        assert known_table is not None and other_table is not None
        known_position, other_position = known_table.position(known_column), other_table.position(other_column)
        other_is_key = any(key == (other_table.columns[other_position].name,) for key in other_table.uniques)
        known_is_key = any(key == (known_table.columns[known_position].name,) for key in known_table.uniques)
        if other_is_key and not known_is_key:
            made[known][known_position] = stored_or_none(made[other][other_position], known_table.columns[known_position], self.schema.kind)
        else:
            made[other][other_position] = stored_or_none(made[known][known_position], other_table.columns[other_position], self.schema.kind)

    def _rekeyed(self, table: Table, existing: list[tuple[Any, ...]], made: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Made rows with fresh key values where they copy a row's key, now rather than at the
        repair: children made next must point at the boundary row itself, not at the row it
        was copied from (which the repair would leave holding the key)."""
        fixed_columns = {c for fk in self.links[table.name] for c in fk.columns}
        hinted = {hint.column[1] for hint in self._hints_of(table)}
        keys = [(key, [table.position(c) for c in key]) for key in table.uniques]
        seen = {key: {tuple(row[p] for p in positions) for row in existing} for key, positions in keys}
        result: list[tuple[Any, ...]] = []
        pools: dict[int, FreshValues] = {}  # a column's values in `existing` and `result`, kept as rows are added
        for original in made:
            row = list(original)
            for key, positions in keys:
                value = tuple(row[p] for p in positions)
                if any(v is None for v in value):
                    continue
                if value in seen[key]:
                    free = [p for p in positions if table.columns[p].name not in fixed_columns]
                    free.sort(key=lambda p: table.columns[p].name not in hinted)
                    if not free:
                        continue  # left to the repair
                    position = free[-1]
                    pool = pools.get(position)
                    if pool is None:
                        pool = pools[position] = FreshValues(table.columns[position], {r[position] for r in existing} | {r[position] for r in result})
                    self.fresh_counter += 1
                    row[position] = stored_or_none(pool.fresh(row[position], self.fresh_counter),  # fresh_value over pool | {row[position]}
                                                    table.columns[position], self.schema.kind)
                    value = tuple(row[p] for p in positions)
                    if row[position] is None:
                        continue
                seen[key].add(value)
            result.append(tuple(row))
            for position, pool in pools.items():
                pool.add(row[position])
        return result

    def _hints_of(self, table: Table) -> list[Hint]:
        """The gold's hints on `table` (asked per row: made once per table; not to be changed)."""
        found = self._hints.get(table.name)
        if found is None:
            found = self._hints[table.name] = [hint for hint in self.facts.hints if hint.column[0] == table.name]
        return found

    def _satisfies(self, table: Table, row: tuple[Any, ...]) -> bool:
        """Does the row meet every condition the gold puts on this table's columns (and point at
        parents that do)?"""
        for hint in self._hints_of(table):
            if not hint_holds(hint, row[table.position(hint.column[1])]):
                return False
        return True

    def _stored_row(self, table: Table, row: Sequence[Any]) -> tuple[Any, ...]:
        if self.schema.kind == "sqlite":  # most rows hold only values their columns store as they are
            kept = self.schema.derived["as is"].get(table.name)
            if kept is None:
                kept = self.schema.derived["as is"][table.name] = tuple(SQLITE_AS_IS.get(c.affinity, frozenset()) for c in table.columns)
            if len(row) == len(kept) and all(value is None or type(value) in types for value, types in zip(row, kept)):
                return tuple(row)
        return tuple(stored_or_none(value, column, self.schema.kind) for value, column in zip(row, table.columns))

    def _pull_parents(self, rows: Rows, order: list[Table]) -> None:
        """Real parents of the sampled children, so that real joins survive (children first)."""
        for table in reversed(order):
            budget.check()
            for fk in table.foreign_keys:
                found = parent_columns(self.schema, fk)
                if found is None or not rows[table.name]:
                    continue
                parent, referenced = found
                positions = [table.position(c) for c in fk.columns]
                wanted = list(dict.fromkeys(
                    tuple(row[p] for p in positions) for row in rows[table.name] if all(row[p] is not None for p in positions)
                ))
                have = {tuple(row[parent.position(c)] for c in referenced) for row in rows[parent.name]}
                missing = [key for key in wanted if key not in have]
                pulled = self.source.rows_matching(parent, referenced, missing, limit=12)
                rows[parent.name] = rows[parent.name] + [self._stored_row(parent, row) for row in pulled]

    def _template(self, table: Table, rows: list[tuple[Any, ...]]) -> list[Any]:
        if rows:
            return list(self.rng.choice(rows))
        return self._synthetic(table, self.rng)

    def _synthetic(self, table: Table, rng: random.Random) -> list[Any]:
        """A row for a table with none to copy (a source shipped empty): values from small
        domains per column, so that rows repeat values, tie and group as real data does. A
        column the gold compares with a literal mostly takes the literal's values (on, inside and
        just outside): nothing else would meet `year > 2000`, and one row meeting it cannot tell
        `LIMIT 1` from `LIMIT 2` or one ORDER BY column from another."""
        hinted = {hint.column[1].lower(): hint for hint in self._hints_of(table)}
        row: list[Any] = []
        for column in table.columns:
            hint = hinted.get(column.name.lower())
            near = [*satisfying(hint, column.value_class), *hint_values(hint, column.value_class)] if hint else []
            if near and rng.random() < 0.7:
                value: Any = rng.choice(near)
            elif column.value_class == INT:
                value = rng.randint(1, 8) * 10
            elif column.value_class == REAL:
                value = rng.randint(1, 8) * 2.5
            elif column.value_class in (TEXT, OTHER):
                value = f"{column.name} {rng.randint(1, 4)}"
            elif column.value_class in (DATE, TIMESTAMP):
                value = f"200{rng.randint(1, 4)}-01-01"
            else:
                value = None
            row.append(stored_or_none(value, column, self.schema.kind))
        return row

    def _make_row(self, table: Table, rows: Rows, focus: Hint | None, agree: float = 0.7) -> list[Any]:
        """A row like the sampled ones that mostly meets the gold's other conditions on this
        table and mostly points at parents that meet theirs, so that a boundary row is reached."""
        row = self._template(table, rows[table.name])
        for other in self._hints_of(table):
            if other == focus or self.rng.random() > agree:
                continue
            column = table.column(other.column[1])
            assert column is not None
            options = satisfying(other, column.value_class)
            if options:
                value = stored_or_none(self.rng.choice(options), column, self.schema.kind)
                if value is not None:
                    row[table.position(column.name)] = value
        for fk in self.links[table.name]:
            found = parent_columns(self.schema, fk)
            if found is None or self.rng.random() > agree:
                continue
            parent, referenced = found
            good = self.good.get(parent.name) if self.rng.random() < 0.6 else self.reachable.get(parent.name)
            if good:
                parent_row = self.rng.choice(good)
                for child_column, parent_column in zip(fk.columns, referenced):
                    row[table.position(child_column)] = parent_row[parent.position(parent_column)]
        return row

    def _hint_rows(self, table: Table, rows: Rows) -> list[tuple[Any, ...]]:
        made: list[tuple[Any, ...]] = []
        for hint in self._hints_of(table):
            column = table.column(hint.column[1])
            assert column is not None
            position = table.position(column.name)
            for value in hint_values(hint, column.value_class):
                value = stored_or_none(value, column, self.schema.kind)
                if value is None:
                    continue
                row = self._make_row(table, rows, hint)
                row[position] = value
                made.append(tuple(row))
                made += self._past_the_extremes(table, hint, row, position, rows[table.name])
        if len(made) > HINT_ROWS_CAP:
            made = self.rng.sample(made, HINT_ROWS_CAP)
        for _ in range(2):  # rows that meet every condition
            made.append(tuple(self._make_row(table, rows, None, agree=1.0)))
        return made

    def _past_the_extremes(self, table: Table, hint: Hint, row: list[Any], position: int,
               current: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """For a row just outside the gold's condition: copies whose aggregated or ordered column
        is past every value there, so that a query that drops or shifts the condition (MIN without
        `share_count > 50`, `>=` for `>`) picks that row and shows itself. (Twins meeting another
        condition on the same column were tried for INTERSECT golds: they caught two mutants and
        lost four, the shared values repaired away as repeated names.)"""
        twins: list[tuple[Any, ...]] = []
        column = table.columns[position]
        if hint_holds(hint, row[position]):
            return twins
        extremes = [c for t, c in self.facts.aggregated + self.facts.ordered
                    if t == table.name and c.lower() != column.name.lower()]
        for name in dict.fromkeys(extremes):
            at = table.position(name)
            kind = table.columns[at].value_class
            seen = [r[at] for r in current if isinstance(r[at], (int, float)) and not isinstance(r[at], bool)]
            if kind not in (INT, REAL) or not seen:
                continue
            step = 1 if kind == INT else 0.5
            value = stored_or_none(self.rng.choice([min(seen) - step, max(seen) + step]), table.columns[at], self.schema.kind)
            if value is not None:
                twin = list(row)
                twin[at] = value
                twins.append(tuple(twin))
        return twins

    def _duplicates(self, table: Table, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Copies of rows (their keys made fresh by the repair) and values copied across rows."""
        if not rows:
            return []
        good = [row for row in rows if self._satisfies(table, row)] or rows
        made = [self.rng.choice(good if self.rng.random() < 0.7 else rows) for _ in range(self.rng.randint(1, 3))]
        mentioned = [table.position(c) for t, c in self.facts.mentioned if t == table.name]
        others = list(range(len(table.columns)))
        for _ in range(self.rng.randint(2, 4)):
            position = self.rng.choice(mentioned if mentioned and self.rng.random() < 0.6 else others)
            source, target = self.rng.choice(rows), list(self.rng.choice(good))
            target[position] = source[position]
            made.append(tuple(target))
        return made

    def _group_rows(self, table: Table, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Several rows per group of the gold's GROUP BY (and aggregated) columns, other values varied."""
        if not rows:
            return []
        made = []
        keyed = [c for t, c in self.facts.grouped + self.facts.ordered if t == table.name]
        varied = [table.position(c) for t, c in self.facts.aggregated + self.facts.ordered if t == table.name]
        for name in dict.fromkeys(keyed):
            position = table.position(name)
            for _ in range(2):
                row = list(self.rng.choice(rows))
                donor = self.rng.choice(rows)
                for other in varied or range(len(row)):
                    if other != position:
                        row[other] = donor[other]
                made.append(tuple(row))
        return made

    def _adopting_rows(self, table: Table, rows: Rows) -> list[tuple[Any, ...]]:
        """Children of the parents' rows that meet the gold's conditions, so a literal on a
        parent reaches a join (several children each, for counts and duplicates)."""
        made = []
        for fk in self.links[table.name]:
            found = parent_columns(self.schema, fk)
            if found is None:
                continue
            parent, referenced = found
            boundary = self.boundary.get(parent.name, [])
            good = self.good.get(parent.name, [])
            chosen = self.rng.sample(boundary, min(8, len(boundary))) + self.rng.sample(good, min(3, len(good)))
            for parent_row in dict.fromkeys(chosen):
                for _ in range(self.rng.randint(1, 3)):
                    row = self._make_row(table, rows, None)
                    for child_column, parent_column in zip(fk.columns, referenced):
                        row[table.position(child_column)] = parent_row[parent.position(parent_column)]
                    made.append(tuple(row))
        return made

    def _links(self) -> dict[str, list[ForeignKey]]:
        """Declared foreign keys, plus the gold's column = column equalities that none declares
        (the side that is a key of its table is the parent), so that synthetic rows join."""
        links = {table.name: list(table.foreign_keys) for table in self.schema.tables}
        for (left_table, left_column), (right_table, right_column) in self.facts.joins:
            left = self.schema.table(left_table)
            right = self.schema.table(right_table)
            if left is None or right is None or left is right or _declared(left, left_column, right, right_column):
                continue
            if any(key == (right_column,) for key in right.uniques) and not any(key == (left_column,) for key in left.uniques):
                left, left_column, right, right_column = right, right_column, left, left_column
            link = ForeignKey((right_column,), left.name, (left_column,))
            if link not in links[right.name]:
                links[right.name].append(link)
        return links

    def _soft_joins(self, rows: Rows) -> None:
        """The gold's column = column equalities that no foreign key declares: make most rows join."""
        for (left_table, left_column), (right_table, right_column) in self.facts.joins:
            if left_table == right_table:
                continue
            left = self.schema.table(left_table)
            right = self.schema.table(right_table)
            if left is None or right is None or _declared(left, left_column, right, right_column):
                continue
            left_values = [row[left.position(left_column)] for row in rows[left.name] if row[left.position(left_column)] is not None]
            if not left_values:
                continue
            position = right.position(right_column)
            column = right.columns[position]
            changed = []
            for row in rows[right.name]:
                if self.rng.random() < 0.7:
                    row = tuple(stored_or_none(self.rng.choice(left_values), column, self.schema.kind) if i == position else v
                                for i, v in enumerate(row))
                changed.append(row)
            rows[right.name] = changed

    def _nulls(self, rows: Rows) -> None:
        for table_name, column_name in self.facts.mentioned:
            table = self.schema.table(table_name)
            assert table is not None
            column = table.column(column_name)
            if column is None or column.not_null or any(column.name in key for key in table.uniques[:1]):
                continue
            position = table.position(column.name)
            rows[table.name] = [
                tuple(None if i == position else v for i, v in enumerate(row)) if self.rng.random() < 0.25 else row
                for row in rows[table.name]
            ]


def _members(rows: list[tuple[Any, ...]], group_of: Callable[[tuple[Any, ...]], Any]) -> dict[Any, list[int]]:
    """The row numbers of each group (rows of no group, NULL, left out)."""
    members: dict[Any, list[int]] = {}
    for index, row in enumerate(rows):
        group = group_of(row)
        if group is not None:
            members.setdefault(group, []).append(index)
    return members


def _declared(left: Table, left_column: str, right: Table, right_column: str) -> bool:
    for child, child_column, parent in ((left, left_column, right), (right, right_column, left)):
        for fk in child.foreign_keys:
            if fk.parent.lower() == parent.name.lower() and child_column in fk.columns:
                return True
    return False


def stored_or_none(value: Any, column: Any, kind: str) -> Any:
    """`value` as the column stores it, or None when it cannot hold it."""
    try:
        return stored(value, column, kind)
    except Unstorable:
        return None


class Repairer:
    """Makes rows satisfy the schema: NOT NULL filled, foreign keys pointing at existing parents
    (or NULL, or the row dropped), keys unique (fresh values, or the row dropped); then `keep`
    (the invariants no schema declares: `plausible.Keeper.keep`), and again until nothing changes."""

    def __init__(self, schema: Schema, rng: random.Random, keep: Callable[[Rows], Rows] | None = None) -> None:
        self.schema = schema
        self.rng = rng
        self.keep = keep
        self.order = topological(schema)
        self.fresh_counter = 0
        self._fixed = False  # whether the check running changed a row (drew from the rng, or dropped one)
        self._clean = {}

    def repair(self, rows: Rows) -> Rows:
        rows = {name: list(table_rows) for name, table_rows in rows.items()}
        self._clean: dict[str, tuple[list[tuple[Any, ...]], ...]] = {}  # `_declared`'s, over this repair's passes
        for _ in range(3):
            rows = self._declared(rows)
            if self.keep is None:
                return rows
            kept = self.keep(rows)
            if kept == rows:
                return rows
            rows = kept
        return self._declared(rows)

    def _declared(self, rows: Rows) -> Rows:
        """The declared constraints (and those folded into the schema), until nothing changes.
        A table is checked again only when its rows or its parents' rows changed since a check
        that changed nothing (and so drew nothing from the rng: the same rows check the same)."""
        plans = repair_plans(self.schema)
        clean = self._clean  # table -> its rows and its parents' at its last clean check (lists are never changed in place)
        for _ in range(6):
            changed = False
            for table in self.order:
                budget.check()
                plan = plans[table.name]
                before = rows[table.name]
                inputs = (before, *(rows[name] for name in plan.parents))
                last = clean.get(table.name)
                if last is not None and all(a is b for a, b in zip(last, inputs)):
                    continue
                self._fixed = False
                after = self._not_null(table, before)
                after = self._foreign_keys(table, after, rows)
                after = self._unique(table, after, rows)
                if after != before:
                    changed = True
                if self._fixed:
                    rows[table.name] = after
                else:  # every row kept as it was: the list the check saw stays, to be known again
                    clean[table.name] = inputs
            if not changed:
                break
        return rows

    def _not_null(self, table: Table, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        required = repair_plans(self.schema)[table.name].required
        if not required:
            return rows
        result = []
        for row in rows:
            if None not in row or all(row[i] is not None for i in required):
                result.append(row)
                continue
            self._fixed = True
            fixed = list(row)
            for i in required:
                if fixed[i] is None:
                    pool = [other[i] for other in rows if other[i] is not None]
                    if pool:
                        fixed[i] = self.rng.choice(pool)
                    else:
                        fixed[i] = fresh_value(table.columns[i], set(), self._next())
            if all(fixed[i] is not None for i in required):
                result.append(tuple(fixed))
        return result

    def _next(self) -> int:
        self.fresh_counter += 1
        return self.fresh_counter

    def _foreign_keys(self, table: Table, rows: list[tuple[Any, ...]], all_rows: Rows) -> list[tuple[Any, ...]]:
        kind = self.schema.kind
        for link in repair_plans(self.schema)[table.name].links:
            parent_rows = rows if link.own else all_rows[link.parent.name]
            if len(link.keys) == 1:
                (key,), (parent_column,), (position,) = link.keys, link.parent_columns, link.positions
                present = {row[key] for row in parent_rows}
                present.discard(None)
                column = [row[position] for row in rows]
                values = set(column)
                values.discard(None)
                if kind == "sqlite" and set(map(type, values)) <= SQLITE_AS_IS.get(parent_column.affinity, frozenset()):
                    if values <= present:  # values the parent's column stores as they are
                        continue  # every row points at a parent (or at none): nothing to do
                elif all(value is None or stored_or_none(value, parent_column, kind) in present for value in column):
                    continue
            keys = [tuple(row[p] for p in link.keys) for row in parent_rows]
            keys = [key for key in dict.fromkeys(keys) if None not in key]
            parent_cols, positions = link.parent_columns, link.positions
            keyset = set(keys)
            result = []
            for row in rows:
                values = tuple(row[p] for p in positions)
                if any(v is None for v in values):
                    result.append(row)
                    continue
                as_parent = tuple(stored_or_none(v, c, kind) for v, c in zip(values, parent_cols))
                if as_parent in keyset:
                    result.append(row)
                    continue
                self._fixed = True
                fixed = list(row)
                if keys:
                    choice = self.rng.choice(keys)
                    for p, v in zip(positions, choice):
                        fixed[p] = stored_or_none(v, table.columns[p], kind)
                    if any(fixed[p] is None for p in positions):
                        continue
                elif all(not table.columns[p].not_null and table.columns[p].name not in table.primary_key for p in positions):
                    for p in positions:
                        fixed[p] = None
                else:
                    continue  # no parent to point at: the row goes
                result.append(tuple(fixed))
            rows = result
        return rows

    def _unique(self, table: Table, rows: list[tuple[Any, ...]], all_rows: Rows) -> list[tuple[Any, ...]]:
        plan = repair_plans(self.schema)[table.name]
        for key, positions, free in plan.uniques:
            if len(positions) == 1:
                column = [row[positions[0]] for row in rows]
                present = column if key == table.primary_key else [v for v in column if v is not None]
                if len(set(present)) == len(present):
                    continue  # no two rows share the key: nothing to do
            else:
                values = list(map(operator.itemgetter(*positions), rows))
                present = values if key == table.primary_key else [v for v in values if None not in v]
                if len(set(present)) == len(present):
                    continue
            seen: set[tuple[Any, ...]] = set()
            taken = {i: {row[i] for row in rows} for i in positions}
            result = []
            for row in rows:
                value = tuple(row[p] for p in positions)
                if any(v is None for v in value) and key != table.primary_key:
                    result.append(row)  # NULLs never collide in a UNIQUE key
                    continue
                if value not in seen:
                    seen.add(value)
                    result.append(row)
                    continue
                self._fixed = True
                if not free:
                    continue  # a key made of foreign keys only: drop the copy
                fixed = list(row)
                position = free[-1]
                fresh = fresh_value(table.columns[position], taken[position], self._next())
                fixed[position] = stored_or_none(fresh, table.columns[position], self.schema.kind)
                new_value = tuple(fixed[p] for p in positions)
                if fixed[position] is None or new_value in seen:
                    continue
                taken[position].add(fixed[position])
                seen.add(new_value)
                result.append(tuple(fixed))
            rows = result
        return rows


@dataclass(frozen=True)
class _Link:
    """A foreign key as the repair follows it: the parent, its referenced columns' positions and
    columns, the child's positions; `own`: the table points at itself (its rows as they are being
    repaired are the parent's)."""

    parent: Table
    keys: tuple[int, ...]
    parent_columns: tuple[Column, ...]
    positions: tuple[int, ...]
    own: bool


@dataclass(frozen=True)
class _Plan:
    """What the repair of one table needs of the schema, worked out once per schema."""

    required: tuple[int, ...]  # NOT NULL and primary key columns
    links: tuple[_Link, ...]  # the foreign keys whose parent is found, in declared order
    uniques: tuple[tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]], ...]  # (key, positions, positions not in a foreign key)
    parents: tuple[str, ...]  # the tables whose rows the check reads besides the table's own


def repair_plans(schema: Schema) -> dict[str, _Plan]:
    """Each table's `_Plan` (by name), worked out once per schema."""
    plans = schema.derived.get("repair")
    if plans is None:
        plans = schema.derived["repair"] = {table.name: _plan(schema, table) for table in schema.tables}
    return plans  # type: ignore[no-any-return]


def _plan(schema: Schema, table: Table) -> _Plan:
    required = tuple(i for i, c in enumerate(table.columns) if c.not_null or c.name in table.primary_key)
    links = []
    for fk in table.foreign_keys:
        found = parent_columns(schema, fk)
        if found is None:
            continue
        parent, referenced = found
        own = fk.parent.lower() == table.name.lower() and parent.name == table.name
        links.append(_Link(parent, tuple(parent.position(c) for c in referenced), tuple(parent.column(c) for c in referenced),  # type: ignore[misc]
                           tuple(table.position(c) for c in fk.columns), own))
    fk_columns = {c for fk in table.foreign_keys for c in fk.columns}
    uniques = []
    for key in table.uniques:
        positions = tuple(table.position(c) for c in key)
        uniques.append((key, positions, tuple(p for p in positions if table.columns[p].name not in fk_columns)))
    parents = tuple(dict.fromkeys(link.parent.name for link in links if not link.own))
    return _Plan(required, tuple(links), tuple(uniques), parents)


# ----------------------------------------------------------------------------- writing a candidate

_REFUSED = (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError, OverflowError)  # a row SQLite does not take


class _Refused(Exception):
    """A row was refused where rows go in without savepoints: again with them."""


def create_sqlite(schema: Schema, rows: Rows, target: str | Path) -> tuple[sqlite3.Connection, Rows]:
    """A SQLite database (`:memory:` or a file path) holding `rows`; rows the database refuses
    (a CHECK, an index we do not model) are left out and the inserted rows returned. The tables
    come from a copy of an empty database made once per schema (creating them costs more than
    filling them); a file is the filled database's image, written at once. The rows go in
    without a savepoint per table first (nearly every candidate's rows are all taken); where one
    is refused, the database is made again from the empty image with them (the same statements
    as always, and so the same bytes)."""
    if _CAN_SERIALIZE:
        try:
            return _create_sqlite(schema, rows, target, savepoints=False)
        except _Refused:
            pass
    return _create_sqlite(schema, rows, target, savepoints=True)


def _create_sqlite(schema: Schema, rows: Rows, target: str | Path, *, savepoints: bool) -> tuple[sqlite3.Connection, Rows]:
    in_memory = _CAN_SERIALIZE or str(target) == ":memory:"
    connection = sqlite3.connect(":memory:" if in_memory else str(target), isolation_level=None)
    connection.text_factory = lambda data: data.decode("utf-8", "backslashreplace")
    try:
        if _CAN_SERIALIZE:
            connection.deserialize(_empty_image(tuple(table.create_sql for table in schema.tables)))
        else:  # an SQLite built without serialize(): the tables made here, the file written in place
            connection.execute("PRAGMA journal_mode = OFF")
            connection.execute("PRAGMA synchronous = OFF")  # the cache renames the folder into place once closed
            _create_tables(connection, tuple(table.create_sql for table in schema.tables))
        connection.execute("BEGIN")
        if savepoints:
            kept = _insert_rows(connection, schema, rows, _REFUSED, savepoints=True)
        else:
            kept = _insert_all_rows(connection, schema, rows)
        for sql in schema.extra_sql:
            try:
                connection.execute(sql)
            except sqlite3.Error:
                pass  # a unique index that our rows break: the rows were checked against it already
        connection.execute("COMMIT")
        if _CAN_SERIALIZE and str(target) != ":memory:":
            Path(target).write_bytes(connection.serialize())
    except BaseException:
        connection.close()
        raise
    return connection, kept


_CAN_SERIALIZE = hasattr(sqlite3.Connection, "serialize")  # Python 3.11+ on SQLite 3.23+


@functools.lru_cache(maxsize=64)  # a pure function of the schema's tables: shrinking builds a database per attempt
def _empty_image(create_sql: tuple[str, ...]) -> bytes:
    """The bytes of an empty database with these tables, in small pages (a neighbour is a few
    rows in each of many tables)."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    try:
        _create_tables(connection, create_sql)
        return connection.serialize()
    finally:
        connection.close()


def _create_tables(connection: sqlite3.Connection, create_sql: tuple[str, ...]) -> None:
    connection.execute("PRAGMA page_size = 1024")  # before the first table; small pages: few rows per table
    for sql in create_sql:
        budget.check()
        connection.execute(sql)


def _insert_statement(schema: Schema, table: Table) -> str:
    found = schema.derived["insert"].get(table.name)
    if found is None:
        names = ", ".join(quote(c.name) for c in table.columns)
        marks = ", ".join("?" * len(table.columns))
        found = schema.derived["insert"][table.name] = f"INSERT INTO {quote(table.name)} ({names}) VALUES ({marks})"
    return found  # type: ignore[no-any-return]


def _insert_all_rows(connection: sqlite3.Connection, schema: Schema, rows: Rows) -> Rows:
    """`_insert_rows` where every row goes in: each table's rows with one `executemany`, parents
    first; `_Refused` at the first row refused."""
    kept: Rows = {}
    for table in topological(schema):
        budget.check()
        try:
            connection.executemany(_insert_statement(schema, table), rows[table.name])
        except _REFUSED as error:
            raise _Refused() from error
        kept[table.name] = list(rows[table.name])
    return kept


def _insert_rows(connection: Any, schema: Schema, rows: Rows, refused: tuple[type[BaseException], ...],
                 *, savepoints: bool = False) -> Rows:
    """Insert the rows parents first; a row the database refuses (`refused`: a constraint it
    checks that ours missed) is left out. Returns the rows kept. With `savepoints` (SQLite) each
    table's rows go in with one `executemany`, and row by row only when that is refused."""
    kept: Rows = {}
    for table in topological(schema):
        budget.check()
        names = ", ".join(quote(c.name) for c in table.columns)
        marks = ", ".join("?" * len(table.columns))
        insert = f"INSERT INTO {quote(table.name)} ({names}) VALUES ({marks})"
        if savepoints:
            connection.execute("SAVEPOINT nl2sql_rows")
            try:
                connection.executemany(insert, rows[table.name])
            except refused:
                connection.execute("ROLLBACK TO nl2sql_rows")  # undo the rows before the refused one
            else:
                connection.execute("RELEASE nl2sql_rows")
                kept[table.name] = list(rows[table.name])
                continue
            connection.execute("RELEASE nl2sql_rows")
        kept[table.name] = []
        for row in rows[table.name]:
            try:
                connection.execute(insert, list(row))
            except refused as error:
                raise_if_interrupt(error)  # a Ctrl-C refuses no row: it stops the run
                continue
            kept[table.name].append(row)
    return kept


def create_duckdb(schema: Schema, rows: Rows, target: str | Path) -> tuple[Any, Rows]:
    """A DuckDB database (`:memory:` or a file path) holding `rows`, attached to the process's
    DuckDB instance (`schema.DuckdbHost`: no instance started per candidate); rows the database
    refuses are left out and the inserted rows returned. Closing the connection detaches it. The
    tables are copied from a database holding them empty (`DuckdbHost.create_tables`)."""
    import duckdb

    connection = DUCKDB_HOST.attach(target)
    try:
        budget.check()
        DUCKDB_HOST.create_tables(connection, tuple(table.create_sql for table in schema.tables))
        kept = _insert_duckdb_rows(connection, schema, rows, (duckdb.Error,))
        for sql in schema.extra_sql:
            try:
                connection.execute(sql)
            except duckdb.Error as error:
                raise_if_interrupt(error)
    except BaseException:
        connection.close()
        raise
    return connection, kept


DUCKDB_BATCH_ROWS = 500  # rows per bulk INSERT
DUCKDB_UNNEST_ROWS = 3  # from this many rows, a batch of one-type columns goes in as lists (`_as_columns`)


def _insert_duckdb_rows(connection: Any, schema: Schema, rows: Rows, refused: tuple[type[BaseException], ...]) -> Rows:
    """`_insert_rows` for DuckDB, which has no savepoints and runs each statement in a transaction
    of its own: row by row, a refused row left out, as there; but each table's rows first go in
    with one statement (per `DUCKDB_BATCH_ROWS`), which DuckDB takes whole or not at all, and row
    by row only when it is refused (one INSERT per row costs about a millisecond in DuckDB). The
    rows kept are those of row by row from the start: each value is cast to its column on its own
    either way, and a batch holds only rows that each go in after the rows before them; except
    where a row may point at a later row of the same batch, which row by row would refuse (a
    foreign key of a table to itself: such a table goes row by row).

    The statement: each column's values as one list, unnested (`INSERT ... SELECT unnest(?), ...`:
    DuckDB binds one parameter per column instead of one per value, several times faster past a
    few rows), where every column holds values of one type that a list keeps as they are
    (`_as_columns`); else one multi-row `INSERT ... VALUES`."""
    kept: Rows = {}
    for table in topological(schema):
        budget.check()
        names = ", ".join(quote(c.name) for c in table.columns)
        marks = "(" + ", ".join("?" * len(table.columns)) + ")"
        insert = f"INSERT INTO {quote(table.name)} ({names}) VALUES "
        unnest = f"INSERT INTO {quote(table.name)} ({names}) SELECT " + ", ".join("unnest(?)" for _ in table.columns)
        own = any(fk.parent.lower() == table.name.lower() for fk in table.foreign_keys)
        kept[table.name] = []
        table_rows = rows[table.name]
        for start in range(0, len(table_rows), DUCKDB_BATCH_ROWS):
            batch = table_rows[start:start + DUCKDB_BATCH_ROWS]
            if len(batch) > 1 and not own:
                columns = _as_columns(batch) if len(batch) >= DUCKDB_UNNEST_ROWS else None
                try:
                    if columns is not None:
                        connection.execute(unnest, columns)
                    else:
                        connection.execute(insert + ", ".join([marks] * len(batch)), [value for row in batch for value in row])
                except refused as error:
                    raise_if_interrupt(error)  # a Ctrl-C refuses no row: it stops the run
                else:
                    kept[table.name].extend(batch)
                    continue
            for row in batch:
                try:
                    connection.execute(insert + marks, list(row))
                except refused as error:
                    raise_if_interrupt(error)
                    continue
                kept[table.name].append(row)
    return kept


# Python types whose values DuckDB's client reads into a list exactly as it reads each alone (a
# list takes its values' widest type, and widening these changes no value); int also within 64
# bits (wider ones become HUGEINT, UBIGINT or DOUBLE), datetime and time without a time zone.
# Decimal is not among them: two decimals widen to a type that may round one of them.
_LIST_TYPES = frozenset({str, int, float, bool, bytes, datetime.date, datetime.datetime, datetime.time})


def _as_columns(batch: Sequence[tuple[Any, ...]]) -> list[list[Any]] | None:
    """The batch's values column by column, when each column's values but NULLs are all of one of
    `_LIST_TYPES`; else None."""
    columns = [list(column) for column in zip(*batch)]
    for values in columns:
        kind = None
        for value in values:
            if value is None:
                continue
            if kind is None:
                kind = type(value)
                if kind not in _LIST_TYPES:
                    return None
            elif type(value) is not kind:
                return None
            if kind is int:
                if not -(1 << 63) <= value < (1 << 63):
                    return None
            elif (kind is datetime.datetime or kind is datetime.time) and value.tzinfo is not None:
                return None
    return columns


def create_database(schema: Schema, rows: Rows, target: str | Path, repairer: Repairer) -> tuple[Any, Rows]:
    """Write `rows`; if the database refused some, repair again (children of a refused parent)
    and rewrite, until every row goes in."""
    connection, kept, _ = _create_until_kept(schema, rows, target, repairer, False)
    return connection, kept


def create_candidate(schema: Schema, rows: Rows, repairer: Repairer) -> tuple[Any, Rows, bytes | None]:
    """`create_database` in memory, and the image of the database (SQLite): the bytes that
    `create_database` writes into a file for the rows it kept, where its last attempt took every
    row (so that the cache writes a chosen candidate without building it again); else None."""
    return _create_until_kept(schema, rows, ":memory:", repairer, schema.kind == "sqlite" and _CAN_SERIALIZE)


def _create_until_kept(schema: Schema, rows: Rows, target: str | Path, repairer: Repairer,
                       image: bool) -> tuple[Any, Rows, bytes | None]:
    create = create_sqlite if schema.kind == "sqlite" else create_duckdb
    for _ in range(3):
        connection, kept = create(schema, rows, target)
        if kept == rows:
            return connection, kept, connection.serialize() if image else None
        connection.close()
        if str(target) != ":memory:":
            Path(target).unlink(missing_ok=True)
        rows = repairer.repair(kept)
    connection, kept = create(schema, rows, target)
    return connection, kept, connection.serialize() if image and kept == rows else None
