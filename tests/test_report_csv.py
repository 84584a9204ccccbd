"""The CSV report: one row per case, and the correct instance ids beside it (spec 004)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.termselection import score_term_selection
from pytest_nl2sql.reports.csv import COLUMNS, correct_ids_path, write_csv
from pytest_nl2sql.vocab import Kind, Verdict

SELECTION = [{"dataset_id": "W", "dimensions": [{"dimension_name": "INDICATOR",
                                                  "values": [{"id": "GDP", "name": "gross domestic product"}]}]}]


def make_report() -> dict[str, Any]:
    score = score_term_selection([SELECTION], [SELECTION])
    results = [
        CaseResult("q1", "s.nl2sql.yaml::q1", "s.nl2sql.yaml", 0, Kind.SQL, Verdict.PASS,
                   question="How many, in total?", database="db", gold="SELECT 1", predicted="SELECT 1",
                   hardness="easy", tags=("a", "b"), exact_match=True, latency=0.5),
        CaseResult("q2", "s.nl2sql.yaml::q2", "s.nl2sql.yaml", 1, Kind.SQL, Verdict.MISMATCH,
                   question="Multi\nline", database="db", gold=["SELECT 2", "SELECT 3"],
                   predicted="SELECT 4", hardness="hard", reason="values", exact_match=False,
                   baseline="regression",
                   diff={"pairing": [0], "missing": [[2]], "extra": [[4]], "missing_count": 1, "extra_count": 1}),
        CaseResult("ts", "t.nl2sql.yaml::ts", "t.nl2sql.yaml", 2, Kind.TERM_SELECTION, Verdict.PASS,
                   question="GDP?", predicted=SELECTION, term_selection=score.to_json()),
        CaseResult("broken", "s.nl2sql.yaml::broken", "s.nl2sql.yaml", 3, Kind.SQL, Verdict.GOLD_ERROR,
                   database="gone", gold="SELECT 1", reason="database missing"),
    ]
    return {"summary": {"total": 3, "passed": 2, "errors": 1, "accuracy": 1.0},
            "items": [r.to_json() for r in results]}


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_one_row_per_case(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "report.csv"
    written = write_csv(make_report(), path)
    assert written == [path, tmp_path / "sub" / "report.correct.csv"]
    rows = read(path)
    assert list(rows[0]) == list(COLUMNS)
    assert [r["id"] for r in rows] == ["q1", "q2", "ts", "broken"]
    q1, q2, ts, broken = rows
    assert q1["question"] == "How many, in total?" and q1["tags"] == "a;b"
    assert (q1["passed"], q1["exact_match"], q1["latency"]) == ("true", "true", "0.5")
    assert q2["question"] == "Multi\nline"
    assert json.loads(q2["gold"]) == ["SELECT 2", "SELECT 3"]
    assert (q2["verdict"], q2["reason"], q2["baseline"]) == ("mismatch", "values", "regression")
    assert (q2["missing_rows"], q2["extra_rows"]) == ("1", "1")
    assert ts["kind"] == "term_selection"
    assert json.loads(ts["predicted"]) == SELECTION
    assert (float(ts["macro_precision"]), float(ts["macro_recall"])) == (1.0, 1.0)
    assert broken["exact_match"] == "" and broken["predicted"] == "" and broken["verdict"] == "gold_error"


def test_correct_instance_ids(tmp_path: Path) -> None:
    _, correct = write_csv(make_report(), tmp_path / "report.csv")
    assert correct == correct_ids_path(tmp_path / "report.csv")
    lines = correct.read_text(encoding="utf-8").splitlines()
    assert lines == ["instance_id", "q1", "ts"]


def test_empty_report(tmp_path: Path) -> None:
    path, correct = write_csv({"summary": {}, "items": []}, tmp_path / "r.csv")
    assert path.read_text(encoding="utf-8").strip() == ",".join(COLUMNS)
    assert correct.read_text(encoding="utf-8").strip() == "instance_id"


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ('=HYPERLINK("http://x","click")', '\'=HYPERLINK("http://x","click")'),
        ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "\\x0d=1"),  # a carriage return is shown as an escape, which no spreadsheet reads as a formula
        ("-- a comment\nSELECT 1", "'-- a comment\nSELECT 1"),
        ("SELECT 1 = 1", "SELECT 1 = 1"),  # only the first character matters
        ("-1", "-1"),  # plain numbers are data, not formulas
        ("+0.5", "+0.5"),
        ("-1e-3", "-1e-3"),
    ],
)
def test_formula_injection_is_neutralised(tmp_path: Path, text: str, written: str) -> None:
    """OWASP's CSV injection advice: a cell starting with = + - @ TAB CR gets a quote before it."""
    report = make_report()
    report["items"][1].update(predicted=text, reason=text, tags=[text], question=text)
    path, _ = write_csv(report, tmp_path / "r.csv")
    q2 = read(path)[1]
    assert (q2["predicted"], q2["reason"], q2["tags"], q2["question"]) == (written,) * 4


def test_ids_in_the_correct_file_are_neutralised_too(tmp_path: Path) -> None:
    report = make_report()
    report["items"][0]["id"] = "=1+1"
    _, correct = write_csv(report, tmp_path / "r.csv")
    assert correct.read_text(encoding="utf-8").splitlines()[1] == "'=1+1"


def test_numbers_are_never_prefixed(tmp_path: Path) -> None:
    report = make_report()
    report["items"][0]["latency"] = -0.5  # a clock that went backwards: still a number
    assert read(write_csv(report, tmp_path / "r.csv")[0])[0]["latency"] == "-0.5"


def test_enum_values_are_written_by_their_spelling(tmp_path: Path) -> None:
    from pytest_nl2sql.vocab import BaselineStatus

    report = make_report()
    report["items"][1]["baseline"] = BaselineStatus.REGRESSION  # str() would be 'BaselineStatus.REGRESSION'
    report["items"][1]["verdict"] = Verdict.MISMATCH
    q2 = read(write_csv(report, tmp_path / "r.csv")[0])[1]
    assert (q2["baseline"], q2["verdict"]) == ("regression", "mismatch")


def test_a_lone_surrogate_does_not_crash_the_csv(tmp_path: Path) -> None:
    report = make_report()
    report["items"][1]["predicted"] = "SELECT '\ud800'"
    path, _ = write_csv(report, tmp_path / "r.csv")
    assert read(path)[1]["predicted"] == "SELECT '\\ud800'"
