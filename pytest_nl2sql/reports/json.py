"""The JSON report (`--nl2sql-report=json[:PATH]`): the contract's summary and items.

JSON has no NaN or infinity: Python's `json` writes them as the bare words `NaN` and `Infinity`,
which JavaScript's JSON.parse, jq, Go and serde refuse, so one non-finite float (a database's
`'NaN'::float` in a diff, a latency) would make the whole report unreadable to them. Every JSON
this package writes (this report, the history's lines, the comparison) goes through `dumps`, which
writes such a number as `null`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_nl2sql.files import atomic_open
from pytest_nl2sql.reports import ReportWriteError, register

# A lone surrogate (a prediction decoded with errors="surrogateescape", a `\ud800` in a model's
# output) cannot be encoded as UTF-8. Written as the JSON escape `\ud800` instead, it reads back
# as the very same string; nothing else is ever escaped this way, since UTF-8 encodes the rest.
ENCODING_ERRORS = "backslashreplace"


def finite(value: Any) -> Any:
    """`value` with every non-finite float (NaN, ±infinity) replaced by None, in mappings, lists
    and tuples at any depth (a key that is one becomes its text)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {(repr(k) if isinstance(k, float) and not math.isfinite(k) else k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kw: Any) -> str:
    """`json.dumps(value, **kw)` that never writes `NaN` or `Infinity`: a non-finite float is
    `null`. Values without one (nearly all) are encoded once, by the C encoder."""
    try:
        return json.dumps(value, allow_nan=False, **kw)
    except ValueError:  # a non-finite float somewhere (or a circular value, which `finite` cannot mend either)
        return json.dumps(finite(value), allow_nan=False, **kw)


def write_json(report: Mapping[str, Any], path: Path) -> list[Path]:
    """The summary indented, then one item per line: readable, `jq`-friendly, and written by the C
    encoder (an indented dump of every item runs the pure-Python one, ~5x slower). Items are
    written one at a time, so a large report is never held twice in memory."""
    def dump(value: Any, **kw: Any) -> str:
        return dumps(value, ensure_ascii=False, default=str, **kw)

    path = Path(path)
    with atomic_open(
        path, encoding="utf-8", errors=ENCODING_ERRORS, newline="\n", what="the json report", error=ReportWriteError
    ) as f:
        parts = [f'  "summary": {dump(report["summary"], indent=2)}'] if "summary" in report else []
        parts += [f"  {dump(k)}: {dump(v)}" for k, v in report.items() if k not in ("summary", "items")]
        f.write("{\n" + ",\n".join(parts))
        if "items" in report:
            if parts:
                f.write(",\n")
            items = iter(report["items"])
            first = next(items, None)
            if first is None:
                f.write('  "items": []')
            else:
                f.write('  "items": [\n    ' + dump(first))
                for item in items:
                    f.write(",\n    " + dump(item))
                f.write("\n  ]")
        f.write("\n}\n")
    return [path]


register("json", write_json)
