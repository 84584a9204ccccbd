"""The trend over `--nl2sql-history` in the md and xlsx reports, written from a report dict.

The contract: `report["history"]` is the history's entries (`gate.run.read_history`), oldest first,
the current run last, each `{"run": {...}, "summary": {...}}`; absent or empty, no trend is shown.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from pytest_nl2sql.gate.run import RunInfo, append_history, read_history
from pytest_nl2sql.reports import write_report
from pytest_nl2sql.reports.md import MAX_TREND_RUNS, SPARK_BLOCKS, render_markdown, sparkline, trend
from pytest_nl2sql.reports.xlsx import write_xlsx

CHART_NS = {"c": "http://schemas.openxmlformats.org/drawingml/2006/chart",
            "a": "http://schemas.openxmlformats.org/drawingml/2006/main"}


def entry(day: int, accuracy: Any, hardness: dict[str, Any] | None = None, *, label: Any = "model-a",
          commit: Any = "0123456789abcdef0123456789abcdef01234567", complete: Any = True) -> dict[str, Any]:
    return {
        "run": {"started": f"2024-05-{day:02d}T09:30:00.123456+00:00", "duration_s": 3.5, "label": label,
                "git_commit": commit, "engine": "per case", "complete": complete, "options": {}},
        "summary": {
            "total": 10, "passed": 0, "errors": 0, "accuracy": accuracy,
            "by_hardness": {
                name: {"total": 4, "passed": 0, "errors": 0, "accuracy": value}
                for name, value in (hardness or {}).items()
            },
        },
    }


HISTORY = [
    entry(1, 0.5, {"hard": 0.25, "easy": 0.75}, label="first"),
    entry(2, 0.4, {"easy": 0.5, "medium": 0.5, "hard": 0.0}, label="second", complete=False,
          commit="fedcba9876543210fedcba9876543210fedcba98+dirty"),
    entry(3, 0.8, {"extra": 0.5, "easy": 1.0, "medium": 0.75, "hard": 0.5}, label="third"),
]


def report_with(history: Any, *, current: bool = True) -> dict[str, Any]:
    report: dict[str, Any] = {
        "summary": {"total": 10, "passed": 8, "errors": 0, "accuracy": 0.8,
                    "by_hardness": {}, "by_tag": {}, "by_database": {}},
        "items": [],
    }
    if current and isinstance(history, list) and history and isinstance(history[-1], dict):
        report["run"] = history[-1].get("run")
    if history is not None:
        report["history"] = history
    return report


def trend_table(markdown: str) -> list[list[str]]:
    """The trend table's rows (header first, the separator left out) as lists of cells."""
    section = markdown.split("#### Trend", 1)[1].split("\n#### ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines if not line.startswith("|--")]


# --------------------------------------------------------------------------- md


def test_md_trend_table_rows_in_order_with_the_right_numbers() -> None:
    text = render_markdown(report_with(HISTORY))
    rows = trend_table(text)
    # hardness columns in vocabulary order, only the levels present
    assert rows[0] == ["run", "started (UTC)", "label", "commit", "accuracy", "easy", "medium", "hard", "extra"]
    assert rows[1] == ["1", "2024-05-01 09:30", "first", "`01234567`", "50.0%", "75.0%", "", "25.0%", ""]
    assert rows[2] == ["2", "2024-05-02 09:30", "second", "`fedcba98+dirty`", "40.0% ⚠", "50.0%", "50.0%", "0.0%", ""]
    assert rows[3] == ["**3**", "2024-05-03 09:30 (this run)", "third", "`01234567`", "80.0%",
                       "100.0%", "75.0%", "50.0%", "50.0%"]
    assert len(rows) == 4
    assert "⚠ an incomplete run (interrupted)" in text
    assert f"Accuracy over 3 runs (oldest first): `{sparkline([0.5, 0.4, 0.8])}` 50.0% → 80.0%" in text
    assert text.index("### pytest-nl2sql") < text.index("#### Trend")


@pytest.mark.parametrize("history", [None, [], "not a list", {"run": {}}, [1, "x", None]])
def test_md_no_trend_without_history(history: Any) -> None:
    text = render_markdown(report_with(history))
    assert "Trend" not in text and "▁" not in text


def test_md_current_run_only_when_started_matches() -> None:
    report = report_with(HISTORY)
    report["run"] = {"started": "2030-01-01T00:00:00+00:00"}  # e.g. merge-reports of an older run
    rows = trend_table(render_markdown(report))
    assert rows[3][0] == "3" and "this run" not in rows[3][1]


def test_md_keeps_the_last_runs_and_numbers_them_in_the_history() -> None:
    history = [entry(1 + n % 28, n / 100, {"easy": n / 100}, label=f"run-{n}") for n in range(50)]
    text = render_markdown(report_with(history))
    rows = trend_table(text)[1:]
    assert len(rows) == MAX_TREND_RUNS
    assert [row[2] for row in rows] == [f"run-{n}" for n in range(50 - MAX_TREND_RUNS, 50)]
    assert rows[0][0] == str(50 - MAX_TREND_RUNS + 1) and rows[-1][0] == "**50**"
    assert rows[-1][4] == "49.0%"
    assert f"the last {MAX_TREND_RUNS} of 50 runs" in text
    assert f"<details><summary>The {MAX_TREND_RUNS} runs</summary>" in text  # a long table is folded


def test_md_survives_entries_missing_fields_and_non_numeric_values() -> None:
    history: list[Any] = [
        "a torn line",
        {"run": None, "summary": None},
        {"run": {"started": "yesterday-ish", "label": {"nested": 1}, "git_commit": 1234, "complete": "no"},
         "summary": {"accuracy": "high", "by_hardness": ["easy"]}},
        {"run": {"started": 17, "label": "x" * 500, "git_commit": ""},
         "summary": {"accuracy": float("nan"), "passed": 3, "total": 5, "errors": 1,
                     "by_hardness": {"easy": None, "hard": {"accuracy": True}, "medium": {"accuracy": None},
                                     "extra": {"accuracy": 7}}}},
        {"run": {"started": "2024-05-01T12:00:00+02:00", "label": "a|b<c"}, "summary": {"accuracy": 1}},
    ]
    text = render_markdown(report_with(history, current=False))
    rows = trend_table(text)
    assert rows[0] == ["run", "started (UTC)", "label", "commit", "accuracy", "medium", "hard", "extra"]
    # three readable entries; the string entry is skipped
    assert rows[1] == ["1", "", "", "", "n/a", "", "", ""]
    assert rows[2] == ["2", "yesterday-ish", "", "", "n/a", "", "", ""]  # "complete": "no" is not a boolean
    label = rows[3][2]
    assert rows[3][4] == "75.0%"  # NaN accuracy: from the counts, 3 / (5 - 1)
    assert label.endswith("…") and len(label) <= 40
    assert rows[3][5:] == ["n/a", "n/a", "n/a"]  # null, a boolean, 7 (out of [0, 1])
    assert rows[4][1] == "2024-05-01 10:00"  # converted to UTC
    assert rows[4][2] == "a\\|b&lt;c" and rows[4][4] == "100.0%"
    assert "⚠" not in text


def test_sparkline() -> None:
    assert sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert sparkline([0.2, None, 0.8]) == "▁·█"
    assert sparkline([None, None]) == "··"
    flat = sparkline([0.7, 0.7, 0.7])  # a flat line sits in the middle, not at the bottom
    assert len(set(flat)) == 1 and flat[0] in SPARK_BLOCKS[3:5]
    # a 1-point change is not drawn as the full height: the scale spans at least 10 points
    assert sparkline([0.80, 0.81]) in ("▃▄", "▄▄", "▄▅", "▃▅")
    assert sparkline([0.99, 1.0])[-1] == "█" and sparkline([0.0, 0.01])[0] == "▁"


def test_trend_rows() -> None:
    shown = trend(report_with(HISTORY))
    assert shown is not None and shown.total == 3 and shown.hardness == ["easy", "medium", "hard", "extra"]
    assert [run.accuracy for run in shown.runs] == [0.5, 0.4, 0.8]
    assert [run.complete for run in shown.runs] == [True, False, True]
    assert [run.current for run in shown.runs] == [False, False, True]
    assert trend({"history": []}) is None and trend({}) is None


def test_hardness_labels_bird_and_unknown_after_spider() -> None:
    history = [entry(1, 0.5, {"zeta": 0.1, "challenging": 0.2, "simple": 0.3, "easy": 0.4, "alpha": 0.5})]
    rows = trend_table(render_markdown(report_with(history)))
    assert rows[0][5:] == ["easy", "simple", "challenging", "alpha", "zeta"]


# --------------------------------------------------------------------------- xlsx


def chart_xml(path: Path, kind: str) -> ET.Element:
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if name.startswith("xl/charts/chart"):
                root = ET.fromstring(z.read(name))
                if root.find(f".//c:{kind}", CHART_NS) is not None:
                    return root
    raise AssertionError(f"no {kind} in {path}")


def test_xlsx_trend_sheet_table_and_chart(tmp_path: Path) -> None:
    path = tmp_path / "r.xlsx"
    write_xlsx(report_with(HISTORY), path)
    wb = openpyxl.load_workbook(path)
    assert wb.sheetnames == ["Overview", "Statistics", "Trend", "Failures"]
    ws = wb["Trend"]
    headers = [c.value for c in ws[1]]
    assert headers[:10] == ["run", "started (UTC)", "label", "git commit", "complete", "accuracy",
                            "easy", "medium", "hard", "extra"]
    values = [[c.value for c in row[:10]] for row in ws.iter_rows(min_row=2, max_row=4)]
    assert values == [
        [1, "2024-05-01 09:30", "first", "01234567", "yes", 0.5, 0.75, None, 0.25, None],
        [2, "2024-05-02 09:30", "second", "fedcba98+dirty", "no", 0.4, 0.5, 0.5, 0.0, None],
        [3, "2024-05-03 09:30", "third", "01234567", "yes", 0.8, 1.0, 0.75, 0.5, 0.5],
    ]
    assert ws["F2"].number_format == "0.0%" and ws["J4"].number_format == "0.0%"
    assert ws["A4"].font.b and ws["F4"].font.b and not ws["F3"].font.b  # this run, in bold
    assert ws["E3"].fill.fgColor.rgb.endswith("FFEB9C") and ws["F3"].fill.fgColor.rgb.endswith("FFEB9C")
    notes = [ws.cell(row=r, column=1).value for r in range(6, 9)]
    assert "In bold: this run." in notes and any("interrupted" in str(n) for n in notes)
    # the incomplete runs' accuracy, in a hidden column for the chart's red diamonds
    assert ws["K1"].value == "incomplete run" and ws.column_dimensions["K"].hidden
    assert [ws.cell(row=r, column=11).value for r in range(2, 5)] == [None, 0.4, None]

    chart = chart_xml(path, "lineChart")
    series = chart.findall(".//c:lineChart/c:ser", CHART_NS)
    refs = [
        (s.find("c:tx/c:strRef/c:f", CHART_NS).text, s.find("c:cat/c:strRef/c:f", CHART_NS).text,
         s.find("c:val/c:numRef/c:f", CHART_NS).text)
        for s in series
    ]
    assert refs == [
        (f"'Trend'!{col}1", "'Trend'!$C$2:$C$4", f"'Trend'!${col}$2:${col}$4") for col in "FGHIJK"
    ]
    assert chart.find(".//c:plotVisOnly", CHART_NS).get("val") == "0"  # the hidden column is plotted
    assert chart.find("c:chart/c:title//a:t", CHART_NS).text == "Execution accuracy over runs"


def test_xlsx_categories_are_the_start_times_unless_every_run_has_a_label(tmp_path: Path) -> None:
    history = [entry(1, 0.5, label=None), entry(2, 0.6)]
    write_xlsx(report_with(history), tmp_path / "r.xlsx")
    chart = chart_xml(tmp_path / "r.xlsx", "lineChart")
    series = chart.findall(".//c:lineChart/c:ser", CHART_NS)
    assert len(series) == 1  # no hardness, no incomplete run
    assert series[0].find("c:cat/c:strRef/c:f", CHART_NS).text == "'Trend'!$B$2:$B$3"
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["Trend"]
    assert [c.value for c in ws[1]] == ["run", "started (UTC)", "label", "git commit", "complete", "accuracy"]


@pytest.mark.parametrize("history", [None, []])
def test_xlsx_no_trend_sheet_without_history(tmp_path: Path, history: Any) -> None:
    write_xlsx(report_with(history), tmp_path / "r.xlsx")
    assert openpyxl.load_workbook(tmp_path / "r.xlsx").sheetnames == ["Overview", "Statistics", "Failures"]
    with zipfile.ZipFile(tmp_path / "r.xlsx") as z:
        assert not any(b"lineChart" in z.read(n) for n in z.namelist() if n.startswith("xl/charts/"))


def test_xlsx_survives_bad_entries_and_hostile_labels(tmp_path: Path) -> None:
    history: list[Any] = [
        None,
        {"run": {"label": "=HYPERLINK(\"http://x\")", "complete": None}, "summary": {"accuracy": "0.5"}},
        {"run": {"started": "2024-05-01T00:00:00Z", "label": "ok\x00\x07"},
         "summary": {"accuracy": 0.25, "by_hardness": {"=1+1": {"accuracy": 0.5}, "bad\ud800": {"accuracy": 0.1}}}},
    ]
    write_xlsx(report_with(history, current=False), tmp_path / "r.xlsx")
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["Trend"]
    assert ws["C2"].value == "=HYPERLINK(\"http://x\")" and ws["C2"].data_type == "s"
    assert ws["E2"].value == "?" and ws["F2"].value is None  # "0.5" is text, not an accuracy
    assert ws["B3"].value == "2024-05-01 00:00" and ws["C3"].value == "ok" and ws["F3"].value == 0.25
    headers = [c.value for c in ws[1]]
    assert "=1+1" in headers and ws.cell(row=1, column=headers.index("=1+1") + 1).data_type == "s"
    assert "bad\\ud800" in headers


# --------------------------------------------------------------------------- end to end


def test_history_file_to_reports(tmp_path: Path) -> None:
    """What finish.py does: append this run, read the history back into the report, write."""
    history_path = tmp_path / "history.jsonl"
    runs = []
    for n, accuracy in enumerate((0.6, 0.7, 0.65)):
        run = RunInfo(f"2024-06-0{n + 1}T08:00:00+00:00", 1.0, f"m{n}", "abcdef0123456789", "per case", True)
        summary = {"total": 20, "passed": int(accuracy * 20), "errors": 0, "accuracy": accuracy,
                   "by_hardness": {"easy": {"total": 10, "passed": 8, "errors": 0, "accuracy": 0.8}}}
        append_history(history_path, run, summary)
        runs.append((run, summary))
    run, summary = runs[-1]
    report = {"run": run.to_json(), "summary": summary, "items": [], "history": read_history(history_path)}
    write_report("md", report, tmp_path / "r.md")
    rows = trend_table((tmp_path / "r.md").read_text(encoding="utf-8"))
    assert [row[4] for row in rows[1:]] == ["60.0%", "70.0%", "65.0%"]
    assert rows[3][1] == "2024-06-03 08:00 (this run)" and rows[3][3] == "`abcdef01`"
    write_report("xlsx", report, tmp_path / "r.xlsx")
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["Trend"]
    assert [ws.cell(row=r, column=6).value for r in range(2, 5)] == [0.6, 0.7, 0.65]
