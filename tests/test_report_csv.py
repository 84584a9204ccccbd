"""The CSV report: one row per case, and the correct instance ids beside it (spec 004)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pytest_nl2sql.reports.csv import COLUMNS, correct_ids_path, write_csv
from pytest_nl2sql.metrics.termselection import score_term_selection
from pytest_nl2sql.vocab import Kind, Verdict
from pytest_nl2sql.judge.result import CaseResult

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
