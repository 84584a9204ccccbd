"""Ties on the gold's ORDER BY keys, and golds whose result set is up to the database.

`ORDER BY score` leaves the order of rows with equal scores undefined, so a right prediction may
list them in another order; `ORDER BY score DESC LIMIT 1` over a tie picks one of the tied rows
arbitrarily, so a right prediction may pick another. To see the ties, the gold runs once with its
ORDER BY keys available: a key that is an output column (by alias, by position, or the same
expression) is read there; any other key is added as a hidden trailing column (`plan`). A LIMIT
is extended (by `EXTENSION` rows, OFFSET folded into it) so that the rows tied with the ones at
the cut are seen too. `group` then splits the gold's rows into consecutive groups of equal keys
(`TieGroups`): an ordered comparison compares order between groups only, and at a cut any rows of
the tied group are accepted (`compare.py`).

The rewrite is made only where it cannot change the gold's rows: no hidden column under DISTINCT,
none that would make a plain query an aggregate one, set operations only by their output columns,
no nondeterministic key. Anything else gets no plan (`None`), and the gold is compared as before.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

EXTENSION = 1000  # rows read past a LIMIT to find every row tied with the last kept one
HIDDEN_PREFIX = "_nl2sql_tie_key_"  # the hidden key columns' names (never shown; stripped on read)

_SET_OPERATION = getattr(exp, "SetOperation", exp.Union)  # sqlglot < 25: Union is the base class
# dialects whose databases name an unaliased expression's column by its text as written
# (`count( * )`): regenerated SQL would rename it, so such columns get their text as an alias
_NAMED_BY_TEXT = frozenset({"sqlite", "mysql"})
_CLAUSE_END = frozenset({TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.HAVING, TokenType.ORDER_BY,
                         TokenType.LIMIT, TokenType.UNION, TokenType.EXCEPT, TokenType.INTERSECT, TokenType.SEMICOLON})
_NONDETERMINISTIC = tuple(t for t in (getattr(exp, "Rand", None), getattr(exp, "Randn", None)) if t is not None)


@dataclass(frozen=True)
class TieGroups:
    """A gold result's rows in consecutive groups of equal ORDER BY keys.

    `sizes[i]` rows of the gold belong to group i (they sum to the row count). `spare[i]` holds the
    rows tied with group i that a LIMIT/OFFSET cut away (visible columns only): a prediction may
    show any of them instead of the group's own rows. Rows within a group may come in any order.
    """

    sizes: tuple[int, ...]
    spare: tuple[tuple[tuple[Any, ...], ...], ...] = ()

    def __post_init__(self) -> None:
        if not self.spare:
            object.__setattr__(self, "spare", tuple(() for _ in self.sizes))
        if len(self.spare) != len(self.sizes):
            raise ValueError("TieGroups: one spare tuple per group")

    @property
    def strict(self) -> bool:
        """Every group is one row and nothing was cut: the plain ordered comparison applies."""
        return all(n == 1 for n in self.sizes) and not any(self.spare)

    @property
    def cut(self) -> bool:
        """A LIMIT/OFFSET cut through a tie (some group has spare rows)."""
        return any(self.spare)

    def labels(self) -> list[int]:
        """The group of each gold row (and of each predicted row at the same position)."""
        out: list[int] = []
        for group, size in enumerate(self.sizes):
            out += [group] * size
        return out

    def starts(self) -> list[int]:
        """The first row of each group."""
        out, at = [], 0
        for size in self.sizes:
            out.append(at)
            at += size
        return out


@dataclass(frozen=True)
class TiePlan:
    """How to run one gold query so that its ties are seen: `sql` (in the gold's dialect) returns
    the gold's columns, then `hidden` key columns; `keys` are the key positions in that result.
    With `extended`, `sql` runs without OFFSET and with LIMIT `extended`; the gold's own rows are
    then `offset` .. `offset + limit`."""

    sql: str
    keys: tuple[int, ...]
    hidden: int = 0
    limit: int | None = None
    offset: int = 0
    extended: int | None = None

    @property
    def rewritten(self) -> bool:
        return self.hidden > 0 or self.extended is not None


@dataclass(frozen=True)
class GoldShape:
    """What the gold's top level says about determinism: a tie plan (ORDER BY), or a LIMIT without
    ORDER BY (`unordered_limit`, the limit, set when the query can return more than one row)."""

    plan: TiePlan | None = None
    unordered_limit: int | None = None


def shape(sql: str, dialect: str | None, max_rows: int) -> GoldShape:
    """The gold's `GoldShape`; an empty one when the SQL cannot be read or the rewrite is unsafe."""
    return _shape(sql, dialect, max_rows, EXTENSION)


@functools.lru_cache(maxsize=4096)
def _shape(sql: str, dialect: str | None, max_rows: int, extension: int) -> GoldShape:
    """`shape`, kept per gold text (a pure function of its arguments, with a frozen result): a
    case's gold runs on its own database and again on each of its neighbour databases."""
    lowered = sql.lower()
    if "order" not in lowered and "limit" not in lowered:
        return GoldShape()  # most golds: nothing to parse
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (SqlglotError, RecursionError, ValueError):
        return GoldShape()
    if len(statements) != 1:
        return GoldShape()
    query = _unwrapped(statements[0])
    if not isinstance(query, (exp.Select, _SET_OPERATION)):
        return GoldShape()
    order = query.args.get("order")
    if order is None or not order.expressions:
        limit = _literal(query.args.get("limit"))
        if limit is not None and limit > 0 and not _one_row(query):
            return GoldShape(unordered_limit=limit)
        return GoldShape()
    try:
        return GoldShape(plan=_plan(query, dialect, max_rows, sql))
    except (SqlglotError, RecursionError, ValueError):
        return GoldShape()


def _unwrapped(node: exp.Expression) -> exp.Expression:
    """`(SELECT ... ORDER BY x)`: the parentheses around the whole statement change nothing."""
    while isinstance(node, exp.Subquery) and all(v is None for k, v in node.args.items() if k != "this"):
        node = node.this
    return node


def _literal(limit: exp.Expression | None) -> int | None:
    """The integer of `LIMIT n` / `OFFSET n`; None for anything else (an expression, FETCH, ...)."""
    if not isinstance(limit, (exp.Limit, exp.Offset)) or any(limit.args.get(k) for k in ("offset", "expressions")):
        return None
    value = limit.expression
    if isinstance(value, exp.Literal) and not value.is_string:
        try:
            return int(value.this)
        except ValueError:
            return None
    return None


def _plan(query: exp.Expression, dialect: str | None, max_rows: int, text: str) -> TiePlan | None:
    """The plan for a query with a top-level ORDER BY; None where a rewrite could change its rows
    (or its column names). Rewrites `query` in place: `_shape` parsed it for this call alone."""
    is_select = isinstance(query, exp.Select)
    projections = list((query if is_select else _leftmost_select(query)).expressions)
    starred = any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
                  for p in projections)
    aliases = {p.alias.casefold() for p in projections if isinstance(p, exp.Alias)}
    positions: list[int | None] = []  # None: a hidden key, placed after the gold's own columns
    hidden: list[exp.Expression] = []
    for ordered in query.args["order"].expressions:
        key = ordered.this if isinstance(ordered, exp.Ordered) else ordered
        if _NONDETERMINISTIC and any(isinstance(n, _NONDETERMINISTIC) for n in key.walk()):
            return None  # ORDER BY random(): a hidden copy would draw other numbers
        found = _output_position(key, projections, starred)
        positions.append(found)
        if found is not None:
            continue
        if not is_select or _is_number(key):
            return None  # a set operation orders by its output columns only; a position we cannot place
        if query.args.get("distinct") is not None:
            return None  # a hidden column would change what DISTINCT removes
        if any(not c.table and c.name.casefold() in aliases for c in key.find_all(exp.Column)):
            return None  # an expression over an output alias: not valid in the select list
        if _aggregates(key) and query.args.get("group") is None and not any(_aggregates(p) for p in projections):
            return None  # count(*) in the select list would turn a plain query into one row
        hidden.append(key)
    if hidden:
        extra = [exp.alias_(key.copy(), f"{HIDDEN_PREFIX}{n}") for n, key in enumerate(hidden)]
        query.set("expressions", [*query.expressions, *extra])
    slots = iter(range(-len(hidden), 0))  # hidden keys are counted from the end of the result
    keys = tuple(p if p is not None else next(slots) for p in positions)
    limit = _literal(query.args.get("limit"))
    offset = _literal(query.args.get("offset")) if query.args.get("offset") is not None else 0
    extended = None
    if limit is not None and offset is not None and limit > 0 and offset >= 0 and offset + limit < max_rows:
        extended = min(offset + limit + EXTENSION, max_rows)
        query.set("limit", exp.Limit(expression=exp.Literal.number(extended)))
        query.set("offset", None)
    else:
        limit, offset = None, 0  # no LIMIT, or one we cannot read: nothing is cut (as far as we know)
    rewritten = bool(hidden) or extended is not None
    if rewritten and (dialect or "").lower() in _NAMED_BY_TEXT and not _keep_names(projections, text, dialect):
        return None
    sql = query.sql(dialect=dialect, copy=False) if rewritten else ""  # our own parse: nothing to copy for
    return TiePlan(sql, keys, len(hidden), limit, offset or 0, extended)


