"""Does a query fix the order of its rows? (`order: auto` compares rows in order iff it does.)

Only a top-level ORDER BY orders the result: one inside a subquery, a CTE, a window or an
`IN (...)` list does not (the official Spider tool's substring test gets this wrong; `compat.py`
keeps that on purpose). For a set operation (`... UNION ... ORDER BY 1`) the ORDER BY belongs to
the whole operation and counts.

This runs once per case, so it reads sqlglot's tokens (an ORDER BY outside every parenthesis)
rather than building a syntax tree: the answer is the same and it costs a fraction.
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Token, TokenType


@functools.lru_cache(maxsize=4096)  # a pure function of the text: a gold is asked again on every neighbour
def has_top_level_order_by(sql: str, dialect: str | None = None) -> bool:
    """True iff the (first) statement of `sql` has an ORDER BY that applies to its result.

    If even tokenizing fails, the answer is False, i.e. rows are compared as multisets: a lenient
    default that never fails a correct prediction for its row order.
    """
    if "order" not in sql.lower():
        return False  # no ORDER keyword at all: nothing to tokenize
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except SqlglotError:
        return False
    tokens = _first_statement(tokens)
    while _wrapped_in_parentheses(tokens):
        tokens = tokens[1:-1]
    depth = 0
    for token in tokens:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif token.token_type == TokenType.ORDER_BY and depth == 0:
            return True
    return False


def _first_statement(tokens: list[Token]) -> list[Token]:
    for index, token in enumerate(tokens):
        if token.token_type == TokenType.SEMICOLON:
            return tokens[:index]
    return tokens


def _wrapped_in_parentheses(tokens: list[Token]) -> bool:
    """`(SELECT ... ORDER BY x)`: the outer parentheses enclose the whole statement."""
    if len(tokens) < 2 or tokens[0].token_type != TokenType.L_PAREN or tokens[-1].token_type != TokenType.R_PAREN:
        return False
    depth = 0
    for token in tokens[:-1]:
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth == 0:
            return False  # the first parenthesis closes before the end
    return True
