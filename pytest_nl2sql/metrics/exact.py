"""Spider's exact set match and partial component scores, as the official evaluator computes them.

Both queries are parsed into the official structure (`pytest_nl2sql.spider_sql`), then normalised as
``evaluate()`` does with its default flags: values are dropped (nested queries in conditions stay,
without their values), DISTINCT flags are dropped, and columns linked by foreign keys are merged to
one representative when their table is in the top-level FROM. The components are then compared as
sets. Each official behaviour that looks odd is kept on purpose and named where it happens, so that
our figures equal the leaderboard's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pytest_nl2sql.metrics.spider_schema import SpiderSchema
from pytest_nl2sql.metrics.spider_sql import (
    ColUnit,
    Condition,
    CondUnit,
    OrderBy,
    Select,
    SpiderParseError,
    SpiderSQL,
    ValUnit,
    WhereOp,
    parse_spider_sql,
)

COMPONENTS = (
    "select",
    "select(no AGG)",
    "where",
    "where(no OP)",
    "group(no Having)",
    "group",
    "order",
    "and/or",
    "IUEN",
    "keywords",
)
"""Partial-match components, named and ordered as in the official output."""


@dataclass(frozen=True)
class ExactMatch:
    """One item's exact-set-match verdict and its per-component numbers (official ``partial_scores``)."""

    match: bool
    partial: dict[str, dict[str, float | int]]

    def to_json(self) -> dict[str, Any]:
        return {"match": self.match, "partial": {name: dict(scores) for name, scores in self.partial.items()}}


def exact_match(gold: str, predicted: str, schema: SpiderSchema) -> ExactMatch:
    """Compare ``predicted`` with ``gold`` as the official ``evaluate(..., etype="match")`` does.

    The prediction gets the official preprocessing (cut at the first TAB, ``" value "`` -> ``" 1 "``);
    one that does not parse is compared as an empty query (so it does not match). A gold query that
    does not parse raises `ValueError` (the official tool aborts on it).
    """
    gold_text = gold.strip()
    try:
        gold_norm = _normalized(gold_text, schema)
    except SpiderParseError as exc:
        raise ValueError(f"the gold query does not parse for Spider exact match: {exc}") from exc
    text = predicted.strip().split("\t")[0].replace(" value ", " 1 ")
    try:
        pred_norm = _normalized(text, schema)
    except SpiderParseError:
        pred_norm = normalize(SpiderSQL.empty(), schema)
    if pred_norm == gold_norm:  # the same query once normalised (most right predictions)
        return ExactMatch(True, {name: dict(scores) for name, scores in _agreeing(gold_text, schema).items()})
    match, partial = _exact(pred_norm, gold_norm)
    return ExactMatch(match, partial)


@lru_cache(maxsize=8192)
def _normalized(sql: str, schema: SpiderSchema) -> SpiderSQL:
    """`normalize` of the parsed `sql`, kept per text like the parse: paraphrased questions share
    their gold, and predictions repeat golds and each other."""
    return normalize(parse_spider_sql(sql, schema), schema)


@lru_cache(maxsize=8192)
def _agreeing(sql: str, schema: SpiderSchema) -> dict[str, dict[str, float | int]]:
    """The partial scores of a query against itself, which are those of any prediction that
    normalises to it: every component agrees, and its totals are the gold's. Kept per gold text;
    callers get copies."""
    query = _normalized(sql, schema)
    return partial_scores(query, query)


def aggregate_partial(partials: Iterable[Mapping[str, Mapping[str, float | int]]]) -> dict[str, dict[str, float]]:
    """Official aggregation over items: acc averages items that predicted the component, rec items whose
    gold has it; f1 is their harmonic mean (1.0 when both are 0, as officially)."""
    sums = {name: [0.0, 0, 0.0, 0] for name in COMPONENTS}  # acc sum, acc count, rec sum, rec count
    for partial in partials:
        for name in COMPONENTS:
            scores = partial[name]
            entry = sums[name]
            if scores["pred_total"] > 0:
                entry[0] += scores["acc"]
                entry[1] += 1
            if scores["label_total"] > 0:
                entry[2] += scores["rec"]
                entry[3] += 1
    result: dict[str, dict[str, float]] = {}
    for name, (acc_sum, acc_n, rec_sum, rec_n) in sums.items():
        acc = acc_sum / acc_n if acc_n else 0.0
        rec = rec_sum / rec_n if rec_n else 0.0
        f1 = 1.0 if acc == 0 and rec == 0 else 2.0 * acc * rec / (acc + rec)
        result[name] = {"acc": acc, "rec": rec, "f1": f1}
    return result


