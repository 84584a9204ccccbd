"""`--nl2sql-compat=spider`: the official test-suite-sql-eval execution verdicts, bugs included.

The official tool (taoyds/test-suite-sql-eval, `evaluation.py` + `exec_eval.py`) rewrites both
queries before running them and then compares the results with `result_eq`. To give numbers that can
be put next to a leaderboard, this module reproduces each step *exactly*, including the ones we
would not choose ourselves (they are listed in `spider_prepare`'s docstring). The comparison itself
lives in `compare.py` (`CompareOptions(mode="spider")`), which uses our fast column-permutation
search; this module only holds what is specific to the official tool: the text rewrites and its
quick-rejection test (`official_quick_reject`), whose sort key makes `1` and `1.0` unequal in some
rows.

The engine, not this module, reproduces the official connection's
`text_factory = lambda b: b.decode(errors="ignore")`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import sqlglot
from sqlglot.tokens import TokenType

# The official `replace_cur_year` regex, applied to both queries right before execution. It is kept
# as a regex on purpose: it reproduces the official substitution, including where it would fire.
_CUR_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", flags=re.IGNORECASE)


def spider_prepare(predicted: str, gold: str) -> tuple[str, str, bool]:
    """Rewrite a (predicted, gold) pair as the official evaluator does; return (pred, gold, order_matters).

    The steps, in the official order:
    1. the prediction line is stripped and cut at its first TAB (the official file reader splits
       each line on TABs and keeps the first field); the gold is stripped likewise;
    2. every `value` in the prediction becomes `1` (a plain substring replace, so an identifier such
       as `market_value` becomes `market_1`);
    3. `> =`, `< =` and `! =` are joined in both queries;
    4. every `distinct` token is removed from both (`COUNT(DISTINCT x)` becomes `COUNT( x)`); the
       official code keeps only the first statement (`sqlparse.parse(s)[0]`), so anything after the
       first `;` is dropped too;
    5. rows are ordered iff the gold, after these steps, contains the substring `order by` (case
       insensitive; also inside a subquery or a string literal; `ORDER  BY` with two spaces does
       not count);
    6. `YEAR(CURDATE())` becomes `2020` in both (the official code does it at execution time, after
       the order decision; the substitution cannot create or remove `order by`).
    """
    pred = predicted.strip().split("\t")[0]
    pred = pred.replace("value", "1")
    gold = gold.strip()
    pred, gold = _join_comparison_operators(pred), _join_comparison_operators(gold)
    pred, gold = remove_distinct(pred), remove_distinct(gold)
    order_matters = "order by" in gold.lower()
    return replace_cur_year(pred), replace_cur_year(gold), order_matters


def _join_comparison_operators(sql: str) -> str:
    return sql.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")


def replace_cur_year(sql: str) -> str:
    """The official `replace_cur_year`: `YEAR(CURDATE())` (and the whitespace after it) -> `2020`."""
    return _CUR_YEAR.sub("2020", sql)


def remove_distinct(sql: str) -> str:
    """Drop every DISTINCT keyword token and everything after the first statement, as the official
    `remove_distinct` does with sqlparse (`''.join(tokens of sqlparse.parse(s)[0] if not distinct)`).

    We tokenize with sqlglot's SQLite tokenizer and cut the DISTINCT tokens out of the text by
    position, so everything else (spacing, comments, quoted `"distinct"` identifiers, `'distinct'`
    strings) stays byte for byte as sqlparse leaves it; `t.distinct` loses its `distinct` in both.
    If the text cannot be tokenized (an unterminated string, say), it is returned unchanged: such a
    prediction fails to execute either way.
    """
    try:
        tokens = sqlglot.tokenize(sql, read="sqlite")
    except Exception:  # sqlglot raises TokenError, but be safe: this must never break a run
        return sql
    end = len(sql)
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            end = token.end + 1
            break
    pieces: list[str] = []
    cursor = 0
    for token in tokens:
        if token.start >= end:
            break
        if token.token_type == TokenType.DISTINCT and sql[token.start : token.end + 1].lower() == "distinct":
            pieces.append(sql[cursor : token.start])
            cursor = token.end + 1
    pieces.append(sql[cursor:end])
    return "".join(pieces)


def _official_sort_key(value: Any) -> str:
    return str(value) + str(type(value))


def official_quick_reject(gold: Sequence[tuple], pred: Sequence[tuple], order_matters: bool) -> bool:
    """True when the official `quick_rej` rejects the pair (so the official verdict is a mismatch).

    Each row is sorted by `str(x) + str(type(x))` (so `1` and `1.0` may sort differently and the
    rows then differ although `1 == 1.0`); ordered results compare the sorted rows in sequence,
    unordered ones as *sets* of sorted rows.
    """
    unordered_gold = [tuple(sorted(row, key=_official_sort_key)) for row in gold]
    unordered_pred = [tuple(sorted(row, key=_official_sort_key)) for row in pred]
    if order_matters:
        return unordered_gold != unordered_pred
    return set(unordered_gold) != set(unordered_pred)