def _keep_names(projections: list[exp.Expression], text: str, dialect: str | None) -> bool:
    """Alias each unaliased expression of the output with its text as written, so that the
    rewritten query names its columns as the gold does; False if the text cannot be matched."""
    if all(isinstance(p, (exp.Alias, exp.Column, exp.Star)) for p in projections):
        return True
    spans = _projection_texts(text, dialect)
    if spans is None or len(spans) != len(projections):
        return False
    for p, span in zip(projections, spans):
        if isinstance(p, (exp.Alias, exp.Column, exp.Star)):
            continue
        written = sqlglot.parse_one(f"SELECT {span}", read=dialect)
        if not isinstance(written, exp.Select) or len(written.expressions) != 1 or written.expressions[0] != p:
            return False  # the text found is not this projection (a parenthesised set operation...)
        p.replace(exp.alias_(p.copy(), exp.to_identifier(span, quoted=True)))
    return True


def _projection_texts(text: str, dialect: str | None) -> list[str] | None:
    """The text of each output expression of the first top-level SELECT, read from sqlglot's tokens."""
    tokens = sqlglot.tokenize(text, read=dialect)
    depth, spans, current, inside = 0, [], [], False
    for token in tokens:
        kind = token.token_type
        if not inside:
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(kind, 0)
            inside = kind == TokenType.SELECT and depth == 0
            continue
        if depth == 0 and not current and kind in (TokenType.DISTINCT, TokenType.ALL):
            continue
        if depth == 0 and (kind in _CLAUSE_END or kind == TokenType.COMMA):
            spans.append(current)
            current = []
            if kind != TokenType.COMMA:
                break
            continue
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(kind, 0)
        current.append(token)
    else:
        if current:
            spans.append(current)
    if not spans or any(not span for span in spans):
        return None
    return [text[span[0].start:span[-1].end + 1] for span in spans]


