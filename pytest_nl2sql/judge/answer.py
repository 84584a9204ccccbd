"""What a model answered, made into a prediction: the SQL inside a Markdown answer, the usage it
reported, and whether its failure is worth asking again.

Chat models answer in Markdown (```` ```sql ```` fences, prose around them) far more often than in
bare SQL, and every harness that scores them (promptfoo, deepeval, the BIRD and Spider scripts)
first takes the query out of the fence. Doing it here, for every source of predictions, means a
recorded or exported answer is judged exactly as the live one was.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_nl2sql.cases.predictions import PredictedMalloy

# An opening code fence (CommonMark: up to three spaces, three or more ` or ~, an info string that,
# for backticks, holds no backtick: "```sql SELECT 1```" on one line is a code span, not a fence).
_OPENING = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")

# Info strings that name SQL: "sql", a dialect, or anything ending in "sql" (mysql, postgresql, tsql).
_SQL_TAGS = frozenset({"sql", "sqlite", "sqlite3", "postgres", "duckdb", "mariadb", "bigquery", "snowflake",
                       "trino", "presto", "hive", "redshift", "oracle", "sql92", "ansi"})


@dataclass(frozen=True)
class Extracted:
    """The SQL of an answer: `sql` is what is judged (the answer itself when it has no fence);
    `problem` says why no query could be taken out (then `sql` is None, or "" for an empty block)."""

    sql: str | None
    problem: str | None = None


@dataclass(frozen=True)
class _Block:
    tag: str  # the info string's first word, lower case ("" for a bare fence)
    text: str


def extract_sql(answer: str) -> Extracted:
    """The query in a Markdown answer. No fence: the answer as it is. One fenced block (```` ```sql ````,
    a bare ```` ``` ````, `~~~`, any tag): its text. Several: the last block tagged as SQL (models
    that revise a query put the final one last); several and none tagged SQL: ambiguous, a problem.
    A fence left open (an answer cut at the token limit) runs to the end, as in CommonMark."""
    blocks = _fenced_blocks(answer)
    if blocks is None:
        return Extracted(answer)
    sql_blocks = [b for b in blocks if _is_sql_tag(b.tag)]
    if sql_blocks:
        chosen = sql_blocks[-1]
    elif len(blocks) == 1:
        chosen = blocks[0]
    else:
        tags = ", ".join(f"```{b.tag}" if b.tag else "``` (no language)" for b in blocks)
        return Extracted(None, f"the answer holds {len(blocks)} fenced code blocks ({tags}) and none is marked sql: "
                               "which one is the query is ambiguous")
    text = chosen.text.strip()
    if not text:
        return Extracted("", "the answer's fenced code block is empty")  # no prediction, rather than a wrong one
    return Extracted(text)


def _fenced_blocks(answer: str) -> list[_Block] | None:
    """The fenced code blocks of `answer`, or None when it has no fence at all."""
    lines = answer.splitlines()
    blocks: list[_Block] = []
    index = 0
    while index < len(lines):
        opening = _OPENING.match(lines[index])
        fence = opening.group("fence") if opening else ""
        if not opening or (fence[0] == "`" and "`" in opening.group("info")):
            index += 1
            continue
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        indent = len(opening.group("indent"))
        body: list[str] = []
        index += 1
        while index < len(lines) and not closing.match(lines[index]):
            line = lines[index]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            index += 1
        index += 1  # past the closing fence (or the end)
        words = opening.group("info").strip().split()
        blocks.append(_Block(words[0].strip("{}.").lower() if words else "", "\n".join(body)))
    return blocks or None


def _is_sql_tag(tag: str) -> bool:
    return tag in _SQL_TAGS or tag.endswith("sql")


# --- usage --------------------------------------------------------------------------------------

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "cost")
_ALIASES = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}  # Anthropic's spelling


def usage_of(value: Any) -> dict[str, int | float] | None:
    """A hook's `usage` as `{"prompt_tokens": int, "completion_tokens": int, "cost": float}` (the
    keys it gave). A mapping, or an object with those attributes (an SDK's usage object);
    `input_tokens` / `output_tokens` are read as prompt and completion tokens, other keys
    (`total_tokens`, ...) ignored. A ValueError says what is wrong."""
    if value is None:
        return None
    names = (*USAGE_KEYS, *_ALIASES)
    if isinstance(value, Mapping):
        given = {str(k): v for k, v in value.items()}
    else:
        given = {name: getattr(value, name) for name in names if getattr(value, name, None) is not None}
    usage: dict[str, int | float] = {}
    for name in names:
        raw = given.get(name)
        if raw is None:
            continue
        key = _ALIASES.get(name, name)
        if key in usage:
            continue  # prompt_tokens wins over input_tokens
        number = _number(raw)
        if number is None or number < 0:
            kind = "a number" if key == "cost" else "a whole number"
            raise ValueError(f"usage {name!r} must be {kind} >= 0, not {raw!r}")
        if key != "cost":
            if number != int(number):
                raise ValueError(f"usage {name!r} must be a whole number of tokens, not {raw!r}")
            number = int(number)
        usage[key] = number if key != "cost" else float(number)
    if not usage:
        shown = ", ".join(sorted(given)) or "nothing"
        raise ValueError(f"usage has none of {', '.join(USAGE_KEYS)} (it has {shown})")
    return {key: usage[key] for key in USAGE_KEYS if key in usage}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def add_usage(total: dict[str, int | float] | None, more: dict[str, int | float] | None) -> dict[str, int | float] | None:
    """The usage of several calls (the turns of a conversation, the answers of a repeated case)."""
    if more is None:
        return total
    if total is None:
        return dict(more)
    keys = [k for k in USAGE_KEYS if k in total or k in more]
    summed = {k: total.get(k, 0) + more.get(k, 0) for k in keys}
    if "cost" in summed:
        summed["cost"] = round(summed["cost"], 10)  # 0.0015, not 0.0015000000000000002
    return summed


# --- the answer a hook returned -------------------------------------------------------------------

ANSWER_KEYS = ("sql", "malloy", "selection", "usage")


@dataclass(frozen=True)
class Unpacked:
    value: Any
    usage: dict[str, int | float] | None = None


def unpack_answer(value: Any) -> Unpacked:
    """A hook's return value: SQL text (or a term selection), or `{"sql": TEXT, "usage": {...}}`,
    `{"malloy": TEXT, "usage": {...}}` for a Malloy query (`{"selection": [...], "usage": {...}}` for
    term-selection cases). A mapping that is none of these is a ValueError naming its keys, rather
    than a prediction nobody can judge."""
    if not isinstance(value, Mapping):
        return Unpacked(value)
    keys = [str(k) for k in value]
    unknown = [k for k in keys if k not in ANSWER_KEYS]
    answers = [k for k in ("sql", "malloy", "selection") if k in value]
    if unknown or len(answers) != 1:
        raise ValueError(f"the predictor returned a mapping with keys {keys}: return SQL text, or "
                         '{"sql": TEXT, "usage": {"prompt_tokens", "completion_tokens", "cost"}} (or "malloy": TEXT)')
    if answers == ["malloy"]:
        if not isinstance(value["malloy"], str):
            raise ValueError(f'"malloy" must be the Malloy query as text, not {type(value["malloy"]).__name__}')
        return Unpacked(PredictedMalloy(value["malloy"]), usage_of(value.get("usage")))
    return Unpacked(value[answers[0]], usage_of(value.get("usage")))


# --- failures worth asking again ----------------------------------------------------------------------


def is_transient(error: BaseException) -> bool:
    """A failure that another try may not meet: a timeout, a dropped connection, or an HTTP status
    429 (rate limited) or 5xx, read from the exception's `status_code` or `status` (or those of its
    `response`, as `requests` and `httpx` errors carry them)."""
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True
    for holder in (error, getattr(error, "response", None)):
        for name in ("status_code", "status"):
            try:
                code = getattr(holder, name, None)
            except Exception:  # noqa: BLE001 - a property of a half-built response object
                continue
            if isinstance(code, str) and code.strip().isdigit():
                code = int(code)
            if isinstance(code, int) and not isinstance(code, bool) and (code == 429 or 500 <= code <= 599):
                return True
    return False
