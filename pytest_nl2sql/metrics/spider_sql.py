"""Parse SQL into the structure Spider's official evaluator compares (its ``process_sql`` output).

Spider's hardness buckets and exact-set-match scores are defined on that structure, quirks
included, so this module reproduces the official grammar rule for rule rather than mapping a
general SQL AST onto it: the official parser accepts a narrow subset of SQL (no ``LEFT JOIN``, no
column aliases, no ``IN (1, 2)`` lists, ...) and anything outside it must fail here too, or our
scores would differ from the leaderboard's.

Reading the SQL is done by sqlglot's tokenizer. The official parser works on NLTK word tokens, so
sqlglot tokens that touch each other without whitespace are glued back into one word where NLTK
would not split them (``a=1`` stays one unusable word, ``T1.name`` one column reference, ``>=``
becomes ``>`` ``=`` and is joined again). Comments, which sqlglot drops, are put back as the words
NLTK would make of them, since they decide whether the official parser fails.

Columns are identified as ``__table.column__`` (lower-cased), tables as ``__table__``, ``*`` as
``__all__``. Without a schema, names are taken as written (enough for hardness, which only counts
clauses); ``T1.col`` is still resolved through the query's ``AS`` aliases. Without a schema, three
readings that the official parser would only make with an implausible schema are rejected, so that
such queries get the tree-counted hardness rules instead of a misreading: a table alias without
``AS`` (``FROM emp e``, read as a second table ``e``), a column alias (``SELECT name n``, read as
a second column ``n``) and ``NULL`` / ``TRUE`` / ``FALSE`` as a column name.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from typing import NamedTuple, Union

from sqlglot.dialects.sqlite import SQLite
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType

from pytest_nl2sql.metrics.spider_schema import SpiderSchema, col_id, table_id


class SpiderParseError(ValueError):
    """The SQL is outside the subset the official Spider parser understands."""


class AggOp(IntEnum):
    """Aggregates, numbered as in the official ``AGG_OPS``."""

    NONE = 0
    MAX = 1
    MIN = 2
    COUNT = 3
    SUM = 4
    AVG = 5


class UnitOp(IntEnum):
    """Arithmetic between two columns, numbered as in the official ``UNIT_OPS``."""

    NONE = 0
    MINUS = 1
    PLUS = 2
    TIMES = 3
    DIVIDE = 4


class WhereOp(IntEnum):
    """Condition operators, numbered as in the official ``WHERE_OPS``."""

    NOT = 0
    BETWEEN = 1
    EQ = 2
    GT = 3
    LT = 4
    GE = 5
    LE = 6
    NE = 7
    IN = 8
    LIKE = 9
    IS = 10
    EXISTS = 11


_AGG_WORDS = ("none", "max", "min", "count", "sum", "avg")
_UNIT_WORDS = ("none", "-", "+", "*", "/")
_WHERE_WORDS = ("not", "between", "=", ">", "<", ">=", "<=", "!=", "in", "like", "is", "exists")
_CLAUSE_KEYWORDS = frozenset(("select", "from", "where", "group", "order", "limit", "intersect", "union", "except"))
_JOIN_KEYWORDS = frozenset(("join", "on", "as"))
_COND_OPS = ("and", "or")
_SQL_OPS = ("intersect", "union", "except")
_ORDER_OPS = ("desc", "asc")
_VALUE_END = _CLAUSE_KEYWORDS | _JOIN_KEYWORDS | {",", ")", "and"}
_CONDITION_END = _CLAUSE_KEYWORDS | _JOIN_KEYWORDS | {")", ";"}
# Words that cannot name a table or column when no schema is given (with a schema, the schema decides).
_RESERVED = (
    _CLAUSE_KEYWORDS
    | _JOIN_KEYWORDS
    | frozenset(_WHERE_WORDS + _COND_OPS + _ORDER_OPS + _AGG_WORDS)
    | frozenset(("by", "having", "distinct", "left", "right", "inner", "outer", "cross", "full", "natural", "using"))
    | frozenset(("null", "true", "false"))  # literals, not columns: a schema would reject them
)


@dataclass(frozen=True, slots=True)
class ColUnit:
    """A column, possibly aggregated: the official ``(agg_id, col_id, isDistinct)``."""

    agg: AggOp
    column: str
    distinct: bool | None


@dataclass(frozen=True, slots=True)
class ValUnit:
    """One column or two columns joined by arithmetic: ``(unit_op, col_unit1, col_unit2)``."""

    op: UnitOp
    left: ColUnit
    right: ColUnit | None


@dataclass(frozen=True, slots=True)
class CondUnit:
    """``(not_op, op_id, val_unit, val1, val2)``; values are numbers, quoted strings, columns or queries."""

    negated: bool
    op: WhereOp
    val_unit: ValUnit
    val1: Value
    val2: Value


Connector = str
"""``"and"`` or ``"or"`` between two condition units."""

Condition = tuple[Union[CondUnit, Connector], ...]
"""Condition units at even positions, connectors at odd positions (the official flat list)."""


@dataclass(frozen=True, slots=True)
class TableUnit:
    """A FROM item: a schema table (``table`` is its id) or a subquery (``query``)."""

    table: str | None = None
    query: SpiderSQL | None = None


@dataclass(frozen=True, slots=True)
class Select:
    """``(isDistinct, [(agg_id, val_unit), ...])``."""

    distinct: bool | None
    items: tuple[tuple[AggOp, ValUnit], ...]


@dataclass(frozen=True, slots=True)
class OrderBy:
    """One direction for all keys: the official parser keeps only the last ``ASC``/``DESC`` seen."""

    direction: str
    items: tuple[ValUnit, ...]


@dataclass(frozen=True, slots=True)
class SpiderSQL:
    """One parsed query. ``limit`` is only its presence: the official parser never keeps the number."""

    select: Select
    from_tables: tuple[TableUnit, ...]
    from_conds: Condition
    where: Condition
    group_by: tuple[ColUnit, ...]
    having: Condition
    order_by: OrderBy | None
    limit: bool
    intersect: SpiderSQL | None
    except_: SpiderSQL | None
    union: SpiderSQL | None

    @classmethod
    def empty(cls) -> SpiderSQL:
        """What the official evaluator compares against when a prediction does not parse."""
        return cls(Select(False, ()), (), (), (), (), (), None, False, None, None, None)

    def conditions(self) -> Condition:
        """FROM ... ON, WHERE and HAVING conditions together, in the official order."""
        return self.from_conds + self.where + self.having


Value = Union[float, str, ColUnit, SpiderSQL, None]


# ---------------------------------------------------------------------------------- words

_SPLIT_CHARS = frozenset("()[]{}<>;@#$%&?!*")
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.=+-/")
_VALUE_PLACEHOLDER = "__val__"
_TOKENIZER_CLASS = SQLite.tokenizer_class
_TOKENIZERS = threading.local()  # one tokenizer per thread: it keeps state while it runs (reset per call)


def _tokenize(text: str) -> list[Token]:
    """sqlglot's tokens of `text`, by this thread's tokenizer (making one costs as much as
    tokenizing a short query)."""
    tokenizer = getattr(_TOKENIZERS, "tokenizer", None)
    if tokenizer is None:
        tokenizer = _TOKENIZERS.tokenizer = _TOKENIZER_CLASS()
    return tokenizer.tokenize(text)


class _Piece(NamedTuple):  # a tuple: made a few dozen times per query, so cheap to make
    text: str
    start: int
    end: int
    split: bool  # NLTK puts this piece on its own
    value: bool  # a quoted string


def spider_words(sql: str) -> tuple[str, ...]:
    """The official parser's tokens: lower-cased words; quoted values keep their text in ``"..."``."""
    if (sql.count("'") + sql.count('"')) % 2:
        raise SpiderParseError("unbalanced quotes (the official tokenizer rejects an odd number of quote characters)")
    try:
        tokens = _tokenize(sql)
    except SqlglotError as exc:
        raise SpiderParseError(f"cannot tokenize: {exc}") from exc
    pieces: list[_Piece] = []
    previous_end = 0
    for token in tokens:
        start, end = token.start, token.end
        if start > previous_end and not sql[previous_end:start].isspace():
            pieces.extend(_comment_pieces(sql, previous_end, start))
        raw = sql[start : end + 1]
        if token.token_type is not TokenType.STRING and _PLAIN.issuperset(raw):  # most tokens: one piece
            pieces.append(_Piece(raw, start, end, False, False))
        else:
            pieces.extend(_pieces(sql, token))
        previous_end = end + 1
    if previous_end < len(sql) and not sql[previous_end:].isspace():
        pieces.extend(_comment_pieces(sql, previous_end, len(sql)))
    words: list[str] = []
    group: list[_Piece] = []
    for piece in pieces:
        if group and (piece.start != group[-1].end + 1 or piece.split or group[-1].split):
            words.append(_word(group))
            group = []
        group.append(piece)
    if group:
        words.append(_word(group))
    return _join_comparisons(words)


