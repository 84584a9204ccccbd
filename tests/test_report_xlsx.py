"""The Excel report: written from a JSON report dict, read back with openpyxl."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.termselection import aggregate_term_selection, reason_text, score_term_selection
from pytest_nl2sql.reports.xlsx import write_xlsx
from pytest_nl2sql.vocab import Kind, Verdict


def selection(**dimensions: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [
        {
            "dataset_id": "IMF.RES:WEO",
            "dimensions": [
                {"dimension_name": name, "values": [{"id": i, "name": n} for i, n in values]}
                for name, values in dimensions.items()
            ],
        }
    ]


GDP = ("GDP", "gross domestic product")
GDPPC = ("GDPPC", "GDP per capita")
GDP_CONST = ("GDP_CONST", "gross domestic product constant prices")


def make_report(baseline: bool = True) -> dict[str, Any]:
    """Two SQL passes, a mismatch with a row diff, a prediction error, a broken gold, and the
    spec's worked term-selection example; the summary as the plugin would aggregate it."""
    predicted = selection(INDICATOR=[GDP, GDPPC, GDP_CONST])
    score = score_term_selection([selection(INDICATOR=[GDP, GDPPC])], [predicted])
    results = [
        CaseResult(
            "case-0000", "dev.nl2sql.yaml::case-0000", "dev.nl2sql.yaml", 0, Kind.SQL, Verdict.PASS,
            question="How many singers do we have?", database="concert_singer",
            gold="SELECT count(*) FROM singer", predicted="SELECT count(*) FROM singer",
            hardness="easy", tags=("count",), exact_match=True, latency=0.25,
        ),
        CaseResult(
            "case-0001", "dev.nl2sql.yaml::case-0001", "dev.nl2sql.yaml", 1, Kind.SQL, Verdict.MISMATCH,
            question="Average age of singers from France?", database="concert_singer",
            gold="SELECT avg(age) FROM singer WHERE country = 'France'",
            predicted="SELECT avg(age) FROM singer WHERE country = 'france'",
            hardness="medium", tags=("agg",), reason="values", exact_match=False,
            baseline="regression" if baseline else None,
            diff={"pairing": [0], "missing": [[34.5]], "extra": [[None]], "missing_count": 1, "extra_count": 1},
        ),
        CaseResult(
            "case-0002", "dev.nl2sql.yaml::case-0002", "dev.nl2sql.yaml", 2, Kind.SQL, Verdict.PRED_ERROR,
            question="Names of pets", database="pets_1", gold=["SELECT name FROM pets", "SELECT pet_name FROM pets"],
            predicted="=HYPERLINK(\"x\")\x07", hardness="hard", reason="no such column: nme",
        ),
        CaseResult(
            "case-0003", "dev.nl2sql.yaml::case-0003", "dev.nl2sql.yaml", 3, Kind.SQL, Verdict.GOLD_ERROR,
            question="Broken", database="wta_1", gold="SELECT 1", hardness="extra", reason="database missing",
        ),
        CaseResult(
            "case-0004", "dev.nl2sql.yaml::case-0004", "dev.nl2sql.yaml", 4, Kind.SQL, Verdict.PASS,
            question="Fixed", database="pets_1", gold="SELECT 1", predicted="SELECT 1", hardness="extra",
            baseline="fixed" if baseline else None,
        ),
        CaseResult(
            "gdp-example", "gdp.nl2sql.yaml::gdp-example", "gdp.nl2sql.yaml", 5, Kind.TERM_SELECTION,
            Verdict.MISMATCH, question="Show GDP and GDP per capita", predicted=predicted, tags=("imf",),
            reason=reason_text(score), term_selection=score.to_json(),
        ),
    ]
    items = [r.to_json() for r in results]
    bucket = lambda total, passed: {"total": total, "passed": passed, "accuracy": passed / total}  # noqa: E731
    summary = {
        "total": 5, "passed": 2, "errors": 1, "accuracy": 0.5,
        "by_hardness": {"medium": bucket(1, 0), "easy": bucket(1, 1), "hard": bucket(1, 0), "extra": bucket(1, 1)},
        "by_tag": {"count": bucket(1, 1), "agg": bucket(1, 0)},
        "by_database": {"concert_singer": bucket(2, 1), "pets_1": bucket(2, 1)},
        "exact_match": 0.5,
        "term_selection": aggregate_term_selection(items),
        "partial": {"select": {"acc": 0.9, "rec": 0.8, "f1": 0.85}},
        "baseline": {
            "path": "baseline.json", "accuracy_before": 0.5, "accuracy_now": 0.5,
            "regressions": ["case-0001"], "fixed": ["case-0004"], "p_value": 1.0,
        } if baseline else None,
    }
    return {"summary": summary, "items": items}


