"""What of a source's schema a target can hold, decided before anything is written.

Policy (the README's copy-db section says the same): the data are copied whole; a constraint the
data violate is not created, with a warning naming it, so that a messy database (Spider's) still
copies in one command. That covers a primary key or UNIQUE with a duplicate or a NULL, a foreign
key whose parent table or columns are missing, reference no key, differ in type, or that rows
violate, and on DuckDB a self-referencing or cyclic foreign key (DuckDB checks them row by row,
so no insert order satisfies them). A name the target cannot hold exactly (too long, or two names
that only differ in case where the target folds case) is an error instead: a renamed table would
silently break every query that names it.
"""

from __future__ import annotations

from dataclasses import replace

from pytest_nl2sql.copydb.model import ColumnType, CopyError, ForeignKey, Kind, Plan, Table
from pytest_nl2sql.copydb.sources import Source
from pytest_nl2sql.engines.url import EngineKind

# Longest identifier each target keeps (PostgreSQL counts bytes and silently truncates).
_NAME_LIMITS = {EngineKind.MYSQL: (64, "characters", "MySQL/MariaDB"), EngineKind.POSTGRES: (63, "bytes", "PostgreSQL")}
# Targets whose table names are case-insensitive: two source tables `a` and `A` would collide.
_FOLDS_TABLE_CASE = {EngineKind.SQLITE, EngineKind.DUCKDB}


def make_plan(source: Source, tables: list[Table], target: EngineKind, numeric_text: bool = False) -> Plan:
    """The tables as the target will get them, parents first, and why anything is left out."""
    _check_names(tables, target)
    warnings: list[str] = []
    if numeric_text:
        tables = [_numbers_from_text(source, table, warnings) for table in tables]
    checked = [_checked_keys(source, table, warnings) for table in tables]
    checked = _integers_for_joins(source, checked, warnings)
    by_name = {t.name: t for t in checked}
    folded = _folded(checked)
    final = []
    for table in checked:
        kept = []
        for fk in table.foreign_keys:
            resolved, why = _resolve(table, fk, by_name, folded)
            if resolved is None:
                warnings.append(f"foreign key {fk.describe(table.name)} not created: {why}")
                continue
            parent = by_name[resolved.ref_table]
            count, example = source.orphans(table, resolved, parent)
            if count:
                warnings.append(f"foreign key {resolved.describe(table.name)} not created: {count} row(s) of "
                                f"{table.name!r} reference no row of {parent.name!r} (e.g. {example!r})")
                continue
            if target is EngineKind.DUCKDB and resolved.ref_table == table.name:
                warnings.append(f"foreign key {resolved.describe(table.name)} not created: DuckDB cannot load a "
                                "table that references itself (it checks each row as it is inserted)")
                continue
            kept.append(resolved)
        final.append(replace(table, foreign_keys=tuple(dict.fromkeys(kept))))
    ordered = _parents_first(final, target, warnings)
    for table in ordered:
        for column in table.columns:
            if column.read_as == "TEXT":
                warnings.append(f"column {table.name}.{column.name} (declared {column.declared}) holds both numbers "
                                "and text: copied as text")
    return Plan(tuple(ordered), tuple(warnings))


def _folded(tables: list[Table]) -> dict[str, list[Table]]:
    folded: dict[str, list[Table]] = {}
    for table in tables:
        folded.setdefault(table.name.lower(), []).append(table)
    return folded


def _numbers_from_text(source: Source, table: Table, warnings: list[str]) -> Table:
    """`--numeric-text`: a SQLite text column holding only numbers (`'2014'`, `'15.5'`) becomes a
    number, so that `year = 2014` and `avg(mpg)` work where text and numbers do not mix (SQLite
    converts them on comparison); `LIKE` and string functions on it then differ instead."""
    columns = []
    for column in table.columns:
        kind = source.numbers_as_text(table, column) if column.type.kind is Kind.TEXT and not column.read_as else None
        if kind is None:
            columns.append(column)
            continue
        warnings.append(f"column {table.name}.{column.name} (declared {column.declared}) holds only numbers written as "
                        f"text: copied as {kind.value} (--numeric-text)")
        columns.append(replace(column, type=ColumnType(kind, 64), read_as=kind.value.upper()))
    return replace(table, columns=tuple(columns))


def _integers_for_joins(source: Source, tables: list[Table], warnings: list[str]) -> list[Table]:
    """Text columns of SQLite holding only integers (`'12'`) that a foreign key pairs with an
    integer column become integers: SQLite compares them as numbers in that join (it converts the
    text), while PostgreSQL would refuse `text = bigint` and no target could hold the key."""
    by_name = {t.name: t for t in tables}
    folded = _folded(tables)
    retype: dict[str, set[str]] = {}
    for table in tables:
        for fk in table.foreign_keys:
            resolved, _ = _resolve(table, fk, by_name, folded, check_types=False)
            if resolved is None:
                continue
            parent = by_name[resolved.ref_table]
            for child_name, parent_name in zip(resolved.columns, resolved.ref_columns):
                pair = [(table, table.column(child_name)), (parent, parent.column(parent_name))]
                kinds = {c.type.kind for _, c in pair if c is not None}
                if kinds != {Kind.TEXT, Kind.INTEGER}:
                    continue
                owner, text_column = next((t, c) for t, c in pair if c is not None and c.type.kind is Kind.TEXT)
                if text_column.name not in retype.get(owner.name, set()) and source.integers_as_text(owner, text_column):
                    retype.setdefault(owner.name, set()).add(text_column.name)
                    other = next(f"{t.name}.{c.name}" for t, c in pair if c is not None and c is not text_column)
                    warnings.append(f"column {owner.name}.{text_column.name} (declared {text_column.declared}) holds "
                                    f"integers written as text and joins the integer column {other}: copied as integer")
    return [replace(t, columns=tuple(
        replace(c, type=ColumnType(Kind.INTEGER, 64), read_as="INTEGER") if c.name in retype.get(t.name, ()) else c
        for c in t.columns)) for t in tables]


