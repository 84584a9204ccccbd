"""Golds that are the fragile query: where a neighbour shows data on which the gold's own answer is
up to chance or merges what the question keeps apart, a difference from the prediction says
nothing about the prediction. Two shapes, read from the gold with sqlglot:

- a `LIMIT` inside a subquery that cuts a tie on its `ORDER BY` keys (`stadium_id = (SELECT
  stadium_id ... ORDER BY capacity DESC LIMIT 1)` when two stadiums share the top capacity): the
  database picks one; the top-level `LIMIT` is the tie handling's (`judge.ties`);
- `EXCEPT` / `INTERSECT` over columns that are names but not a key (`name`, `title`, `fname`, the
  table's own word), where two rows share a value: the gold merges two people called Jordan, a
  prediction that keeps them apart is at least as right. Over any other column (a district, a
  state) the shared value is the answer itself (districts with both kinds of shop), not a merge;
- a plain column beside one MIN or MAX without GROUP BY (`SELECT min(version), type FROM
  templates`), where several rows hold that minimum: SQLite shows one of them, any of them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pytest_nl2sql.engines.base import Engine, EngineError, Limits
from pytest_nl2sql.judge.compare import CompareOptions, Mode, compare_results
from pytest_nl2sql.judge.execute import execute_once_more_if_lost

# Why a plausible neighbour's difference is the gold's own doing (its SQL leaves the answer to the
# database or merges what the question keeps apart), as `why_gold_is_fragile` says it. The other
# excuses (`on_neighbours.unseen_by_gold`: NULL, zero or repeated rows the gold never showed) say
# what its author could not see, not that the gold is wrong: the gold audit tells the two apart.
TIE_CUT = "a tie that the gold's LIMIT inside a subquery cuts, which the case's database never has"
BARE_COLUMN = "rows tied at the MIN or MAX beside which the gold shows a bare column (the database picks one)"
SET_MERGE = "rows that share a value the gold's {} compares (a name, not a key), which it merges"
GOLD_S_OWN = frozenset({TIE_CUT, BARE_COLUMN, SET_MERGE.format("EXCEPT"), SET_MERGE.format("INTERSECT")})


def is_the_gold_s_own(reason: str | None) -> bool:
    """Is `reason` (a plausible neighbour's excuse) one of `why_gold_is_fragile`'s: the gold's SQL at fault?"""
    return reason in GOLD_S_OWN


def why_gold_is_fragile(golds: Sequence[str], dialect: str | None, engine: Engine, limits: Limits,
                        keys: frozenset[tuple[str, str]], differing: Sequence[Any],
                        predicted: Sequence[Sequence[Any]] | None = None,
                        compare: Mapping[str, Any] | None = None) -> str | None:
    """Why the (first) gold's answer on `engine`'s database is not one to hold a prediction to, or
    None. `keys`: (table, column), lower case, of the columns that identify a row or a parent there
    (declared or kept keys, references); `differing`: the values of the result rows that differ.
    `predicted`: the prediction's rows there (compared under `compare`): a tie then excuses the
    difference only when the prediction gives one of the answers the gold could give (one tied row
    picked, or all of them), not when it differs for a reason of its own (`>=` for `>`)."""
    tree = _parse(golds[0], dialect) if golds else None
    if tree is None:
        return None
    options = CompareOptions.from_mapping({**(compare or {}), "mode": "exec"})
    for probe, cut, select in _inner_limit_probes(tree, dialect or ""):
        try:
            rows = execute_once_more_if_lost(engine, probe, limits, trusted=True).rows
        except EngineError:
            continue
        if len(rows) > cut and rows[cut - 1] == rows[cut] and (
                predicted is None or _one_of(engine, limits, _answers(tree, select, cut, dialect or ""), predicted, options)):
            return TIE_CUT
    for probe, choices in _bare_column_probes(tree, dialect or ""):
        try:
            rows = execute_once_more_if_lost(engine, probe, limits, trusted=True).rows
        except EngineError:
            continue
        if rows and rows[0] and isinstance(rows[0][0], int) and rows[0][0] > 1 and (
                predicted is None or _among(engine, limits, choices, predicted, options)):
            return BARE_COLUMN
    for operation in tree.find_all(exp.Except, exp.Intersect):
        branches = [_projected(branch) for branch in (operation.this, operation.expression)]
        if any(columns is None or any(c in keys for c in columns) for columns in branches):
            continue  # a side returns a key (or cannot be read): equal rows are one entity
        if not all(_names_its_rows(*column) for columns in branches for column in columns):  # type: ignore[union-attr]
            continue  # a district or a state shared by two rows is the answer itself, not two entities merged
        if not any(_shared(engine, limits, column, dialect, differing) for columns in branches for column in columns):  # type: ignore[union-attr]
            continue
        if predicted is not None and operation is tree and not _kept_apart(engine, limits, tree, keys, dialect or "", predicted, options):
            continue  # the prediction differs for a reason of its own ('Cat' where the data holds 'cat')
        return SET_MERGE.format("EXCEPT" if isinstance(operation, exp.Except) else "INTERSECT")
    return None


def _kept_apart(engine: Engine, limits: Limits, tree: exp.Expression, keys: frozenset[tuple[str, str]], dialect: str,
                predicted: Sequence[Sequence[Any]], options: CompareOptions) -> bool:
    """Does the prediction give what the gold's set operation gives once its rows are compared by
    their keys as well as by name (the same rows, copies aside)? True when that gold cannot be
    written here (each side's rows from different tables, a table without a key, an ORDER BY)."""
    unmerged = _by_key(tree, keys, dialect)
    if unmerged is None:
        return True
    try:
        rows = execute_once_more_if_lost(engine, unmerged, limits, trusted=True).rows
    except EngineError:
        return True
    once = [list(row) for row in dict.fromkeys(tuple(row) for row in rows)]
    mine = [list(row) for row in dict.fromkeys(tuple(row) for row in predicted)]
    return compare_results(once, mine, False, options, explain=False).match


def _by_key(tree: exp.Expression, keys: frozenset[tuple[str, str]], dialect: str) -> str | None:
    """The gold (a set operation of two plain SELECTs) with each side also returning the key
    columns of the table of each column it shows, the names alone then shown: two namesakes stay
    two rows. None when the sides show columns of different tables there, or a table has no key."""
    if tree.args.get("order") or tree.args.get("limit") or not isinstance(tree.this, exp.Select) \
            or not isinstance(tree.expression, exp.Select):
        return None
    sides = [_projected(branch) for branch in (tree.this, tree.expression)]
    if sides[0] is None or sides[1] is None or [t for t, _ in sides[0]] != [t for t, _ in sides[1]]:
        return None
    extra = [sorted(c for t, c in keys if t == table) for table, _ in sides[0]]
    if not all(extra):
        return None
    copy = tree.copy()
    for branch in (copy.this, copy.expression):
        shown = list(branch.expressions)
        added = []
        for position, projection in enumerate(shown):
            column = projection.unalias()
            qualifier = column.table if isinstance(column, exp.Column) else ""
            added += [exp.alias_(exp.column(key, table=qualifier or None), f"nl2sql_k{position}_{n}")
                      for n, key in enumerate(extra[position])]
        branch.set("expressions", [exp.alias_(p.unalias().copy(), f"nl2sql_c{i}") for i, p in enumerate(shown)] + added)
    names = ", ".join(f"nl2sql_c{i}" for i in range(len(sides[0])))
    try:
        return f"SELECT {names} FROM ({copy.sql(dialect=dialect)}) AS nl2sql_u"
    except (SqlglotError, ValueError):
        return None


def _names_its_rows(table: str, column: str) -> bool:
    """A column called like a name (the invariants' test: `name`, `title`, `…name`, the table's word)."""
    from pytest_nl2sql.neighbours.invariants import _name_like

    return _name_like(table, column)


def _shared(engine: Engine, limits: Limits, column: tuple[str, str], dialect: str | None, values: Sequence[Any]) -> bool:
    """Do two rows of the table share one of `values` (those of the differing result rows) in the
    column, on this database? Only then did the set operation merge two of them there."""
    wanted = [v for v in dict.fromkeys(values) if isinstance(v, (str, int, float)) and not isinstance(v, bool)][:50]
    if not wanted:
        return False
    table, name = (exp.to_identifier(part, quoted=True).sql(dialect=dialect or "") for part in column)
    listed = ", ".join(exp.convert(v).sql(dialect=dialect or "") for v in wanted)
    try:
        rows = execute_once_more_if_lost(
            engine, f"SELECT {name} FROM {table} WHERE {name} IN ({listed}) GROUP BY {name} HAVING count(*) > 1 LIMIT 1",
            limits, trusted=True).rows
    except EngineError:
        return False
    return bool(rows)


def _one_of(engine: Engine, limits: Limits, answers: Sequence[str], predicted: Sequence[Sequence[Any]],
            options: CompareOptions) -> bool:
    """Is the prediction's result that of one of `answers` (the gold with its tie resolved one way)?"""
    for answer in answers:
        try:
            rows = execute_once_more_if_lost(engine, answer, limits, trusted=True).rows
        except EngineError:
            continue
        if compare_results(rows, predicted, False, options, explain=False).match:
            return True
    return False


def _among(engine: Engine, limits: Limits, choices: str | None, predicted: Sequence[Sequence[Any]],
           options: CompareOptions) -> bool:
    """Are the prediction's rows (one or more) among the rows the gold could show (`choices`: one
    per tied row)?"""
    if choices is None:
        return False
    try:
        rows = execute_once_more_if_lost(engine, choices, limits, trusted=True).rows
    except EngineError:
        return False
    within = dataclasses.replace(options, mode=Mode.SUBSET)
    return bool(predicted) and compare_results(predicted, rows, False, within, explain=False).match


@functools.lru_cache(maxsize=256)  # a pure function of the text: a shrink asks again for every attempt (the tree is only read)
def _parse(sql: str, dialect: str | None) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(sql, read=dialect)
    except (SqlglotError, RecursionError, ValueError):
        return None


def _inner_limit_probes(tree: exp.Expression, dialect: str) -> list[tuple[str, int, exp.Select]]:
    """For each SELECT below the top level with an ORDER BY and a literal LIMIT n: a query for its
    first n+1 rows' ORDER BY keys, n, and the SELECT."""
    probes = []
    for select in tree.find_all(exp.Select):
        if select is tree or select.parent is None or not select.args.get("order") or not select.args.get("limit"):
            continue
        limit = select.args["limit"].expression
        if not isinstance(limit, exp.Literal) or not limit.is_int or int(limit.this) < 1:
            continue
        cut = int(limit.this)
        probe = select.copy()
        probe.set("expressions", [ordered.this.copy() for ordered in select.args["order"].expressions])
        probe.set("limit", exp.Limit(expression=exp.Literal.number(cut + 1)))
        try:
            probes.append((probe.sql(dialect=dialect), cut, select))
        except (SqlglotError, ValueError):
            continue
    return probes


def _answers(tree: exp.Expression, select: exp.Select, cut: int, dialect: str) -> list[str]:
    """The gold with the tie at `select`'s LIMIT resolved: ordered further by each column it shows,
    ascending and descending (one tied row picked, several ways), and, for one ORDER BY key, every
    row tied at the cut kept (`= (subquery)` read as `IN`)."""
    answers: list[str] = []
    try:
        _resolve_tie(tree, select, cut, dialect, answers)
    except (SqlglotError, ValueError, StopIteration):
        pass  # the answers made so far
    return answers


def _resolve_tie(tree: exp.Expression, select: exp.Select, cut: int, dialect: str, answers: list[str]) -> None:
    order = select.args["order"].expressions
    for shown in select.expressions[:4]:
        for descending in (False, True):
            variant = tree.copy()
            inner = _same_node(tree, variant, select)
            breaker = exp.Ordered(this=shown.unalias().copy(), desc=descending)
            inner.set("order", exp.Order(expressions=[o.copy() for o in order] + [breaker]))
            answers.append(variant.sql(dialect=dialect))
    if len(order) == 1:
        variant = tree.copy()
        inner = _same_node(tree, variant, select)
        key, descending = order[0].this, bool(order[0].args.get("desc"))
        bound = select.copy()
        bound.set("expressions", [key.copy()])
        bound.set("limit", exp.Limit(expression=exp.Literal.number(1)))
        bound.set("offset", exp.Offset(expression=exp.Literal.number(cut - 1)))
        kept = (exp.GTE if descending else exp.LTE)(this=key.copy(), expression=exp.Subquery(this=bound))
        inner.set("limit", None)
        inner.set("order", None)
        inner.where(kept, copy=False)
        holder = inner.parent.parent if isinstance(inner.parent, exp.Subquery) else None
        if isinstance(holder, exp.EQ):
            other = holder.left if holder.right is inner.parent else holder.right
            holder.replace(exp.In(this=other.copy(), query=inner.parent.copy()))
        answers.append(variant.sql(dialect=dialect))


def _same_node(tree: exp.Expression, copied: exp.Expression, node: exp.Expression) -> exp.Expression:
    """`node` of `tree`, found at the same place in `copied` (a copy of `tree`)."""
    return next(b for a, b in zip(tree.walk(), copied.walk()) if a is node)


def _bare_column_probes(tree: exp.Expression, dialect: str) -> list[tuple[str, str | None]]:
    """For a SELECT without GROUP BY that shows one MIN or MAX beside plain columns (`SELECT
    min(version), type FROM templates`: SQLite shows the row of the minimum), a query counting the
    rows at that minimum: more than one, and which row's columns show is the database's choice;
    and a query for the rows the gold could show, one per row at the minimum."""
    probes = []
    for select in tree.find_all(exp.Select):
        if select.args.get("group") or not (select.args.get("from") or select.args.get("from_")):
            continue
        extremes = [e for e in select.expressions if isinstance(e.unalias(), (exp.Min, exp.Max))]
        bare = [e for e in select.expressions if isinstance(e.unalias(), exp.Column)]
        others = [e for e in select.expressions if e not in extremes and e not in bare]
        if len(extremes) != 1 or not bare or others:
            continue
        function = extremes[0].unalias()
        top = select is tree
        rows = select.copy()
        rows.set("expressions", [exp.alias_(function.this.copy(), "nl2sql_v")])
        for key in ("order", "limit", "offset"):
            rows.set(key, None)
        inner = rows.sql(dialect=dialect)
        name = "min" if isinstance(function, exp.Min) else "max"
        extreme = f"(SELECT {name}(nl2sql_v) FROM ({inner}) AS nl2sql_s)"
        choices = select.copy()  # (below the top level: no rows the whole gold could show, nothing excused)
        choices.set("expressions", [function.this.copy() if e is extremes[0] else e.copy() for e in select.expressions])
        for key in ("order", "limit", "offset"):
            choices.set(key, None)
        choices.where(exp.EQ(this=function.this.copy(), expression=sqlglot.parse_one(extreme, read=dialect or None)),
                      copy=False)
        probes.append((f"SELECT count(*) FROM ({inner}) AS nl2sql_r WHERE nl2sql_v = {extreme}",
                       choices.sql(dialect=dialect) if top else None))
    return probes


def _projected(branch: Any) -> list[tuple[str, str]] | None:
    """The (table, column) pairs, lower case, one side of a set operation returns; None when it is
    not a plain SELECT of columns (a nested set operation, an expression)."""
    if not isinstance(branch, exp.Select):
        return None
    tables = {}
    for table in branch.find_all(exp.Table):
        tables[(table.alias_or_name or table.name).lower()] = table.name.lower()
    only = next(iter(tables.values())) if len(tables) == 1 else None
    found = []
    for projection in branch.expressions:
        column = projection.unalias() if isinstance(projection, exp.Alias) else projection
        table = (tables.get(column.table.lower()) if column.table else only) if isinstance(column, exp.Column) else None
        if table is None:
            return None
        found.append((table, column.name.lower()))
    return found


def neighbour_keys(path: Path, kind: str, invariants: Sequence[Any]) -> frozenset[tuple[str, str]]:
    """The columns of a generated neighbour that identify a row (single-column keys, declared or
    kept unique) or a parent (references, declared or learned)."""
    from pytest_nl2sql.neighbours.interrupts import ctrl_c_stops
    from pytest_nl2sql.neighbours.invariants import InvariantKind
    from pytest_nl2sql.neighbours.schema import open_source

    with ctrl_c_stops():  # DuckDB reads the schema in this thread
        reader = open_source(path, kind)
        try:
            schema = reader.schema()
        finally:
            reader.close()
    keys = {(t.name.lower(), key[0].lower()) for t in schema.tables for key in t.uniques if len(key) == 1}
    keys |= {(t.name.lower(), fk.columns[0].lower()) for t in schema.tables for fk in t.foreign_keys if len(fk.columns) == 1}
    keys |= {(i.table.lower(), i.column.lower()) for i in invariants
             if i.kind is InvariantKind.INCLUSION or (i.kind is InvariantKind.UNIQUE and not i.together)}
    return frozenset(keys)
