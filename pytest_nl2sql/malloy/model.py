"""The Malloy model generated from a database's schema: a source per table, named as the table,
with its primary key, `join_one` along each foreign key and `join_many` back.

Malloy has no forward references and foreign keys make cycles (`singer_in_concert` joins `singer`,
`singer` joins `singer_in_concert` back), so the model is written in three layers, and only the
last one bears the tables' names:

1. `_base_t`: the table and its primary key (`source: _base_t is duckdb.table('"t"') extend {
   primary_key: id }`).
2. `_one_t`, for a table with foreign keys: `_base_t` with a `join_one` along each of them, to
   the parent's `_one_` source (or its `_base_`, where it has none), so that chains of parents
   reach as far as the keys go (`concert.stadium.name`). Tables are taken parents first; a key
   that closes a cycle (a table referencing itself or a descendant) joins the parent's `_base_`.
3. `t`: `_one_t` (or `_base_t`) with a `join_many` back to every table that references it, each
   one that child's `_one_` source: `singer -> { aggregate: n is count(singer_in_concert.concert_id) }`,
   `singer_in_concert.concert.year`.

A model writer uses the table names only; the underscored layers exist because Malloy needs them
defined first (more underscores if a table's own name starts with `_base_` or `_one_`). A table
named as a Malloy function (`round`) is the source `round_table`: no source may take a function's
name. A join is named as the table it reaches, unless that name is taken (a column so named, two
keys to one parent, a table referencing itself): then `parent_via_COLUMNS` for a `join_one`,
`child_by_COLUMNS` for a `join_many`. A foreign key whose parent is not in the schema, or whose
columns do not match, is left out. Malloy takes one primary key column: a table keyed on several
columns, or on none, has no `primary_key` (where Malloy needs a key for it, a fan-out-safe
aggregate across its `join_many`, it makes one with `UUID()`, which DuckDB's SQL has).

The connection is named after Malloy's dialect (`duckdb`, `postgres`, `mysql`): the compiler
answers any connection name with the case's schema (`compiler.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_nl2sql.copydb.model import Table
from pytest_nl2sql.malloy.names import FUNCTIONS, malloy_dialect, malloy_name, malloy_string, table_path


@dataclass(frozen=True)
class Edge:
    """A foreign key between two tables of the schema, with its columns as each table spells them."""

    child: Table
    columns: tuple[str, ...]
    parent: Table
    ref_columns: tuple[str, ...]


def _find(tables: dict[str, Table], name: str) -> Table | None:
    exact = tables.get(name)
    if exact is not None:
        return exact
    folded = [t for t in tables.values() if t.name.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def edges(tables: Sequence[Table]) -> list[Edge]:
    """The foreign keys the model can join along, in the order the schema lists them."""
    by_name = {t.name: t for t in tables}
    found = []
    for child in tables:
        for fk in child.foreign_keys:
            parent = _find(by_name, fk.ref_table)
            if parent is None:
                continue
            columns = [child.column(c) for c in fk.columns]
            refs = [parent.column(c) for c in (fk.ref_columns or parent.primary_key)]
            if not columns or len(columns) != len(refs) or None in columns or None in refs:
                continue
            found.append(Edge(child, tuple(c.name for c in columns if c), parent, tuple(r.name for r in refs if r)))
    return found


class _Names:
    """Unique names within one source: its columns and the joins added so far (case-insensitive,
    so that no two fields of a source differ by case only)."""

    def __init__(self, table: Table) -> None:
        self.taken = {c.name.lower() for c in table.columns}

    def claim(self, preferred: str, fallback: str) -> str:
        name = preferred if preferred.lower() not in self.taken else fallback
        base, n = name, 2
        while name.lower() in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name.lower())
        return name


def _prefix(tables: Sequence[Table]) -> str:
    """`_`, or more underscores when a table's own name would clash with a layer's."""
    prefix = "_"
    while any(t.name.lower().startswith((f"{prefix}base_", f"{prefix}one_")) for t in tables):
        prefix += "_"
    return prefix


def _condition(local: Sequence[str], join: str, joined: Sequence[str]) -> str:
    return " and ".join(f"{malloy_name(a)} = {malloy_name(join)}.{malloy_name(b)}" for a, b in zip(local, joined))


def _parents_first(tables: Sequence[Table], links: Sequence[Edge]) -> list[Table]:
    """Tables with every parent before them where the keys allow; in a cycle, schema order."""
    waiting = {t.name: {e.parent.name for e in links if e.child is t and e.parent is not t} for t in tables}
    order: list[Table] = []
    while len(order) < len(tables):
        placed = {t.name for t in order}
        ready = [t for t in tables if t.name not in placed and waiting[t.name] <= placed]
        order.extend(ready or [next(t for t in tables if t.name not in placed)])
    return order


def source_names(tables: Sequence[Table]) -> dict[str, str]:
    """Each table's source name: the table's, unless Malloy has a function so named (`round`),
    which no source may be: then `round_table` (or `round_table_2`, ... if that is a table too)."""
    taken = {t.name for t in tables}
    names = {}
    for t in tables:
        name, n = t.name, 2
        if name in FUNCTIONS:
            name = f"{t.name}_table"
            while name in taken:
                name, n = f"{t.name}_table_{n}", n + 1
            taken.add(name)
        names[t.name] = name
    return names


@dataclass(frozen=True)
class Join:
    """A join of a generated source: its name there, the source it joins, along which key."""

    kind: str  # "join_one" (child to parent) or "join_many" (parent to child)
    name: str
    target: str
    edge: Edge

    def line(self) -> str:
        local, joined = (self.edge.columns, self.edge.ref_columns) if self.kind == "join_one" else (self.edge.ref_columns, self.edge.columns)
        return f"  {self.kind}: {malloy_name(self.name)} is {malloy_name(self.target)} on {_condition(local, self.name, joined)}"


@dataclass(frozen=True)
class Layout:
    """The generated model's sources, by table name: each layer's source name and the joins."""

    tables: tuple[Table, ...]
    base: dict[str, str]  # `_base_t`
    one: dict[str, str]  # `_one_t`, or `_base_t` for a table with no foreign key
    final: dict[str, str]  # `t` (`round_table` for `round`)
    order: tuple[Table, ...]  # the order `_one_` sources are written in: parents first
    join_one: dict[str, tuple[Join, ...]]  # in `_one_t`
    join_many: dict[str, tuple[Join, ...]]  # in `t`


def layout(tables: Sequence[Table]) -> Layout:
    """Where each source and join of the generated model goes (see the module docstring)."""
    links = edges(tables)
    prefix = _prefix(tables)
    base = {t.name: f"{prefix}base_{t.name}" for t in tables}
    has_parents = {e.child.name for e in links}
    one = {t.name: f"{prefix}one_{t.name}" if t.name in has_parents else base[t.name] for t in tables}
    names = {t.name: _Names(t) for t in tables}
    order = _parents_first(tables, links)
    join_one: dict[str, tuple[Join, ...]] = {}
    defined: set[str] = set()
    for t in order:
        outgoing = [e for e in links if e.child is t]
        parents = [e.parent.name for e in outgoing]
        joins = []
        for e in outgoing:
            p, via = e.parent.name, f"{e.parent.name}_via_{'_'.join(e.columns)}"
            name = names[t.name].claim(p if parents.count(p) == 1 and e.parent is not t else via, via)
            joins.append(Join("join_one", name, one[p] if p in defined else base[p], e))
        join_one[t.name] = tuple(joins)
        defined.add(t.name)
    join_many: dict[str, tuple[Join, ...]] = {}
    for t in tables:
        incoming = [e for e in links if e.parent is t]
        children = [e.child.name for e in incoming]
        joins = []
        for e in incoming:
            c, by = e.child.name, f"{e.child.name}_by_{'_'.join(e.columns)}"
            name = names[t.name].claim(c if children.count(c) == 1 and e.child is not t else by, by)
            joins.append(Join("join_many", name, one[c], e))
        join_many[t.name] = tuple(joins)
    return Layout(tuple(tables), base, one, source_names(tables), tuple(order), join_one, join_many)


def generated_model(tables: Sequence[Table], dialect: str, *, database: str | None = None) -> str:
    """The model's text for a case's engine (`dialect`: its sqlglot name; a SQLite case's model
    is DuckDB's, as its Malloy is compiled for DuckDB). `database` is named in its first line."""
    connection = malloy_dialect(dialect)
    plan = layout(tables)
    shown = f" of {database}" if database else ""
    lines = [
        f"// Generated by pytest-nl2sql from the schema{shown} (nl2sql malloy-model).",
        "// A source per table, named as the table, with its primary key, join_one along each foreign key and",
        "// join_many back. The _base_ and _one_ sources are layers Malloy needs defined first (it has no",
        "// forward references): use the table names.",
        *(f"// The table {t} is the source {s}: Malloy has a function named {t}." for t, s in plan.final.items() if s != t),
        "",
    ]
    for t in tables:
        pk = f" extend {{ primary_key: {malloy_name(t.primary_key[0])} }}" if len(t.primary_key) == 1 else ""
        path = malloy_string(table_path(t.name, dialect))
        lines.append(f"source: {malloy_name(plan.base[t.name])} is {connection}.table({path}){pk}")
    for t in plan.order:
        if plan.join_one[t.name]:
            lines += ["", f"source: {malloy_name(plan.one[t.name])} is {malloy_name(plan.base[t.name])} extend {{"]
            lines += [join.line() for join in plan.join_one[t.name]]
            lines.append("}")
    lines.append("")
    for t in tables:
        head = f"source: {malloy_name(plan.final[t.name])} is {malloy_name(plan.one[t.name])}"
        if not plan.join_many[t.name]:
            lines.append(head)
            continue
        lines += [f"{head} extend {{", *(join.line() for join in plan.join_many[t.name]), "}"]
    return "\n".join(lines) + "\n"