def rows(ws: Any) -> list[list[Any]]:
    return [list(r) for r in ws.iter_rows(values_only=True)]


def records(ws: Any) -> dict[str, dict[str, Any]]:
    header, *body = rows(ws)
    return {r[0]: dict(zip(header, r)) for r in body}


@pytest.fixture
def workbook(tmp_path: Path) -> tuple[Path, Any]:
    path = tmp_path / "out" / "report.xlsx"
    write_xlsx(make_report(), path)
    return path, openpyxl.load_workbook(path)


def test_sheets(workbook: tuple[Path, Any]) -> None:
    _, wb = workbook
    assert wb.sheetnames == ["Overview", "Statistics", "Failures", "Regressions and fixes"]


def test_no_baseline_sheet_without_a_baseline(tmp_path: Path) -> None:
    write_xlsx(make_report(baseline=False), tmp_path / "r.xlsx")
    assert openpyxl.load_workbook(tmp_path / "r.xlsx").sheetnames == ["Overview", "Statistics", "Failures"]


def test_overview_has_a_row_per_case_with_the_spec_columns(workbook: tuple[Path, Any]) -> None:
    _, wb = workbook
    ws = wb["Overview"]
    header = rows(ws)[0]
    for column in ("id", "question", "database", "hardness", "tags", "verdict", "gold SQL",
                   "predicted SQL", "reason", "macro recall", "macro precision", "indicator selection details"):
        assert column in header
    by_id = records(ws)
    assert list(by_id) == ["case-0000", "case-0001", "case-0002", "case-0003", "case-0004", "gdp-example"]
    assert by_id["case-0001"]["verdict"] == "mismatch"
    assert by_id["case-0001"]["database"] == "concert_singer"
    assert by_id["case-0002"]["gold SQL"] == "SELECT name FROM pets\nSELECT pet_name FROM pets"
    assert by_id["case-0000"]["tags"] == "count"
    gdp = by_id["gdp-example"]
    assert gdp["macro precision"] == pytest.approx(2 / 3)
    assert gdp["macro recall"] == 1.0
    assert "IMF.RES:WEO / INDICATOR: GDP, GDPPC, GDP_CONST" in gdp["predicted SQL"]
    assert ws.freeze_panes == "B2"
    assert ws.auto_filter.ref == f"A1:{ws.cell(1, len(header)).column_letter}7"


def test_details_cell_in_the_spec_format(workbook: tuple[Path, Any]) -> None:
    _, wb = workbook
    details = records(wb["Overview"])["gdp-example"]["indicator selection details"]
    assert details.splitlines() == [
        "INDICATOR",
        "[recall: 1.00, precision: 0.67]",
        "True Positives [2]",
        "  * GDP: gross domestic product",
        "  * GDPPC: GDP per capita",
        "False Negatives [0]",
        "False Positives [1]",
        "  * GDP_CONST: gross domestic product constant prices",
    ]
    ws = wb["Overview"]
    column = rows(ws)[0].index("indicator selection details") + 1
    cell = ws.cell(7, column)
    assert cell.alignment.wrap_text
    assert ws.row_dimensions[7].height >= 8 * 15  # tall enough to show the eight lines


