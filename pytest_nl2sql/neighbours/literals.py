"""What the gold query looks at, read with sqlglot: its tables, the literals it compares columns
with (and how), its join, GROUP BY, ORDER BY and aggregated columns. Neighbours put values next
to those literals and several rows in those groups, because that is where wrong SQL shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pytest_nl2sql.neighbours.schema import Schema

ColumnRef = tuple[str, str]  # (table name as the schema spells it, column name as the schema spells it)


@dataclass(frozen=True)
class Hint:
    """A column compared with a literal: `op` is one of = != < <= > >= between like in."""

    column: ColumnRef
    op: str
    value: object  # the literal (int, float or str); for between: (low, high); for in: a tuple


@dataclass(frozen=True)
class GoldFacts:
    tables: tuple[str, ...]  # schema spellings, first mention first
    hints: tuple[Hint, ...]
    joins: tuple[tuple[ColumnRef, ColumnRef], ...]  # column = column equalities
    grouped: tuple[ColumnRef, ...]
    ordered: tuple[ColumnRef, ...]
    aggregated: tuple[ColumnRef, ...]
    mentioned: tuple[ColumnRef, ...]  # every column the gold names
    limits: tuple[int, ...]
    computed: tuple[tuple[ColumnRef, str, str], ...] = ()
    counts: tuple[int, ...] = ()  # n of count(...) compared with n (a HAVING's bound)  # column op (SELECT one value ...): (column, op, the subquery's SQL)


def parse_gold(sql: str, dialect: str) -> exp.Expression | None:
    try:
        parsed = sqlglot.parse(sql, read=dialect)
    except (SqlglotError, RecursionError, ValueError):
        return None
    statements = [statement for statement in parsed if statement is not None]
    return statements[0] if len(statements) == 1 else None


def read_golds(golds: Sequence[str], dialect: str, schema: Schema) -> GoldFacts | None:
    """The facts of all golds together; None when no gold parses."""
    trees = [tree for tree in (parse_gold(g, dialect) for g in golds) if tree is not None]
    if not trees:
        return None
    collector = _Collector(schema, dialect)
    for tree in trees:
        collector.visit(tree)
    return collector.facts()


def _literal_value(node: exp.Expression) -> object | None:
    """A literal's Python value: numbers as int/float, strings as str; `-3` too; else None."""
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = _literal_value(node.this)
        return -value if isinstance(value, (int, float)) else None
    if isinstance(node, exp.Paren):
        return _literal_value(node.this)
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return node.this
    try:
        return int(node.this)
    except ValueError:
        try:
            return float(node.this)
        except ValueError:
            return None


def _having(tables: Sequence[Any], name: str) -> list[ColumnRef]:
    found = []
    for table in dict.fromkeys(t for t in tables if t is not None):
        column = table.column(name)
        if column is not None:
            found.append((table.name, column.name))
    return found


_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
_OPS = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


