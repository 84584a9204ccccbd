"""Spider's hardness buckets (easy / medium / hard / extra), as the official ``eval_hardness`` assigns them.

The official rules count on the parsed query (see `pytest_nl2sql.spider_sql`):

* component 1: WHERE, GROUP BY, ORDER BY, LIMIT, each extra FROM table, each OR, each LIKE;
* component 2: nested queries in conditions, INTERSECT / UNION / EXCEPT;
* others: more than one aggregate, more than one SELECT item, more than one WHERE condition unit
  (connectors counted), more than one GROUP BY column.

Two official quirks are kept on purpose so that our buckets equal the leaderboard's: the aggregate
count also counts WHERE/HAVING condition units that carry NOT, and every AND/OR connector of HAVING.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

from pytest_nl2sql.spider_schema import SpiderSchema
from pytest_nl2sql.spider_sql import AggOp, CondUnit, SpiderParseError, SpiderSQL, WhereOp, parse_spider_sql


class Hardness(StrEnum):
    """The four official buckets (a `str`, so it compares equal to ``"easy"`` etc.)."""

    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"
    EXTRA = "extra"


def hardness(sql: str, schema: Mapping[str, Sequence[str]] | SpiderSchema | None = None) -> Hardness:
    """The official hardness of ``sql``; a schema only makes column resolution stricter.

    Raises `ValueError` when the official parser could not read the query.
    """
    if schema is not None and not isinstance(schema, SpiderSchema):
        schema = SpiderSchema.from_columns(schema)
    try:
        parsed = parse_spider_sql(sql, schema)
    except SpiderParseError as exc:
        raise ValueError(f"cannot compute Spider hardness, the query does not parse: {exc}") from exc
    return hardness_of(parsed)


def hardness_of(sql: SpiderSQL) -> Hardness:
    """The bucket of an already parsed query."""
    c1 = count_component1(sql)
    c2 = count_component2(sql)
    others = count_others(sql)
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
