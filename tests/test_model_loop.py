"""The model in the loop, end to end: Markdown answers, retries of transient failures, reported
usage and repeated answers (pass@k, consistency), their recording and replay, the gate's messages
when the model could not be asked, and the JSON report with and without xdist.

One stand-in model (`STUB`) does all of it: it answers in Markdown, is rate limited twice on one
case before it answers, is unreachable on another, reports its usage, and is asked three times per
case. Its figures, worked by hand in `test_the_stub_model_end_to_end`, are the ones quoted in the
README."""

from __future__ import annotations

import csv
import json
from typing import Any

import pytest

from helpers import make_shop, read_report, write_jsonl, write_suite

CASES: list[dict[str, Any]] = [
    {"id": "count", "question": "How many items?", "gold": "SELECT count(*) FROM item"},
    {"id": "cheap", "question": "Cheap items", "gold": "SELECT name FROM item WHERE price < 2"},
    {"id": "flaky", "question": "The highest price", "gold": "SELECT max(price) FROM item"},
    {"id": "down", "question": "The lowest price", "gold": "SELECT min(price) FROM item"},
    {"id": "wrong", "question": "Items per category", "gold": "SELECT category, count(*) FROM item GROUP BY category"},
]

STUB = '''
from collections import Counter

CALLS = Counter()


class RateLimited(Exception):
    status_code = 429


ANSWERS = {
    # prose around one ```sql fence
    "count": ["Sure! Here is the query:\\n\\n```sql\\nSELECT count(id) FROM item\\n```\\nIt counts the items."] * 3,
    # right, wrong (<= takes the pad at 2.0), right
    "cheap": ["```sql\\nSELECT name FROM item WHERE price < 2\\n```",
              "```sql\\nSELECT name FROM item WHERE price <= 2\\n```",
              "```sql\\nSELECT name FROM item WHERE price < 2\\n```"],
    # a bare fence
    "flaky": ["```\\nSELECT max(price) FROM item\\n```"] * 3,
    "wrong": ["```sql\\nSELECT category FROM item GROUP BY category\\n```"] * 3,
}


def pytest_nl2sql_predict(case):
    CALLS[case.id] += 1
    if case.id == "down":
        raise ConnectionError("model endpoint unreachable")
    if case.id == "flaky" and CALLS[case.id] <= 2:
        raise RateLimited("429 Too Many Requests")
    return {"sql": ANSWERS[case.id][case.sample], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "cost": 0.0005}}
'''

LOOP = ("--nl2sql-repeat=3", "--nl2sql-retries=2", "--nl2sql-retry-wait=0.001", "--nl2sql-neighbours=0")
RUN_SPECIFIC = ("latency", "execution_time")


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    pytester.makeconftest(STUB)
    return pytester


def _items(path: Any) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in read_report(path)["items"]}