def _comment_pieces(sql: str, start: int, end: int) -> list[_Piece]:
    """Comments (which sqlglot drops) as the official NLTK tokens see them: ``--``, ``/`` ``*`` and words.

    Their words matter: a comment inside a clause makes the official parser fail, one at the end
    does not, and an ``AS`` in a comment still defines an alias.
    """
    pieces: list[_Piece] = []
    index = start
    while index < end:
        if sql.startswith("--", index):
            stop = sql.find("\n", index, end)
            stop = end if stop < 0 else stop
            pieces.append(_Piece("--", index, index + 1, True, False))
            pieces.extend(_text_pieces(sql, index + 2, stop))
            index = stop
        elif sql.startswith("/*", index):
            stop = sql.find("*/", index + 2, end)
            stop = end if stop < 0 else stop
            pieces += [_Piece("/", index, index, False, False), _Piece("*", index + 1, index + 1, True, False)]
            pieces.extend(_text_pieces(sql, index + 2, stop))
            if stop < end:
                pieces += [_Piece("*", stop, stop, True, False), _Piece("/", stop + 1, stop + 1, False, False)]
            index = stop + 2
        else:
            index += 1
    return pieces


def _text_pieces(sql: str, start: int, stop: int) -> list[_Piece]:
    try:
        tokens = _tokenize(sql[start:stop])
    except SqlglotError:
        return []
    pieces: list[_Piece] = []
    for token in tokens:
        pieces.extend(_pieces(sql, token, start))
    return pieces


