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

from pytest_nl2sql.cases.predictions import PredictedMalloy, PredictedResult
from pytest_nl2sql.engines.base import Limits

# The longest answer read: as long as the longest query judged (`Limits.max_sql_chars`), far past a
# model's completion (a 128k-token one is about 500,000 characters). Longer is refused before it is
# unfenced, encoded or copied: a gigabyte from a broken hook must not take gigabytes more to refuse.
MAX_ANSWER_CHARS = Limits().max_sql_chars

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
    A fence left open (an answer cut at the token limit) runs to the end, as in CommonMark.
    An answer over `MAX_ANSWER_CHARS` is a problem, found before it is split into lines."""
    if len(answer) > MAX_ANSWER_CHARS:
        return Extracted(None, f"the prediction is {len(answer):,} characters long, over the {MAX_ANSWER_CHARS:,} "
                               "a query (or an answer around one) may have; it was not run")
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


# What a hook may answer besides text: the pipeline judges these (a number is "not SQL text", a
# list is a term selection); anything else is refused here, before anything calls its __str__.
_PLAIN = (type(None), int, float, PredictedMalloy, PredictedResult)
MAX_ANSWER_DEPTH = 32  # a term selection is four levels deep


class AnswerRefused(ValueError):
    """A hook's answer that is not read at all (too long, or an object that is no answer): the
    hook's failure, `predictor_error`; `str()` says why."""


@dataclass(frozen=True)
class Unpacked:
    value: Any
    usage: dict[str, int | float] | None = None


def unpack_answer(value: Any) -> Unpacked:
    """A hook's return value: SQL text (or a term selection), or `{"sql": TEXT, "usage": {...}}`,
    `{"malloy": TEXT, "usage": {...}}` for a Malloy query (`{"selection": [...], "usage": {...}}` for
    term-selection cases). A mapping that is none of these is a ValueError naming its keys, rather
    than a prediction nobody can judge; an answer over `MAX_ANSWER_CHARS`, or an object that is no
    answer, is `AnswerRefused` (its size is read first, before it is copied or unfenced)."""
    if not isinstance(value, Mapping):
        return Unpacked(_answer(value))
    keys = [str(k) for k in value]
    unknown = [k for k in keys if k not in ANSWER_KEYS]
    answers = [k for k in ("sql", "malloy", "selection") if k in value]
    if unknown or len(answers) != 1:
        raise ValueError(f"the predictor returned a mapping with keys {keys}: return SQL text, or "
                         '{"sql": TEXT, "usage": {"prompt_tokens", "completion_tokens", "cost"}} (or "malloy": TEXT)')
    if answers == ["malloy"]:
        text = value["malloy"]
        if not isinstance(text, str):
            raise ValueError(f'"malloy" must be the Malloy query as text, not {type(text).__name__}')
        return Unpacked(PredictedMalloy.of(_answer(text)), usage_of(value.get("usage")))
    return Unpacked(_answer(value[answers[0]]), usage_of(value.get("usage")))


def _answer(value: Any) -> Any:
    """The hook's answer as the pipeline takes it: text within `MAX_ANSWER_CHARS` (a subclass of
    str as the plain str it holds: its own `__str__` may raise), a plain value, a term selection as
    plain JSON data (lists, mappings, text, numbers; within the same cap in all), else refused."""
    if isinstance(value, (str, bytes, bytearray)):
        length = (str.__len__ if isinstance(value, str) else len)(value)
        if length > MAX_ANSWER_CHARS:
            unit = "characters" if isinstance(value, str) else "bytes"
            raise AnswerRefused(f"the predictor's answer is {length:,} {unit} long, over the {MAX_ANSWER_CHARS:,} "
                                "characters an answer may have: refused unread")
        return str.__str__(value) if type(value) not in (str, bytes) and isinstance(value, str) else value
    if isinstance(value, (list, tuple, Mapping)):
        return _data(value, [MAX_ANSWER_CHARS], 0)
    if isinstance(value, _PLAIN):
        return value
    raise AnswerRefused(f"the prediction must be SQL text, not {type(value).__name__}")


def _data(value: Any, left: list[int], depth: int) -> Any:
    """`value` as plain JSON data (a copy: lists, dicts with text keys, text, numbers, booleans,
    None), its text counted against `left`; anything else, or too deep, is refused."""
    if depth > MAX_ANSWER_DEPTH:
        raise AnswerRefused(f"the prediction is nested deeper than {MAX_ANSWER_DEPTH} levels: refused unread")
    if isinstance(value, str):
        left[0] -= str.__len__(value) + 2
        if left[0] < 0:
            raise AnswerRefused(f"the predictor's answer holds more than the {MAX_ANSWER_CHARS:,} characters "
                                "an answer may have: refused unread")
        return str.__str__(value)
    if value is None or type(value) in (bool, int, float):
        left[0] -= 8
        return value
    if isinstance(value, (list, tuple)):
        return [_data(v, left, depth + 1) for v in value]
    if isinstance(value, Mapping):
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise AnswerRefused(f"the prediction's mappings must have text keys, not {type(key).__name__}")
            out[_data(key, left, depth + 1)] = _data(v, left, depth + 1)
        return out
    raise AnswerRefused(f"the prediction must be SQL text or a term selection (lists, mappings, text, numbers), "
                        f"and it holds a {type(value).__name__}")


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
