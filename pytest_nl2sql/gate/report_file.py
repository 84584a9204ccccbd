"""A JSON report read back from a file, checked at the boundary, for the commands that take
reports (`nl2sql compare`, `nl2sql merge-reports`).

A report file may be old, hand-edited, cut short or crafted. Every field the commands, the summary
and the report writers read is checked here for its JSON type, before anything computes with it: a
string where a list belongs, an integer where a time belongs, a 400-digit integer (which no float
holds) or a `repeats.k` of a billion (a loop to a billion) is a `ReportFileError` whose message
names the file, the item and the field, never a traceback from deep in a renderer. Fields a report
may lack stay optional; `null` is allowed wherever the plugin writes it. `NaN`, `Infinity` and
numbers too large for a float read as `null`, as the JSON writer now writes them.

    data = read_report_file(path)          # {"items": [...], "summary": {...} | None, "run": {...} | None}
    check_shard_item(item, "a.json: item 3")  # what merging needs on top: the fields a result is made of
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.parse import MAX_DEPTH, nested_too_deep
from pytest_nl2sql.metrics.exact import COMPONENTS
from pytest_nl2sql.vocab import BaselineStatus, Kind, Verdict

MAX_COUNT = 2**53  # the largest count a float (and so every percentage) holds exactly
MAX_NUMBER = 1e15  # seconds, scores, costs: anything larger is not a run's figure
MAX_REPEATS = 1000  # `repeats.k`: pass@k is computed for every k up to it (the option allows 100)


class ReportFileError(ValueError):
    """A file that is not a JSON report of this plugin, or one with a field of the wrong type; the
    message names the file (and the item and field)."""


Check = Callable[[Any], "str | None"]  # None when the value is right, else what it should be


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def count(value: Any) -> str | None:
    if _is_int(value) and 0 <= value <= MAX_COUNT:
        return None
    return f"a count (an integer from 0 to {MAX_COUNT})"


def number(value: Any) -> str | None:
    if _is_int(value) and abs(value) <= MAX_NUMBER:
        return None
    if isinstance(value, float) and math.isfinite(value) and abs(value) <= MAX_NUMBER:
        return None
    return f"a number (at most {MAX_NUMBER:g})"


def text(value: Any) -> str | None:
    return None if isinstance(value, str) else "a string"


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def anything(value: Any) -> str | None:
    return None


def one_of(*names: str) -> Check:
    def check(value: Any) -> str | None:
        return None if isinstance(value, str) and value in names else "one of " + ", ".join(names)
    return check


def list_of(each: Check) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return "a list"
        for n, element in enumerate(value):
            wrong = each(element)
            if wrong is not None:
                return f"a list whose elements are {wrong} (element {n + 1} is not)"
        return None
    return check


def either(*checks: Check) -> Check:
    def check(value: Any) -> str | None:
        wrongs = [c(value) for c in checks]
        return None if any(w is None for w in wrongs) else " or ".join(str(w) for w in wrongs)
    return check


def optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def record(fields: Mapping[str, Check], required: tuple[str, ...] = ()) -> Check:
    """An object whose listed fields (when present; `required` ones always) pass their checks;
    other fields are left alone."""
    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return "an object"
        for key in required:
            if key not in value:
                return f"an object with `{key}`"
        for key, field_check in fields.items():
            if key in value:
                wrong = field_check(value[key])
                if wrong is not None:
                    return f"an object whose `{key}` is {wrong}"
        return None
    return check


def mapping_of(each: Check) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return "an object"
        for key, element in value.items():
            wrong = each(element)
            if wrong is not None:
                return f"an object whose values are {wrong} (`{key[:60]}` is not)"
        return None
    return check


# --- the fields -----------------------------------------------------------------------------------

_TEXT = optional(text)
_COUNT = optional(count)
_NUMBER = optional(number)
_COMPONENT = record({"acc": number, "rec": number, "f1": _NUMBER, "pred_total": count, "label_total": count},
                    required=("acc", "rec", "pred_total", "label_total"))
_DIMENSION = record({"precision": _NUMBER, "recall": _NUMBER, "true_positives": optional(list_of(anything)),
                     "false_positives": optional(list_of(anything)), "false_negatives": optional(list_of(anything))})

_REPEATS = record({"k": count, "passed": count, "verdicts": optional(list_of(text)), "predicted": optional(list_of(anything))},
                  required=("k", "passed"))


def _repeats(value: Any) -> str | None:
    """`{"k", "passed", …}` with 1 <= k <= MAX_REPEATS (pass@k is computed for each k up to it)
    and passed <= k."""
    wrong = _REPEATS(value)
    if wrong is None and not (1 <= value["k"] <= MAX_REPEATS and value["passed"] <= value["k"]):
        wrong = f"an object whose `k` is from 1 to {MAX_REPEATS} and `passed` at most `k`"
    return wrong


ITEM_FIELDS: dict[str, Check] = {
    "id": either(text, count),
    **{key: _TEXT for key in ("nodeid", "file", "question", "database", "hardness", "reason", "fingerprint",
                              "ran_on", "predicted_result", "predicted_malloy", "near_miss")},
    "verdict": one_of(*(v.value for v in Verdict)),
    "kind": one_of(*(k.value for k in Kind)),
    "baseline": optional(one_of(*(b.value for b in BaselineStatus))),
    "passed": optional(boolean),
    "exact_match": optional(boolean),
    "gold": optional(either(text, list_of(optional(text)))),
    "tags": optional(list_of(text)),
    "gold_warnings": optional(list_of(text)),
    "position": count,  # collection order: the merged run sorts by it
    "attempts": _COUNT,
    "latency": _NUMBER,
    "partial": optional(record({name: _COMPONENT for name in COMPONENTS}, required=COMPONENTS)),
    "term_selection": optional(record({"macro_precision": _NUMBER, "macro_recall": _NUMBER,
                                       "by_dimension": optional(mapping_of(_DIMENSION)),
                                       "not_in_target": optional(list_of(text))})),
    "soft_scores": optional(mapping_of(number)),
    "execution_time": optional(record({"reward": number, "slowdown": number, "gold_s": _NUMBER, "predicted_s": _NUMBER},
                                      required=("reward", "slowdown"))),
    "neighbours": optional(record({"checked": _COUNT, "failed": _COUNT, "fragile": _COUNT,
                                   "counterexample": optional(record({})), "fragile_side": _TEXT})),
    "usage": optional(record({"prompt_tokens": _COUNT, "completion_tokens": _COUNT, "cost": _NUMBER})),
    "repeats": optional(_repeats),
    "diff": optional(record({"missing": optional(list_of(anything)), "extra": optional(list_of(anything)),
                             "missing_count": _COUNT, "extra_count": _COUNT, "first_order_difference": _COUNT,
                             "gold_columns": optional(list_of(anything)), "predicted_columns": optional(list_of(anything)),
                             "pairing": optional(list_of(anything)), "database": _TEXT})),
    "extra": optional(record({"neighbours_off": _TEXT, "traceback": _TEXT, "error": _TEXT})),
    "review": optional(record({"decision": _TEXT, "note": _TEXT, "by": _TEXT, "at": _TEXT, "stale": optional(boolean),
                               "stale_because": optional(list_of(text)), "verdict_before": optional(one_of(*(v.value for v in Verdict))),
                               "reason_before": _TEXT,
                               "suggested": optional(record({"decision": _TEXT, "note": _TEXT, "by": _TEXT}))})),
    "database_hash": _TEXT,
    "gold_audit": optional(record({"suspect": boolean, "findings": list_of(record({"kind": text, "detail": text},
                                                                                 required=("kind", "detail")))},
                                  required=("suspect", "findings"))),
}

_BUCKET = record({"total": _COUNT, "passed": _COUNT, "errors": _COUNT, "predictor_errors": _COUNT,
                  "accuracy": _NUMBER, "accuracy_ci": optional(list_of(number))})
SUMMARY_FIELDS: dict[str, Check] = {
    **{key: _COUNT for key in ("total", "passed", "errors", "failed", "single_db_passed", "fragile", "exact_match_passed",
                               "exact_match_total", "predictor_errors", "gold_warnings", "gold_suspects", "stale_reviews", "review_suggestions",
                               "passed_before_reviews")},
    **{key: _NUMBER for key in ("accuracy", "answered_accuracy", "single_db_accuracy", "strict_accuracy", "exact_match",
                                "accuracy_before_reviews")},
    "reviewed": optional(mapping_of(count)),
    "neighbours": optional(mapping_of(_COUNT)),
    "term_selection": optional(record({"macro_precision": _NUMBER, "macro_recall": _NUMBER})),
    **{key: optional(mapping_of(_BUCKET)) for key in ("by_hardness", "by_tag", "by_database")},
}
RUN_FIELDS: dict[str, Check] = {
    "started": _TEXT, "duration_s": _NUMBER, "label": _TEXT, "git_commit": _TEXT, "engine": _TEXT,
    "complete": optional(boolean), "options": optional(record({})), "shards": _COUNT,
}
SHARD_REQUIRED = ("id", "nodeid", "file", "verdict")  # what a case result cannot be made without


def _checked(fields: Mapping[str, Check], value: Mapping[str, Any], where: str) -> None:
    for key, check in fields.items():
        if key in value:
            wrong = check(value[key])
            if wrong is not None:
                raise ReportFileError(f"{where}: `{key}` must be {wrong}, not {_shown(value[key])}")


def _shown(value: Any) -> str:
    """A wrong value, briefly (a 400-digit integer as its first digits, not a screenful)."""
    if _is_int(value) and abs(value) > MAX_COUNT:
        digits = len(str(abs(value)))
        return f"an integer of {digits} digits"
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:59] + "…"


def check_item(item: Any, where: str) -> None:
    """An item: an object whose fields, those it has, are of the right types."""
    if not isinstance(item, dict):
        raise ReportFileError(f"{where}: not an object")
    _checked(ITEM_FIELDS, item, where)


def check_shard_item(item: Any, where: str) -> None:
    """An item of a shard: `check_item`, and the fields a case result is made of are there."""
    check_item(item, where)
    for key in SHARD_REQUIRED:
        if item.get(key) is None:
            raise ReportFileError(f"{where}: no {key!r}")


def _finite_or_none(literal: str) -> float | None:
    value = float(literal)
    return value if math.isfinite(value) else None  # 1e400 is "inf" to Python


def read_report_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The report in `path`: an object with an `items` list of checked items, and `summary` and
    `run` objects (or null, or absent) whose fields are checked. Anything else is a
    `ReportFileError` naming the file."""
    where = os.fspath(path)
    try:
        raw = Path(where).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ReportFileError(f"{where}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    try:
        data = json.loads(raw, parse_constant=lambda _: None, parse_float=_finite_or_none)
    except RecursionError:
        raise ReportFileError(f"{where}: not JSON (nested deeper than {MAX_DEPTH} levels)") from None
    except ValueError as e:  # not JSON, or an integer of more digits than Python converts
        raise ReportFileError(f"{where}: not JSON ({e})") from None
    if nested_too_deep(data):
        raise ReportFileError(f"{where}: not a JSON report of pytest-nl2sql (nested deeper than {MAX_DEPTH} levels)")
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise ReportFileError(f"{where}: not a JSON report of pytest-nl2sql (no `items` list)")
    for key, fields in (("summary", SUMMARY_FIELDS), ("run", RUN_FIELDS)):
        part = data.get(key)
        if part is not None and not isinstance(part, dict):
            raise ReportFileError(f"{where}: not a JSON report of pytest-nl2sql (`summary` and `run` must be objects; "
                                  f"`{key}` is {_shown(part)})")
        _checked(fields, part or {}, f"{where}: {key}")
    for number_, item in enumerate(data["items"], start=1):
        check_item(item, f"{where}: item {number_}")
    return data
