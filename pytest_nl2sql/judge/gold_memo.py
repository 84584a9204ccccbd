"""The gold's outcome on a generated neighbour, remembered beside it: a pure function of the
neighbour (a file the cache never rewrites), the golds and the rules, which every prediction for
that gold would otherwise run again (it is most of the cost of judging on neighbours).

Stored as JSON with tagged values (bytes as hex); a result holding a value JSON cannot carry
exactly (a DuckDB date, a Decimal) is not remembered. A file that cannot be read is a miss.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.base import QueryResult
from pytest_nl2sql.judge.execute import GoldOutcome
from pytest_nl2sql.judge.ties import TieGroups


class _Unstorable(ValueError):
    """A value JSON cannot carry exactly."""


def _value(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return {"f": repr(value)}  # repr round-trips every float, NaN and infinities included
    if isinstance(value, bytes):
        return {"b": value.hex()}
    raise _Unstorable(type(value).__name__)


def _back(value: Any) -> Any:
    if isinstance(value, dict):
        return float(value["f"]) if "f" in value else bytes.fromhex(value["b"])
    return value


def _rows(rows: Any) -> list[list[Any]]:
    return [[_value(v) for v in row] for row in rows]


def _tuples(rows: Any) -> list[tuple[Any, ...]]:
    return [tuple(_back(v) for v in row) for row in rows]


def recall(path: Path | None) -> GoldOutcome | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
        ties = tuple(None if t is None else TieGroups(tuple(t["sizes"]), tuple(tuple(_tuples(s)) for s in t["spare"]))
                     for t in data["ties"])
        return GoldOutcome(tuple(QueryResult(tuple(r["columns"]), _tuples(r["rows"])) for r in data["results"]),
                           tuple(data["queries"]), bool(data["order_matters"]), ties, tuple(data["warnings"]),
                           frozenset(data["large"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(path: Path | None, gold: GoldOutcome) -> None:
    """Written under a temporary name and renamed; nothing when a value cannot be stored exactly
    or the folder cannot be written."""
    if path is None or gold.large:
        return
    try:
        data = {"results": [{"columns": list(r.columns), "rows": _rows(r.rows)} for r in gold.results],
                "queries": list(gold.queries), "order_matters": gold.order_matters,
                "ties": [None if t is None else {"sizes": list(t.sizes), "spare": [_rows(s) for s in t.spare]} for t in gold.ties],
                "warnings": list(gold.warnings), "large": sorted(gold.large)}
        path.parent.mkdir(exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        staging.write_text(json.dumps(data))
        os.replace(staging, path)
    except (_Unstorable, OSError, ValueError):
        pass