def _leftmost_select(node: exp.Expression) -> exp.Expression:
    while not isinstance(node, exp.Select):
        if isinstance(node, _SET_OPERATION):
            node = node.this
        elif isinstance(node, exp.Subquery):
            node = node.this
        else:
            raise ValueError("no SELECT on the left of the set operation")
    return node


def _is_number(key: exp.Expression) -> bool:
    return isinstance(key, exp.Literal) and not key.is_string


def _output_position(key: exp.Expression, projections: Sequence[exp.Expression], starred: bool) -> int | None:
    """The output column a key names: by position (`ORDER BY 2`), by alias, or the same expression."""
    if _is_number(key):
        try:
            position = int(key.this)
        except ValueError:
            return None
        return position - 1 if not starred and 1 <= position <= len(projections) else None
    if starred:
        return None  # the output's width is unknown: a matching projection's position is not its column
    if isinstance(key, exp.Column) and not key.table:
        for index, p in enumerate(projections):
            if isinstance(p, exp.Alias) and p.alias.casefold() == key.name.casefold():
                return index
    for index, p in enumerate(projections):
        if p.unalias() == key:
            return index
    return None


def _aggregates(node: exp.Expression) -> bool:
    """An aggregate of this query (not inside a window or a subquery)."""
    for found in node.find_all(exp.AggFunc):
        at: exp.Expression | None = found
        while at is not None and at is not node:
            at = at.parent
            if isinstance(at, (exp.Window, exp.Subquery, exp.Select)):
                break
        else:
            return True
    return False


def _one_row(query: exp.Expression) -> bool:
    """An aggregate without GROUP BY returns one row: no LIMIT can cut it."""
    return (isinstance(query, exp.Select) and query.args.get("group") is None
            and any(_aggregates(p) for p in query.expressions))


@dataclass(frozen=True)
class Grouped:
    """The gold's own result out of an augmented run: visible columns and rows, and its groups."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    groups: TieGroups
    warnings: tuple[str, ...] = ()


def group(columns: Sequence[str], rows: Sequence[tuple[Any, ...]], plan: TiePlan) -> Grouped:
    """Split the (augmented) result into the gold's rows and their tie groups. O(rows)."""
    width = len(columns) - plan.hidden
    keys = [tuple(row[k] for k in plan.keys) for row in rows]
    strip = plan.hidden > 0
    start, stop = 0, len(rows)
    if plan.extended is not None and plan.limit is not None:
        start, stop = min(plan.offset, len(rows)), min(plan.offset + plan.limit, len(rows))
    visible = [row[:width] for row in rows] if strip else list(rows)
    sizes: list[int] = []
    spare: list[tuple[tuple[Any, ...], ...]] = []
    warnings: list[str] = []
    at = 0
    while at < len(rows):
        end = at + 1
        while end < len(rows) and _same_key(keys[end], keys[at]):
            end += 1
        low, high = max(at, start), min(end, stop)
        if low < high:
            sizes.append(high - low)
            outside = tuple(visible[at:low]) + tuple(visible[high:end])
            spare.append(outside)
            if outside:
                warnings.append(_cut_warning(plan, end - at, open_ended=end == len(rows) and len(rows) == plan.extended))
        at = end
    return Grouped(tuple(columns[:width]), visible[start:stop], TieGroups(tuple(sizes), tuple(spare)), tuple(warnings))


def _same_key(a: tuple, b: tuple) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _cut_warning(plan: TiePlan, tied: int, open_ended: bool) -> str:
    cut = f"LIMIT {plan.limit}" + (f" OFFSET {plan.offset}" if plan.offset else "")
    count = f"at least {tied}" if open_ended else f"{tied}"
    return f"{cut} cuts through a tie of {count} rows on the ORDER BY keys: any of them is accepted"


UNORDERED_LIMIT_WARNING = "LIMIT without ORDER BY: which rows is up to the database"
