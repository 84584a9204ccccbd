"""Operations you can trust: the CI gate under the conditions of real CI (issue 29).

A baseline update beside a broken case file, predictor errors against known failures, partial
runs (thresholds, history), cost and latency gates, quarantined cases, a worker killed under
xdist, usage sums that overflow, and McNemar's test on large comparisons.
"""

from __future__ import annotations

import json
import math
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from helpers import make_shop, write_suite
from pytest_nl2sql.gate import baseline as baseline_module
from pytest_nl2sql.gate.baseline import Baseline, BaselineEntry, compare_with_baseline
from pytest_nl2sql.gate.stats import mcnemar_exact

# --- McNemar's test: linear, computed once -------------------------------------------------------


def exact_p(b: int, c: int) -> float:
    """The definition, in integers: 2 * P(X <= min(b, c)) for X ~ Binomial(b + c, 1/2), at most 1."""
    n = b + c
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


@pytest.mark.parametrize(("b", "c"), [(900, 1149), (1000, 1200), (1400, 1600), (0, 3000), (1, 2500),
                                      (1024, 1025), (1700, 1800)])
def test_mcnemar_beyond_the_exact_range_agrees_with_the_definition(b: int, c: int) -> None:
    expected = exact_p(b, c)
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)
    assert mcnemar_exact(c, b) == mcnemar_exact(b, c)


