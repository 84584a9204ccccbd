"""The JSON report (`--nl2sql-report=json[:PATH]`): the contract's summary and items."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_nl2sql.files import atomic_open
from pytest_nl2sql.reports import ReportWriteError, register

# A lone surrogate (a prediction decoded with errors="surrogateescape", a `\ud800` in a model's
# output) cannot be encoded as UTF-8. Written as the JSON escape `\ud800` instead, it reads back
# as the very same string; nothing else is ever escaped this way, since UTF-8 encodes the rest.
ENCODING_ERRORS = "backslashreplace"


def write_json(report: Mapping[str, Any], path: Path) -> list[Path]:
    """The summary indented, then one item per line: readable, `jq`-friendly, and written by the C
    encoder (an indented dump of every item runs the pure-Python one, ~5x slower). Items are
    written one at a time, so a large report is never held twice in memory."""
    def dump(value: Any, **kw: Any) -> str:
        return json.dumps(value, ensure_ascii=False, default=str, **kw)

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