# ---------------------------------------------------------------------------------- normalisation


def normalize(sql: SpiderSQL, schema: SpiderSchema) -> SpiderSQL:
    """Values and DISTINCT removed, foreign-key columns merged (official ``rebuild_sql_val/col``)."""
    top_tables = frozenset(unit.table[2:-2] for unit in sql.from_tables if unit.table is not None)
    return _merge_columns(_strip_values(sql), top_tables, schema.kmap)


def _strip_values(sql: SpiderSQL) -> SpiderSQL:
    """Drop condition values except nested queries. FROM subqueries are left as they are (officially)."""

    def strip(condition: Condition) -> Condition:
        return tuple(
            CondUnit(el.negated, el.op, el.val_unit, _strip_nested(el.val1), _strip_nested(el.val2))
            if isinstance(el, CondUnit) else el
            for el in condition
        )

    return SpiderSQL(  # built field by field: `dataclasses.replace` costs more than the rest of this
        sql.select, sql.from_tables, strip(sql.from_conds), strip(sql.where), sql.group_by, strip(sql.having),
        sql.order_by, sql.limit,
        intersect=_strip_values(sql.intersect) if sql.intersect else None,
        except_=_strip_values(sql.except_) if sql.except_ else None,
        union=_strip_values(sql.union) if sql.union else None,
    )


def _strip_nested(value: object) -> SpiderSQL | None:
    return _strip_values(value) if isinstance(value, SpiderSQL) else None


def _merge_columns(sql: SpiderSQL, tables: frozenset[str], kmap: Mapping[str, str]) -> SpiderSQL:
    """Official ``rebuild_sql_col``: only the columns *outside* condition values are touched, so a
    nested query in WHERE keeps its DISTINCT flags and unmerged columns; set operands are rebuilt with
    the outer query's tables."""

    def col(unit: ColUnit) -> ColUnit:
        column = unit.column
        if column in kmap and column[2 : column.find(".")] in tables:
            column = kmap[column]
        return ColUnit(unit.agg, column, None)

    def val(unit: ValUnit) -> ValUnit:
        return ValUnit(unit.op, col(unit.left), col(unit.right) if unit.right is not None else None)

    def cond(condition: Condition) -> Condition:
        return tuple(CondUnit(el.negated, el.op, val(el.val_unit), el.val1, el.val2) if isinstance(el, CondUnit) else el
                     for el in condition)

    order_by = sql.order_by
    if order_by is not None:
        order_by = OrderBy(order_by.direction, tuple(val(unit) for unit in order_by.items))
    return SpiderSQL(
        select=Select(None, tuple((agg, val(unit)) for agg, unit in sql.select.items)),
        from_tables=sql.from_tables,
        from_conds=cond(sql.from_conds),
        where=cond(sql.where),
        group_by=tuple(col(unit) for unit in sql.group_by),
        having=cond(sql.having),
        order_by=order_by,
        limit=sql.limit,
        intersect=_merge_columns(sql.intersect, tables, kmap) if sql.intersect else None,
        except_=_merge_columns(sql.except_, tables, kmap) if sql.except_ else None,
        union=_merge_columns(sql.union, tables, kmap) if sql.union else None,
    )


# ---------------------------------------------------------------------------------- comparison


def _exact(pred: SpiderSQL, gold: SpiderSQL) -> tuple[bool, dict[str, dict[str, float | int]]]:
    partial = partial_scores(pred, gold)
    if any(scores["f1"] != 1 for scores in partial.values()):
        return False, partial
    if gold.from_tables:
        return Counter(gold.from_tables) == Counter(pred.from_tables), partial
    return True, partial


def _scores(count: int, pred_total: int, label_total: int) -> dict[str, float | int]:
    hit = 1 if pred_total == label_total and count == pred_total else 0
    return {"acc": hit, "rec": hit, "f1": hit, "label_total": label_total, "pred_total": pred_total}


