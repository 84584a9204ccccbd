"""Mutants of the gold: small generic rewrites of its syntax tree (the mutation operators of
test-suite distillation). A neighbour is worth keeping when gold and mutants disagree on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp
from sqlglot.errors import SqlglotError

MAX_MUTANTS = 60
MAX_DATA_MUTANTS = 6  # `_data_rewrites`, past the others

_SWAPS: dict[type, type] = {
    exp.GT: exp.GTE, exp.GTE: exp.GT, exp.LT: exp.LTE, exp.LTE: exp.LT,
    exp.Max: exp.Min, exp.Min: exp.Max, exp.Sum: exp.Avg, exp.Avg: exp.Sum,
    exp.And: exp.Or, exp.Or: exp.And, exp.Intersect: exp.Except, exp.Except: exp.Intersect,
}
_OPPOSITES: dict[type, type] = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.NEQ, exp.NEQ: exp.EQ}


def _replaced_by(node: exp.Expression, new_type: type) -> exp.Expression:
    if isinstance(node, exp.Binary):
        return new_type(this=node.this, expression=node.expression)
    if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
        return new_type(this=node.this, expression=node.expression, distinct=node.args.get("distinct", True))
    return new_type(this=node.this)


def _rewrites(node: exp.Expression) -> Iterator[Callable[[exp.Expression], exp.Expression | None]]:
    """Ways to rewrite a node of this shape; each takes the node (in a copy) and returns its
    replacement (or None to remove it)."""
    kind = type(node)
    if kind in _SWAPS:
        yield lambda n, t=_SWAPS[kind]: _replaced_by(n, t)
    if kind in _OPPOSITES:
        yield lambda n, t=_OPPOSITES[kind]: _replaced_by(n, t)
    if isinstance(node, exp.Select):
        if node.args.get("distinct"):
            yield lambda n: _drop_arg(n, "distinct")
        else:
            yield lambda n: _set_arg(n, "distinct", exp.Distinct())
        if node.args.get("where") is not None:
            yield lambda n: _drop_arg(n, "where")
        if node.args.get("having") is not None:
            yield lambda n: _drop_arg(n, "having")
        group = node.args.get("group")
        if group is not None and len(group.expressions) > 1:
            yield lambda n: _set_arg(n, "group", exp.Group(expressions=n.args["group"].expressions[1:]))
    if isinstance(node, exp.And):
        yield lambda n: n.this
        yield lambda n: n.expression
    if isinstance(node, exp.Count):
        inner = node.this
        if isinstance(inner, exp.Distinct):
            yield lambda n: exp.Count(this=n.this.expressions[0] if n.this.expressions else exp.Star())
        elif isinstance(inner, exp.Star):
            select = node.find_ancestor(exp.Select)
            column = next(select.find_all(exp.Column), None) if select is not None else None
            if column is not None:
                yield lambda n, c=column: exp.Count(this=exp.Distinct(expressions=[c.copy()]))
        elif inner is not None:
            yield lambda n: exp.Count(this=exp.Star())
            yield lambda n: exp.Count(this=exp.Distinct(expressions=[n.this]))
    if isinstance(node, exp.Literal):
        if node.is_string:
            if node.this:
                yield lambda n: exp.Literal.string(n.this[:-1])
        else:
            try:
                number = float(node.this)
            except ValueError:
                number = None
            if number is not None:
                yield lambda n: exp.Literal.number(_number_text(float(n.this) + 1))
                yield lambda n: exp.Literal.number(_number_text(float(n.this) - 1))
    if isinstance(node, exp.Ordered):
        yield lambda n: _set_arg(n, "desc", not n.args.get("desc"))
    if isinstance(node, exp.Order):
        select = node.parent
        if isinstance(select, exp.Select) and len(select.expressions) > 1:
            yield lambda n, s=select: exp.Order(expressions=[exp.Ordered(this=e.unalias().copy(), desc=o.args.get("desc"))
                                                           for e, o in zip(_other_columns(s, n), n.expressions)])
        yield lambda n: None
    if isinstance(node, exp.Limit):
        value = node.expression
        if isinstance(value, exp.Literal) and value.this.isdigit():
            yield lambda n: exp.Limit(expression=exp.Literal.number(int(n.expression.this) + 1))
            if int(value.this) > 1:
                yield lambda n: exp.Limit(expression=exp.Literal.number(int(n.expression.this) - 1))
    if isinstance(node, exp.Join):
        if not node.side and node.args.get("on") is not None:
            yield lambda n: _set_arg(n, "side", "LEFT")
    if isinstance(node, (exp.Like, exp.ILike)):
        yield lambda n: exp.EQ(this=n.this, expression=n.expression)
    if isinstance(node, exp.Not):
        yield lambda n: n.this
    if isinstance(node, exp.Union):
        yield lambda n: _set_arg(n, "distinct", not n.args.get("distinct"))


def _data_rewrites(node: exp.Expression) -> Iterator[Callable[[exp.Expression], exp.Expression | None]]:
    """Rewrites that only some data tells apart from the gold: a tie at the top (`ORDER BY x DESC
    LIMIT 1` for `x = (SELECT max(x) ...)`, a tie-break left out), a value on both sides of a set
    operation (the EXCEPT left out). Made after the others (`mutants`), so that a gold keeps the
    mutants it had."""
    if isinstance(node, exp.EQ) and _extreme_of(node) is not None:
        yield _top_one
    if isinstance(node, exp.Order) and len(node.expressions) > 1 and isinstance(node.parent, exp.Select) \
            and node.parent.args.get("limit") is not None:
        yield lambda n: exp.Order(expressions=[n.expressions[0]])
    if isinstance(node, (exp.Except, exp.Intersect)):
        yield lambda n: n.this


def _extreme_of(node: exp.EQ) -> tuple[exp.Expression, bool] | None:
    """For `x = (SELECT max(x) ...)` or `count(*) = (SELECT max(n) ... / SELECT count(*) ... ORDER BY
    count(*) DESC LIMIT 1)` in a SELECT without ORDER BY or LIMIT: (x, whether the greatest)."""
    for this, other in ((node.this, node.expression), (node.expression, node.this)):
        inner = other.this if isinstance(other, exp.Subquery) else None
        select = node.find_ancestor(exp.Select)
        if not isinstance(inner, exp.Select) or len(inner.expressions) != 1 or select is None \
                or select.args.get("order") is not None or select.args.get("limit") is not None:
            continue
        function = inner.expressions[0].unalias()
        if isinstance(this, exp.Column) and isinstance(function, (exp.Max, exp.Min)) and not inner.args.get("group"):
            return this, isinstance(function, exp.Max)
        if isinstance(this, exp.Count) and isinstance(function, (exp.Max, exp.Min)):
            return this, isinstance(function, exp.Max)
        order = inner.args.get("order")
        if isinstance(this, exp.Count) and isinstance(function, exp.Count) and order is not None and order.expressions:
            return this, bool(order.expressions[0].args.get("desc"))
    return None


def _top_one(node: exp.EQ) -> exp.Expression:
    """`x = (SELECT max(x) ...)` as `ORDER BY x DESC LIMIT 1`: the same row unless the top is tied."""
    key, descending = _extreme_of(node)  # type: ignore[misc]
    select = node.find_ancestor(exp.Select)
    select.set("order", exp.Order(expressions=[exp.Ordered(this=key.copy(), desc=descending)]))
    select.set("limit", exp.Limit(expression=exp.Literal.number(1)))
    return exp.true()


def _other_columns(select: exp.Select, order: exp.Order) -> list[exp.Expression]:
    """The select list rotated by one, as another ORDER BY choice."""
    items = list(select.expressions)
    return items[1:] + items[:1]


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _set_arg(node: exp.Expression, name: str, value: object) -> exp.Expression:
    node.set(name, value)
    return node


def _drop_arg(node: exp.Expression, name: str) -> exp.Expression:
    node.set(name, None)
    return node


def mutants(tree: exp.Expression, dialect: str) -> list[str]:
    """SQL texts of the gold's mutants (distinct, none equal to the gold), at most MAX_MUTANTS,
    in a fixed order: the tree's nodes in walk order, each node's rewrites in order; then at most
    MAX_DATA_MUTANTS of `_data_rewrites`, in the same order."""
    original = tree.sql(dialect=dialect)
    found: dict[str, None] = {}
    _mutate(tree, dialect, original, _rewrites, found, MAX_MUTANTS)
    _mutate(tree, dialect, original, _data_rewrites, found, len(found) + MAX_DATA_MUTANTS)
    return list(found)


def _mutate(tree: exp.Expression, dialect: str, original: str,
            rewrites: Callable[[exp.Expression], Iterator[Callable[[exp.Expression], exp.Expression | None]]],
            found: dict[str, None], cap: int) -> None:
    """Adds to `found` the texts of `rewrites` of each node of `tree` (in walk order), up to `cap` in all."""
    if len(found) >= cap:
        return
    nodes = list(tree.walk())
    for index, node in enumerate(nodes):
        for number, _ in enumerate(rewrites(node)):
            copy = tree.copy()
            target = list(copy.walk())[index]
            rewrite = list(rewrites(target))[number]
            try:
                replacement = rewrite(target)
                if replacement is not target:
                    if target is copy:
                        copy = replacement
                        if copy is None:
                            continue
                    else:
                        target.replace(replacement) if replacement is not None else target.pop()
                text = copy.sql(dialect=dialect)
            except (SqlglotError, ValueError, TypeError, AttributeError, IndexError, RecursionError):
                continue
            if text != original:
                found.setdefault(text)
            if len(found) >= cap:
                return
