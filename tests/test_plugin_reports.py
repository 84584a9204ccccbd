"""Reports written by the plugin, read back: xlsx (openpyxl), csv and its correct-ids file, md.

One mixed run (SQL cases with every kind of outcome, and the term-selection worked example of
spec `002`) writes every format; each is read back and checked against the JSON report and the
numbers the spec gives (P 0.67 / R 1.0 for the worked example). That the csv and xlsx reports
are the same, row for row, with and without `-n 2` is checked by test_plugin_core.py's one pair of
xdist runs (term-selection cases included), not by a pair of runs here.
"""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
import pytest
import yaml

from helpers import make_shop, read_report, write_suite
from pytest_nl2sql.metrics.summary import accuracy_name

SQL_CASES = [
    {"id": "count", "question": "How many items?", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item", "tags": ["agg"]},
    {"id": "office", "question": "Office items", "gold": "SELECT name, price FROM item WHERE category = 'office'",
     "predicted": "SELECT price, name FROM item WHERE price < 3"},
    {"id": "typo", "question": "Typo", "gold": "SELECT name FROM item", "predicted": "SELECT nam FROM item"},
    {"id": "broken", "question": "Broken gold", "gold": "SELECT nope FROM item", "predicted": "SELECT 1"},
]
GDP = {"id": "GDP", "name": "gross domestic product"}
GDPPC = {"id": "GDPPC", "name": "GDP per capita"}
GDP_CONST = {"id": "GDP_CONST", "name": "gross domestic product constant prices"}
LP = {"id": "LP", "name": "Population, Persons for countries / Index for country groups"}
MEX = {"id": "MEX", "name": "Mexico"}
MEXICO_ID = "c48d7624-d376-48ca-b2d8-386999befb45"

# The "indicator selection details" cell of the worked example, in spec 002's format.
GDP_DETAILS = """\
INDICATOR
[recall: 1.00, precision: 0.67]
True Positives [2]
  * GDP: gross domestic product
  * GDPPC: GDP per capita
False Negatives [0]
False Positives [1]
  * GDP_CONST: gross domestic product constant prices"""

OVERVIEW_HEADERS = [
    "id", "question", "database", "hardness", "tags", "verdict", "reason", "gold SQL", "predicted SQL",
    "macro recall", "macro precision", "indicator selection details", "exact match", "near miss",
    "column F1", "row F1", "column precision", "column recall", "row precision", "row recall", "baseline",
    "latency (s)", "nodeid",
]
CSV_COLUMNS = [
    "id", "nodeid", "file", "kind", "question", "database", "hardness", "tags", "verdict", "passed", "reason",
    "gold", "predicted", "exact_match", "macro_precision", "macro_recall", "baseline", "latency",
    "missing_rows", "extra_rows", "near_miss", "predicted_result", "column_precision", "column_recall",
    "column_f1", "row_precision", "row_recall", "row_f1", "run_label", "run_started", "run_commit",
    "raw_prediction", "attempts", "prompt_tokens", "completion_tokens", "cost", "repeats_k", "repeats_passed",
    "predicted_malloy", "retries",
]
GREEN, RED, YELLOW = "C6EFCE", "FFC7CE", "FFEB9C"


def selection(**dimensions: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [{"dataset_id": "IMF.RES:WEO",
             "dimensions": [{"dimension_name": name, "values": values} for name, values in dimensions.items()]}]


def term_case(case_id: str, target: list[dict[str, Any]], predicted: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": case_id, "tags": ["imf"], "predicted": predicted,
            "conversation": [{"role": "user", "content": f"question of {case_id}", "target": {"indicator_selection": target}}],
            **extra}


@pytest.fixture
def mixed(pytester: pytest.Pytester) -> pytest.Pytester:
    """A shop suite (pass, mismatch with a row diff, pred_error, gold_error) and two
    term-selection cases: spec 002's Mexico case (passes) and the worked example (fails)."""
    make_shop(pytester.path)
    write_suite(pytester.path, SQL_CASES, database="shop.sqlite")
    write_suite(pytester.path, [
        term_case(MEXICO_ID, selection(INDICATOR=[LP], COUNTRY=[MEX]), selection(INDICATOR=[LP], COUNTRY=[MEX])),
        term_case("gdp", selection(INDICATOR=[GDP, GDPPC]), selection(INDICATOR=[GDP, GDPPC, GDP_CONST]),
                  question="Show GDP and GDP per capita"),
    ], name="imf.nl2sql.yaml")
    return pytester


def table(ws: Any) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """A tabular sheet's header and its rows by id (first column)."""
    rows = [[c.value for c in row] for row in ws.iter_rows()]
    header = rows[0]
    return header, {r[0]: dict(zip(header, r)) for r in rows[1:]}


def cell(ws: Any, row_id: str, header: str) -> Any:
    headers = [c.value for c in ws[1]]
    for row in ws.iter_rows(min_row=2):
        if row[0].value == row_id:
            return row[headers.index(header)]
    raise KeyError(row_id)


def statistics(ws: Any) -> dict[str, tuple[Any, ...]]:
    """The Statistics sheet as {first cell: the other cells} (labels are unique enough here)."""
    found: dict[str, tuple[Any, ...]] = {}
    for row in ws.iter_rows(values_only=True):
        if row[0] is not None:
            found.setdefault(str(row[0]), tuple(row[1:]))
    return found


def test_every_report_format_read_back(mixed: pytest.Pytester) -> None:
    result = mixed.runpytest("--nl2sql-report=json:out/r.json", "--nl2sql-report=xlsx:out/r.xlsx",
                             "--nl2sql-report=csv:out/r.csv", "--nl2sql-report=md:out/r.md")
    result.assert_outcomes(passed=2, failed=3, errors=1)
    out = mixed.path / "out"
    result.stdout.fnmatch_lines(["xlsx report: out/r.xlsx"])  # relative to the rootdir
    result.stdout.fnmatch_lines(["csv report: out/r.correct.csv"])
    report = read_report(out / "r.json")
    order = [i["id"] for i in report["items"]]
    assert order == [MEXICO_ID, "gdp", "count", "office", "typo", "broken"]  # collection order

    # --- xlsx -------------------------------------------------------------------------------
    wb = openpyxl.load_workbook(out / "r.xlsx")
    assert wb.sheetnames == ["Overview", "Statistics", "Failures"]  # no baseline: no changes sheet
    ws = wb["Overview"]
    header, rows = table(ws)
    assert header == OVERVIEW_HEADERS
    assert list(rows) == order
    gdp = rows["gdp"]
    assert (gdp["verdict"], gdp["question"], gdp["tags"]) == ("mismatch", "Show GDP and GDP per capita", "imf")
    assert gdp["macro precision"] == pytest.approx(2 / 3) and gdp["macro recall"] == 1.0
    assert cell(ws, "gdp", "macro precision").number_format == "0.00"  # shown as 0.67
    assert gdp["indicator selection details"] == GDP_DETAILS
    assert gdp["predicted SQL"] == "IMF.RES:WEO / INDICATOR: GDP, GDPPC, GDP_CONST"
    assert gdp["gold SQL"] is None and gdp["hardness"] is None
    mexico = rows[MEXICO_ID]["indicator selection details"]
    assert mexico.startswith("INDICATOR\n[recall: 1.00, precision: 1.00]\nTrue Positives [1]\n  * LP: Population")
    assert "COUNTRY\n[recall: 1.00, precision: 1.00]\nTrue Positives [1]\n  * MEX: Mexico" in mexico
    assert (rows["count"]["verdict"], rows["count"]["hardness"], rows["count"]["gold SQL"]) == ("pass", "easy", "SELECT count(*) FROM item")
    assert rows["count"]["macro precision"] is None and rows["count"]["indicator selection details"] is None
    assert rows["office"]["reason"] == "values" and rows["typo"]["verdict"] == "pred_error"
    assert rows["broken"]["verdict"] == "gold_error"
    colours = {i: cell(ws, i, "verdict").fill.fgColor.rgb[-6:] for i in order}
    assert colours == {MEXICO_ID: GREEN, "gdp": RED, "count": GREEN, "office": RED, "typo": RED, "broken": YELLOW}
    assert ws.freeze_panes == "B2"
    assert ws.auto_filter.ref == f"A1:W{len(order) + 1}"
    details = cell(ws, "gdp", "indicator selection details")
    assert details.alignment.wrap_text and ws.row_dimensions[details.row].height >= 8 * 15  # eight lines shown
    assert ws.column_dimensions["A"].width >= len(MEXICO_ID)  # the long id is not cut off

    stats = statistics(wb["Statistics"])
    assert stats[accuracy_name(report["summary"])][0] == pytest.approx(1 / 3)  # 1 of 3 judged SQL cases
    assert stats["errors (gold_error, outside the accuracy)"][0] == 1
    assert stats["easy"][:4] == (report["summary"]["by_hardness"]["easy"]["total"],
                                 report["summary"]["by_hardness"]["easy"]["passed"],
                                 report["summary"]["by_hardness"]["easy"]["errors"],
                                 report["summary"]["by_hardness"]["easy"]["accuracy"])
    labels = [r[:2] for r in wb["Statistics"].iter_rows(values_only=True)]
    at = labels.index(("Data Query Metrics", None))
    assert labels[at + 1: at + 5] == [("macro precision", pytest.approx(5 / 6)), ("macro recall", 1.0),
                                      ("term-selection cases", 2), ("passed", 1)]
    assert stats["INDICATOR"][:3] == (pytest.approx(5 / 6), 1.0, 2)
    assert stats["COUNTRY"][:3] == (1.0, 1.0, 1)
    with zipfile.ZipFile(out / "r.xlsx") as z:
        charts = [n for n in z.namelist() if n.startswith("xl/charts/chart")]
        assert len(charts) == 1 and b"barChart" in z.read(charts[0])

    fheader, failures = table(wb["Failures"])
    assert list(failures) == ["gdp", "office", "typo", "broken"]
    office = failures["office"]
    assert office["missing rows"] == 1 and office["extra rows"] == 1
    assert office["rows missing (in gold, not predicted)"] == "('ink', 3.0)"
    assert office["rows extra (predicted, not in gold)"] == "('cap', 0.5)"
    assert office["column pairing (gold→predicted)"] == "0→1, 1→0"
    assert failures["gdp"]["indicator selection details"] == GDP_DETAILS
    assert wb["Failures"].freeze_panes == "B2" and wb["Failures"].auto_filter.ref == f"A1:{_last_column(fheader)}5"

    # --- csv and the correct ids --------------------------------------------------------------
    with (out / "r.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == CSV_COLUMNS
        by_id = {r["id"]: r for r in reader}
    assert list(by_id) == order
    assert float(by_id["gdp"]["macro_precision"]) == pytest.approx(2 / 3) and float(by_id["gdp"]["macro_recall"]) == 1.0
    assert (by_id["gdp"]["kind"], by_id["gdp"]["verdict"], by_id["gdp"]["passed"]) == ("term_selection", "mismatch", "false")
    assert (by_id["count"]["kind"], by_id["count"]["passed"], by_id["count"]["macro_precision"]) == ("sql", "true", "")
    assert (by_id["office"]["missing_rows"], by_id["office"]["extra_rows"]) == ("1", "1")
    assert by_id["office"]["nodeid"] == "shop.nl2sql.yaml::office" and by_id["count"]["tags"] == "agg"
    assert by_id[MEXICO_ID]["tags"] == "imf"
    correct = (out / "r.correct.csv").read_text().splitlines()
    assert correct == ["instance_id", MEXICO_ID, "count"]
    assert correct[1:] == [i["id"] for i in report["items"] if i["passed"]]

    # --- markdown -------------------------------------------------------------------------------
    md = (out / "r.md").read_text()
    assert "execution accuracy with neighbour databases 1/3 = 33.3%" in md
    assert "macro precision 0.833" in md and "macro recall 1.000" in md


def _last_column(header: list[str]) -> str:
    from openpyxl.utils import get_column_letter

    return get_column_letter(len(header))


def test_default_report_paths_are_relative_to_the_invocation_dir(mixed: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    work = mixed.mkdir("work")
    monkeypatch.chdir(work)
    result = mixed.runpytest(str(mixed.path), "--nl2sql-report=xlsx", "--nl2sql-report=csv", "--nl2sql-report=csv:sub/c.csv")
    result.assert_outcomes(passed=2, failed=3, errors=1)
    written = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
    assert written == ["nl2sql-report.correct.csv", "nl2sql-report.csv", "nl2sql-report.xlsx",
                       "sub/c.correct.csv", "sub/c.csv"]
    assert openpyxl.load_workbook(work / "nl2sql-report.xlsx").sheetnames[:2] == ["Overview", "Statistics"]


def test_regressions_and_fixes_sheet_with_a_baseline(mixed: pytest.Pytester) -> None:
    """Record a baseline, change two predictions: one regression, one fix, shown in their sheet."""
    recorded = mixed.runpytest("--nl2sql-baseline=baseline.json", "--nl2sql-update-baseline")
    recorded.assert_outcomes(passed=2, xfailed=3, errors=1)  # failures recorded; a broken case stays an error
    cases = [dict(c) for c in SQL_CASES]
    cases[0]["predicted"] = "SELECT count(*) + 1 FROM item"  # count: pass -> fail
    cases[2]["predicted"] = "SELECT name FROM item"  # typo: fail -> pass
    write_suite(mixed.path, cases, database="shop.sqlite")
    result = mixed.runpytest("--nl2sql-baseline=baseline.json", "--nl2sql-report=xlsx:r.xlsx",
                             "--nl2sql-report=csv:r.csv")
    result.assert_outcomes(passed=2, failed=1, xfailed=2, errors=1)  # office and gdp: known failures
    wb = openpyxl.load_workbook(mixed.path / "r.xlsx")
    assert wb.sheetnames == ["Overview", "Statistics", "Failures", "Regressions and fixes"]
    header, changes = table(wb["Regressions and fixes"])
    assert header[:3] == ["id", "change", "verdict"]
    assert {i: (r["change"], r["verdict"]) for i, r in changes.items()} == {
        "count": ("regression", "mismatch"), "typo": ("fixed", "pass")}
    assert cell(wb["Regressions and fixes"], "count", "change").fill.fgColor.rgb[-6:] == RED
    assert cell(wb["Regressions and fixes"], "typo", "change").fill.fgColor.rgb[-6:] == GREEN
    _, overview = table(wb["Overview"])
    assert {i: r["baseline"] for i, r in overview.items()} == {
        MEXICO_ID: None, "gdp": "known_failure", "count": "regression", "office": "known_failure",
        "typo": "fixed", "broken": None}  # a broken case is an error whatever the baseline: no status
    _, failures = table(wb["Failures"])
    assert {i: r["baseline"] for i, r in failures.items()} == {
        "gdp": "known_failure", "count": "regression", "office": "known_failure", "broken": None}
    stats = statistics(wb["Statistics"])
    assert stats["regressions"][0] == 1 and stats["fixed"][0] == 1
    with (mixed.path / "r.csv").open(newline="") as f:
        assert {r["id"]: r["baseline"] for r in csv.DictReader(f)}["count"] == "regression"
    assert (mixed.path / "r.correct.csv").read_text().splitlines() == ["instance_id", MEXICO_ID, "typo"]


def test_xlsx_of_a_spider_dev_run(pytester: pytest.Pytester, spider_dir: Path) -> None:
    """A realistic workbook: Spider dev questions with a real system's predictions (first 60)."""
    questions = json.loads((spider_dir / "dev.json").read_text())[:60]
    predictions = (spider_dir / "predictions" / "dail_sql_gpt4.sql").read_text().splitlines()[:60]
    (pytester.path / "dev.json").write_text(json.dumps(questions))
    (pytester.path / "preds.sql").write_text("\n".join(predictions) + "\n")
    (pytester.path / "spider.nl2sql.yaml").write_text(yaml.safe_dump({"source": {
        "format": "spider", "questions": "dev.json", "db_dir": str(spider_dir / "database"),
        "predictions": "preds.sql", "tables": str(spider_dir / "tables.json")}}))
    result = pytester.runpytest("--nl2sql-neighbours=0", "--nl2sql-report=xlsx:r.xlsx", "--nl2sql-report=json:r.json")
    report = read_report(pytester.path / "r.json")
    wb = openpyxl.load_workbook(pytester.path / "r.xlsx")
    _, rows = table(wb["Overview"])
    assert len(rows) == 60 == report["summary"]["total"]
    assert {i: r["verdict"] for i, r in rows.items()} == {i["id"]: i["verdict"] for i in report["items"]}
    stats = statistics(wb["Statistics"])
    assert stats[accuracy_name(report["summary"])][0] == pytest.approx(report["summary"]["accuracy"])
    for level, bucket in report["summary"]["by_hardness"].items():
        assert stats[level][:3] == (bucket["total"], bucket["passed"], bucket["errors"])
    _, failures = table(wb["Failures"])
    assert list(failures) == [i["id"] for i in report["items"] if not i["passed"]]
    assert result.ret == (pytest.ExitCode.OK if not failures else pytest.ExitCode.TESTS_FAILED)


def test_every_report_says_which_run_it_describes(pytester: pytest.Pytester) -> None:
    """`--nl2sql-label` (the model, the prompt) reaches md, csv and xlsx too, with the start and
    the commit: a report read without its command line still says what it is."""
    import csv as csv_module

    openpyxl = pytest.importorskip("openpyxl")
    make_shop(pytester.path)
    write_suite(pytester.path, [{"id": "a", "gold": "SELECT 1", "predicted": "SELECT 1"}], database="shop.sqlite")
    pytester.runpytest("--nl2sql-label=gpt-x prompt 7", "--nl2sql-report=md:r.md", "--nl2sql-report=csv:r.csv",
                       "--nl2sql-report=xlsx:r.xlsx")
    assert "Run: **gpt-x prompt 7** · started " in (pytester.path / "r.md").read_text()
    with open(pytester.path / "r.csv", newline="", encoding="utf-8") as handle:
        (row,) = list(csv_module.DictReader(handle))
    assert row["run_label"] == "gpt-x prompt 7" and row["run_started"].endswith("+00:00")
    sheet = openpyxl.load_workbook(pytester.path / "r.xlsx")["Statistics"]
    pairs = {sheet.cell(r, 1).value: sheet.cell(r, 2).value for r in range(1, sheet.max_row + 1)}
    assert pairs["label (--nl2sql-label)"] == "gpt-x prompt 7" and pairs["engine"] == "per case"