def _matches(pred_items: list, gold_items: list) -> int:
    """How many predicted items find a not yet used equal gold item."""
    remaining = list(gold_items)
    count = 0
    for item in pred_items:
        if item in remaining:
            count += 1
            remaining.remove(item)
    return count


def partial_scores(pred: SpiderSQL, gold: SpiderSQL) -> dict[str, dict[str, float | int]]:
    """The official ``eval_partial_match`` on two normalised queries."""
    res: dict[str, dict[str, float | int]] = {}

    pred_sel, gold_sel = list(pred.select.items), list(gold.select.items)
    res["select"] = _scores(_matches(pred_sel, gold_sel), len(pred_sel), len(gold_sel))
    res["select(no AGG)"] = _scores(
        _matches([unit for _, unit in pred_sel], [unit for _, unit in gold_sel]), len(pred_sel), len(gold_sel)
    )

    pred_where, gold_where = list(pred.where[::2]), list(gold.where[::2])
    res["where"] = _scores(_matches(pred_where, gold_where), len(pred_where), len(gold_where))
    res["where(no OP)"] = _scores(
        _matches([u.val_unit for u in pred_where], [u.val_unit for u in gold_where]), len(pred_where), len(gold_where)
    )

    # GROUP BY columns are compared by column name only (the official split on ".")
    pred_group = [_column_name(unit.column) for unit in pred.group_by]
    gold_group = [_column_name(unit.column) for unit in gold.group_by]
    res["group(no Having)"] = _scores(_matches(pred_group, gold_group), len(pred_group), len(gold_group))

    pred_has, gold_has = int(bool(pred.group_by)), int(bool(gold.group_by))
    same_group = (
        pred_has == gold_has == 1
        and [u.column for u in pred.group_by] == [u.column for u in gold.group_by]
        and pred.having == gold.having
    )
    res["group"] = _scores(int(same_group), pred_has, gold_has)

    pred_has, gold_has = int(pred.order_by is not None), int(gold.order_by is not None)
    same_order = gold.order_by is not None and pred.order_by == gold.order_by and pred.limit == gold.limit
    res["order"] = _scores(int(same_order), pred_has, gold_has)

    pred_ao, gold_ao = set(pred.where[1::2]), set(gold.where[1::2])
    if pred_ao == gold_ao:
        res["and/or"] = _scores(1, 1, 1)
    else:  # official quirk: the two totals are returned swapped
        res["and/or"] = _scores(0, len(gold_ao), len(pred_ao))

    label_total = pred_total = count = 0
    for p, g in ((pred.intersect, gold.intersect), (pred.except_, gold.except_), (pred.union, gold.union)):
        pred_total += p is not None
        label_total += g is not None
        if p is not None and g is not None:
            count += _exact(p, g)[0]
    res["IUEN"] = _scores(count, pred_total, label_total)

    pred_kw, gold_kw = keywords(pred), keywords(gold)
    res["keywords"] = _scores(len(pred_kw & gold_kw), len(pred_kw), len(gold_kw))
    return res


def _column_name(column: str) -> str:
    return column.split(".")[1] if "." in column else column


def keywords(sql: SpiderSQL) -> set[str]:
    """The official keyword set of a query (``not``, ``in``, ``like`` looked up in all conditions)."""
    found: set[str] = set()
    if sql.where:
        found.add("where")
    if sql.group_by:
        found.add("group")
    if sql.having:
        found.add("having")
    if sql.order_by is not None:
        found.update((sql.order_by.direction, "order"))
    if sql.limit:
        found.add("limit")
    for name, operand in (("except", sql.except_), ("union", sql.union), ("intersect", sql.intersect)):
        if operand is not None:
            found.add(name)
    if "or" in sql.from_conds[1::2] + sql.where[1::2] + sql.having[1::2]:
        found.add("or")
    units = [el for el in sql.conditions() if isinstance(el, CondUnit)]
    if any(unit.negated for unit in units):
        found.add("not")
    if any(unit.op == WhereOp.IN for unit in units):
        found.add("in")
    if any(unit.op == WhereOp.LIKE for unit in units):
        found.add("like")
    return found