def test_verdicts_are_coloured_pass_green_fail_red(workbook: tuple[Path, Any]) -> None:
    _, wb = workbook
    ws = wb["Overview"]
    column = rows(ws)[0].index("verdict") + 1
    colours = {ws.cell(r, 1).value: ws.cell(r, column).fill.fgColor.rgb for r in range(2, ws.max_row + 1)}
    assert colours["case-0000"] == colours["case-0004"]
    assert colours["case-0001"] == colours["case-0002"] == colours["gdp-example"]
    assert len({colours["case-0000"], colours["case-0001"], colours["case-0003"]}) == 3


def test_untrusted_text_stays_text(workbook: tuple[Path, Any]) -> None:
    _, wb = workbook
    cell = wb["Overview"].cell(4, rows(wb["Overview"])[0].index("predicted SQL") + 1)
    assert cell.value == '=HYPERLINK("x")'  # control character dropped, not a formula
    assert cell.data_type == "s"


def test_statistics(workbook: tuple[Path, Any]) -> None:
    path, wb = workbook
    found = {r[0]: tuple(r[1:]) for r in rows(wb["Statistics"]) if r[0] is not None}
    assert found["execution accuracy"][0] == 0.5
    assert found["exact match"][0] == 0.5
    assert "Accuracy by hardness" in found and "Accuracy by tag" in found and "Accuracy by database" in found
    labels = [r[0] for r in rows(wb["Statistics"])]
    assert labels.index("easy") < labels.index("medium") < labels.index("hard") < labels.index("extra")
    assert found["medium"][:4] == (1, 0, 0, 0.0)  # total, passed, errors, accuracy
    assert found["concert_singer"][:4] == (2, 1, 0, 0.5)
    assert "Data Query Metrics" in found
    assert found["macro precision"][0] == pytest.approx(2 / 3)
    assert found["macro recall"][0] == 1.0
    assert found["INDICATOR"][:3] == (pytest.approx(2 / 3), 1.0, 1)
    assert found["select"][:3] == (0.9, 0.8, 0.85)
    assert found["p-value (McNemar)"][0] == 1.0
    with zipfile.ZipFile(path) as z:
        chart = next(n for n in z.namelist() if n.startswith("xl/charts/chart"))
        assert b"barChart" in z.read(chart)


def test_failures_sheet_lists_failures_with_their_row_diff(workbook: tuple[Path, Any]) -> None:
    _, wb = workbook
    by_id = records(wb["Failures"])
    assert list(by_id) == ["case-0001", "case-0002", "case-0003", "gdp-example"]
    mismatch = by_id["case-0001"]
    assert mismatch["missing rows"] == 1 and mismatch["extra rows"] == 1
    assert mismatch["rows missing (in gold, not predicted)"] == "(34.5)"
    assert mismatch["rows extra (predicted, not in gold)"] == "(NULL)"
    assert mismatch["column pairing (gold→predicted)"] == "0→0"
    assert "GDP_CONST" in by_id["gdp-example"]["indicator selection details"]
    assert wb["Failures"].freeze_panes == "B2"


def test_long_diffs_are_cut_with_a_count(tmp_path: Path) -> None:
    report = make_report()
    report["items"][1]["diff"] = {"pairing": [], "missing": [[i, f"row {i}"] for i in range(500)],
                                  "extra": [], "missing_count": 500, "extra_count": 0}
    write_xlsx(report, tmp_path / "r.xlsx")
    cell = records(openpyxl.load_workbook(tmp_path / "r.xlsx")["Failures"])["case-0001"]
    lines = cell["rows missing (in gold, not predicted)"].splitlines()
    assert lines[0] == "(0, 'row 0')"
    assert lines[-1] == "… 480 more"
    assert cell["missing rows"] == 500


