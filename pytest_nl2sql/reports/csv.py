"""The CSV report (`--nl2sql-report=csv[:PATH]`): one row per case, plus the correct ids.

Beside the per-case file goes `<stem>.correct.csv`: a header `instance_id` and the id of every
case that passed, in collection order, the "list of correctly answered instances" that the
Spider2 evaluation suite writes (spec `004`) for submission systems. Spider2's own id rewriting
(`bq…` → `sf_bq…`) is specific to its leaderboard and is not applied.

The files are opened in spreadsheets, and predictions are untrusted text: a cell that starts with
`=`, `+`, `-`, `@`, a tab or a carriage return is prefixed with a single quote, as OWASP
recommends against formula injection (`=HYPERLINK(…)` stays text). Plain numbers (`-1`, `+0.5`)
are left alone. A lone surrogate, which UTF-8 cannot encode, is written as its escape `\\ud800`;
control characters (but newline and tab) and bidi overrides are written as escapes (`\\x1b`,
`\\u202e`), as in the terminal and the md report: a cell `cat`-ed or opened in a viewer cannot
recolour a terminal or reorder what it shows.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from pytest_nl2sql.files import atomic_open
from pytest_nl2sql.reports import ReportWriteError, register
from pytest_nl2sql.shown import escaped

COLUMNS = (
    "id", "nodeid", "file", "kind", "question", "database", "hardness", "tags", "verdict",
    "passed", "reason", "gold", "predicted", "exact_match", "macro_precision", "macro_recall",
    "baseline", "latency", "missing_rows", "extra_rows", "near_miss", "predicted_result",
    "column_precision", "column_recall", "column_f1", "row_precision", "row_recall", "row_f1",
    "run_label", "run_started", "run_commit",
    "raw_prediction", "attempts", "prompt_tokens", "completion_tokens", "cost", "repeats_k", "repeats_passed",
    "predicted_malloy", "retries",
)
SOFT_SCORE_COLUMNS = ("column_precision", "column_recall", "column_f1", "row_precision", "row_recall", "row_f1")  # the item's `soft_scores`
USAGE_COLUMNS = ("prompt_tokens", "completion_tokens", "cost")  # the item's `usage`, one column each
RUN_COLUMNS = {"run_label": "label", "run_started": "started", "run_commit": "git_commit"}  # the run's, on every row: runs concatenate
CORRECT_HEADER = "instance_id"

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
ENCODING_ERRORS = "backslashreplace"  # a lone surrogate as the text `\ud800`, not a crash


def correct_ids_path(path: Path) -> Path:
    """Where the correct-instances file of the per-case CSV at `path` goes."""
    path = Path(path)
    return path.with_name(f"{path.stem}.correct.csv")


def neutralise(text: str) -> str:
    """`text` safe to open in a spreadsheet: a leading formula character gets a quote before it."""
    if text.startswith(FORMULA_PREFIXES) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def _cell(value: Any) -> str:
    """Plain text for a CSV cell: empty for null, lowercase booleans, JSON for structures."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return neutralise(escaped(value))
    return neutralise(escaped(json.dumps(value, ensure_ascii=False, default=str)))


def _row(item: Mapping[str, Any], run: Mapping[str, Any] | None = None) -> list[str]:
    ts = item.get("term_selection") or {}
    diff = item.get("diff") or {}

    def count(key: str) -> Any:
        if not diff:
            return None
        n = diff.get(f"{key}_count")
        return n if isinstance(n, int) else len(diff.get(key) or [])

    values = {
        **{key: item.get(key) for key in COLUMNS},
        **{key: None for key in SOFT_SCORE_COLUMNS},
        "question": item.get("question") or item.get("name"),
        "tags": ";".join(str(getattr(tag, "value", tag)) for tag in item.get("tags") or []),
        "macro_precision": ts.get("macro_precision"),
        "macro_recall": ts.get("macro_recall"),
        "missing_rows": count("missing"),
        "extra_rows": count("extra"),
        **(item.get("soft_scores") or {}),
        **{column: (run or {}).get(key) for column, key in RUN_COLUMNS.items()},
        **{key: (item.get("usage") or {}).get(key) for key in USAGE_COLUMNS},
        "repeats_k": (item.get("repeats") or {}).get("k"),
        "repeats_passed": (item.get("repeats") or {}).get("passed"),
        "retries": (item.get("extra") or {}).get("retries"),  # the hook's calls after a transient failure
    }
    return [_cell(values[key]) for key in COLUMNS]


def write_csv(report: Mapping[str, Any], path: Path) -> list[Path]:
    """Write the per-case CSV at `path` and the correct ids beside it; return both paths."""
    path = Path(path)
    items = list(report.get("items") or [])
    with _open(path) as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(_row(item, report.get("run")) for item in items)
    correct = correct_ids_path(path)
    with _open(correct) as f:
        writer = csv.writer(f)
        writer.writerow([CORRECT_HEADER])
        writer.writerows([_cell(str(item.get("id")))] for item in items if item.get("passed") is True)
    return [path, correct]


def _open(path: Path) -> Any:
    return atomic_open(
        path, encoding="utf-8", errors=ENCODING_ERRORS, newline="", what="the csv report", error=ReportWriteError
    )


register("csv", write_csv)
