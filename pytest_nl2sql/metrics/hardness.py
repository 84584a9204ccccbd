"""Spider's hardness buckets (easy / medium / hard / extra), as the official ``eval_hardness`` assigns them.

The official rules count on the parsed query (see `pytest_nl2sql.spider_sql`):

* component 1: WHERE, GROUP BY, ORDER BY, LIMIT, each extra FROM table, each OR, each LIKE;
* component 2: nested queries in conditions, INTERSECT / UNION / EXCEPT;
* others: more than one aggregate, more than one SELECT item, more than one WHERE condition unit
  (connectors counted), more than one GROUP BY column.

Two official quirks are kept on purpose so that our buckets equal the leaderboard's: the aggregate
count also counts WHERE/HAVING condition units that carry NOT, and every AND/OR connector of HAVING.

`hardness` is the one entry point (`case_hardness` is the same for a suite run, never raising): the
official parser where it reads the query, else the same rules counted on sqlglot's tree, built so
that every spelling of a query (aliases without AS, quoted identifiers, keyword case, parentheses,
``<>``) gets the bucket the official rules give its official spelling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from pytest_nl2sql.metrics.spider_schema import SpiderSchema
from pytest_nl2sql.metrics.spider_sql import AggOp, CondUnit, SpiderParseError, SpiderSQL, WhereOp, parse_spider_sql


class Hardness(StrEnum):
    """The four official buckets (a `str`, so it compares equal to ``"easy"`` etc.)."""

    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"
    EXTRA = "extra"


def hardness(
    sql: str,
    schema: Mapping[str, Sequence[str]] | SpiderSchema | None = None,
    dialect: str | None = None,
) -> Hardness:
    """Spider's bucket of ``sql``: the same answer a suite run gives for a gold query.

    1. The official parser with ``schema`` (``{table: [column, ...]}`` or a `SpiderSchema`), if given;
    2. the official parser without a schema (names taken as written), if that reads the query;
    3. else the same rules counted on sqlglot's tree (`estimated_hardness`), read in ``dialect``
       (default ``"sqlite"``), for SQL the official parser cannot read: aliases without ``AS``,
       quoted identifiers, parentheses, ``<>``, ``CAST``, CTEs, window functions, ``SELECT 1``, ...

    Every spelling of one query (aliases with or without ``AS``, quoting, keyword case,
    parentheses, ``!=`` or ``<>``) gets the bucket the official rules give its official spelling.
    Raises `ValueError` only when sqlglot cannot parse ``sql`` at all, or it is not a query.
    """
    if schema is not None and not isinstance(schema, SpiderSchema):
        schema = SpiderSchema.from_columns(schema)
    for attempt in (schema, None) if schema is not None else (None,):
        try:
            return official_hardness(sql, attempt)
        except ValueError:
            continue
    return estimated_hardness(sql, dialect)


def case_hardness(
    sql: str,
    schema: Mapping[str, Sequence[str]] | SpiderSchema | None = None,
    dialect: str | None = None,
) -> str | None:
    """What a suite run records as a gold query's hardness: `hardness` as a plain string, or
    None when no bucket can be computed (sqlglot cannot parse the query). Never raises."""
    try:
        return str(hardness(sql, schema, dialect))
    except Exception:  # noqa: BLE001 - computed at collection time for every case: never fail the run
        return None


def official_hardness(sql: str, schema: Mapping[str, Sequence[str]] | SpiderSchema | None = None) -> Hardness:
    """The bucket from the official parser alone, no fallback: raises `ValueError` where it fails."""
    if schema is not None and not isinstance(schema, SpiderSchema):
        schema = SpiderSchema.from_columns(schema)
    try:
        parsed = parse_spider_sql(sql, schema)
    except SpiderParseError as exc:
        raise ValueError(f"cannot compute Spider hardness, the query does not parse: {exc}") from exc
    except RecursionError as exc:
        raise ValueError("cannot compute Spider hardness, the query is nested too deeply") from exc
    return hardness_of(parsed)


def hardness_of(sql: SpiderSQL) -> Hardness:
    """The bucket of an already parsed query.

    Raises `ValueError` where the official ``eval_hardness`` crashes: a condition in which a
    connector stands where a unit should (``WHERE a = 1 b = 2 AND c = 3``, two units without a
    connector, then one).
    """
    for condition in (sql.from_conds, sql.where, sql.having):
        if not all(isinstance(unit, CondUnit) for unit in condition[::2]):
            raise ValueError("cannot compute Spider hardness: a condition lacks an AND/OR between two units")
    return bucket(count_component1(sql), count_component2(sql), count_others(sql))


def bucket(c1: int, c2: int, others: int) -> Hardness:
    """The official thresholds on the three counts (components 1 and 2, "others")."""
    if c1 <= 1 and others == 0 and c2 == 0:
        return Hardness.EASY
    if (others <= 2 and c1 <= 1 and c2 == 0) or (c1 <= 2 and others < 2 and c2 == 0):
        return Hardness.MEDIUM
    if (
        (others > 2 and c1 <= 2 and c2 == 0)
        or (2 < c1 <= 3 and others <= 2 and c2 == 0)
        or (c1 <= 1 and others == 0 and c2 <= 1)
    ):
        return Hardness.HARD
    return Hardness.EXTRA


def _units(condition) -> list[CondUnit]:
    return [unit for unit in condition[::2]]


def _connectors(condition) -> list[str]:
    return list(condition[1::2])


def count_component1(sql: SpiderSQL) -> int:
    count = sum((bool(sql.where), bool(sql.group_by), sql.order_by is not None, sql.limit))
    if sql.from_tables:
        count += len(sql.from_tables) - 1  # each JOIN
    connectors = _connectors(sql.from_conds) + _connectors(sql.where) + _connectors(sql.having)
    count += connectors.count("or")
    units = _units(sql.from_conds) + _units(sql.where) + _units(sql.having)
    count += sum(1 for unit in units if unit.op == WhereOp.LIKE)
    return count


def nested_queries(sql: SpiderSQL) -> list[SpiderSQL]:
    """Queries in conditions (not FROM subqueries) and the INTERSECT/EXCEPT/UNION operand."""
    nested: list[SpiderSQL] = []
    for unit in _units(sql.from_conds) + _units(sql.where) + _units(sql.having):
        nested.extend(v for v in (unit.val1, unit.val2) if isinstance(v, SpiderSQL))
    nested.extend(q for q in (sql.intersect, sql.except_, sql.union) if q is not None)
    return nested


def count_component2(sql: SpiderSQL) -> int:
    return len(nested_queries(sql))


def count_others(sql: SpiderSQL) -> int:
    aggregates = sum(1 for agg, _ in sql.select.items if agg != AggOp.NONE)
    # official quirk: a condition unit "has an aggregate" when its NOT flag is set
    aggregates += sum(1 for unit in _units(sql.where) if unit.negated)
    aggregates += sum(1 for unit in sql.group_by if unit.agg != AggOp.NONE)
    if sql.order_by is not None:
        for item in sql.order_by.items:
            aggregates += item.left.agg != AggOp.NONE
            aggregates += item.right is not None and item.right.agg != AggOp.NONE
    # official quirk: HAVING is counted element by element, so every AND/OR connector counts too
    aggregates += sum(1 for element in sql.having if not isinstance(element, CondUnit) or element.negated)
    count = int(aggregates > 1)
    count += len(sql.select.items) > 1
    count += len(sql.where) > 1  # condition units *and* connectors, as officially
    count += len(sql.group_by) > 1
    return count


# --- SQL the official parser cannot read: the same rules counted on sqlglot's tree --------------
#
# The counts mirror what the official parser would build from the query's official spelling
# (table aliases with AS, no quoted identifiers, no parentheses around conditions, != for <>), so
# that every spelling of one query gets one bucket. Official quirks reproduced here:
# * a condition value that is a column (not a number, string or subquery) makes the official
#   parser skip everything up to the next AND: `a = T2.b OR c > 1 AND d = 2` reads as two units
#   joined by AND, the OR (and whatever it joins) is not seen; when the skipped words hold a
#   parenthesis (`OR count(*) > 1`, `OR x IN (SELECT ...)`), the query ends there;
# * only the first operand of INTERSECT / UNION / EXCEPT is the query; the rest is one nested query;
# * a SELECT item counts as an aggregate only when it *is* one: `count(*)` does, `(count(*))` and
#   `max(a) - min(a)` do not;
# * WHERE and HAVING units with NOT count as aggregates, so do HAVING's AND/OR connectors, but not
#   HAVING's own aggregates;
# * FROM subqueries count as FROM tables, nothing inside them counts.
# Beyond the official grammar: each CTE is one nested query, a CTE name in FROM one table, any
# JOIN kind (or a comma) one JOIN, and an aggregate under an alias, a CAST or a window one aggregate.

_QUERIES = (exp.Select, exp.SetOperation, exp.Subquery)


@dataclass(frozen=True, slots=True)
class _Unit:
    """One condition unit (a predicate, its NOT and parentheses taken off)."""

    node: exp.Expression
    negated: bool


def estimated_hardness(sql: str, dialect: str | None = None) -> Hardness:
    """The official rules counted on sqlglot's tree (read in ``dialect``, default ``"sqlite"``).

    `hardness` uses it for SQL the official parser cannot read; on every Spider dev, train and test
    gold it gives the official bucket. Raises `ValueError` if sqlglot cannot parse ``sql``, or it
    is not a query.
    """
    return bucket(*tree_counts(_query_tree(sql, dialect)))


def _query_tree(sql: str, dialect: str | None) -> exp.Expression:
    try:
        statements = sqlglot.parse(sql, read=dialect or "sqlite")
    except (SqlglotError, RecursionError) as exc:
        raise ValueError(f"cannot compute a hardness, the query does not parse: {exc}") from exc
    # like the official parser, words after the first statement are ignored
    tree = next((statement for statement in statements if statement is not None), None)
    if tree is not None and not isinstance(tree, _QUERIES):
        tree = tree.find(exp.Select, exp.SetOperation)  # e.g. INSERT ... SELECT
    if tree is None:
        raise ValueError("cannot compute a hardness: not a query")
    return tree


def tree_counts(tree: exp.Expression) -> tuple[int, int, int]:
    """Components 1 and 2 and "others" of a query parsed by sqlglot, as the official rules count."""
    c2 = 0
    compound = False
    while True:
        ctes = tree.args.get("with_") or tree.args.get("with")
        if ctes is not None:
            c2 += len(ctes.expressions)  # each CTE is a nested query
        if isinstance(tree, exp.Subquery):
            tree = tree.this
        elif isinstance(tree, exp.SetOperation):  # A UNION B EXCEPT C: A, and one nested query
            compound = True
            tree = tree.args.get("this")  # not `.left`, which raises TypeError when a side is no query (`0 UNION SELECT`)
        else:
            break
    if not isinstance(tree, exp.Select) or not tree.expressions:
        raise ValueError("cannot compute a hardness: not a query")
    select = tree
    where, having, group, order, limit = (select.args.get(k) for k in ("where", "having", "group", "order", "limit"))
    joins = select.args.get("joins") or []
    tables = (select.args.get("from_") or select.args.get("from")) is not None

    # Clauses in the order they are written; a condition whose skipped words reach a parenthesis
    # ends the official reading there (see `_official_condition`): the clauses after it are not read.
    ended = False
    from_conds: list[_Unit | str] = []
    for join in joins:
        if ended:
            break
        tables += 1
        on = join.args.get("on")
        if on is not None:
            if from_conds:
                from_conds.append("and")
            conds, ended = _official_condition(on)
            from_conds.extend(conds)
    where_conds: list[_Unit | str] = []
    if where is not None and not ended:
        where_conds, ended = _official_condition(where.this)
    else:
        where = None
    group = None if ended else group
    having_conds: list[_Unit | str] = []
    if having is not None and not ended:
        having_conds, ended = _official_condition(having.this)
    order, limit = (None, None) if ended else (order, limit)
    c2 += compound and not ended

    elements = from_conds + where_conds + having_conds
    units = [element for element in elements if isinstance(element, _Unit)]
    c1 = sum(x is not None for x in (where, group, order, limit)) + max(tables - 1, 0)
    c1 += elements.count("or")
    c1 += sum(isinstance(_unescape(unit.node), (exp.Like, exp.ILike)) for unit in units)
    c2 += sum(_nested_queries(unit.node) for unit in units)

    group_items = group.expressions if group is not None else []
    aggregates = sum(_is_aggregate(item) for item in select.expressions)
    aggregates += sum(isinstance(e, _Unit) and e.negated for e in where_conds)  # the official NOT quirk
    aggregates += sum(_is_aggregate(_unparen(item)) for item in group_items)
    if order is not None:
        for ordered in order.expressions:
            key = _unparen(ordered.this if isinstance(ordered, exp.Ordered) else ordered)
            operands = (key.this, key.expression) if isinstance(key, (exp.Add, exp.Sub, exp.Mul, exp.Div)) else (key,)
            aggregates += sum(_is_aggregate(_unparen(operand)) for operand in operands)
    # the official HAVING quirk: connectors and NOT flags count, the aggregates themselves do not
    aggregates += sum(not isinstance(e, _Unit) or e.negated for e in having_conds)
    others = (aggregates > 1) + (len(select.expressions) > 1) + (len(where_conds) > 1) + (len(group_items) > 1)
    return c1, c2, others


def _unparen(node: exp.Expression | None) -> exp.Expression | None:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _unescape(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Escape):  # LIKE ... ESCAPE ...
        node = node.this
    return node


def _is_aggregate(node: exp.Expression | None) -> bool:
    """An aggregate as a whole (through an alias, a CAST or a window), not one inside an expression."""
    while isinstance(node, (exp.Alias, exp.Cast, exp.Window)):
        node = node.this
    return isinstance(node, exp.AggFunc)


def _flatten(node: exp.Expression, out: list[_Unit | str]) -> None:
    """Units and connectors in the order they are written; parentheses do not matter."""
    node = _unparen(node)
    if isinstance(node, (exp.And, exp.Or)):
        _flatten(node.this, out)
        out.append("and" if isinstance(node, exp.And) else "or")
        _flatten(node.expression, out)
    elif isinstance(node, exp.Not):
        inner = _unparen(node.this)
        if isinstance(inner, (exp.And, exp.Or)):
            start = len(out)
            _flatten(inner, out)
            first = out[start]
            if isinstance(first, _Unit):
                out[start] = _Unit(first.node, not first.negated)
        else:
            out.append(_Unit(inner, True))
    else:  # sqlglot writes x NOT LIKE y (and, in some dialects, IS NOT) as a flag on the predicate
        out.append(_Unit(node, bool(_unescape(node).args.get("negate"))))


def _official_condition(node: exp.Expression) -> tuple[list[_Unit | str], bool]:
    """The condition as the official parser reads it, and whether that reading ends the query.

    After a unit whose value is a column, the official value reader skips words up to the next
    AND (or a comma, a closing parenthesis, a keyword): the units and ORs in between are not read.
    When the skipped words hold a parenthesis (a function, an aggregate, a nested query), the
    skipping stops at its ``)`` or at the nested SELECT, which ends the condition and, as no clause
    can start there, the query.
    """
    flat: list[_Unit | str] = []
    _flatten(node, flat)
    read: list[_Unit | str] = []
    index = 0
    while index < len(flat):
        element = flat[index]
        read.append(element)
        index += 1
        if isinstance(element, _Unit) and _value_is_column(element.node):
            while index < len(flat) and flat[index] != "and":
                skipped = flat[index]
                if isinstance(skipped, _Unit) and _writes_parentheses(skipped.node):
                    return read, True
                index += 1
    return read, False


def _value_is_column(node: exp.Expression) -> bool:
    node = _unescape(node)
    if isinstance(node, exp.Between):
        value = node.args.get("high")  # the low value's skipping stops at BETWEEN's own AND
    elif isinstance(node, exp.In):
        return False  # a subquery (a list of values is not official SQL)
    elif isinstance(node, exp.Binary):
        value = node.expression
    else:
        return False
    value = _unparen(value)
    if value is None or isinstance(value, (exp.Literal, exp.Null, exp.Boolean, *_QUERIES)):
        return False
    if isinstance(value, exp.Neg) and isinstance(_unparen(value.this), exp.Literal):
        return False
    if isinstance(value, exp.Column) and not value.table and isinstance(value.this, exp.Identifier) and value.this.quoted:
        return False  # "text": Spider's spelling of a string value
    return True


def _writes_parentheses(node: exp.Expression) -> bool:
    """Whether the unit, written the official way (its own outer parentheses taken off), holds a
    ``(``: a function or aggregate, a nested query, a list, a parenthesised operand."""
    return any(
        isinstance(n, (exp.Paren, exp.Func, exp.Tuple, *_QUERIES)) or (isinstance(n, exp.In) and n.expressions)
        for n in node.walk()
    )


def _nested_queries(node: exp.Expression) -> int:
    count, stack = 0, [node]
    while stack:
        current = stack.pop()
        if isinstance(current, _QUERIES):
            count += 1
        else:
            stack.extend(current.iter_expressions())
    return count
