"""Golds that are the fragile query: where a neighbour shows data on which the gold's own answer is
up to chance or merges what the question keeps apart, a difference from the prediction says
nothing about the prediction. Two shapes, read from the gold with sqlglot:

- a `LIMIT` inside a subquery that cuts a tie on its `ORDER BY` keys (`stadium_id = (SELECT
  stadium_id ... ORDER BY capacity DESC LIMIT 1)` when two stadiums share the top capacity): the
  database picks one; the top-level `LIMIT` is the tie handling's (`judge.ties`);
- `EXCEPT` / `INTERSECT` over columns that are not a key (names), where two rows share a value:
  the gold merges two people called Jordan, a prediction that keeps them apart is at least as right.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pytest_nl2sql.engines.base import Engine, EngineError, Limits
from pytest_nl2sql.judge.execute import execute_once_more_if_lost


def why_gold_is_fragile(golds: Sequence[str], dialect: str | None, engine: Engine, limits: Limits,
                        keys: frozenset[tuple[str, str]]) -> str | None:
    """Why the (first) gold's answer on `engine`'s database is not one to hold a prediction to, or
    None. `keys`: (table, column), lower case, of the columns that are keys there (declared or kept
    unique by the neighbour)."""
    tree = _parse(golds[0], dialect) if golds else None
    if tree is None:
        return None
    for probe, cut in _inner_limit_probes(tree, dialect or ""):
        try:
            rows = execute_once_more_if_lost(engine, probe, limits, trusted=True).rows
        except EngineError:
            continue
        if len(rows) > cut and rows[cut - 1] == rows[cut]:
            return "a tie that the gold's LIMIT inside a subquery cuts, which the case's database never has"
    for operation in tree.find_all(exp.Except, exp.Intersect):
        if not any(_projects_key(branch, keys) for branch in (operation.this, operation.expression)):
            name = "EXCEPT" if isinstance(operation, exp.Except) else "INTERSECT"
            return f"rows that share a value the gold's {name} compares (not a key), which it merges"
    return None


def _parse(sql: str, dialect: str | None) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(sql, read=dialect)
    except (SqlglotError, RecursionError, ValueError):
        return None


def _inner_limit_probes(tree: exp.Expression, dialect: str) -> list[tuple[str, int]]:
    """For each SELECT below the top level with an ORDER BY and a literal LIMIT n: a query for its
    first n+1 rows' ORDER BY keys, and n."""
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
            probes.append((probe.sql(dialect=dialect), cut))
        except (SqlglotError, ValueError):
            continue
    return probes


def _projects_key(branch: Any, keys: frozenset[tuple[str, str]]) -> bool:
    """Does one side of a set operation return a key column (so equal rows are one entity)?"""
    if not isinstance(branch, exp.Select):
        return True  # a nested set operation or something unread: assume it is safe
    tables = {}
    for table in branch.find_all(exp.Table):
        tables[(table.alias_or_name or table.name).lower()] = table.name.lower()
    only = next(iter(tables.values())) if len(tables) == 1 else None
    for projection in branch.expressions:
        column = projection.unalias() if isinstance(projection, exp.Alias) else projection
        if not isinstance(column, exp.Column):
            continue
        table = tables.get(column.table.lower()) if column.table else only
        if table is not None and (table, column.name.lower()) in keys:
            return True
    return False


def neighbour_keys(path: Path, kind: str, invariants: Sequence[Any]) -> frozenset[tuple[str, str]]:
    """The single-column keys of a generated neighbour: declared, or kept unique by it."""
    from pytest_nl2sql.neighbours.invariants import InvariantKind
    from pytest_nl2sql.neighbours.schema import open_source

    reader = open_source(path, kind)
    try:
        schema = reader.schema()
    finally:
        reader.close()
    keys = {(t.name.lower(), key[0].lower()) for t in schema.tables for key in t.uniques if len(key) == 1}
    keys |= {(i.table.lower(), i.column.lower()) for i in invariants if i.kind is InvariantKind.UNIQUE}
    return frozenset(keys)