class _Collector:
    def __init__(self, schema: Schema, dialect: str) -> None:
        self.schema = schema
        self.dialect = dialect
        self.tables: list[str] = []
        self.hints: list[Hint] = []
        self.joins: list[tuple[ColumnRef, ColumnRef]] = []
        self.grouped: list[ColumnRef] = []
        self.ordered: list[ColumnRef] = []
        self.aggregated: list[ColumnRef] = []
        self.mentioned: list[ColumnRef] = []
        self.limits: list[int] = []
        self.computed: list[tuple[ColumnRef, str, str]] = []
        self.counts: list[int] = []

    def facts(self) -> GoldFacts:
        return GoldFacts(
            tuple(self.tables), tuple(dict.fromkeys(self.hints)), tuple(dict.fromkeys(self.joins)),
            tuple(dict.fromkeys(self.grouped)), tuple(dict.fromkeys(self.ordered)),
            tuple(dict.fromkeys(self.aggregated)), tuple(dict.fromkeys(self.mentioned)), tuple(self.limits),
            tuple(dict.fromkeys(self.computed)), tuple(dict.fromkeys(self.counts)),
        )

    def visit(self, tree: exp.Expression) -> None:
        aliases: dict[str, str] = {}
        for node in tree.find_all(exp.Table):
            table = self.schema.table(node.name)
            if table is None:
                continue
            if table.name not in self.tables:
                self.tables.append(table.name)
            aliases[node.alias_or_name.lower()] = table.name
            aliases.setdefault(node.name.lower(), table.name)
        in_query = [self.schema.table(name) for name in dict.fromkeys(aliases.values())]

        def resolve(node: exp.Expression) -> list[ColumnRef]:
            if not isinstance(node, exp.Column) or not node.name:
                return []
            if node.table:
                name = aliases.get(node.table.lower())
                table = self.schema.table(name) if name else None
                column = table.column(node.name) if table else None
                return [(table.name, column.name)] if table and column else []
            select = node.find_ancestor(exp.Select)
            while select is not None:  # the nearest SELECT whose own tables have the column
                own = [self.schema.table(t.name) for t in select.find_all(exp.Table) if t.find_ancestor(exp.Select) is select]
                found = _having(own, node.name)
                if found:
                    return found
                select = select.find_ancestor(exp.Select)
            return _having(in_query, node.name)

        def value_of(node: exp.Expression) -> object | None:
            """A literal; or a double-quoted name that is no column, which SQLite reads as a string."""
            if isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier) \
                    and node.this.quoted and not resolve(node):
                return node.name
            return _literal_value(node)

        for node in tree.find_all(exp.Column):
            self.mentioned.extend(resolve(node))
        for op_type, op in _OPS.items():
            for node in tree.find_all(op_type):
                left, right = node.this, node.expression
                for counted, other in ((left, right), (right, left)):
                    bound = _literal_value(other)
                    if isinstance(counted, exp.Count) and isinstance(bound, int) and not isinstance(bound, bool):
                        self.counts.append(bound)
                left_refs, right_refs = resolve(left), resolve(right)
                if left_refs and right_refs and op == "=":
                    for a in left_refs:
                        for b in right_refs:
                            self.joins.append((a, b))
                    continue
                for refs, other, this_op in ((left_refs, right, op), (right_refs, left, _FLIPPED[op])):
                    inner = other.this if isinstance(other, exp.Subquery) else None
                    if refs and isinstance(inner, exp.Select) and len(inner.expressions) == 1:
                        self.computed.extend((ref, this_op, inner.sql(dialect=self.dialect)) for ref in refs)
                        continue
                    value = value_of(other)
                    if refs and value is not None:
                        self.hints.extend(Hint(ref, this_op, value) for ref in refs)
        for node in tree.find_all(exp.Between):
            low, high = value_of(node.args.get("low")), value_of(node.args.get("high"))
            if low is not None and high is not None:
                self.hints.extend(Hint(ref, "between", (low, high)) for ref in resolve(node.this))
        for node in tree.find_all(exp.Like, exp.ILike):
            value = value_of(node.expression)
            if isinstance(value, str):
                self.hints.extend(Hint(ref, "like", value) for ref in resolve(node.this))
        for node in tree.find_all(exp.In):
            query = node.args.get("query")
            inner = query.this if isinstance(query, exp.Subquery) else query
            if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
                for a in resolve(node.this):  # x IN (SELECT y ...) joins x and y
                    for b in resolve(inner.expressions[0].unalias()):
                        self.joins.append((a, b))
            values = tuple(v for v in (value_of(e) for e in node.expressions) if v is not None)
            if values:
                self.hints.extend(Hint(ref, "in", values) for ref in resolve(node.this))
        for node in tree.find_all(exp.Group):
            for expression in node.expressions:
                self.grouped.extend(resolve(expression))
        for node in tree.find_all(exp.Ordered):
            for column in node.find_all(exp.Column):
                self.ordered.extend(resolve(column))
        for node in tree.find_all(exp.AggFunc):
            for column in node.find_all(exp.Column):
                self.aggregated.extend(resolve(column))
        for node in tree.find_all(exp.Limit):
            value = _literal_value(node.expression) if node.expression is not None else None
            if isinstance(value, int):
                self.limits.append(value)