def _pieces(sql: str, token: Token, offset: int = 0) -> list[_Piece]:
    """The NLTK pieces of one sqlglot token (``offset``: where the tokenized text starts in ``sql``)."""
    token_start, token_end = token.start + offset, token.end + offset
    raw = sql[token_start : token_end + 1]
    quoted_identifier = token.token_type == TokenType.IDENTIFIER and raw[:1] == '"'
    if token.token_type == TokenType.STRING or quoted_identifier:
        inner = raw[1:-1]
        if "'" in inner or '"' in inner:  # the official quote pairing garbles such values
            return [_Piece(_VALUE_PLACEHOLDER + _VALUE_PLACEHOLDER, token_start, token_end, False, False)]
        return [_Piece('"' + inner + '"', token_start, token_end, False, True)]
    if _PLAIN.issuperset(raw):  # the common case: one piece
        return [_Piece(raw, token_start, token_end, False, False)]
    pieces: list[_Piece] = []
    run_start = None
    for position, char in enumerate(raw, start=token_start):
        following = sql[position + 1 : position + 2]
        if char.isspace():  # multi-word tokens such as "ORDER BY"
            if run_start is not None:
                pieces.append(_Piece(sql[run_start:position], run_start, position - 1, False, False))
                run_start = None
            continue
        split = char in _SPLIT_CHARS or (char in ",:" and not following.isdigit())
        if split:
            if run_start is not None:
                pieces.append(_Piece(sql[run_start:position], run_start, position - 1, False, False))
                run_start = None
            pieces.append(_Piece(char, position, position, True, False))
        elif run_start is None:
            run_start = position
    if run_start is not None:
        pieces.append(_Piece(sql[run_start : token_end + 1], run_start, token_end, False, False))
    return pieces


def _word(group: list[_Piece]) -> str:
    if len(group) == 1:
        piece = group[0]
        return piece.text if piece.value else piece.text.lower()
    return "".join(_VALUE_PLACEHOLDER if p.value else p.text.lower() for p in group)


def _join_comparisons(words: list[str]) -> tuple[str, ...]:
    """``>`` ``=`` -> ``>=`` (also ``<=``, ``!=``), even across whitespace, as the official tokenizer does."""
    for index in reversed([i for i, word in enumerate(words) if word == "="]):
        previous = words[index - 1]
        if previous in ("!", ">", "<"):
            words = words[: index - 1] + [previous + "="] + words[index + 1 :]
    return tuple(words)