@pytest.mark.parametrize(("b", "c", "expected"), [(0, 5, 0.0625), (1, 9, 0.021484375), (2, 8, 0.109375), (3, 3, 1.0)])
def test_mcnemar_small_counts_are_exact(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == expected


def _baseline_and_items(worse: int, better: int, same: int = 0) -> tuple[Baseline, list[dict[str, Any]]]:
    entries, items = {}, []
    for number in range(worse + better + same):
        case_id = f"q{number}"
        before = number < worse or number >= worse + better  # the worse ones passed, the better ones failed
        now = number >= worse
        entries[("s.nl2sql.yaml", case_id)] = BaselineEntry("pass" if before else "mismatch", before)
        items.append({"id": case_id, "file": "s.nl2sql.yaml", "nodeid": f"s.nl2sql.yaml::{case_id}",
                      "verdict": "pass" if now else "mismatch", "passed": now})
    return Baseline("base.json", entries), items


def test_the_baseline_comparison_computes_mcnemar_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def counted(b: int, c: int) -> float:
        calls.append((b, c))
        return mcnemar_exact(b, c)

    monkeypatch.setattr(baseline_module, "mcnemar_exact", counted)
    comparison = compare_with_baseline(*_baseline_and_items(3, 9, same=4))
    data = comparison.to_json()
    lines = comparison.render_lines()
    assert calls == [(3, 9)]  # the summary, its significance and the terminal lines share one computation
    assert data["p_value"] == mcnemar_exact(3, 9) and any("McNemar exact p = 0.146" in line for line in lines)


def test_a_comparison_of_20000_flips_completes(tmp_path: Path) -> None:
    """`nl2sql compare` on 20,000 flipped cases (145 s before): the p-value of a binomial tail of
    20,000 is a few hundred floating-point terms now. The bound is generous; the work is not."""
    from pytest_nl2sql.gate.compare import compare_files, render_markdown, render_text

    def report(path: Path, passed: list[bool]) -> Path:
        items = [{"id": f"q{n}", "nodeid": f"s.nl2sql.yaml::q{n}", "file": "s.nl2sql.yaml", "verdict": "pass" if ok else "mismatch",
                  "passed": ok} for n, ok in enumerate(passed)]
        path.write_text(json.dumps({"summary": {}, "run": {}, "items": items}))
        return path

    a = report(tmp_path / "a.json", [n % 2 == 0 for n in range(20000)])
    b = report(tmp_path / "b.json", [n % 2 == 1 or n % 10 == 0 for n in range(20000)])
    done: dict[str, Any] = {}

    def compare() -> None:
        comparison = compare_files(a, b)
        done["text"], done["md"], done["json"] = render_text(comparison), render_markdown(comparison), comparison.to_json()

    worker = threading.Thread(target=compare, daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert "json" in done, "nl2sql compare of 20,000 flips did not finish in 120 s"
    worse, better = done["json"]["mcnemar"]["b"], done["json"]["mcnemar"]["c"]
    assert (worse, better) == (8000, 10000)
    z = (abs(worse - better) - 1) / math.sqrt(worse + better)  # the normal approximation agrees at this size
    assert done["json"]["p_value"] == pytest.approx(math.erfc(z / math.sqrt(2)), rel=0.05)


# --- usage that overflows ---------------------------------------------------------------------------

SHOP_CASES = [
    {"id": "a", "question": "How many items?", "gold": "SELECT count(*) FROM item"},
    {"id": "b", "question": "Every name", "gold": "SELECT name FROM item"},
    {"id": "c", "question": "The dearest", "gold": "SELECT max(price) FROM item"},
]


def strict_json(path: Path) -> Any:
    """The file as JSON, refusing the non-standard Infinity and NaN a lenient encoder writes."""
    def refuse(name: str) -> Any:
        raise AssertionError(f"{path.name} holds a bare {name}: not JSON")
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def test_usage_costs_whose_sum_overflows_still_give_every_report(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, SHOP_CASES, database="shop.sqlite")
    pytester.makeconftest("""
def pytest_nl2sql_predict(case):
    return {"sql": "SELECT count(*) FROM item", "usage": {"cost": 1.7e308, "prompt_tokens": 10}}
""")
    result = pytester.runpytest("--nl2sql-report=json:r.json", "--nl2sql-report=html:r.html", "--nl2sql-report=md:r.md",
                                "--nl2sql-report=csv:r.csv", "--nl2sql-report=xlsx:r.xlsx", "--nl2sql-history=h.jsonl")
    result.assert_outcomes(passed=1, failed=2)
    report = strict_json(pytester.path / "r.json")
    usage = report["summary"]["usage"]
    assert usage["cases"] == 3 and usage["total"]["prompt_tokens"] == 30
    assert "cost" not in usage["total"] and usage["not_finite"] == ["cost"]  # said, not a made-up number
    assert usage["mean"]["cost"] == pytest.approx(1.7e308)  # the mean of finite costs is finite
    for name in ("r.html", "r.md", "r.csv", "r.xlsx"):
        assert (pytester.path / name).stat().st_size > 0
    strict_json(pytester.path / "h.jsonl")
    result.stdout.fnmatch_lines(["model usage over 3 case(s): 30 prompt tokens, cost too large to add up*"])


def _result(case_id: str, verdict: str = "pass", **fields: Any) -> Any:
    from pytest_nl2sql.judge.result import CaseResult
    from pytest_nl2sql.vocab import Kind, Verdict

    return CaseResult(id=case_id, nodeid=f"s.nl2sql.yaml::{case_id}", file="s.nl2sql.yaml", position=int(case_id[1:]),
                      kind=Kind.SQL, verdict=Verdict(verdict), **fields)


def _run_info(**changes: Any) -> Any:
    from pytest_nl2sql.gate.run import RunInfo

    return RunInfo(**{"started": "2025-01-01T00:00:00+00:00", "duration_s": 1.0, "label": None, "git_commit": None,
                      "engine": "per case", "complete": True, **changes})


def test_a_figure_or_a_report_that_fails_costs_no_other_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_nl2sql.gate import finish
    from pytest_nl2sql.gate.finish import Gate, finish_run

    def broken_html(fmt: str, payload: Any, path: Path) -> list[Path]:
        if fmt == "html":
            raise ValueError("Out of range float values are not JSON compliant")
        return real_write(fmt, payload, path)

    def broken_summary(results: Any) -> Any:
        raise ZeroDivisionError("a figure's bug")

    real_write = finish.write_report
    monkeypatch.setattr(finish, "write_report", broken_html)
    gate = Gate(rootdir=tmp_path, reports=[("html", tmp_path / "r.html"), ("json", tmp_path / "r.json")])
    finished = finish_run([_result("q0"), _result("q1", "mismatch")], _run_info(), gate)
    assert any("html report" in f and "could not be written: ValueError" in f for f in finished.failures)
    assert len(strict_json(tmp_path / "r.json")["items"]) == 2

    monkeypatch.setattr(finish, "summarize", broken_summary)
    finished = finish_run([_result("q0"), _result("q1", "mismatch")], _run_info(), gate)
    assert any("figures could not be computed (ZeroDivisionError" in f for f in finished.failures)
    summary = strict_json(tmp_path / "r.json")["summary"]
    assert (summary["total"], summary["passed"], summary["accuracy"]) == (2, 1, 0.5)


# --- predictor errors are never excused by the baseline ----------------------------------------------

PREDICTED = {"a": "SELECT count(*) FROM item", "b": "SELECT name FROM item WHERE 0", "c": "SELECT max(price) FROM item"}


def test_a_predictor_error_on_a_known_failure_fails_the_run(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, [{**c, "predicted": PREDICTED[c["id"]]} for c in SHOP_CASES], database="shop.sqlite")
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline").assert_outcomes(passed=2, xfailed=1)
    pytester.makeconftest("""
def pytest_nl2sql_predict(case):
    if case.id == "b":
        raise RuntimeError("model down")
    return None
""")
    result = pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-report=json:r.json", "--nl2sql-retries=0")
    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    item = {i["id"]: i for i in strict_json(pytester.path / "r.json")["items"]}["b"]
    assert item["verdict"] == "predictor_error" and item["baseline"] is None
    result.stdout.fnmatch_lines(["*1 case could not be predicted (predictor_error*never excused by the baseline*",
                                 "  shop.nl2sql.yaml::b"])


def test_merged_shards_do_not_excuse_a_predictor_error_either(tmp_path: Path) -> None:
    from pytest_nl2sql.gate.finish import Gate, finish_run

    known = Baseline(str(tmp_path / "base.json"), {("s.nl2sql.yaml", "q0"): BaselineEntry("mismatch", False)})
    shard_item = _result("q0", "predictor_error", baseline="known_failure")  # as a shard classified it
    finished = finish_run([shard_item], _run_info(), Gate(rootdir=tmp_path, baseline=known))
    assert finished.report["items"][0]["baseline"] is None
    assert finished.summary["baseline"]["unpredicted"] == ["s.nl2sql.yaml::q0"]


# --- quarantine ----------------------------------------------------------------------------------------


def test_quarantined_cases_run_and_are_reported_but_their_failures_fail_nothing(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    cases = [
        {"id": "ok", "question": "How many?", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item",
         "quarantine": "flaky on Tuesdays"},
        {"id": "wrong", "question": "Names", "gold": "SELECT name FROM item", "predicted": "SELECT name FROM item LIMIT 1",
         "quarantine": "ticket 12: the gold is disputed"},
        {"id": "absent", "question": "Players", "gold": "SELECT 1 FROM players", "predicted": "SELECT 1", "database": "wta_1.sqlite"},
        {"id": "plain", "question": "Max", "gold": "SELECT max(price) FROM item", "predicted": "SELECT max(price) FROM item"},
    ]
    write_suite(pytester.path, cases, database="shop.sqlite", quarantine={"wta_1.sqlite": "absent from the download"})
    result = pytester.runpytest("--nl2sql-report=json:r.json", "-rx")
    result.assert_outcomes(passed=2, xfailed=2)  # the absent database is no ERROR, the wrong answer no failure
    assert result.ret == pytest.ExitCode.OK
    report = strict_json(pytester.path / "r.json")
    items = {i["id"]: i for i in report["items"]}
    assert {k: (i["verdict"], i["quarantine"]) for k, i in items.items()} == {
        "ok": ("pass", "flaky on Tuesdays"), "wrong": ("mismatch", "ticket 12: the gold is disputed"),
        "absent": ("gold_error", "absent from the download"), "plain": ("pass", None)}
    assert report["summary"]["quarantined"] == 3 and report["summary"]["errors"] == 1  # verdicts still count as verdicts
    result.stdout.fnmatch_lines(["3 quarantined case(s) (case key `quarantine`)*fails nothing*",
                                 "XFAIL *::wrong - quarantined: ticket 12: the gold is disputed",
                                 "XFAIL at setup of *::absent - quarantined: absent from the download"])


def test_a_quarantined_case_is_no_regression_and_its_verdict_stays_in_the_baseline(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    cases = [{**c, "predicted": PREDICTED[c["id"]]} for c in SHOP_CASES]
    write_suite(pytester.path, cases, database="shop.sqlite")
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    worse = [{**c, "predicted": "SELECT 0"} if c["id"] == "a" else c for c in cases]
    write_suite(pytester.path, [{**c, "quarantine": "being retrained"} if c["id"] == "a" else c for c in worse],
                database="shop.sqlite")
    result = pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, xfailed=2)
    assert result.ret == pytest.ExitCode.OK
    report = strict_json(pytester.path / "r.json")
    assert report["summary"]["baseline"]["regressions"] == [] and report["summary"]["baseline"]["quarantined"] == ["shop.nl2sql.yaml::a"]
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    entry = json.loads((pytester.path / "base.json").read_text())["cases"]["shop.nl2sql.yaml"]["a"]
    assert entry["verdict"] == "mismatch"  # the baseline keeps verdicts, quarantined or not


@pytest.mark.parametrize("value", ["", 3, ["x"], {"shop.sqlite": ""}])
def test_a_quarantine_that_is_not_a_reason_is_an_invalid_case(pytester: pytest.Pytester, value: Any) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, [{**SHOP_CASES[0], "predicted": "SELECT 1", "quarantine": value}], database="shop.sqlite")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*`quarantine` must *"])


def test_merged_shards_excuse_a_quarantined_failure_as_the_run_does(tmp_path: Path) -> None:
    from pytest_nl2sql.cli import gate_fails
    from pytest_nl2sql.gate.finish import Gate, finish_run

    results = [_result("q0"), _result("q1", "gold_error", quarantine="wta_1 is not in the download"),
               _result("q2", "mismatch", quarantine="disputed gold")]
    finished = finish_run(results, _run_info(), Gate(rootdir=tmp_path))
    assert not gate_fails(finished, update_baseline=False) and finished.summary["quarantined"] == 2
    finished = finish_run([*results, _result("q3", "mismatch")], _run_info(), Gate(rootdir=tmp_path))
    assert gate_fails(finished, update_baseline=False)


# --- a baseline update never drops what it did not judge -----------------------------------------------

FIFTEEN = [{"id": f"q{n}", "question": f"Item {n}?", "gold": f"SELECT name FROM item WHERE id = {n % 5 + 1}",
            "predicted": f"SELECT name FROM item WHERE id = {(n % 5 + 1) if n % 3 else 9}"} for n in range(15)]


def baseline_cases(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())["cases"]


def test_an_update_keeps_the_entries_of_a_case_file_that_cannot_be_read(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    suite = write_suite(pytester.path, FIFTEEN, database="shop.sqlite")
    other = write_suite(pytester.path, [{**SHOP_CASES[0], "predicted": "SELECT count(*) FROM item"}], name="other.nl2sql.yaml",
                        database="shop.sqlite")
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline").assert_outcomes(passed=11, xfailed=5)
    before = baseline_cases(pytester.path / "base.json")
    assert len(before["shop.nl2sql.yaml"]) == 15

    suite.write_text(suite.read_text().replace("question: Item 3?", "question: 'Item 3?"))  # an unclosed quote
    other.write_text(other.read_text().replace("predicted: SELECT count(*) FROM item", "predicted: SELECT count(*) + 1 FROM item"))
    result = pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the broken file is an error, as ever
    after = baseline_cases(pytester.path / "base.json")
    assert after["shop.nl2sql.yaml"] == before["shop.nl2sql.yaml"]  # not one `case-0000: gold_error`
    assert after["other.nl2sql.yaml"]["a"]["verdict"] == "mismatch"  # the file that could be read is updated
    result.stdout.fnmatch_lines(["baseline: shop.nl2sql.yaml could not be read (shop.nl2sql.yaml:*): "
                                 "its 15 entries are kept as they were*"])

    # a case of a file that cannot be read keeps its entry too (an unknown key: the file's other cases ran)
    suite.write_text(suite.read_text().replace("question: 'Item 3?", "question: Item 3?").replace(
        "question: Item 4?", "question: Item 4?\n  gold_sql: SELECT 1"))
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline").assert_outcomes(passed=9, xfailed=6, errors=1)
    assert baseline_cases(pytester.path / "base.json")["shop.nl2sql.yaml"] == before["shop.nl2sql.yaml"]


def test_an_update_keeps_the_entries_of_cases_deselected_or_not_collected(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, FIFTEEN, database="shop.sqlite")
    write_suite(pytester.path, [{**SHOP_CASES[0], "predicted": "SELECT count(*) FROM item"}], name="other.nl2sql.yaml",
                database="shop.sqlite")
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    before = baseline_cases(pytester.path / "base.json")
    for args in (["-k", "q1"], ["other.nl2sql.yaml"], ["-m", "nothing"]):
        result = pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline", *args)
        assert baseline_cases(pytester.path / "base.json") == before, args
    result = pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline", "-k", "q1")
    result.stdout.fnmatch_lines(["baseline written: *base.json (6 cases; 10 entries of cases not judged in this run kept as they were)"])


# --- partial runs: thresholds, history, baseline updates ------------------------------------------------


@pytest.fixture
def three(pytester: pytest.Pytester) -> pytest.Pytester:
    """Three cases, one wrong (b), thresholds in the ini file."""
    make_shop(pytester.path)
    write_suite(pytester.path, [{**c, "predicted": PREDICTED[c["id"]]} for c in SHOP_CASES], database="shop.sqlite")
    pytester.makeini("[pytest]\nnl2sql_fail_under = 0.9\n")
    return pytester


@pytest.mark.parametrize("selection", [["-k", "not b"], ["shop.nl2sql.yaml::a", "shop.nl2sql.yaml::c"], ["-n", "2", "-k", "not b"]])
def test_a_partial_run_is_not_gated_on_the_suite_s_thresholds(three: pytest.Pytester, selection: list[str]) -> None:
    full = three.runpytest()
    assert full.ret == pytest.ExitCode.TESTS_FAILED
    full.stdout.fnmatch_lines(["nl2sql: execution accuracy 0.667 (2/3) is below --nl2sql-fail-under=0.9"])
    partial = three.runpytest(*selection)
    partial.assert_outcomes(passed=2)
    assert partial.ret == pytest.ExitCode.OK, partial.stdout.str()
    partial.stdout.fnmatch_lines(["thresholds not applied: partial run (2 of 3 cases)*"])


def test_last_failed_is_a_partial_run(three: pytest.Pytester) -> None:
    three.makeini("[pytest]\nnl2sql_fail_under = 0.5\n")
    three.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    before = baseline_cases(three.path / "base.json")
    assert three.runpytest().ret == pytest.ExitCode.TESTS_FAILED  # b fails: --lf will run it alone
    rerun = three.runpytest("--lf", "--nl2sql-report=json:r.json", "--nl2sql-history=h.jsonl")
    rerun.assert_outcomes(failed=1)
    rerun.stdout.fnmatch_lines(["thresholds not applied: partial run (1 of 3 cases)*"])  # 0/1 is below 0.5: not the suite's figure
    assert "below --nl2sql-fail-under" not in rerun.stdout.str()
    assert strict_json(three.path / "r.json")["run"]["partial"] is True
    update = three.runpytest("--lf", "--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    update.stdout.fnmatch_lines(["baseline written: *(1 cases; 2 entries of cases not judged in this run kept as they were)"])
    assert baseline_cases(three.path / "base.json") == before  # a and c were not judged: kept, not forgotten


def test_the_history_marks_a_partial_run_and_the_trend_leaves_it_out(three: pytest.Pytester) -> None:
    three.runpytest("--nl2sql-history=h.jsonl", "--nl2sql-label=full")
    partial = three.runpytest("--nl2sql-history=h.jsonl", "--nl2sql-label=some", "-k", "not b and not c", "--nl2sql-report=md:r.md")
    partial.stdout.fnmatch_lines(["history: *h.jsonl (+1 run, marked partial: 1 of 3 cases; the trend leaves it out)"])
    lines = [json.loads(line) for line in (three.path / "h.jsonl").read_text().splitlines()]
    assert [(entry["run"]["label"], entry["run"]["partial"], entry["summary"]["total"]) for entry in lines] == [
        ("full", False, 3), ("some", True, 1)]
    three.runpytest("--nl2sql-history=h.jsonl", "--nl2sql-label=again", "--nl2sql-report=md:r.md")
    trend = (three.path / "r.md").read_text()
    assert "full" in trend and "again" in trend and "some" not in trend


# --- gates on cost and latency ---------------------------------------------------------------------------


def test_budgets_on_cost_and_latency_are_checked_from_the_summary() -> None:
    from pytest_nl2sql.gate.thresholds import check_budgets, parse_budget

    summary = {"usage": {"cases": 3, "total": {"cost": 1.2}, "mean": {"cost": 0.4}},
               "latency": {"count": 3, "total": 0.9, "p50": 0.2, "p95": 0.48}}
    assert check_budgets(summary, max_cost=2.0, max_latency_p95=0.5) == ([], [])
    failures, notes = check_budgets(summary, max_cost=1.0, max_latency_p95=0.25)
    assert failures == ["nl2sql: model cost 1.2000 (the usage 3 cases reported) is above --nl2sql-max-cost=1",
                        "nl2sql: predictor latency p95 0.480s (over 3 cases) is above --nl2sql-max-latency-p95=0.25"]
    overflow = {"usage": {"cases": 2, "total": {}, "mean": {"cost": 1.7e308}, "not_finite": ["cost"]}, "latency": None}
    failures, notes = check_budgets(overflow, max_cost=1e9, max_latency_p95=1.0)
    assert failures == ["nl2sql: model cost too large to add up (the usage 2 cases reported) is above --nl2sql-max-cost=1e+09"]
    assert notes == ["--nl2sql-max-latency-p95 not checked: no case was answered by the predictor hook (nothing was timed)"]
    assert check_budgets({"usage": None}, max_cost=1.0, max_latency_p95=None)[1] == [
        "--nl2sql-max-cost not checked: no case reported its cost (the hook's usage)"]
    assert parse_budget("0.5", "--nl2sql-max-cost") == 0.5
    for bad in ("", "abc", "-1", "inf", "nan", "$5"):
        with pytest.raises(ValueError, match="--nl2sql-max-cost"):
            parse_budget(bad, "--nl2sql-max-cost")


def test_a_run_over_its_cost_or_latency_budget_fails(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, SHOP_CASES, database="shop.sqlite")
    pytester.makeconftest("""
import time
ANSWERS = {"a": "SELECT count(*) FROM item", "b": "SELECT name FROM item", "c": "SELECT max(price) FROM item"}
def pytest_nl2sql_predict(case):
    time.sleep(0.05)
    return {"sql": ANSWERS[case.id], "usage": {"cost": 0.4}}
""")
    within = pytester.runpytest("--nl2sql-max-cost=2", "--nl2sql-max-latency-p95=60")
    within.assert_outcomes(passed=3)
    assert within.ret == pytest.ExitCode.OK
    over = pytester.runpytest("--nl2sql-max-cost=1", "--nl2sql-max-latency-p95=0.01")
    over.assert_outcomes(passed=3)
    assert over.ret == pytest.ExitCode.TESTS_FAILED
    over.stdout.fnmatch_lines(["nl2sql: model cost 1.2000 (the usage 3 cases reported) is above --nl2sql-max-cost=1",
                               "nl2sql: predictor latency p95 0.* (over 3 cases) is above --nl2sql-max-latency-p95=0.01"])
    pytester.makeini("[pytest]\nnl2sql_max_cost = 1\nnl2sql_max_latency_p95 = 0.01\n")
    assert pytester.runpytest().ret == pytest.ExitCode.TESTS_FAILED  # from the ini file too
    partial = pytester.runpytest("-k", "not b")
    assert partial.ret == pytest.ExitCode.OK  # 0.8 over two cases is no budget's figure
    partial.stdout.fnmatch_lines(["thresholds not applied: partial run (2 of 3 cases)*"])
    bad = pytester.runpytest("--nl2sql-max-cost=lots")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--nl2sql-max-cost*lots*"])


# --- a worker killed while judging a case -------------------------------------------------------------


def test_a_case_whose_xdist_worker_died_is_in_every_report_and_fails_the_run(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    cases = [{**c, "predicted": PREDICTED[c["id"]], "tags": ["t"]} for c in SHOP_CASES]
    write_suite(pytester.path, cases, database="shop.sqlite")
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline")  # every case judged
    before = baseline_cases(pytester.path / "base.json")
    pytester.makeconftest("""
import os, signal
def pytest_nl2sql_predict(case):
    if case.id == "b":
        os.kill(os.getpid(), signal.SIGKILL)  # the OOM killer, a crashing client library
    return None  # the case's stored prediction
""")
    # one run under xdist (a worker dies, another takes over) both reports and updates the baseline
    result = pytester.runpytest("-n", "2", "--nl2sql-report=json:r.json", "--nl2sql-report=csv:r.csv",
                                "--nl2sql-report=html:r.html", "--nl2sql-report=md:r.md",
                                "--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = strict_json(pytester.path / "r.json")
    items = {i["id"]: i for i in report["items"]}
    assert [i["id"] for i in report["items"]] == ["a", "b", "c"]  # every case, in collection order
    died = items["b"]
    assert died["verdict"] == "gold_error" and died["passed"] is False
    assert "could not be judged: the worker process judging it died" in died["reason"]
    assert (died["question"], died["database"], died["tags"]) == ("Every name", "shop.sqlite", ["t"])  # read from its case file
    summary = report["summary"]
    assert (summary["total"], summary["errors"], summary["by_verdict"].get("gold_error")) == (3, 1, 1)
    assert summary["by_tag"]["t"]["errors"] == 1
    csv_ids = [line.split(",")[0] for line in (pytester.path / "r.csv").read_text().splitlines()[1:]]
    assert csv_ids == ["a", "b", "c"]
    assert "worker process judging it died" in (pytester.path / "r.html").read_text()
    result.stdout.fnmatch_lines(["errors: 1 case(s) could not be judged*"])
    result.stdout.fnmatch_lines(["1 case(s) could not be judged (their worker died): their earlier baseline entries are kept"])
    assert baseline_cases(pytester.path / "base.json") == before  # b was not judged: its entry is not a gold_error now


def test_a_case_whose_own_usage_is_beyond_floating_point_is_not_left_out_of_the_total() -> None:
    from pytest_nl2sql.metrics.summary import summarize_usage

    usage = summarize_usage([{"cost": 1.0}, {"cost": math.inf}])  # a case's answers added up past 1.8e308
    assert "cost" not in usage["total"] and usage["not_finite"] == ["cost"] and usage["mean"]["cost"] == 1.0
    assert summarize_usage([{"cost": 1.0}, {"cost": 2.0}])["total"]["cost"] == 3.0
