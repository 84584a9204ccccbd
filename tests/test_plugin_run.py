"""Every report says what the run was: when, how long, which model and commit, where, whether it
finished; `--nl2sql-history` keeps one line per run."""

from __future__ import annotations

import json
import subprocess

import pytest

from helpers import make_shop, read_report, write_suite

CASES = [
    {"id": "a", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"},
    {"id": "b", "gold": "SELECT name FROM item WHERE price < 2", "predicted": "SELECT name FROM item"},
    {"id": "c", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"},
]


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    return pytester


def test_the_report_names_the_run(shop: pytest.Pytester) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=shop.path, check=True)
    subprocess.run([*git, "add", "-A"], cwd=shop.path, check=True)
    subprocess.run([*git, "commit", "-qm", "suite"], cwd=shop.path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=shop.path, capture_output=True, text=True).stdout.strip()
    shop.runpytest("--nl2sql-label=prompt-v2", "--nl2sql-report=json:r.json")
    run = read_report(shop.path / "r.json")["run"]
    assert {k: run[k] for k in ("label", "git_commit", "engine", "complete")} == {
        "label": "prompt-v2", "git_commit": head, "engine": "per case", "complete": True}
    assert run["duration_s"] >= 0 and run["started"].endswith("+00:00")
    assert run["options"]["timeout"] == 30.0


def test_a_stopped_run_is_marked_incomplete(shop: pytest.Pytester) -> None:
    result = shop.runpytest("-x", "--nl2sql-report=json:r.json")
    result.stdout.fnmatch_lines(["the run was interrupted: 2 cases were judged and the reports say `complete: false`"])
    report = read_report(shop.path / "r.json")
    assert report["run"]["complete"] is False and len(report["items"]) == 2


def test_an_interrupted_run_is_marked_incomplete(shop: pytest.Pytester) -> None:
    shop.makeconftest("def pytest_nl2sql_predict(case):\n    if case.id == 'b':\n        raise KeyboardInterrupt\n")
    result = shop.runpytest("--nl2sql-report=json:r.json", no_reraise_ctrlc=True)  # Ctrl-C, as pytest sees it
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = read_report(shop.path / "r.json")
    assert report["run"]["complete"] is False and [i["id"] for i in report["items"]] == ["a"]


def test_a_hook_that_exits_is_the_model_s_failure_and_its_case_stays(shop: pytest.Pytester) -> None:
    """`sys.exit()` in a model's code is that case's `predictor_error`, not a vanished case."""
    shop.makeconftest("import sys\ndef pytest_nl2sql_predict(case):\n    if case.id == 'b':\n        sys.exit(3)\n")
    result = shop.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=2, failed=1)
    report = read_report(shop.path / "r.json")
    items = {i["id"]: i for i in report["items"]}
    assert report["run"]["complete"] is True and sorted(items) == ["a", "b", "c"]
    assert items["b"]["verdict"] == "predictor_error" and "SystemExit: 3" in items["b"]["reason"]


def test_history_keeps_one_line_per_run(shop: pytest.Pytester) -> None:
    shop.runpytest("--nl2sql-history=h.jsonl", "--nl2sql-label=one")
    shop.runpytest("--nl2sql-history=h.jsonl", "--nl2sql-label=two")
    lines = [json.loads(line) for line in (shop.path / "h.jsonl").read_text().splitlines()]
    assert [(entry["run"]["label"], entry["summary"]["accuracy"]) for entry in lines] == [("one", 2 / 3), ("two", 2 / 3)]


def test_a_partial_run_is_marked_in_the_history_and_not_gated_on_thresholds(shop: pytest.Pytester) -> None:
    """Node ids run other cases than a full run: its history line is marked partial (the trend
    leaves it out: it would show a change no model made), and the suite's thresholds are not its
    to check, whichever buckets its cases belong to (issue 29; tests/test_gate_operations.py has more)."""
    write_suite(shop.path, [{**CASES[0], "tags": ["joins"]}, *CASES[1:]], database="shop.sqlite")
    shop.makeini("[pytest]\nnl2sql_fail_under = tag:joins=0.5\n")
    shop.runpytest("--nl2sql-history=h.jsonl").assert_outcomes(passed=2, failed=1)
    partial = shop.runpytest("--nl2sql-history=h.jsonl", "shop.nl2sql.yaml::c")
    partial.assert_outcomes(passed=1)
    assert partial.ret == pytest.ExitCode.OK  # no "no case has tag 'joins'"
    partial.stdout.fnmatch_lines(["history: *h.jsonl (+1 run, marked partial: 1 of 3 cases; the trend leaves it out)"])
    assert [json.loads(line)["run"]["partial"] for line in (shop.path / "h.jsonl").read_text().splitlines()] == [False, True]
    write_suite(shop.path, [CASES[0], {**CASES[1], "tags": ["joins"]}, CASES[2]], database="shop.sqlite")
    failing = shop.runpytest("shop.nl2sql.yaml::b")
    failing.stdout.fnmatch_lines(["thresholds not applied: partial run (1 of 3 cases)*"])
    assert "is below --nl2sql-fail-under" not in failing.stdout.str()