def test_regressions_and_fixes(workbook: tuple[Path, Any]) -> None:
    _, wb = workbook
    by_id = records(wb["Regressions and fixes"])
    assert {i: r["change"] for i, r in by_id.items()} == {"case-0001": "regression", "case-0004": "fixed"}
    assert by_id["case-0001"]["verdict"] == "mismatch"


def test_changes_listed_by_node_id_appear_once(tmp_path: Path) -> None:
    """The summary's baseline lists name cases by node id (`file::id`), as the plugin writes them."""
    report = make_report()
    report["summary"]["baseline"].update(regressions=["dev.nl2sql.yaml::case-0001"], fixed=["dev.nl2sql.yaml::case-0004"])
    write_xlsx(report, tmp_path / "r.xlsx")
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["Regressions and fixes"]
    assert [(r[0], r[1]) for r in rows(ws)[1:]] == [("case-0001", "regression"), ("case-0004", "fixed")]


def test_a_predictor_traceback_does_not_fill_the_reason_cell(tmp_path: Path) -> None:
    report = make_report()
    report["items"][2]["verdict"] = "predictor_error"
    report["items"][2]["reason"] = ("RuntimeError: the model is down\nTraceback (most recent call last):\n"
                                    + "".join(f'  File "m.py", line {n}, in f\n' for n in range(40)))
    write_xlsx(report, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(tmp_path / "r.xlsx")
    for sheet in ("Overview", "Failures"):
        assert records(wb[sheet])["case-0002"]["reason"] == "RuntimeError: the model is down\n(traceback in the JSON report)"


def test_minimal_report_with_missing_optional_keys(tmp_path: Path) -> None:
    report = {"summary": {"total": 1, "passed": 0, "errors": 0, "accuracy": 0.0},
              "items": [{"id": "only", "verdict": "no_prediction", "passed": False}]}
    write_xlsx(report, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(tmp_path / "r.xlsx")
    assert records(wb["Overview"])["only"]["verdict"] == "no_prediction"
    assert list(records(wb["Failures"])) == ["only"]


@pytest.mark.skipif(not (shutil.which("soffice") or shutil.which("libreoffice")), reason="LibreOffice is not installed")
def test_libreoffice_converts_the_workbook(workbook: tuple[Path, Any]) -> None:
    path, _ = workbook
    soffice = shutil.which("soffice") or shutil.which("libreoffice")
    profile = path.parent / "lo-profile"  # own profile: no clash with a LibreOffice already running
    subprocess.run(
        [soffice, f"-env:UserInstallation=file://{profile}", "--headless", "--convert-to", "pdf",
         "--outdir", str(path.parent), str(path)],
        capture_output=True, timeout=180, check=False,
    )
    pdf = path.with_suffix(".pdf")
    assert pdf.exists() and pdf.read_bytes().startswith(b"%PDF")


def test_bird_difficulty_levels_in_their_order(tmp_path: Path) -> None:
    """BIRD's levels are simple < moderate < challenging, after Spider's, not by name."""
    report = make_report()
    bucket = {"total": 1, "passed": 1, "accuracy": 1.0}
    report["summary"]["by_hardness"] = {
        label: bucket for label in ("challenging", "zzz-custom", "moderate", "extra", "simple", "easy")
    }
    write_xlsx(report, tmp_path / "r.xlsx")
    labels = [r[0] for r in rows(openpyxl.load_workbook(tmp_path / "r.xlsx")["Statistics"])]
    start = labels.index("Accuracy by hardness") + 2
    assert labels[start:start + 6] == ["easy", "extra", "simple", "moderate", "challenging", "zzz-custom"]


def test_partial_component_that_no_query_has_is_not_applicable(tmp_path: Path) -> None:
    report = make_report()
    report["summary"]["partial"] = {
        "select": {"acc": 0.9, "rec": 0.8, "f1": 0.85, "pred_count": 4, "gold_count": 4},
        "group": {"acc": 0.0, "rec": 0.0, "f1": 1.0, "pred_count": 0, "gold_count": 0},  # official 0 / 0
        "order": {"acc": 0.0, "rec": 0.0, "f1": 1.0, "pred_count": 0, "gold_count": 2},  # never predicted
    }
    write_xlsx(report, tmp_path / "r.xlsx")
    table = rows(openpyxl.load_workbook(tmp_path / "r.xlsx")["Statistics"])
    header = next(r for r in table if r[0] == "component")
    assert header[:6] == ["component", "accuracy", "recall", "F1", "in gold", "in predictions"]
    found = {r[0]: tuple(r[1:6]) for r in table if r[0] is not None}
    assert found["select"] == (0.9, 0.8, 0.85, 4, 4)
    assert found["group"] == ("n/a", "n/a", "n/a", 0, 0)
    assert found["order"] == (0.0, 0.0, 1.0, 2, 0)  # the official numbers: the gold has it
    assert any(str(r[0]).startswith("n/a: no gold query") for r in table)


def test_huge_values_are_cut_with_a_visible_marker(tmp_path: Path) -> None:
    report = make_report()
    huge = "x" * 10_000_000
    report["items"][1]["predicted"] = huge
    report["items"][1]["reason"] = "=" + huge  # a formula-looking text, cut, stays text
    report["items"][1]["diff"] = {"pairing": [0], "missing": [[huge]] * 30, "extra": [], "missing_count": 30}
    write_xlsx(report, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(tmp_path / "r.xlsx")
    overview = records(wb["Overview"])["case-0001"]
    assert overview["predicted SQL"].endswith("x\n… [cut: 10,000,000 characters in all]")
    assert overview["reason"].endswith("x\n… [cut: 10,000,001 characters in all]")
    assert len(overview["predicted SQL"]) == len(overview["reason"]) == 32_767
    header = rows(wb["Overview"])[0]
    assert wb["Overview"].cell(3, header.index("reason") + 1).data_type == "s"
    missing = records(wb["Failures"])["case-0001"]["rows missing (in gold, not predicted)"]
    assert missing.splitlines()[0] == "('" + "x" * 200 + "'… [10,000,000 characters])"
    assert missing.splitlines()[-1] == "… 10 more"


def test_text_that_xml_cannot_hold_does_not_corrupt_the_workbook(tmp_path: Path) -> None:
    report = make_report()
    report["items"][1]["predicted"] = "SELECT '\ud800\uffff\ufffe' -- \x00\x1b ok"
    report["items"][1]["tags"] = ["\udcff"]
    report["summary"]["by_tag"] = {"\udcff": {"total": 1, "passed": 0, "accuracy": 0.0}}
    write_xlsx(report, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(tmp_path / "r.xlsx")  # raised a ParseError before
    case = records(wb["Overview"])["case-0001"]
    assert case["predicted SQL"] == "SELECT '\\ud800\\uffff\\ufffe' --  ok"
    assert case["tags"] == "\\udcff"


def test_enum_values_are_shown_and_coloured_by_their_spelling(tmp_path: Path) -> None:
    from pytest_nl2sql.vocab import BaselineStatus

    report = make_report()
    report["items"][1]["baseline"] = BaselineStatus.REGRESSION
    report["items"][1]["verdict"] = Verdict.MISMATCH
    write_xlsx(report, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(tmp_path / "r.xlsx")
    case = records(wb["Overview"])["case-0001"]
    assert (case["baseline"], case["verdict"]) == ("regression", "mismatch")
    header = rows(wb["Overview"])[0]
    fill = wb["Overview"].cell(3, header.index("baseline") + 1).fill.fgColor.rgb
    assert fill.endswith("FFC7CE")  # the regression red
    assert [r[0] for r in rows(wb["Regressions and fixes"])[1:]] == ["case-0001", "case-0004"]


def test_statistics_give_the_interval_of_every_accuracy(tmp_path: Path) -> None:
    from pytest_nl2sql.metrics.summary import build_report, summarize

    results = [CaseResult(id=f"c{n}", nodeid=f"s.yaml::c{n}", file="s.yaml", position=n, kind=Kind.SQL,
                          verdict=Verdict.PASS if n % 2 else Verdict.MISMATCH, hardness="easy") for n in range(4)]
    path = tmp_path / "r.xlsx"
    write_xlsx(build_report(results, summarize(results)), path)
    cells = [[c.value for c in row] for row in openpyxl.load_workbook(path)["Statistics"].iter_rows()]
    assert ["95% interval, low (Wilson)", 0.150039] in [row[:2] for row in cells]
    header = next(row for row in cells if row[0] == "hardness")
    easy = next(row for row in cells if row[0] == "easy")
    assert header[:7] == ["hardness", "total", "passed", "errors", "accuracy", "95% CI low", "95% CI high"]
    assert easy[:7] == ["easy", 4, 2, 0, 0.5, 0.150039, 0.849961]


def test_the_statistics_chart_sits_beside_the_tables_not_over_them(workbook: tuple[Path, Any]) -> None:
    _, wb = workbook
    ws = wb["Statistics"]
    (chart,) = ws._charts
    start = chart.anchor._from  # zero-based column and row of its top-left corner
    used = max(cell.column for row in ws.iter_rows() for cell in row if cell.value is not None)
    assert start.col >= used + 1  # right of every column holding a value (one column apart)
    assert ws.cell(start.row + 1, 1).value == "Accuracy by hardness"  # level with the table it draws


def test_no_term_selection_columns_when_no_case_selects_terms(tmp_path: Path) -> None:
    report = make_report()
    report["items"] = [item for item in report["items"] if item["kind"] != "term_selection"]
    write_xlsx(report, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(tmp_path / "r.xlsx")
    term_columns = {"macro recall", "macro precision", "indicator selection details"}
    for sheet in ("Overview", "Failures"):
        header = rows(wb[sheet])[0]
        assert not term_columns & set(header), sheet
        assert {"id", "verdict", "predicted SQL"} <= set(header)
        assert None not in header  # no gap where the columns were
    with_terms = tmp_path / "t.xlsx"
    write_xlsx(make_report(), with_terms)
    assert term_columns <= set(rows(openpyxl.load_workbook(with_terms)["Overview"])[0])


def test_every_sheet_prints_landscape_one_page_wide_with_its_header_on_each_page(tmp_path: Path) -> None:
    report = make_report()
    report["history"] = [{"run": {"started": "2026-01-01T00:00:00+00:00"}, "summary": {"accuracy": 0.4}},
                         {"run": {"started": "2026-01-02T00:00:00+00:00"}, "summary": {"accuracy": 0.5}}]
    write_xlsx(report, tmp_path / "r.xlsx")
    wb = openpyxl.load_workbook(tmp_path / "r.xlsx")
    assert wb.sheetnames == ["Overview", "Statistics", "Trend", "Failures", "Regressions and fixes"]
    for ws in wb.worksheets:
        setup = ws.page_setup
        assert (setup.orientation, setup.fitToWidth, setup.fitToHeight) == ("landscape", 1, 0), ws.title
        assert ws.sheet_properties.pageSetUpPr.fitToPage, ws.title
        assert ws.oddHeader.center.text == "&A" and "&P" in ws.oddFooter.center.text  # sheet name, page number
        assert ws.page_margins.left < 0.75  # narrower than Excel's default
        if ws.title != "Statistics":  # a table: its header row repeats on every printed page
            assert (ws.print_title_rows, ws.print_title_cols) == ("$1:$1", "$A:$A"), ws.title
