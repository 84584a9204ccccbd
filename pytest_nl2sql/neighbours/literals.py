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
class Top:
    """What an `ORDER BY ... LIMIT k` (or `x = (SELECT max(x) ...)`) of the gold ranks by: a column
    (`key`), or the size of its `GROUP BY` groups (`key` None). `determined`: the gold settles a
    tie at the cut itself (a further ORDER BY key; an `= max` keeps every tied row), so a neighbour
    tied there tells a prediction with another tie-break apart; else a tie at the cut leaves the
    gold's answer to the database, and such a neighbour is not counted."""

    key: ColumnRef | None
    descending: bool
    limit: int
    determined: bool
    grouped: tuple[ColumnRef, ...] = ()
    extreme: bool = False  # from `= (SELECT max(...) ...)`, not from an ORDER BY


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
    tops: tuple[Top, ...] = ()
    shared: tuple[tuple[ColumnRef, ColumnRef], ...] = ()  # the two sides of an EXCEPT / INTERSECT / UNION, by position
    equated: tuple[tuple[ColumnRef, ColumnRef], ...] = ()  # column = column (joins without IN (SELECT ...))
    bounds: tuple[Hint, ...] = ()  # HAVING max/min/avg/sum(column) op literal: the column's values on the bound
    sides: tuple[tuple[tuple[Hint, ...], tuple[Hint, ...]], ...] = ()  # each EXCEPT / INTERSECT's two sides' literals


def _outputs(side: exp.Expression) -> list[exp.Expression]:
    """The output expressions of one side of a set operation (its leftmost SELECT's)."""
    while isinstance(side, (exp.Subquery, exp.Union, exp.Except, exp.Intersect)):
        side = side.this
    return [e.unalias() for e in side.expressions] if isinstance(side, exp.Select) else []


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
        self.tops: list[Top] = []
        self.shared: list[tuple[ColumnRef, ColumnRef]] = []
        self.equated: list[tuple[ColumnRef, ColumnRef]] = []
        self.bounds: list[Hint] = []
        self.sides: list[tuple[tuple[Hint, ...], tuple[Hint, ...]]] = []

    def facts(self) -> GoldFacts:
        return GoldFacts(
            tuple(self.tables), tuple(dict.fromkeys(self.hints)), tuple(dict.fromkeys(self.joins)),
            tuple(dict.fromkeys(self.grouped)), tuple(dict.fromkeys(self.ordered)),
            tuple(dict.fromkeys(self.aggregated)), tuple(dict.fromkeys(self.mentioned)), tuple(self.limits),
            tuple(dict.fromkeys(self.computed)), tuple(dict.fromkeys(self.counts)), tuple(dict.fromkeys(self.tops)),
            tuple(dict.fromkeys(self.shared)), tuple(dict.fromkeys(self.equated)), tuple(dict.fromkeys(self.bounds)),
            tuple(dict.fromkeys(self.sides)),
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
                            self.equated.append((a, b))
                    continue
                for refs, other, this_op in ((left_refs, right, op), (right_refs, left, _FLIPPED[op])):
                    inner = other.this if isinstance(other, exp.Subquery) else None
                    if refs and isinstance(inner, exp.Select) and len(inner.expressions) == 1:
                        self.computed.extend((ref, this_op, inner.sql(dialect=self.dialect)) for ref in refs)
                        if this_op == "=":
                            self._extreme(refs, inner)
                        continue
                    value = value_of(other)
                    if refs and value is not None:
                        self.hints.extend(Hint(ref, this_op, value) for ref in refs)
                for aggregate, other, this_op in ((left, right, op), (right, left, _FLIPPED[op])):
                    value = _literal_value(other)
                    if isinstance(aggregate, (exp.Max, exp.Min, exp.Avg, exp.Sum)) and isinstance(value, (int, float)) \
                            and not isinstance(value, bool) and isinstance(aggregate.this, exp.Column):
                        self.bounds.extend(Hint(ref, this_op, value) for ref in resolve(aggregate.this))
                    elif isinstance(aggregate, exp.Count) and isinstance(other, exp.Subquery) and this_op == "=":
                        self._extreme_count(node, other, resolve)
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
                self._ranked(node, value, resolve)
        for node in tree.find_all(exp.Except, exp.Intersect):
            literals = []
            for side in (node.this, node.expression):
                collector = _Collector(self.schema, self.dialect)
                collector.visit(side)
                literals.append(tuple(dict.fromkeys(collector.hints)))
            if literals[0] and literals[1]:
                self.sides.append((literals[0], literals[1]))
        for node in tree.find_all(exp.Except, exp.Intersect, exp.Union):
            sides = [_outputs(side) for side in (node.this, node.expression)]
            for a, b in zip(*sides):
                for left in resolve(a):
                    for right in resolve(b):
                        if left != right:
                            self.shared.append((left, right))

    def _ranked(self, limit: exp.Limit, value: int, resolve: Any) -> None:
        """The top of an `ORDER BY key LIMIT value`: a column, or the size of the groups."""
        select = limit.parent
        order = select.args.get("order") if isinstance(select, (exp.Select, exp.Union, exp.Except, exp.Intersect)) else None
        if order is None or not order.expressions or value < 1:
            return
        first = order.expressions[0]
        key = first.this if isinstance(first, exp.Ordered) else first
        descending = bool(first.args.get("desc")) if isinstance(first, exp.Ordered) else False
        determined = len(order.expressions) > 1
        if isinstance(select, exp.Select) and [e.unalias() for e in select.expressions] == [key]:
            return  # it shows only what it ranks by: a tie at the cut gives the same rows
        grouped = tuple(ref for e in (select.args["group"].expressions if select.args.get("group") else ()) for ref in resolve(e))
        if isinstance(key, exp.Column):
            for ref in resolve(key)[:1]:
                self.tops.append(Top(ref, descending, value, determined, grouped))
        elif isinstance(key, exp.Count) and grouped:
            self.tops.append(Top(None, descending, value, determined, grouped))

    def _extreme(self, refs: list[ColumnRef], inner: exp.Select) -> None:
        """`x = (SELECT max(x) ...)`: every row tied at the top is the gold's."""
        function = inner.expressions[0].unalias()
        if isinstance(function, (exp.Max, exp.Min)) and not inner.args.get("group"):
            self.tops.extend(Top(ref, isinstance(function, exp.Max), 1, True, extreme=True) for ref in refs[:1])

    def _extreme_count(self, node: exp.Expression, subquery: exp.Subquery, resolve: Any) -> None:
        """`HAVING count(*) = (SELECT max(n) ... / SELECT count(*) ... ORDER BY count(*) DESC LIMIT 1)`:
        every group tied at the top size is the gold's."""
        select = node.find_ancestor(exp.Select)
        inner = subquery.this
        if select is None or not select.args.get("group") or not isinstance(inner, exp.Select):
            return
        grouped = tuple(ref for e in select.args["group"].expressions for ref in resolve(e))
        if not grouped:
            return
        function = inner.expressions[0].unalias() if inner.expressions else None
        order = inner.args.get("order")
        if isinstance(function, (exp.Max, exp.Min)):
            self.tops.append(Top(None, isinstance(function, exp.Max), 1, True, grouped, extreme=True))
        elif isinstance(function, exp.Count) and order is not None and order.expressions:
            self.tops.append(Top(None, bool(order.expressions[0].args.get("desc")), 1, True, grouped, extreme=True))
