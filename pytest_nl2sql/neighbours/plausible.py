"""Keeping and breaking observed invariants (`invariants`) in a neighbour's rows.

`Keeper` repairs the invariants that no schema could declare (a category column's values and
spelling, a literal that names one row, parents that always have a child, a name's key and
parents); the unique, NOT NULL and inclusion invariants are folded into the schema the `Repairer`
already enforces. `settle` then removes what still breaks one (rows only go, so it ends), and
`offending` / `violations` check them (a plausible neighbour has none). `break_one` makes a stress
neighbour: rows that break exactly one invariant, in the way a real database might (a second row
with the same name and children of its own, NULLs, a reference to no row, a parent without
children, a second spelling, a value outside a category).
"""

from __future__ import annotations

import operator
import random
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_nl2sql.neighbours import budget
from pytest_nl2sql.neighbours.generate import Rows, parent_columns, repair_plans, stored_or_none
from pytest_nl2sql.neighbours.invariants import Invariant, InvariantKind, Observed
from pytest_nl2sql.neighbours.literals import GoldFacts
from pytest_nl2sql.neighbours.schema import DATE, INT, REAL, TIMESTAMP, Schema, Table
from pytest_nl2sql.neighbours.values import fresh_value, values_near

CHILDREN_COPIED = 4  # children of the copied row a repeated name gets, per child table


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
    _quiet: dict[int, tuple[Any, Any]] = field(default_factory=dict, repr=False, compare=False)  # `keep`'s

    def keep(self, rows: Rows) -> Rows:
        """`rows` with the invariants repaired. An invariant whose tables hold the same lists as
        when it last changed nothing is not looked at again: a repair that changes nothing draws
        nothing from the rng, so the same rows give the same nothing (lists are never changed in
        place here, and a repair keeps a table's list where it changed none of its rows)."""
        rows = dict(rows)
        quiet = self._quiet
        for index, (invariant, table, read) in enumerate(_resolved(self.schema, self.observed)):
            budget.check()
            if table is None:
                continue
            mine = rows[table.name]
            other = rows[read[1]] if len(read) > 1 else None
            last = quiet.get(index)
            if last is not None and last[0] is mine and last[1] is other:
                continue
            self._keep_one(invariant, table, rows)
            after = rows[table.name]
            if after is not mine and len(after) == len(mine) and all(map(operator.is_, after, mine)):
                rows[table.name] = after = mine  # the same rows: the list as it was
            if after is mine and (other is None or rows[read[1]] is other):
                quiet[index] = (mine, other)
        return rows

    def _keep_one(self, invariant: Invariant, table: Table, rows: Rows) -> None:
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
        elif kind is InvariantKind.FACT and invariant.values:
            parents = invariant.pairs
            name, pointer = table.position(invariant.column), table.position(invariant.other_column)
            rows[table.name] = [self._own_parents(table, row, [pointer], (parents[row[name]],), rows, name)
                                if row[name] in parents and row[pointer] != parents[row[name]] else row
                                for row in rows[table.name]]

    def _identity(self, table: Table, invariant: Invariant, rows: Rows) -> None:
        """A row named like a source row takes that row's key (and its children follow), or, when
        another row holds that key, a name of its own: no neighbour calls Aruba 'ASM'."""
        keys = invariant.key_by_name
        parents = invariant.references_by_name
        name, key = table.position(invariant.column), table.position(invariant.other_column)
        pointers = [table.position(c) for c in invariant.together]
        held = {row[key] for row in rows[table.name]}
        result = []
        for row in rows[table.name]:
            if row[name] in parents and any(row[p] != v for p, v in zip(pointers, parents[row[name]])):
                row = self._own_parents(table, row, pointers, parents[row[name]], rows, name)
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

    def _own_parents(self, table: Table, row: tuple[Any, ...], pointers: list[int], values: tuple[Any, ...],
                     rows: Rows, position: int) -> tuple[Any, ...]:
        """The row points at the parents the source row of its name points at, where the neighbour
        has them; else it takes a name of its own (no model 'volvo' made by gm)."""
        fixed = list(row)
        for pointer, value in zip(pointers, values):
            column = table.columns[pointer].name
            fk = next(fk for fk in table.foreign_keys if fk.columns == (column,))
            found = parent_columns(self.schema, fk)
            present = found is not None and any(r[found[0].position(found[1][0])] == value for r in rows[found[0].name])
            if present or value is None:
                fixed[pointer] = value
            else:
                self.counter += 1
                taken = {other[position] for other in rows[table.name]}
                fixed[position] = fresh_value(table.columns[position], taken, self.counter)
                return tuple(fixed)
        return tuple(fixed)

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
        used = {value: 0 for value in invariant.values}
        for row in rows:
            if row[position] in used:
                used[row[position]] += 1
        mapped: dict[Any, Any] = {}  # one value outside the category becomes one inside: its rows stay one group
        result = []
        for row in rows:
            value = row[position]
            if value is not None and value not in allowed and (one_spelling or fold(value) not in spelled):
                if value not in mapped:
                    mapped[value] = spelled.get(fold(value)) or min(used, key=lambda v: (used[v], invariant.values.index(v)))
                    used[mapped[value]] = used.get(mapped[value], 0) + 1
                row = row[:position] + (mapped[value],) + row[position + 1:]
            result.append(row)
        return result

    def _one_spelling(self, table: Table, invariant: Invariant, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        position = table.position(invariant.column)
        literals = self.literals.get((table.name, invariant.column), [])
        texts = {v for v in set(map(operator.itemgetter(position), rows)) if isinstance(v, str)}
        texts.update(v for v in literals if isinstance(v, str))
        if len(set(map(str.lower, map(str.strip, texts)))) == len(texts):  # one text per spelling: every row keeps its own
            return rows
        spelled: dict[Any, Any] = {}
        folds: dict[str, str] = {}  # each distinct text folded once
        for value in [*literals, *(row[position] for row in rows)]:
            if isinstance(value, str):
                folded = folds.get(value)
                if folded is None:
                    folded = folds[value] = value.strip().lower()
                spelled.setdefault(folded, value)
        return [row if not isinstance(row[position], str) or spelled[folds[row[position]]] == row[position]
                else row[:position] + (spelled[folds[row[position]]],) + row[position + 1:] for row in rows]

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


def _resolved(schema: Schema, observed: Observed) -> list[tuple[Invariant, Table | None, tuple[str, ...]]]:
    """Each invariant with its table in `schema` (None where the table or its column is not
    there) and the tables whose rows its repair reads when it changes nothing (a participation:
    the parent's and the child's; else its own), worked out once per schema and set of invariants
    (`keep` runs per repair pass)."""
    memo = schema.derived["keeper"]
    entry = memo.get(id(observed))
    if entry is None or entry[0] is not observed:
        found = []
        for invariant in observed.invariants:
            table = schema.table(invariant.table)
            if table is None or table.column(invariant.column) is None or not _kept_by_keep(invariant):
                found.append((invariant, None, ()))
                continue
            read = (table.name,)
            if invariant.kind is InvariantKind.PARTICIPATION:
                child = schema.table(invariant.other_table)
                read += (child.name,) if child is not None else ()
            found.append((invariant, table, read))
        entry = memo[id(observed)] = (observed, found)  # the key kept alive with its entry
    return entry[1]  # type: ignore[no-any-return]


def _kept_by_keep(invariant: Invariant) -> bool:
    """Does `Keeper.keep` repair it (the others are folded into the schema the `Repairer` keeps)?"""
    kind = invariant.kind
    return kind in (InvariantKind.CATEGORY, InvariantKind.SPELLING, InvariantKind.ONCE, InvariantKind.PARTICIPATION) or (
        kind in (InvariantKind.IDENTITY, InvariantKind.FACT) and bool(invariant.values))


def violations(rows: Rows, schema: Schema, observed: Observed, literals: dict[tuple[str, str], list[Any]],
               only: Iterable[Invariant] | None = None) -> list[Invariant]:
    """The invariants of `observed` (or of `only`) that `rows` break."""
    return [i for i in (observed.invariants if only is None else only) if offending(rows, schema, i, literals)]


def offending(rows: Rows, schema: Schema, invariant: Invariant, literals: dict[tuple[str, str], list[Any]]) -> set[int]:
    """The positions of the rows of `invariant.table` that break it (a duplicate after the first,
    a childless parent, a row whose name points at another parent than the source's ...)."""
    budget.check()
    plan = _check_plan(schema, invariant)
    if plan is None:
        return set()
    table, at, positions, other, other_at = plan
    mine = rows.get(table.name, [])
    kind = invariant.kind
    if kind in (InvariantKind.UNIQUE, InvariantKind.ONCE, InvariantKind.SPELLING):
        if len(positions) == 1 and _none_offend(mine, at, invariant):
            return set()
        seen: dict[Any, Any] = {}
        bad = set()
        for index, row in enumerate(mine):
            value = tuple(row[p] for p in positions)
            if None in value or (kind is InvariantKind.ONCE and value[0] != invariant.values[0]):
                continue
            if kind is InvariantKind.SPELLING:
                if not isinstance(value[0], str):
                    continue
                if seen.setdefault(fold(value[0]), value[0]) != value[0]:
                    bad.add(index)
            elif value in seen:
                bad.add(index)
            else:
                seen[value] = True
        return bad
    if kind is InvariantKind.NOT_NULL:
        if None not in map(operator.itemgetter(at), mine):
            return set()
        return {i for i, row in enumerate(mine) if row[at] is None}
    if kind is InvariantKind.IDENTITY:
        known = invariant.rows_by_name
        return {i for i, row in enumerate(mine) if row[at] in known and known[row[at]] != tuple(row[p] for p in positions)}
    if kind is InvariantKind.FACT:
        facts = invariant.pairs
        pointer = positions[0]
        return {i for i, row in enumerate(mine) if row[at] in facts and facts[row[at]] != row[pointer]}
    if kind is InvariantKind.CATEGORY:
        named = literals.get((table.name, invariant.column))
        if named:
            allowed = set(invariant.values) | set(named)
            folded = {fold(a) for a in allowed}
        else:  # the common case: made once per invariant
            allowed, folded = invariant.value_set, invariant.folded_values  # type: ignore[assignment]
        return {i for i, row in enumerate(mine) if row[at] is not None and row[at] not in allowed and fold(row[at]) not in folded}
    if other is None:  # INCLUSION and PARTICIPATION: the other table or column is not there
        return set()
    theirs = {row[other_at] for row in rows.get(other.name, [])}
    return {i for i, row in enumerate(mine) if row[at] is not None and row[at] not in theirs}


def _check_plan(schema: Schema, invariant: Invariant) -> tuple[Table, int, tuple[int, ...], Table | None, int] | None:
    """Where `offending` looks in `schema` for `invariant`: its table, its column's position, the
    positions it compares (the column and its `together` ones; IDENTITY: the key and references;
    FACT: the reference), the other table and its column's position (INCLUSION, PARTICIPATION);
    None when the table or column is not there. Worked out once per schema and invariant."""
    memo = schema.derived["checks"]
    entry = memo.get(id(invariant))
    if entry is not None and entry[0] is invariant:
        return entry[1]  # type: ignore[no-any-return]
    table = schema.table(invariant.table)
    plan: tuple[Table, int, tuple[int, ...], Table | None, int] | None = None
    if table is not None and table.column(invariant.column) is not None:
        kind = invariant.kind
        other, other_at, positions = None, -1, ()
        if kind in (InvariantKind.UNIQUE, InvariantKind.ONCE, InvariantKind.SPELLING):
            positions = tuple(table.position(c) for c in (invariant.column, *invariant.together))
        elif kind is InvariantKind.IDENTITY:
            positions = tuple(table.position(c) for c in (invariant.other_column, *invariant.together))
        elif kind is InvariantKind.FACT:
            positions = (table.position(invariant.other_column),)
        elif kind in (InvariantKind.INCLUSION, InvariantKind.PARTICIPATION):
            found = schema.table(invariant.other_table)
            if found is not None and found.column(invariant.other_column) is not None:
                other, other_at = found, found.position(invariant.other_column)
        plan = (table, table.position(invariant.column), positions, other, other_at)
    memo[id(invariant)] = (invariant, plan)  # the key kept alive with its entry
    return plan


def _none_offend(mine: list[tuple[Any, ...]], at: int, invariant: Invariant) -> bool:
    """Whether no row breaks a one-column UNIQUE, ONCE or SPELLING invariant, told from the
    column's distinct values (what most checks find, at C speed); False: look row by row."""
    column = [row[at] for row in mine]
    if invariant.kind is InvariantKind.UNIQUE:
        present = [v for v in column if v is not None]
        return len(set(present)) == len(present)
    if invariant.kind is InvariantKind.ONCE:
        literal = invariant.values[0]
        return sum(1 for v in column if v is not None and v == literal) <= 1
    texts = {v for v in set(column) if isinstance(v, str)}  # SPELLING: each folded spelling has one text
    return len(set(map(str.lower, map(str.strip, texts)))) == len(texts)


def settle(rows: Rows, schema: Schema, observed: Observed, literals: dict[tuple[str, str], list[Any]]) -> Rows:
    """`rows` less every row that still breaks an invariant or a declared constraint after the
    repair (a parent left childless, a child left without parent, ...), until none does. Rows only
    go, so it ends; what is left is plausible, if smaller."""
    rows = {name: list(table_rows) for name, table_rows in rows.items()}
    plans = repair_plans(schema)
    declared = [(table, link) for table in schema.tables for link in plans[table.name].links]
    changed: set[str] | None = None  # the tables that lost rows in the last pass (None: check everything)
    while True:
        dropped: set[str] = set()
        for invariant in observed.invariants:
            if changed is not None and invariant.table not in changed and invariant.other_table not in changed:
                continue  # what it reads did not change: it holds as it did
            bad = offending(rows, schema, invariant, literals)
            if bad:
                rows[invariant.table] = [row for i, row in enumerate(rows[invariant.table]) if i not in bad]
                dropped.add(invariant.table)
        for table, link in declared:
            parent = link.parent
            if changed is not None and parent.name not in changed and table.name not in changed:
                continue
            budget.check()
            pointers, keys, as_parent = link.positions, link.keys, link.parent_columns  # '1' in a TEXT reference is the INTEGER key 1
            if len(keys) == 1:  # one column: the values themselves, not 1-tuples
                (pointer,), (key,), (column,) = pointers, keys, as_parent
                present_values = {row[key] for row in rows[parent.name]}
                kept = [row for row in rows[table.name]
                        if row[pointer] is None or stored_or_none(row[pointer], column, schema.kind) in present_values]
            else:
                present = {tuple(row[k] for k in keys) for row in rows[parent.name]}
                kept = [row for row in rows[table.name]
                        if None in (value := tuple(row[p] for p in pointers))
                        or tuple(stored_or_none(v, c, schema.kind) for v, c in zip(value, as_parent)) in present]
            if len(kept) != len(rows[table.name]):
                rows[table.name] = kept
                dropped.add(table.name)
        if not dropped:
            return rows
        changed = dropped


def break_one(rows: Rows, invariant: Invariant, schema: Schema, rng: random.Random,
              literals: dict[tuple[str, str], list[Any]] | None = None, observed: Observed | None = None) -> Rows | None:
    """`rows` with `invariant` broken once, as a real database might break it; None when these rows
    give nothing to break it with. `schema` has the invariants folded in (keys to make fresh). A
    name is repeated, or respelled, where it is one of the gold's literals if a row holds one, and
    of those the row with the most children (the namesake of the busiest entity moves counts most)."""
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
            named = set((literals or {}).get((table.name, invariant.column), []))
            candidates = [row for row in candidates if row[position] in named] or candidates
        if not candidates:
            return None
        children = [_children_of(schema, table, row, rows) for row in candidates]  # counted once per row
        busiest = max(children)
        original = rng.choice([row for row, count in zip(candidates, children) if count == busiest])
        copy = _fresh_keys(table, original, rows[table.name], keep={invariant.column, *invariant.together}, rng=rng)
        if kind is InvariantKind.SPELLING:
            text = original[position]
            other = text.swapcase() if text.swapcase() != text else text + " "
            copy = copy[:position] + (other,) + copy[position + 1:]
        else:
            copy = _otherwise_unlike(table, copy, {invariant.column, *invariant.together}, rows[table.name], literals or {})
        rows[table.name].append(copy)
        _copy_unique_parents(schema, table, original, copy, rows, rng)
        facts = [(i.table, i.column, i.other_column) for i in (observed.of(InvariantKind.FACT) if observed else ())]  # in order: each draws from rng
        _copy_children(schema, table, original, copy, rows, rng, facts)
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
    if kind is InvariantKind.CATEGORY:  # a value the column never holds, in about a third of the rows
        chosen = set(rng.sample(range(len(rows[table.name])), max(1, len(rows[table.name]) // 3)))
        other = fresh_value(table.columns[position], set(invariant.values), rng.randint(1, 50))
        rows[table.name] = [row[:position] + (other,) + row[position + 1:] if i in chosen else row
                            for i, row in enumerate(rows[table.name])]
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


def _otherwise_unlike(table: Table, row: tuple[Any, ...], kept: set[str], rows: list[tuple[Any, ...]],
                      literals: dict[tuple[str, str], list[Any]]) -> tuple[Any, ...]:
    """A namesake that is someone else: in the other columns the gold compares with a literal, a
    value of another row that is not the literal (a second Gruber who is not Astrid), so that a
    dropped conjunct shows."""
    changed = list(row)
    for column in table.columns:
        wanted = literals.get((table.name, column.name))
        if not wanted or column.name in kept:
            continue
        position = table.position(column.name)
        others = sorted({r[position] for r in rows if r[position] is not None and r[position] not in wanted}, key=repr)
        if changed[position] in wanted and others:
            changed[position] = others[0]
    return tuple(changed)


def _varied(table: Table, row: list[Any], fixed: set[int], kind: str, rng: random.Random) -> list[Any]:
    """A namesake's child is not its original's copy: numbers and dates move a step (an invoice of
    another day, another amount), references and texts stay."""
    for position, column in enumerate(table.columns):
        value = row[position]
        if position in fixed or value is None or isinstance(value, bool) or rng.random() < 0.5:
            continue
        if column.value_class in (INT, REAL) and isinstance(value, (int, float)):
            row[position] = stored_or_none(value + rng.choice((1, 2)), column, kind)
        elif column.value_class in (DATE, TIMESTAMP) and isinstance(value, str):
            later = values_near(value, column.value_class)
            row[position] = later[-1] if later else value
    return row


def _children_of(schema: Schema, table: Table, row: tuple[Any, ...], rows: Rows) -> int:
    """How many rows point at `row` (over the declared and folded-in foreign keys)."""
    count = 0
    for child in schema.tables:
        for fk in child.foreign_keys:
            found = parent_columns(schema, fk)
            if found is None or found[0] is not table:
                continue
            key = tuple(row[table.position(c)] for c in found[1])
            pointers = [child.position(c) for c in fk.columns]
            count += sum(1 for other in rows.get(child.name, []) if tuple(other[p] for p in pointers) == key)
    return count


def _copy_unique_parents(schema: Schema, table: Table, original: tuple[Any, ...], copy: tuple[Any, ...], rows: Rows,
                         rng: random.Random) -> None:
    """A parent of its own for the copy where its reference is unique (one party per region): a
    copy of the original's parent, keyed as the copy's fresh reference, or the copy would have to
    share a parent it may not share."""
    singles = {key[0] for key in table.uniques if len(key) == 1}
    for fk in table.foreign_keys:
        found = parent_columns(schema, fk)
        if found is None or len(fk.columns) != 1 or fk.columns[0] not in singles or found[0] is table:
            continue
        parent, (referenced,) = found
        pointer, key = table.position(fk.columns[0]), parent.position(referenced)
        if copy[pointer] == original[pointer] or copy[pointer] is None:
            continue
        theirs = [row for row in rows[parent.name] if row[key] == original[pointer]]
        if not theirs:
            continue
        made = list(_fresh_keys(parent, theirs[0], rows[parent.name], keep=set(), rng=rng))
        made[key] = copy[pointer]
        rows[parent.name].append(tuple(made))


def _copy_children(schema: Schema, parent: Table, original: tuple[Any, ...], copy: tuple[Any, ...], rows: Rows,
                   rng: random.Random, facts: Collection[tuple[str, str, str]] = ()) -> None:
    """The children of `original` (a few) in each child table, copied and pointed at `copy` (a second
    entity of the same name has children of its own, or grouping by name and by key would not differ)."""
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
            others = [(child.position(o.columns[0]), sorted({r[child.position(o.columns[0])] for r in rows[child.name]}, key=repr))
                      for o in child.foreign_keys if o is not fk and len(o.columns) == 1]
            for template in mine[:CHILDREN_COPIED]:  # as many children: the two namesakes' groups weigh alike
                moved = list(template)
                for pointer, position in zip(pointers, referenced):
                    moved[pointer] = copy[position]
                for position, values in others:  # the namesake's children point elsewhere, half the time: its facts are its own
                    if values and rng.random() < 0.5:
                        moved[position] = rng.choice(values)
                moved = _varied(child, moved, {p for p, _ in others} | set(pointers), schema.kind, rng)
                for table_name, column, pointer_column in facts:  # a text that goes with its parent is the new parent's own
                    if table_name == child.name and pointer_column in fk.columns:
                        at = child.position(column)
                        if isinstance(moved[at], str):  # marked as the new parent's: no source text is spelled so
                            moved[at] = f"{moved[at]} (#{rng.randint(2, 99)})"
                rows[child.name].append(_fresh_keys(child, tuple(moved), rows[child.name], keep=set(fk.columns), rng=rng))
