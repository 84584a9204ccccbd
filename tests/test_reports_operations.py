"""Reports, viewer and commands as operators meet them (issue 29): strict JSON everywhere, CSV
cells without control characters, `nl2sql compare` / `merge-reports` refusing crafted reports
with exit 2 and the file's name, the HTML viewer's deep links and hostile names, nothing from the
data obeyed by the terminal, paths shown relative to the rootdir, and the one-database figure
named for what it is."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.gate.compare import compare_reports, read_run, render_json
from pytest_nl2sql.gate.run import RunInfo, append_history
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.summary import build_report, summarize
from pytest_nl2sql.reports import write_report
from pytest_nl2sql.vocab import Kind, Verdict


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"a strict parser refuses {name}")


def strict_loads(text: str) -> Any:
    """`json.loads` as JavaScript's JSON.parse, jq or Go read: no NaN, Infinity or -Infinity."""
    return json.loads(text, parse_constant=_refuse_constant)


def results(n: int = 3, **fields: Any) -> list[CaseResult]:
    return [CaseResult(id=f"q{i}", nodeid=f"s.nl2sql.yaml::q{i}", file="s.nl2sql.yaml", position=i, kind=Kind.SQL,
                       verdict=Verdict.PASS if i % 2 == 0 else Verdict.MISMATCH, database="shop.sqlite",
                       question=f"question {i}", gold="SELECT 1", predicted=f"SELECT {i}", hardness="easy",
                       tags=("t",), **fields) for i in range(n)]


def a_report(n: int = 3, **fields: Any) -> dict[str, Any]:
    rs = results(n, **fields)
    data = build_report(rs, summarize(rs))
    data["run"] = {"started": "2026-01-02T03:04:05+00:00", "duration_s": 1.5, "label": "m", "git_commit": None,
                   "engine": "per case", "complete": True, "options": {"timeout": 30}}
    return data


# --------------------------------------------------------------------------- 2. strict JSON


NON_FINITE = (math.nan, math.inf, -math.inf)


def test_the_json_report_writes_null_for_non_finite_numbers(tmp_path: Path) -> None:
    data = a_report(latency=math.nan, diff={"missing": [[math.inf, "x"]], "extra": [[-math.inf]], "missing_count": 1})
    data["summary"]["r_ves_example"] = math.nan
    write_report("json", data, tmp_path / "r.json")
    back = strict_loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert back["summary"]["r_ves_example"] is None
    assert [item["latency"] for item in back["items"]] == [None, None, None]
    assert back["items"][0]["diff"]["missing"] == [[None, "x"]] and back["items"][0]["diff"]["extra"] == [[None]]
    assert back["summary"]["total"] == 3  # the rest as it was


def test_a_history_line_writes_null_for_non_finite_numbers(tmp_path: Path) -> None:
    run = RunInfo(started="2026-01-02T03:04:05+00:00", duration_s=math.inf, label=None, git_commit=None,
                  engine="per case", complete=True)
    append_history(tmp_path / "h.jsonl", run, {"accuracy": math.nan, "by_hardness": {"easy": {"accuracy": -math.inf}}})
    line = strict_loads((tmp_path / "h.jsonl").read_text(encoding="utf-8"))
    assert line["run"]["duration_s"] is None and line["summary"] == {"accuracy": None, "by_hardness": {"easy": {"accuracy": None}}}


@pytest.mark.parametrize("value", NON_FINITE)
def test_the_json_comparison_writes_null_for_non_finite_numbers(tmp_path: Path, value: float) -> None:
    a, b = a_report(), a_report()
    b["summary"]["exact_match"] = value  # an old report, written before the writer wrote null
    b["run"]["duration_s"] = value
    for name, data in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")  # Python writes NaN / Infinity bare
    text = render_json(compare_reports(read_run(tmp_path / "a.json"), read_run(tmp_path / "b.json")))
    back = strict_loads(text)
    assert back["b"]["run"]["duration_s"] is None


# --------------------------------------------------------------------------- 3. CSV cells


def test_csv_cells_show_control_characters_as_escapes(tmp_path: Path) -> None:
    import csv

    hostile = {"question": "which\x1b[31m red\x07?", "predicted": "SELECT 1 -- \x1b]0;title\x07\u202eevil\r",
               "reason": "near \x00: syntax error\x9b", "database": "db\x1b[2J.sqlite"}
    data = a_report(1)
    data["items"][0].update(hostile, tags=["t\x1b[1m"], id="q\x1b0", gold=["SELECT '\u202e'", "SELECT 2"])
    written = write_report("csv", data, tmp_path / "r.csv")
    for path in written:
        text = path.read_text(encoding="utf-8")
        raw = sorted({ch for ch in text if (ord(ch) < 0x20 and ch not in "\n\r\t") or 0x7F <= ord(ch) < 0xA0 or ch == "\u202e"})
        assert raw == [], (path.name, raw)
    with open(written[0], newline="", encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    assert row["question"] == "which\\x1b[31m red\\x07?"
    assert row["predicted"] == "SELECT 1 -- \\x1b]0;title\\x07\\u202eevil\\x0d"
    assert row["reason"] == "near \\x00: syntax error\\x9b" and row["database"] == "db\\x1b[2J.sqlite"
    assert row["tags"] == "t\\x1b[1m" and row["id"] == "q\\x1b0"
    assert json.loads(row["gold"].replace("\\u202e", "\\\\u202e")) == ["SELECT '\\u202e'", "SELECT 2"]  # a list: JSON, shown escaped
    assert (tmp_path / "r.correct.csv").read_text(encoding="utf-8").splitlines() == ["instance_id", "q\\x1b0"]