@pytest.mark.parametrize(("content", "problem"), [
    (b'{"run": {}, "summary": {}}\n\xff\xfe\n', "h.jsonl:2: not UTF-8 text"),
    (b'{"run": {}, "summary": {}}\n' + b"[" * 5000 + b"]" * 5000 + b"\n", "h.jsonl:2: nested deeper than"),
    (b'{"run": {}, "summary": {}}\nnot json\n{"run": {}, "summary": {}}\n', "h.jsonl:2:"),
])
def test_a_corrupt_history_is_a_usage_error_and_the_reports_are_still_written(shop: pytest.Pytester, content: bytes,
                                                                             problem: str) -> None:
    (shop.path / "h.jsonl").write_bytes(content)
    result = shop.runpytest("--nl2sql-history=h.jsonl", "--nl2sql-report=json:r.json", "--nl2sql-report=md:r.md")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([f"nl2sql: history file *{problem}*"])
    assert len(read_report(shop.path / "r.json")["items"]) == 3 and (shop.path / "r.md").is_file()


def test_a_history_torn_by_a_stopped_run_is_read_without_its_last_line(shop: pytest.Pytester) -> None:
    (shop.path / "h.jsonl").write_bytes(b'{"run": {"label": "x"}, "summary": {"accuracy": 1.0}}\n{"run": {"la')
    result = shop.runpytest("--nl2sql-history=h.jsonl")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # case b fails; the history is fine


def test_a_deeply_nested_baseline_is_a_usage_error_naming_it(shop: pytest.Pytester) -> None:
    (shop.path / "b.json").write_text('{"items": ' + "[" * 5000 + "]" * 5000 + "}")
    result = shop.runpytest("--nl2sql-baseline=b.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*baseline file *b.json: nested deeper than 100 levels*"])


def test_what_survives_every_few_cases_is_frozen_out_of_the_collector_s_sight(shop: pytest.Pytester) -> None:
    """The results, parses and query results a run keeps live to its end: every `FREEZE_EVERY`
    cases they are frozen (after the young garbage is collected), so that the collector's full
    passes do not walk them again and again."""
    shop.makeconftest("""
        import gc, json
        from pytest_nl2sql.plugin import items
        items.FREEZE_EVERY = 2
        calls, last = [], ["(none)"]
        freeze, collect = gc.freeze, gc.collect
        gc.freeze = lambda: (calls.append(("freeze", last[0])), freeze())[1]
        gc.collect = lambda *a: (calls.append(("collect", a)), collect(*a))[1]
        def pytest_runtest_logstart(nodeid, location):
            last[0] = nodeid.rsplit("::", 1)[-1]
        def pytest_unconfigure(config):
            open("frozen.json", "w").write(json.dumps(calls))
    """)
    shop.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2, failed=1)
    calls = [tuple(call) for call in json.loads((shop.path / "frozen.json").read_text()) if call[0] == "freeze" or call[1] == [1]]
    # at collection, after the young generations' collection in the 2nd case's teardown, at the session's end
    assert calls == [("freeze", "(none)"), ("collect", [1]), ("freeze", "b"), ("freeze", "c")]


def test_an_xdist_controller_freezes_the_results_it_received(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller collects no item, but receives every case's result and keeps it to the end:
    frozen at the session's end, pytest's collections at exit do not walk them (nor the reports)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test's own worker's, under -n 2: not the run's
    shop.makeconftest("""
        import gc, os
        import pytest
        freeze = gc.freeze
        def frozen():
            open(f"frozen-{os.getpid()}.txt", "a").write(os.environ.get("PYTEST_XDIST_WORKER", "controller") + "\\n")
            freeze()
        gc.freeze = frozen
    """)
    shop.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2").assert_outcomes(passed=2, failed=1)
    calls = [line for path in shop.path.glob("frozen-*.txt") for line in path.read_text().split()]
    assert "controller" in calls and any(call.startswith("gw") for call in calls)