# ---------------------------------------------------------------------------------- parser


class _Context:
    """Alias map and name resolution for one query (the official ``tables_with_alias``)."""

    def __init__(self, words: tuple[str, ...], schema: SpiderSchema | None) -> None:
        aliases: dict[str, str] = {}
        for index, word in enumerate(words):
            if word == "as":
                if index + 1 >= len(words):
                    raise SpiderParseError("AS at the end of the query")
                aliases[words[index + 1]] = words[index - 1]
        if schema is not None:
            for table, _ in schema.tables:
                if table in aliases:
                    raise SpiderParseError(f"alias {table!r} is also a table name")
                aliases[table] = table
        self.aliases = aliases
        self.schema = schema

    def table(self, word: str) -> tuple[str, str]:
        """(table id, table name) of a FROM item."""
        if self.schema is None:
            name = self.aliases.get(word, word)
            if not _is_name(name):
                raise SpiderParseError(f"not a table: {word!r}")
            return table_id(name), name
        name = self.aliases.get(word)
        if name is None:
            raise SpiderParseError(f"unknown table or alias: {word!r}")
        if name == "*":
            return "__all__", name
        if name not in self.schema.columns:
            raise SpiderParseError(f"unknown table: {name!r}")
        return table_id(name), name

    def column(self, word: str, default_tables: list[str] | None) -> str:
        if word == "*":
            return "__all__"
        if "." in word:
            parts = word.split(".")
            if len(parts) != 2:
                raise SpiderParseError(f"bad column reference: {word!r}")
            alias, column = parts
            if self.schema is None:
                table = self.aliases.get(alias, alias)
                if not (_is_name(table) and _is_identifier(column)):
                    raise SpiderParseError(f"bad column reference: {word!r}")
                return col_id(table, column)
            if alias not in self.aliases:
                raise SpiderParseError(f"unknown table or alias: {alias!r}")
            table = self.aliases[alias]
            if column not in self.schema.columns.get(table, ()):
                raise SpiderParseError(f"unknown column: {table}.{column}")
            return col_id(table, column)
        if not default_tables:
            raise SpiderParseError(f"column {word!r} without a table to take it from")
        if self.schema is None:
            if not _is_name(word):
                raise SpiderParseError(f"not a column: {word!r}")
            return col_id(default_tables[0], word)
        for table in default_tables:
            if word in self.schema.columns[table]:
                return col_id(table, word)
        raise SpiderParseError(f"unknown column: {word!r}")


def _is_identifier(word: str) -> bool:
    return word.replace("_", "a").isalnum()


def _is_name(word: str) -> bool:
    """An unqualified name that can be a table or column when no schema says otherwise."""
    return word not in _RESERVED and _is_identifier(word)


def _expect(words: tuple[str, ...] | list[str], index: int, expected: str) -> None:
    if index >= len(words) or words[index] != expected:
        found = words[index] if index < len(words) else "end of query"
        raise SpiderParseError(f"expected {expected!r}, found {found!r}")


def _col_unit(words, index: int, ctx: _Context, default_tables) -> tuple[int, ColUnit]:
    block = False
    distinct = False
    if words[index] == "(":
        block = True
        index += 1
    if words[index] in _AGG_WORDS:
        agg = AggOp(_AGG_WORDS.index(words[index]))
        index += 1
        _expect(words, index, "(")
        index += 1
        if words[index] == "distinct":
            index += 1
            distinct = True
        column = ctx.column(words[index], default_tables)
        index += 1
        _expect(words, index, ")")
        return index + 1, ColUnit(agg, column, distinct)
    if words[index] == "distinct":
        index += 1
        distinct = True
    column = ctx.column(words[index], default_tables)
    index += 1
    if block:
        _expect(words, index, ")")
        index += 1
    return index, ColUnit(AggOp.NONE, column, distinct)


