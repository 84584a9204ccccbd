"""Does a query fix the order of its rows? (`order: auto` compares rows in order iff it does.)

Only a top-level ORDER BY orders the result: one inside a subquery, a CTE or an `IN (...)` list does
not (the official Spider tool's substring test gets this wrong; `compat.py` keeps that on purpose).
For a set operation (`... UNION ... ORDER BY 1`) the ORDER BY belongs to the whole operation and
counts.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType


def has_top_level_order_by(sql: str, dialect: str | None = None) -> bool:
    """True iff the (first) statement of `sql` has an ORDER BY that applies to its result.

    If sqlglot cannot parse the query (a dialect feature it does not know), we fall back to its
    tokenizer and look for `ORDER BY` outside every parenthesis, which is right for all but
    exotic syntax; if even tokenizing fails, the answer is False, i.e. rows are compared as
    multisets: a lenient default that never fails a correct prediction for its row order.
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError:
        return _order_by_outside_parentheses(sql, dialect)
    if not statements:
        return False
    node = statements[0]
    while not node.args.get("order") and isinstance(node, (exp.Subquery, exp.Paren)):
        node = node.this
    return bool(node.args.get("order"))


def _order_by_outside_parentheses(sql: str, dialect: str | None) -> bool:
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except SqlglotError:
        return False
    depth = 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            break
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        elif token.token_type == TokenType.ORDER_BY and depth == 0:
            return True
    return False
