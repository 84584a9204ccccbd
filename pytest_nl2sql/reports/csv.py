"""The CSV report (`--nl2sql-report=csv[:PATH]`): one row per case, plus the correct ids.

Beside the per-case file goes `<stem>.correct.csv`: a header `instance_id` and the id of every
case that passed, in collection order, the "list of correctly answered instances" that the
Spider2 evaluation suite writes (spec `004`) for submission systems. Spider2's own id rewriting
(`bq…` → `sf_bq…`) is specific to its leaderboard and is not applied.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

COLUMNS = (
    "id", "nodeid", "file", "kind", "question", "database", "hardness", "tags", "verdict",
    "passed", "reason", "gold", "predicted", "exact_match", "macro_precision", "macro_recall",
    "baseline", "latency", "missing_rows", "extra_rows",
)
CORRECT_HEADER = "instance_id"


def correct_ids_path(path: Path) -> Path:
    """Where the correct-instances file of the per-case CSV at `path` goes."""
    path = Path(path)
    return path.with_name(f"{path.stem}.correct.csv")


def _cell(value: Any) -> str:
    """Plain text for a CSV cell: empty for null, lowercase booleans, JSON for structures."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _row(item: Mapping[str, Any]) -> list[str]:
    ts = item.get("term_selection") or {}
    diff = item.get("diff") or {}

    def count(key: str) -> Any:
        if not diff:
            return None
        n = diff.get(f"{key}_count")
        return n if isinstance(n, int) else len(diff.get(key) or [])

    values = {
        **{key: item.get(key) for key in COLUMNS},
        "question": item.get("question") or item.get("name"),
        "tags": ";".join(map(str, item.get("tags") or [])),
        "macro_precision": ts.get("macro_precision"),
        "macro_recall": ts.get("macro_recall"),
        "missing_rows": count("missing"),
        "extra_rows": count("extra"),
    }
    return [_cell(values[key]) for key in COLUMNS]


def write_csv(report: Mapping[str, Any], path: Path) -> list[Path]:
    """Write the per-case CSV at `path` and the correct ids beside it; return both paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    items = list(report.get("items") or [])
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(_row(item) for item in items)
    correct = correct_ids_path(path)
    with correct.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([CORRECT_HEADER])
        writer.writerows([str(item.get("id"))] for item in items if item.get("passed") is True)
    return [path, correct]
