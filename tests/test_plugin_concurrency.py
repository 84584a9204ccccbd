"""`--nl2sql-concurrency=N`: predictions asked ahead, N at once; verdicts and reports as with N=1."""

from __future__ import annotations

import pytest

from helpers import make_shop, read_report, write_suite

CASES = [{"id": f"c{n:02d}", "question": f"question {n}", "gold": "SELECT count(*) FROM item"} for n in range(12)]

PLAIN_HOOK = """
import threading, time
CALLS = []
def pytest_nl2sql_predict(case):
    CALLS.append(threading.current_thread().name)
    time.sleep(0.05)
    if case.id == "c05":
        raise RuntimeError("model down")
    return "SELECT 1" if case.id == "c03" else "SELECT count(id) FROM item"
"""

ASYNC_HOOK = """
import asyncio
async def pytest_nl2sql_predict(case):
    await asyncio.sleep(0.05)
    if case.id == "c05":
        raise RuntimeError("model down")
    return "SELECT 1" if case.id == "c03" else "SELECT count(id) FROM item"
"""


def _items(pytester: pytest.Pytester, *args: str) -> list[dict]:
    result = pytester.runpytest(*args, "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=10, failed=2)
    items = read_report(pytester.path / "r.json")["items"]
    for item in items:
        item.pop("latency"), item.pop("execution_time")  # timings differ between any two runs
        item.get("extra", {}).pop("traceback", None)
    return items


@pytest.mark.parametrize("hook", [PLAIN_HOOK, ASYNC_HOOK], ids=["plain-hook", "async-hook"])
def test_concurrent_predictions_give_the_verdicts_and_report_of_one_at_a_time(pytester: pytest.Pytester, hook: str) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    pytester.makeconftest(hook)
    sequential = _items(pytester)
    assert _items(pytester, "--nl2sql-concurrency=4") == sequential
    assert {i["id"]: i["verdict"] for i in sequential if i["verdict"] != "pass"} == {"c03": "mismatch", "c05": "predictor_error"}


def test_concurrency_under_xdist(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    pytester.makeconftest(PLAIN_HOOK)
    assert _items(pytester, "--nl2sql-concurrency=4", "-n", "2") == _items(pytester)


def test_the_hook_runs_in_worker_threads(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    pytester.makeconftest(PLAIN_HOOK + "\ndef pytest_sessionfinish():\n    print('threads:', sorted(set(CALLS)))\n")
    result = pytester.runpytest("--nl2sql-concurrency=4", "-s")
    assert "threads: ['nl2sql-predict_0', 'nl2sql-predict_1', 'nl2sql-predict_2', 'nl2sql-predict_3']" in result.stdout.str()


def test_concurrency_must_be_positive(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--nl2sql-concurrency=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