def test_the_stub_model_end_to_end(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*LOOP, "--nl2sql-report=json:r.json", "--nl2sql-report=md:r.md", "--nl2sql-report=csv:r.csv")
    result.assert_outcomes(passed=3, failed=2)
    report = read_report(suite.path / "r.json")
    items = {item["id"]: item for item in report["items"]}
    assert {k: i["verdict"] for k, i in items.items()} == {
        "count": "pass", "cheap": "pass", "flaky": "pass", "down": "predictor_error", "wrong": "mismatch"}

    # 1. Markdown: the SQL inside is the prediction; the answer as given is kept when it differs
    assert items["count"]["predicted"] == "SELECT count(id) FROM item"
    assert items["count"]["raw_prediction"].startswith("Sure! Here is the query:\n\n```sql\n")
    assert items["flaky"]["predicted"] == "SELECT max(price) FROM item"
    assert items["down"]["raw_prediction"] is None

    # 2. retries: flaky is rate limited twice, then answers (3 calls) and is asked twice more;
    # down fails three times per answer; the others answer at once
    assert {k: i["attempts"] for k, i in items.items()} == {"count": 3, "cheap": 3, "flaky": 5, "down": 9, "wrong": 3}
    assert items["down"]["reason"] == "ConnectionError: model endpoint unreachable (after 3 attempts)"

    # 3. usage, summed over each case's answers
    assert items["count"]["usage"] == {"prompt_tokens": 300, "completion_tokens": 60, "cost": 0.0015}
    assert items["down"]["usage"] is None
    summary = report["summary"]
    assert summary["usage"] == {"cases": 4, "total": {"prompt_tokens": 1200, "completion_tokens": 240, "cost": 0.006},
                                "mean": {"prompt_tokens": 300.0, "completion_tokens": 60.0, "cost": 0.0015}}

    # 4. three answers per case: the first decides the verdict
    assert items["cheap"]["repeats"] == {
        "k": 3, "passed": 2, "verdicts": ["pass", "mismatch", "pass"],
        "predicted": ["SELECT name FROM item WHERE price < 2", "SELECT name FROM item WHERE price <= 2",
                      "SELECT name FROM item WHERE price < 2"]}
    assert {k: i["repeats"]["passed"] for k, i in items.items()} == {"count": 3, "cheap": 2, "flaky": 3, "down": 0, "wrong": 0}
    # pass@k over 5 cases with c = 3, 2, 3, 0, 0 right answers of n = 3
    assert summary["pass_at_k"] == pytest.approx({"1": (1 + 2 / 3 + 1) / 5, "2": 3 / 5, "3": 3 / 5})
    assert summary["consistency"] == 4 / 5  # cheap's answers disagree

    # predictor errors are failures, counted apart
    assert (summary["passed"], summary["failed"], summary["predictor_errors"]) == (3, 2, 1)
    assert summary["accuracy"] == 3 / 5 and summary["answered_accuracy"] == 3 / 4
    result.stdout.fnmatch_lines([
        "SQL cases: 5 (3 passed, 2 failed, 0 errors)",
        "  1 of the 2 failed could not be predicted (predictor_error: *), not wrong answers; "
        "accuracy over the 4 answered: 3/4 = 75.0%",
        "model usage over 4 case(s): 1,200 prompt + 240 completion tokens, cost 0.0060 "
        "(per case 300.0 prompt + 60.0 completion tokens, cost 0.0015)",
        "repeated answers (3 per case, judged SQL cases): pass@1 53.3%, pass@2 60.0%, pass@3 60.0%; "
        "consistency 80.0% (all 3 answers got the same verdict)",
    ])
    result.stdout.fnmatch_lines(["*nl2sql case down*predictor_error*", "*ConnectionError: model endpoint unreachable*"])
    result.stdout.fnmatch_lines(["*nl2sql case wrong*mismatch*",
                                 "repeated answers (--nl2sql-repeat=3): 0 of 3 passed (mismatch, mismatch, mismatch); "
                                 "the verdict is the first answer's"])

    # the md and csv reports carry the same figures
    md = (suite.path / "r.md").read_text()
    for expected in ("**1 case could not be predicted** (`predictor_error`", "over the 4 answered: 3/4",
                     "model usage over 4 cases: prompt tokens 1,200 (300.0 per case), completion tokens 240 (60.0 per case), "
                     "cost 0.0060 (0.0015 per case)", "repeated answers: pass@1 53.3%, pass@2 60.0%, pass@3 60.0%; consistency 80.0%"):
        assert expected in md, expected
    rows = {row["id"]: row for row in csv.DictReader((suite.path / "r.csv").read_text().splitlines())}
    assert (rows["flaky"]["attempts"], rows["flaky"]["prompt_tokens"], rows["flaky"]["cost"]) == ("5", "300", "0.0015")
    assert (rows["cheap"]["repeats_k"], rows["cheap"]["repeats_passed"]) == ("3", "2")
    assert rows["count"]["raw_prediction"].startswith("Sure!") and rows["count"]["predicted"] == "SELECT count(id) FROM item"


def test_a_recording_keeps_every_answer_and_replays_them(suite: pytest.Pytester) -> None:
    suite.runpytest(*LOOP, "--nl2sql-record=rec.jsonl", "--nl2sql-report=json:live.json")
    records = {r["id"]: r for r in map(json.loads, (suite.path / "rec.jsonl").read_text().splitlines())}
    assert records["cheap"]["predicted"] == "SELECT name FROM item WHERE price < 2"
    assert records["cheap"]["raw_prediction"] == "```sql\nSELECT name FROM item WHERE price < 2\n```"
    assert [s["predicted"] for s in records["cheap"]["samples"]] == [
        "SELECT name FROM item WHERE price < 2", "SELECT name FROM item WHERE price <= 2", "SELECT name FROM item WHERE price < 2"]
    assert records["down"]["samples"] == [{"error": "ConnectionError: model endpoint unreachable (after 3 attempts)"}] * 3

    suite.makeconftest("def pytest_nl2sql_predict(case):\n    raise RuntimeError('the model was called for ' + case.id)\n")
    replay = suite.runpytest(*LOOP, "--nl2sql-predictions=rec.jsonl", "--nl2sql-report=json:replay.json")
    replay.assert_outcomes(passed=3, failed=2)
    assert "the model was called" not in replay.stdout.str()
    live, replayed = _items(suite.path / "live.json"), _items(suite.path / "replay.json")
    for case_id, item in live.items():
        for field in ("verdict", "predicted", "raw_prediction", "repeats", "reason"):
            assert replayed[case_id][field] == item[field], (case_id, field)
        # the model was not asked; the usage it reported was recorded with its answers
        assert (replayed[case_id]["attempts"], replayed[case_id]["usage"]) == (0, item["usage"])
    assert read_report(suite.path / "replay.json")["summary"]["pass_at_k"] == read_report(suite.path / "live.json")["summary"]["pass_at_k"]