def _val_unit(words, index: int, ctx: _Context, default_tables) -> tuple[int, ValUnit]:
    block = False
    if words[index] == "(":
        block = True
        index += 1
    index, left = _col_unit(words, index, ctx, default_tables)
    op, right = UnitOp.NONE, None
    if index < len(words) and words[index] in _UNIT_WORDS:
        op = UnitOp(_UNIT_WORDS.index(words[index]))
        index, right = _col_unit(words, index + 1, ctx, default_tables)
    if block:
        _expect(words, index, ")")
        index += 1
    return index, ValUnit(op, left, right)


def _value(words, start: int, ctx: _Context, default_tables) -> tuple[int, Value]:
    index = start
    block = False
    if words[index] == "(":
        block = True
        index += 1
    word = words[index]
    value: Value
    if word == "select":
        index, value = _query(words, index, ctx)
    elif '"' in word:
        value = word
        index += 1
    else:
        try:
            value = float(word)
            index += 1
        except ValueError:
            end = index
            while end < len(words) and words[end] not in _VALUE_END:
                end += 1
            # the official parser re-reads from `start` (an opening parenthesis included)
            _, value = _col_unit(words[start:end], 0, ctx, default_tables)
            index = end
    if block:
        _expect(words, index, ")")
        index += 1
    return index, value


def _condition(words, index: int, ctx: _Context, default_tables) -> tuple[int, Condition]:
    conds: list[CondUnit | str] = []
    n = len(words)
    while index < n:
        index, val_unit = _val_unit(words, index, ctx, default_tables)
        negated = False
        if words[index] == "not":
            negated = True
            index += 1
        if index >= n or words[index] not in _WHERE_WORDS:
            found = words[index] if index < n else "end of query"
            raise SpiderParseError(f"expected a comparison operator, found {found!r}")
        op = WhereOp(_WHERE_WORDS.index(words[index]))
        index += 1
        val2: Value = None
        if op == WhereOp.BETWEEN:
            index, val1 = _value(words, index, ctx, default_tables)
            _expect(words, index, "and")
            index, val2 = _value(words, index + 1, ctx, default_tables)
        else:
            index, val1 = _value(words, index, ctx, default_tables)
        conds.append(CondUnit(negated, op, val_unit, val1, val2))
        if index < n and words[index] in _CONDITION_END:
            break
        if index < n and words[index] in _COND_OPS:
            conds.append(words[index])
            index += 1
    return index, tuple(conds)


def _select(words, index: int, ctx: _Context, default_tables) -> Select:
    _expect(words, index, "select")
    index += 1
    distinct = False
    if index < len(words) and words[index] == "distinct":
        index += 1
        distinct = True
    items: list[tuple[AggOp, ValUnit]] = []
    while index < len(words) and words[index] not in _CLAUSE_KEYWORDS:
        agg = AggOp.NONE
        if words[index] in _AGG_WORDS:
            agg = AggOp(_AGG_WORDS.index(words[index]))
            index += 1
        index, val_unit = _val_unit(words, index, ctx, default_tables)
        items.append((agg, val_unit))
        if index < len(words) and words[index] == ",":
            index += 1
        elif ctx.schema is None and index < len(words) and words[index] not in _CLAUSE_KEYWORDS:
            # `SELECT name n`: one more column to the official parser, which only a schema with a
            # column `n` accepts; without a schema it is a column alias
            raise SpiderParseError(f"column alias: {words[index]!r}")
    return Select(distinct, tuple(items))


def _from(words, start: int, ctx: _Context):
    try:
        index = words.index("from", start) + 1
    except ValueError:
        raise SpiderParseError("no FROM clause") from None
    n = len(words)
    default_tables: list[str] = []
    units: list[TableUnit] = []
    conds: list[CondUnit | str] = []
    while index < n:
        block = False
        if words[index] == "(":
            block = True
            index += 1
        if words[index] == "select":
            index, query = _query(words, index, ctx)
            units.append(TableUnit(query=query))
        else:
            if index < n and words[index] == "join":
                index += 1
            if ctx.schema is None and words[index - 1] not in ("from", "join", "("):
                # `FROM emp e`: the official parser reads `e` as one more table, which only a schema
                # with a table `e` accepts; without a schema it is an alias written without AS
                raise SpiderParseError(f"table alias without AS: {words[index]!r}")
            table, name = ctx.table(words[index])
            index += 3 if index + 1 < n and words[index + 1] == "as" else 1
            units.append(TableUnit(table=table))
            default_tables.append(name)
        if index < n and words[index] == "on":
            index, these = _condition(words, index + 1, ctx, default_tables)
            if conds:
                conds.append("and")
            conds.extend(these)
        if block:
            _expect(words, index, ")")
            index += 1
        if index < n and (words[index] in _CLAUSE_KEYWORDS or words[index] in (")", ";")):
            break
    return index, tuple(units), tuple(conds), default_tables