def _check_names(tables: list[Table], target: EngineKind) -> None:
    limit = _NAME_LIMITS.get(target)
    names = [(f"table {t.name!r}", t.name) for t in tables]
    names += [(f"table {t.name!r} column {c.name!r}", c.name) for t in tables for c in t.columns]
    for where, name in names:
        if limit is not None:
            most, unit, engine = limit
            size = len(name.encode()) if unit == "bytes" else len(name)
            if size > most:
                raise CopyError(f"{where}: the name is {size} {unit} long; {engine} allows {most}")
        if "\x00" in name:
            raise CopyError(f"{where}: the name contains a NUL character")
    if target in _FOLDS_TABLE_CASE:
        _unique_folded([t.name for t in tables], "tables", target)
    for table in tables:  # column names are case-insensitive on all but PostgreSQL
        if target is not EngineKind.POSTGRES:
            _unique_folded([c.name for c in table.columns], f"columns of table {table.name!r}", target)


def _unique_folded(names: list[str], what: str, target: EngineKind) -> None:
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise CopyError(f"{what}: {other!r} and {name!r} differ only in case, which {target.value} does not tell apart")


def _checked_keys(source: Source, table: Table, warnings: list[str]) -> Table:
    """The table without the primary key or UNIQUE constraints its data violate."""
    primary_key = table.primary_key
    if primary_key:
        why = source.key_violation(table, primary_key, nulls_allowed=False)
        if why:
            warnings.append(f"primary key {table.name}({', '.join(primary_key)}) not created: {why}")
            primary_key = ()
    uniques = []
    for unique in table.uniques:
        why = source.key_violation(table, unique, nulls_allowed=True)
        if why:
            warnings.append(f"unique constraint {table.name}({', '.join(unique)}) not created: {why}")
        else:
            uniques.append(unique)
    return replace(table, primary_key=primary_key, uniques=tuple(uniques))


def _resolve(table: Table, fk: ForeignKey, by_name: dict[str, Table],
             folded: dict[str, list[Table]], check_types: bool = True) -> tuple[ForeignKey | None, str]:
    """The foreign key with its names as the tables spell them (SQLite resolves them
    case-insensitively), or None and why it cannot be created."""
    parent = by_name.get(fk.ref_table)
    if parent is None:
        candidates = folded.get(fk.ref_table.lower(), [])
        if len(candidates) != 1:
            return None, f"table {fk.ref_table!r} does not exist"
        parent = candidates[0]
    own = [table.column(name) for name in fk.columns]
    if any(c is None for c in own):
        return None, f"{table.name!r} has no column {fk.columns[own.index(None)]!r}"
    ref_names = fk.ref_columns or parent.primary_key
    if not ref_names:
        return None, f"it names no columns and {parent.name!r} has no primary key (left out or violated)"
    refs = [parent.column(name) for name in ref_names]
    if any(c is None for c in refs):
        return None, f"{parent.name!r} has no column {ref_names[refs.index(None)]!r}"
    if len(refs) != len(own):
        return None, "it pairs a different number of columns"
    ref_set = {c.name for c in refs if c}
    keys = [set(parent.primary_key), *(set(u) for u in parent.uniques)]
    if ref_set not in keys:
        return None, f"({', '.join(sorted(ref_set))}) is not a primary key or unique in {parent.name!r} (or its data violate it)"
    for child_column, parent_column in zip(own, refs):
        assert child_column is not None and parent_column is not None
        if check_types and child_column.type.kind is not parent_column.type.kind:
            return None, (f"{table.name}.{child_column.name} is {child_column.type.kind.value} but "
                          f"{parent.name}.{parent_column.name} is {parent_column.type.kind.value}")
    resolved = ForeignKey(tuple(c.name for c in own if c), parent.name, tuple(c.name for c in refs if c))
    return resolved, ""


def _parents_first(tables: list[Table], target: EngineKind, warnings: list[str]) -> list[Table]:
    """Tables ordered so that every parent precedes its children (DuckDB checks foreign keys as
    rows arrive); on DuckDB a foreign key closing a cycle is left out."""
    by_name = {t.name: t for t in tables}
    ordered: list[Table] = []
    state: dict[str, str] = {}
    dropped: set[tuple[str, ForeignKey]] = set()

    def visit(table: Table) -> None:
        state[table.name] = "visiting"
        for fk in table.foreign_keys:
            if fk.ref_table == table.name:
                continue
            status = state.get(fk.ref_table)
            if status == "visiting":  # a cycle
                if target is EngineKind.DUCKDB:
                    dropped.add((table.name, fk))
                    warnings.append(f"foreign key {fk.describe(table.name)} not created: it closes a cycle of "
                                    "foreign keys, which DuckDB cannot load")
                continue
            if status is None:
                visit(by_name[fk.ref_table])
        state[table.name] = "done"
        ordered.append(table)

    for table in tables:
        if table.name not in state:
            visit(table)
    return [replace(t, foreign_keys=tuple(fk for fk in t.foreign_keys if (t.name, fk) not in dropped)) for t in ordered]