def test_the_report_is_the_same_with_and_without_xdist(suite: pytest.Pytester) -> None:
    """And with the model asked ahead in threads (`--nl2sql-concurrency`)."""
    suite.runpytest(*LOOP, "--nl2sql-report=json:plain.json").assert_outcomes(passed=3, failed=2)
    suite.runpytest(*LOOP, "-n", "2", "--nl2sql-report=json:xdist.json").assert_outcomes(passed=3, failed=2)

    def comparable(name: str) -> dict[str, Any]:
        report = read_report(suite.path / name)
        for item in report["items"]:
            for key in RUN_SPECIFIC:
                item.pop(key)
            item.get("extra", {}).pop("traceback", None)  # the frames name the process's own files
        report["summary"].pop("latency")
        report["summary"].pop("execution_time")
        report.pop("run")
        return report

    suite.runpytest(*LOOP, "--nl2sql-concurrency=3", "--nl2sql-report=json:threads.json").assert_outcomes(passed=3, failed=2)
    plain = comparable("plain.json")
    assert plain == comparable("xdist.json") == comparable("threads.json")
    assert plain["summary"]["pass_at_k"] and plain["summary"]["usage"]


def test_an_outage_is_not_read_as_a_regression(suite: pytest.Pytester) -> None:
    good = STUB.replace('if case.id == "down":', 'if case.id == "never":').replace('"wrong": [', '"down": ["SELECT min(price) FROM item"] * 3,\n    "wrong": [')
    suite.makeconftest(good)
    suite.runpytest("--nl2sql-neighbours=0", "--nl2sql-retry-wait=0", "--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    suite.makeconftest(STUB)  # now `down` cannot be reached
    result = suite.runpytest("--nl2sql-neighbours=0", "--nl2sql-retry-wait=0", "--nl2sql-baseline=base.json",
                             "--nl2sql-fail-under=0.8", "--nl2sql-report=json:r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # nobody vouches for an unanswered case
    result.stdout.fnmatch_lines([
        "1 case could not be predicted (predictor_error: *): not wrong answers, so neither regressions nor known failures here*",
        "  shop.nl2sql.yaml::down",
        "McNemar exact p = 1: no case changed its verdict",
        "nl2sql: execution accuracy 0.600 (3/5) is below --nl2sql-fail-under=0.8; 1 of the 2 failing cases could not be "
        "predicted (predictor_error), not wrong answers (over the 4 answered: 3/4)",
    ])
    assert "1 regression" not in result.stdout.str()
    result.stdout.fnmatch_lines(["baseline: not a regression: this case passed in the baseline and could not be predicted now*"])
    report = read_report(suite.path / "r.json")
    baseline = report["summary"]["baseline"]
    assert baseline["unpredicted"] == ["shop.nl2sql.yaml::down"] and baseline["regressions"] == []
    assert baseline["paired"] == 4
    assert {i["id"]: i["baseline"] for i in report["items"]}["down"] is None  # in no report's list of regressions

    # an update during the outage keeps what the baseline knew of the case
    before = json.loads((suite.path / "base.json").read_text())["cases"]["shop.nl2sql.yaml"]["down"]
    update = suite.runpytest("--nl2sql-neighbours=0", "--nl2sql-retry-wait=0", "--nl2sql-baseline=base.json",
                             "--nl2sql-update-baseline")
    update.stdout.fnmatch_lines(["1 case(s) could not be predicted (predictor_error): their earlier baseline entries are kept"])
    assert json.loads((suite.path / "base.json").read_text())["cases"]["shop.nl2sql.yaml"]["down"] == before
    assert before["verdict"] == "pass"


def test_only_transient_failures_are_asked_again(suite: pytest.Pytester) -> None:
    suite.makeconftest('''
from collections import Counter
CALLS = Counter()

class BadRequest(Exception):
    status_code = 400

def pytest_nl2sql_predict(case):
    CALLS[case.id] += 1
    if case.id == "count":
        raise BadRequest("400 the prompt is too long")
    if case.id == "cheap":
        raise TimeoutError("read timed out")
    if case.id == "flaky" and CALLS[case.id] == 1:
        raise TimeoutError("read timed out")
    return "SELECT 1"
''')
    suite.runpytest("-k", "count or cheap or flaky", "--nl2sql-neighbours=0", "--nl2sql-retries=1", "--nl2sql-retry-wait=0",
                    "--nl2sql-report=json:r.json")
    items = _items(suite.path / "r.json")
    assert (items["count"]["attempts"], items["count"]["reason"]) == (1, "conftest.BadRequest: 400 the prompt is too long")
    assert (items["cheap"]["attempts"], items["cheap"]["reason"]) == (2, "TimeoutError: read timed out (after 2 attempts)")
    assert (items["flaky"]["attempts"], items["flaky"]["verdict"]) == (2, "mismatch")
    assert items["flaky"]["repeats"] is None  # not asked to repeat


def test_markdown_answers_from_a_predictions_file(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES[:4], database="shop.sqlite")
    write_jsonl(pytester.path / "preds.jsonl", [
        {"id": "count", "predicted": "```sql\nSELECT count(*) FROM item\n```"},
        {"id": "cheap", "predicted": "Either\n```\nSELECT 1\n```\nor\n```\nSELECT 2\n```"},
        {"id": "flaky", "predicted": "```sql\n```"},
        {"id": "down", "predicted": "SELECT min(price) FROM item"},
    ])
    pytester.runpytest("--nl2sql-neighbours=0", "--nl2sql-predictions=preds.jsonl", "--nl2sql-report=json:r.json")
    items = _items(pytester.path / "r.json")
    assert (items["count"]["verdict"], items["count"]["predicted"]) == ("pass", "SELECT count(*) FROM item")
    assert items["count"]["raw_prediction"] == "```sql\nSELECT count(*) FROM item\n```"
    assert items["cheap"]["verdict"] == "pred_error" and "ambiguous" in items["cheap"]["reason"]
    assert items["cheap"]["predicted"].startswith("Either") and items["cheap"]["raw_prediction"] is None
    assert (items["flaky"]["verdict"], items["flaky"]["reason"]) == ("no_prediction", "the answer's fenced code block is empty")
    assert (items["down"]["verdict"], items["down"]["raw_prediction"], items["down"]["attempts"]) == ("pass", None, 0)


def test_repeats_of_a_stored_prediction_are_the_same_answer(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, [{**CASES[1], "predicted": "SELECT name FROM item WHERE price <= 2"}], database="shop.sqlite")
    pytester.runpytest("--nl2sql-repeat=4", "--nl2sql-report=json:r.json").assert_outcomes(failed=1)
    report = read_report(pytester.path / "r.json")
    assert report["items"][0]["repeats"]["verdicts"] == ["mismatch"] * 4
    assert report["summary"]["pass_at_k"] == {"1": 0.0, "2": 0.0, "3": 0.0, "4": 0.0} and report["summary"]["consistency"] == 1.0


def test_each_repeated_answer_is_judged_on_the_neighbour_databases_too(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, [{"id": "from", "question": "Items from 2.5 up", "gold": "SELECT name FROM item WHERE price >= 2.5"}],
                database="shop.sqlite")
    # `price > 2.5` gives the gold's rows on shop.sqlite (no price is 2.5): only a neighbour tells them apart
    pytester.makeconftest('''
def pytest_nl2sql_predict(case):
    return ["SELECT name FROM item WHERE price >= 2.5", "SELECT name FROM item WHERE price > 2.5"][case.sample]
''')
    pytester.runpytest("--nl2sql-repeat=2", "--nl2sql-report=json:r.json").assert_outcomes(passed=1)
    repeats = read_report(pytester.path / "r.json")["items"][0]["repeats"]
    assert repeats["verdicts"] == ["pass", "mismatch"]


@pytest.mark.parametrize("option, complaint", [
    ("--nl2sql-repeat=0", "--nl2sql-repeat must be from 1 to 100"),
    ("--nl2sql-retries=-1", "--nl2sql-retries must be 0"),
    ("--nl2sql-retry-wait=soon", "--nl2sql-retries / --nl2sql-retry-wait / --nl2sql-repeat"),
])
def test_bad_values_are_usage_errors(pytester: pytest.Pytester, option: str, complaint: str) -> None:
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{complaint}*"])


def test_the_options_are_ini_options_too(suite: pytest.Pytester) -> None:
    suite.makeini("[pytest]\nnl2sql_repeat = 2\nnl2sql_retries = 3\nnl2sql_retry_wait = 0\nnl2sql_neighbours = 0\n")
    suite.runpytest("-k", "down", "--nl2sql-report=json:r.json")
    item = read_report(suite.path / "r.json")["items"][0]
    assert (item["attempts"], item["repeats"]["k"]) == (8, 2)
