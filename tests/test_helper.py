"""The helper process (`judge/helper.py`): cases judged there are judged exactly as here; a piece
of work it has not begun is done here at once; a piece that fails there, or a helper that dies,
falls back to doing the work here; it starts only where it can pay."""

from __future__ import annotations

import math
import operator
import os
import time
from pathlib import Path

import pytest

from helpers import make_shop, read_report, without_timings, write_suite
from pytest_nl2sql import evaluate_suite
from pytest_nl2sql.cases.read import load_case_file
from pytest_nl2sql.judge import helper
from pytest_nl2sql.judge.helper import Helper
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions

# a mix the helper must judge as this process does: passes, plain failures, accidental passes
# that neighbours fail (with their shrunk counterexample in the failure text), errors of both sides
CASES = [
    {"id": "right", "gold": "SELECT name FROM item WHERE price > 2", "predicted": "SELECT i.name FROM item AS i WHERE i.price > 2"},
    {"id": "wrong", "gold": "SELECT name FROM item WHERE price > 2", "predicted": "SELECT name FROM item WHERE price < 2"},
    {"id": "distinct", "gold": "SELECT DISTINCT name FROM item", "predicted": "SELECT name FROM item"},
    {"id": "boundary", "gold": "SELECT name FROM item WHERE price >= 2.5", "predicted": "SELECT name FROM item WHERE price > 2.5"},
    {"id": "broken-prediction", "gold": "SELECT name FROM item", "predicted": "SELECT nope FROM item"},
    {"id": "broken-gold", "gold": "SELECT nope FROM item", "predicted": "SELECT name FROM item"},
    {"id": "same-text", "gold": "SELECT count(*) FROM item", "predicted": "select COUNT(*) from item;"},
]


# first, a case slow enough (about a second) for the helper to start and take the next ones
SLOW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1500000) SELECT count(*) FROM c"
ROUNDS = [{"id": "slow", "gold": SLOW, "predicted": SLOW},
          *({**case, "id": f"{case['id']}-{n}"} for n in range(3) for case in CASES)]


@pytest.fixture
def helper_switch(monkeypatch: pytest.MonkeyPatch):
    def switch(on: bool) -> None:
        monkeypatch.setenv(helper.ENV_SWITCH, "1" if on else "0")
    return switch


def test_cases_judged_in_the_helper_get_the_verdicts_and_texts_they_get_here(tmp_path: Path, helper_switch) -> None:
    make_shop(tmp_path)
    suite = write_suite(tmp_path, ROUNDS, database="shop.sqlite")
    helper_switch(False)
    here = evaluate_suite(suite, cache_dir=tmp_path / "cache", rootdir=tmp_path)
    helper_switch(True)
    there = evaluate_suite(suite, cache_dir=tmp_path / "cache", rootdir=tmp_path)
    assert without_timings(here) == without_timings(there)
    verdicts = {i["id"]: (i["verdict"], i["reason"]) for i in there["items"]}
    assert verdicts["distinct-1"] == ("mismatch", "neighbour database")
    assert verdicts["right-2"][0] == "pass" and verdicts["broken-gold-0"][0] == "gold_error"


def test_the_helper_judges_cases_ahead_of_their_turn(tmp_path: Path) -> None:
    make_shop(tmp_path)
    entries = load_case_file(write_suite(tmp_path, ROUNDS, database="shop.sqlite"))
    labels = [CaseLabel(f"shop.nl2sql.yaml::{e.id}", "shop.nl2sql.yaml", n) for n, e in enumerate(entries)]
    pipeline = Pipeline(RunOptions(cache_dir=tmp_path / "cache"))
    pipeline.start_helper()
    try:
        assert pipeline.helper is not None
        for entry, label in zip(entries, labels):
            pipeline.look_ahead(entry, label)
        time.sleep(2)  # the helper starts and judges its share
        outcomes = [pipeline.evaluate(entry, label) for entry, label in zip(entries, labels)]
        assert pipeline.helper.answered + pipeline.helper.computed_here == 2 * len(entries) // 3
        assert pipeline.helper.answered == 2 * len(entries) // 3
    finally:
        pipeline.close()
    alone = Pipeline(RunOptions(cache_dir=tmp_path / "cache"))
    assert [o.result for o in outcomes] == [alone.evaluate(e, lb).result.replace(execution_time=o.result.execution_time)
                                            for e, lb, o in zip(entries, labels, outcomes)]
    assert [o.explanation for o in outcomes] == [alone.evaluate(e, lb).explanation for e, lb in zip(entries, labels)]


def test_a_run_with_the_helper_reports_what_a_run_without_it_and_one_under_xdist_report(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, ROUNDS, database="shop.sqlite")
    reports = {}
    for name, env, flags in (("here", "0", []), ("helper", "1", []), ("xdist", "1", ["-n", "2"])):
        os.environ[helper.ENV_SWITCH] = env
        try:
            result = pytester.runpytest(*flags, f"--nl2sql-report=json:{name}.json")
        finally:
            del os.environ[helper.ENV_SWITCH]
        result.assert_outcomes(passed=7, failed=12, errors=3)
        reports[name] = without_timings(read_report(pytester.path / f"{name}.json"))
    assert reports["here"] == reports["helper"] == reports["xdist"]
    result.stdout.fnmatch_lines(["*on neighbour * of *, its rows that tell the two queries apart:*"])


def test_a_piece_the_helper_has_not_begun_is_done_here_at_once() -> None:
    aid = Helper()
    try:
        busy = aid.submit(time.sleep, 2.0)  # the helper is held by this one
        time.sleep(1.0)  # (started, and begun it)
        waiting = aid.submit(operator.add, 1, 2)
        started = time.monotonic()
        assert aid.take(waiting, lambda: "here") == "here"
        assert time.monotonic() - started < 0.5
        assert aid.take(busy, lambda: "here") is None  # begun there: its result is waited for
        assert aid.take(aid.submit(operator.add, 1, 2), lambda: "here") in (3, "here")
    finally:
        aid.close()


def test_a_piece_that_fails_in_the_helper_is_done_again_here() -> None:
    aid = Helper()
    try:
        first = aid.submit(operator.add, 1, 2)
        assert aid.take(first, lambda: "here") in (3, "here")
        failing = aid.submit(math.sqrt, -1.0)  # ValueError there
        time.sleep(0.5)  # begun there, surely
        assert aid.take(failing, lambda: "here") == "here"
        assert aid.alive  # an error in a piece is the piece's, not the helper's
    finally:
        aid.close()


def test_a_helper_that_dies_leaves_the_work_to_this_process() -> None:
    aid = Helper()
    try:
        dying = aid.submit(os._exit, 3)
        time.sleep(0.5)
        assert aid.take(dying, lambda: "here") == "here"
        assert not aid.alive
        assert aid.submit(operator.add, 1, 2) is None
        assert aid.take(None, lambda: "here") == "here"
    finally:
        aid.close()


def test_the_helper_starts_only_where_it_can_pay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(helper, "available_cpus", lambda: 2)
    assert helper.wanted(helper.MIN_CASES, env={})
    assert not helper.wanted(helper.MIN_CASES - 1, env={})
    assert helper.wanted(1, env={helper.ENV_SWITCH: "1"})
    assert not helper.wanted(10_000, env={helper.ENV_SWITCH: "0"})
    monkeypatch.setattr(helper, "available_cpus", lambda: 1)
    assert not helper.wanted(10_000, env={})
