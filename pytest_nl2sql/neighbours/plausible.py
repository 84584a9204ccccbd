"""Keeping and breaking observed invariants (`invariants`) in a neighbour's rows.

`Keeper` repairs the invariants that no schema could declare (a category column's values and
spelling, a literal that names one row, parents that always have a child); the unique, NOT NULL
and inclusion invariants are folded into the schema the `Repairer` already enforces. `violations`
checks all of them (a plausible neighbour has none). `break_one` makes a stress neighbour: rows
that break exactly one invariant, in the way a real database might (a second row with the same
name and children of its own, a NULL, a reference to no row, a parent without children).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytest_nl2sql.neighbours.generate import Rows, parent_columns
from pytest_nl2sql.neighbours.invariants import Invariant, InvariantKind, Observed
from pytest_nl2sql.neighbours.literals import GoldFacts
from pytest_nl2sql.neighbours.schema import Schema, Table
from pytest_nl2sql.neighbours.values import fresh_value


def fold(value: Any) -> Any:
    """A text as spelling-insensitive comparison sees it (case and outer spaces ignored)."""
    return value.strip().lower() if isinstance(value, str) else value


def gold_literals(facts: GoldFacts) -> dict[tuple[str, str], list[Any]]:
    """The literals the gold compares each column with (a category keeps them, spelled as written)."""
    found: dict[tuple[str, str], list[Any]] = {}
    for hint in facts.hints:
        values = hint.value if isinstance(hint.value, tuple) else (hint.value,)
        found.setdefault(hint.column, []).extend(v for v in values if v is not None)
    return found


@dataclass
class Keeper:
    """Repairs rows so that the invariants a schema cannot declare hold (see the module's doc)."""

    schema: Schema  # with the structural invariants folded in (`Observed.schema_with`)
    observed: Observed
    literals: dict[tuple[str, str], list[Any]]
    rng: random.Random
    counter: int = 0

    def keep(self, rows: Rows) -> Rows:
        rows = dict(rows)
        for invariant in self.observed.invariants:
            table = self.schema.table(invariant.table)
            if table is None or table.column(invariant.column) is None:
                continue
            kind = invariant.kind
            if kind is InvariantKind.CATEGORY:
                rows[table.name] = self._in_category(table, invariant, rows[table.name])
            elif kind is InvariantKind.SPELLING:
                rows[table.name] = self._one_spelling(table, invariant, rows[table.name])
            elif kind is InvariantKind.ONCE:
                rows[table.name] = self._once(table, invariant, rows[table.name])
            elif kind is InvariantKind.PARTICIPATION:
                self._participation(invariant, rows)
            elif kind is InvariantKind.IDENTITY and invariant.values:
                self._identity(table, invariant, rows)
        return rows

    def _identity(self, table: Table, invariant: Invariant, rows: Rows) -> None:
        """A row named like a source row takes that row's key (and its children follow), or, when
        another row holds that key, a name of its own: no neighbour calls Aruba 'ASM'."""
        keys = dict(invariant.values)
        name, key = table.position(invariant.column), table.position(invariant.other_column)
        held = {row[key] for row in rows[table.name]}
        result = []
        for row in rows[table.name]:
            wanted = keys.get(row[name], row[key])
            if wanted == row[key]:
                result.append(row)
                continue
            if wanted in held:
                self.counter += 1
                taken = {other[name] for other in rows[table.name]}
                row = row[:name] + (fresh_value(table.columns[name], taken, self.counter),) + row[name + 1:]
            else:
                self._repoint(table, invariant.other_column, row[key], wanted, rows)
                held.add(wanted)
                row = row[:key] + (wanted,) + row[key + 1:]
            result.append(row)
        rows[table.name] = result

    def _repoint(self, parent: Table, column: str, old: Any, new: Any, rows: Rows) -> None:
        """Rows pointing at `parent.column = old` point at `new` instead."""
        for child in self.schema.tables:
            for fk in child.foreign_keys:
                found = parent_columns(self.schema, fk)
                if found is None or found[0] is not parent or found[1] != (column,):
                    continue
                pointer = child.position(fk.columns[0])
                rows[child.name] = [row[:pointer] + (new,) + row[pointer + 1:] if row[pointer] == old else row
                                    for row in rows[child.name]]

    def _in_category(self, table: Table, invariant: Invariant, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        allowed = list(invariant.values) + self.literals.get((table.name, invariant.column), [])
        spelled = {fold(v): v for v in reversed(allowed)}
        one_spelling = self.observed.has(InvariantKind.SPELLING, table.name, invariant.column)
        position = table.position(invariant.column)
        result = []
        for row in rows:
            value = row[position]
            if value is not None and value not in allowed and (one_spelling or fold(value) not in spelled):
                choice = spelled.get(fold(value)) or self.rng.choice(invariant.values)
                row = row[:position] + (choice,) + row[position + 1:]
            result.append(row)
        return result

    def _one_spelling(self, table: Table, invariant: Invariant, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        position = table.position(invariant.column)
        spelled: dict[Any, Any] = {}
        for value in [*self.literals.get((table.name, invariant.column), []), *(row[position] for row in rows)]:
            if isinstance(value, str):
                spelled.setdefault(fold(value), value)
        return [row if not isinstance(row[position], str) or spelled[fold(row[position])] == row[position]
                else row[:position] + (spelled[fold(row[position])],) + row[position + 1:] for row in rows]

    def _once(self, table: Table, invariant: Invariant, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        position = table.position(invariant.column)
        literal = invariant.values[0]
        taken = {row[position] for row in rows}
        result, seen = [], False
        for row in rows:
            if row[position] == literal:
                if seen:
                    self.counter += 1
                    row = row[:position] + (fresh_value(table.columns[position], taken, self.counter),) + row[position + 1:]
                    taken.add(row[position])
                seen = True
            result.append(row)
        return result

    def _participation(self, invariant: Invariant, rows: Rows) -> None:
        """A parent without a child gets a copy of some child (its keys made fresh by the repair);
        with no child rows at all, the parents go."""
        parent, child = self.schema.table(invariant.table), self.schema.table(invariant.other_table)
        if parent is None or child is None:
            return
        key, pointer = parent.position(invariant.column), child.position(invariant.other_column)
        pointed = {row[pointer] for row in rows[child.name]}
        lonely = [row for row in rows[parent.name] if row[key] is not None and row[key] not in pointed]
        if not lonely:
            return
        if not rows[child.name]:
            rows[parent.name] = [row for row in rows[parent.name] if row[key] is None or row[key] in pointed]
            return
        made = []
        for row in lonely:
            template = self.rng.choice(rows[child.name])
            made.append(template[:pointer] + (row[key],) + template[pointer + 1:])
        rows[child.name] = rows[child.name] + made


def violations(rows: Rows, schema: Schema, observed: Observed, literals: dict[tuple[str, str], list[Any]],
               only: Iterable[Invariant] | None = None) -> list[Invariant]:
    """The invariants of `observed` (or of `only`) that `rows` break."""
    broken = []
    for invariant in (observed.invariants if only is None else only):
        table = schema.table(invariant.table)
        if table is None or table.column(invariant.column) is None:
            continue
        values = [row[table.position(invariant.column)] for row in rows.get(table.name, [])]
        kind = invariant.kind
        if kind is InvariantKind.UNIQUE:
            present = [v for v in values if v is not None]
            bad = len(set(present)) != len(present)
        elif kind is InvariantKind.NOT_NULL:
            bad = None in values
        elif kind is InvariantKind.ONCE:
            bad = values.count(invariant.values[0]) > 1
        elif kind is InvariantKind.SPELLING:
            texts = {v for v in values if isinstance(v, str)}
            bad = len({fold(v) for v in texts}) != len(texts)
        elif kind is InvariantKind.IDENTITY:
            keys = dict(invariant.values)
            key = table.position(invariant.other_column)
            bad = bool(keys) and any(keys.get(row[table.position(invariant.column)], row[key]) != row[key]
                                     for row in rows.get(table.name, []))
        elif kind is InvariantKind.CATEGORY:
            allowed = set(invariant.values) | set(literals.get((table.name, invariant.column), []))
            bad = any(v is not None and v not in allowed and fold(v) not in {fold(a) for a in allowed} for v in values)
        else:
            other = schema.table(invariant.other_table)
            if other is None or other.column(invariant.other_column) is None:
                continue
            theirs = {row[other.position(invariant.other_column)] for row in rows.get(other.name, [])}
            bad = any(v is not None and v not in theirs for v in values)
        if bad:
            broken.append(invariant)
    return broken


def break_one(rows: Rows, invariant: Invariant, schema: Schema, rng: random.Random) -> Rows | None:
    """`rows` with `invariant` broken once, as a real database might break it; None when these rows
    give nothing to break it with. `schema` has the invariants folded in (keys to make fresh)."""
    table = schema.table(invariant.table)
    if table is None or table.column(invariant.column) is None or not rows.get(table.name):
        return None
    rows = {name: list(table_rows) for name, table_rows in rows.items()}
    position = table.position(invariant.column)
    kind = invariant.kind
    if kind in (InvariantKind.UNIQUE, InvariantKind.ONCE, InvariantKind.SPELLING):
        if kind is InvariantKind.ONCE:
            candidates = [row for row in rows[table.name] if row[position] == invariant.values[0]]
        else:
            candidates = [row for row in rows[table.name] if row[position] is not None
                          and (kind is not InvariantKind.SPELLING or isinstance(row[position], str))]
        if not candidates:
            return None
        original = rng.choice(candidates)
        copy = _fresh_keys(table, original, rows[table.name], keep={invariant.column}, rng=rng)
        if kind is InvariantKind.SPELLING:
            text = original[position]
            other = text.swapcase() if text.swapcase() != text else text + " "
            copy = copy[:position] + (other,) + copy[position + 1:]
        rows[table.name].append(copy)
        _copy_children(schema, table, original, copy, rows, rng)
        return rows
    if kind is InvariantKind.NOT_NULL:
        chosen = set(rng.sample(range(len(rows[table.name])), max(1, len(rows[table.name]) // 3)))
        rows[table.name] = [row[:position] + (None,) + row[position + 1:] if i in chosen else row
                            for i, row in enumerate(rows[table.name])]
        return rows
    if kind is InvariantKind.INCLUSION:
        parent = schema.table(invariant.other_table)
        if parent is None:
            return None
        taken = {row[parent.position(invariant.other_column)] for row in rows.get(parent.name, [])}
        taken |= {row[position] for row in rows[table.name]}
        dangling = fresh_value(table.columns[position], taken, rng.randint(1, 50))
        if dangling is None:
            return None
        index = rng.randrange(len(rows[table.name]))
        row = rows[table.name][index]
        rows[table.name][index] = row[:position] + (dangling,) + row[position + 1:]
        return rows
    if kind is InvariantKind.PARTICIPATION:
        original = rng.choice(rows[table.name])
        rows[table.name].append(_fresh_keys(table, original, rows[table.name], keep=set(), rng=rng))
        return rows
    return None


def _fresh_keys(table: Table, row: tuple[Any, ...], existing: list[tuple[Any, ...]], keep: set[str],
                rng: random.Random) -> tuple[Any, ...]:
    """A copy of `row` with a value of its own in every single-column key but those in `keep`, and
    another value in one column of each composite key that holds a kept column (another existing
    value for a foreign key's column, so that it still points at a row)."""
    copy = list(row)
    references = {c for fk in table.foreign_keys for c in fk.columns}
    for key in table.uniques:
        if len(key) == 1 and key[0] in keep:
            continue
        if len(key) > 1:
            others = [c for c in key if c not in keep]
            if not others or len(others) == len(key):
                continue
            position = table.position(others[-1])
            if others[-1] in references:
                choices = sorted({other[position] for other in existing if other[position] not in (None, row[position])}, key=repr)
                if choices:
                    copy[position] = rng.choice(choices)
                continue
        else:
            position = table.position(key[0])
        taken = {other[position] for other in existing}
        value = fresh_value(table.columns[position], taken, rng.randint(1, 1000))
        if value is not None:
            copy[position] = value
    return tuple(copy)


def _copy_children(schema: Schema, parent: Table, original: tuple[Any, ...], copy: tuple[Any, ...], rows: Rows,
                   rng: random.Random) -> None:
    """One child row of `original` in each child table, pointed at `copy` (a second entity of the
    same name has children of its own, or grouping by name and by key would not differ)."""
    for child in schema.tables:
        if child is parent:
            continue
        for fk in child.foreign_keys:
            found = parent_columns(schema, fk)
            if found is None or found[0] is not parent:
                continue
            referenced = [parent.position(c) for c in found[1]]
            pointers = [child.position(c) for c in fk.columns]
            if tuple(copy[p] for p in referenced) == tuple(original[p] for p in referenced):
                continue  # the children point at the shared name already
            mine = [row for row in rows[child.name] if tuple(row[p] for p in pointers) == tuple(original[p] for p in referenced)]
            if not mine:
                continue
            template = list(rng.choice(mine))
            for pointer, position in zip(pointers, referenced):
                template[pointer] = copy[position]
            rows[child.name].append(_fresh_keys(child, tuple(template), rows[child.name], keep=set(fk.columns), rng=rng))
