"""Aggregation of results into the summary, and the summary's terminal lines."""

from __future__ import annotations

import pytest

from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.summary import build_report, summarize
from pytest_nl2sql.plugin.terminal import summary_lines
from pytest_nl2sql.vocab import Kind, Verdict


def result(i: int, verdict: Verdict, **kw: object) -> CaseResult:
    fields = {"id": f"c{i}", "nodeid": f"s.yaml::c{i}", "file": "s.yaml", "position": i, "kind": Kind.SQL, "verdict": verdict}
    return CaseResult(**{**fields, **kw})


RESULTS = [
    result(3, Verdict.MISMATCH, hardness="hard", tags=("joins",), database="a", exact_match=False),
    result(0, Verdict.PASS, hardness="easy", tags=("joins", "agg"), database="a", exact_match=True),
    result(1, Verdict.PASS, hardness="extra", database="b", latency=0.5),
    result(2, Verdict.GOLD_ERROR, hardness="easy", database="missing"),
    result(4, Verdict.PRED_ERROR, hardness="medium", database="b", latency=1.5),
]


def test_accuracy_leaves_errors_out_and_counts_them() -> None:
    s = summarize(RESULTS)
    assert (s["total"], s["passed"], s["errors"], s["failed"]) == (5, 2, 1, 2)
    assert s["accuracy"] == pytest.approx(2 / 4)
    assert s["errors_by_database"] == {"missing": 1}
    assert s["by_verdict"] == {"pass": 2, "mismatch": 1, "pred_error": 1, "gold_error": 1}


def test_buckets_in_hardness_order_with_their_errors() -> None:
    s = summarize(RESULTS)
    assert list(s["by_hardness"]) == ["easy", "medium", "hard", "extra"]
    assert s["by_hardness"]["easy"] == {"total": 2, "passed": 1, "errors": 1, "accuracy": 1.0, "accuracy_ci": [0.206549, 1.0]}
    assert s["by_tag"]["joins"] == {"total": 2, "passed": 1, "errors": 0, "accuracy": 0.5, "accuracy_ci": [0.094531, 0.905469]}
    assert s["by_database"]["b"]["accuracy"] == 0.5


def test_exact_match_and_latency() -> None:
    s = summarize(RESULTS)
    assert s["exact_match"] == 0.5 and (s["exact_match_passed"], s["exact_match_total"]) == (1, 2)
    assert s["latency"] == {"count": 2, "total": 2.0, "p50": 1.0, "p95": pytest.approx(1.45)}


def test_report_items_in_collection_order() -> None:
    report = build_report(RESULTS, summarize(RESULTS))
    assert [i["id"] for i in report["items"]] == ["c0", "c1", "c2", "c3", "c4"]


def test_term_selection_cases_are_not_in_execution_accuracy() -> None:
    ts = {"macro_precision": 0.5, "macro_recall": 1.0, "by_dimension": {}, "not_in_target": []}
    s = summarize([*RESULTS, result(9, Verdict.MISMATCH, kind=Kind.TERM_SELECTION, term_selection=ts)])
    assert (s["total"], s["passed"]) == (5, 2)
    assert s["term_selection"]["macro_precision"] == 0.5


def test_summary_lines_name_the_metric_first() -> None:
    lines = summary_lines(summarize(RESULTS))
    assert lines[0] == "execution accuracy 2/4 = 50.0%"
    assert "exact set match 1/2 = 50.0%" in lines
    assert any(line.startswith("errors: 1 case(s) could not be judged") and "missing (1)" in line for line in lines)
    assert "  easy    1/1 = 100.0%         [95% CI 20.7-100.0%]  (1 error)" in lines
    assert lines[1] == "  [95% CI 15.0-85.0%] (Wilson score interval over the judged SQL cases)"
