"""Efficiency of right answers (BIRD's R-VES): timed, repeated when unusual, never a verdict."""

from __future__ import annotations

import sqlite3

import pytest

from helpers import read_report, write_suite
from pytest_nl2sql.metrics.efficiency import REPEATS, measure, reward, summarize_efficiency


@pytest.mark.parametrize(("gold_s", "pred_s", "expected"), [
    (2.0, 1.0, 1.25), (1.0, 1.0, 1.0), (1.0, 1.5, 0.75), (1.0, 3.0, 0.5), (1.0, 5.0, 0.25), (1.0, 100.0, 0.25)])
def test_the_reward_follows_bird(gold_s: float, pred_s: float, expected: float) -> None:
    assert reward(gold_s, pred_s) == expected


def test_an_unusual_ratio_retimes_the_side_that_looks_slow_and_keeps_its_fastest_timing() -> None:
    preds = iter([0.030, 0.500])
    slow_prediction = measure(0.011, 0.100, lambda: pytest.fail("the gold looked usual"), lambda: next(preds))
    assert (slow_prediction.repeats, slow_prediction.gold_s, slow_prediction.predicted_s) == (REPEATS, 0.011, 0.030)
    golds = iter([0.009, 0.004])
    slow_gold = measure(0.050, 0.010, lambda: next(golds), lambda: pytest.fail("the prediction looked usual"))
    assert (slow_gold.repeats, slow_gold.gold_s, slow_gold.predicted_s) == (REPEATS, 0.004, 0.010)
    usual = measure(0.010, 0.012, lambda: pytest.fail("not repeated"), lambda: pytest.fail("not repeated"))
    assert usual.repeats == 1
    too_fast_to_tell = measure(0.0001, 0.0009, lambda: pytest.fail("not repeated"), lambda: pytest.fail("not repeated"))
    assert too_fast_to_tell.repeats == 1


def test_r_ves_counts_wrong_answers_as_zero() -> None:
    cases = [(True, {"reward": 1.25, "slowdown": 0.5}), (True, {"reward": 0.25, "slowdown": 12.0}), (False, None), (False, None)]
    assert summarize_efficiency(cases) == {"r_ves": 0.375, "timed": 2, "slower_10x": 1, "median_slowdown": 6.25}


def test_a_slow_right_prediction_is_a_finding_not_a_failure(pytester: pytest.Pytester) -> None:
    con = sqlite3.connect(pytester.path / "big.sqlite")
    con.execute("CREATE TABLE n(i INTEGER)")
    con.executemany("INSERT INTO n VALUES (?)", [(i,) for i in range(60)])
    con.commit()
    con.close()
    slow = "SELECT count(*) FROM n WHERE (SELECT count(*) FROM n a, n b, n c, n d) > 0"
    write_suite(pytester.path, [{"id": "slow", "gold": "SELECT count(*) FROM n", "predicted": slow},
                                {"id": "fast", "gold": "SELECT count(*) FROM n", "predicted": "SELECT count(i) FROM n"}],
                database="big.sqlite")
    result = pytester.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["efficiency (BIRD's R-VES over judged SQL cases): *1 of 2 ran 10x slower than their gold or worse"])
    items = {i["id"]: i for i in read_report(pytester.path / "r.json")["items"]}
    assert items["slow"]["execution_time"]["slowdown"] >= 10 and items["slow"]["execution_time"]["reward"] == 0.25
    assert items["slow"]["execution_time"]["repeats"] == REPEATS