def _clause_condition(words, index: int, keyword: str, ctx: _Context, default_tables) -> tuple[int, Condition]:
    if index >= len(words) or words[index] != keyword:
        return index, ()
    return _condition(words, index + 1, ctx, default_tables)


def _group_by(words, index: int, ctx: _Context, default_tables) -> tuple[int, tuple[ColUnit, ...]]:
    units: list[ColUnit] = []
    if index >= len(words) or words[index] != "group":
        return index, ()
    _expect(words, index + 1, "by")
    index += 2
    while index < len(words) and not (words[index] in _CLAUSE_KEYWORDS or words[index] in (")", ";")):
        index, unit = _col_unit(words, index, ctx, default_tables)
        units.append(unit)
        if index < len(words) and words[index] == ",":
            index += 1
        else:
            break
    return index, tuple(units)


def _order_by(words, index: int, ctx: _Context, default_tables) -> tuple[int, OrderBy | None]:
    if index >= len(words) or words[index] != "order":
        return index, None
    _expect(words, index + 1, "by")
    index += 2
    direction = "asc"
    items: list[ValUnit] = []
    while index < len(words) and not (words[index] in _CLAUSE_KEYWORDS or words[index] in (")", ";")):
        index, unit = _val_unit(words, index, ctx, default_tables)
        items.append(unit)
        if index < len(words) and words[index] in _ORDER_OPS:
            direction = words[index]
            index += 1
        if index < len(words) and words[index] == ",":
            index += 1
        else:
            break
    return index, OrderBy(direction, tuple(items))


def _skip_semicolons(words, index: int) -> int:
    while index < len(words) and words[index] == ";":
        index += 1
    return index


def _query(words, start: int, ctx: _Context) -> tuple[int, SpiderSQL]:
    index = start
    block = False
    if words[index] == "(":
        block = True
        index += 1
    # FROM is read first: it gives the tables that bare column names are looked up in
    from_end, units, from_conds, default_tables = _from(words, start, ctx)
    select = _select(words, index, ctx, default_tables)
    index = from_end
    index, where = _clause_condition(words, index, "where", ctx, default_tables)
    index, group_by = _group_by(words, index, ctx, default_tables)
    index, having = _clause_condition(words, index, "having", ctx, default_tables)
    index, order_by = _order_by(words, index, ctx, default_tables)
    limit = index < len(words) and words[index] == "limit"
    if limit:
        index += 2  # the official parser skips whatever follows LIMIT
    index = _skip_semicolons(words, index)
    if block:
        _expect(words, index, ")")
        index += 1
    index = _skip_semicolons(words, index)
    compound: dict[str, SpiderSQL] = {}
    if index < len(words) and words[index] in _SQL_OPS:
        operator = words[index]
        index, compound[operator] = _query(words, index + 1, ctx)
    return index, SpiderSQL(
        select=select,
        from_tables=units,
        from_conds=from_conds,
        where=where,
        group_by=group_by,
        having=having,
        order_by=order_by,
        limit=limit,
        intersect=compound.get("intersect"),
        except_=compound.get("except"),
        union=compound.get("union"),
    )


def parse_spider_sql(sql: str, schema: SpiderSchema | None = None) -> SpiderSQL:
    """Parse ``sql`` as the official Spider ``get_sql`` does; raise `SpiderParseError` where it fails.

    Like the official parser, words after a complete query (after ORDER BY / LIMIT, a second
    statement) are ignored. Results are cached per (sql, schema).
    """
    return _parse_cached(sql, schema)


@lru_cache(maxsize=8192)
def _parse_cached(sql: str, schema: SpiderSchema | None) -> SpiderSQL:
    words = spider_words(sql)
    if not words:
        raise SpiderParseError("empty query")
    ctx = _Context(words, schema)
    try:
        return _query(words, 0, ctx)[1]
    except IndexError:
        raise SpiderParseError("the query ends too early") from None
