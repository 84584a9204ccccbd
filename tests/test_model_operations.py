"""The model in the loop, operated: what retries cost is shown (terminal, summary, CSV, xlsx, md),
a recording keeps the model's usage, the reports show Malloy answers and the model's figures,
hostile answers (huge, unprintable) are refused as the hook's failures without exhausting memory,
repeated answers are kept within bounds, retry options are bounded, and predictions files that
give a case twice are refused naming the line."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import openpyxl
import pytest
import yaml

from helpers import MEXICO_YAML, make_db, make_shop, read_report, write_jsonl, write_suite
from pytest_nl2sql import evaluate_suite
from pytest_nl2sql.cases.predictions import PredictedMalloy, PredictionsFileError, load_predictions
from pytest_nl2sql.engines.base import Limits
from pytest_nl2sql.judge.answer import MAX_ANSWER_CHARS, unpack_answer
from pytest_nl2sql.judge.predict import MAX_BACKOFF, MAX_RETRIES, MAX_RETRY_WAIT, RetryPolicy
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.repeats import SHOWN_ANSWER_CHARS, SHOWN_ANSWERS_CHARS, shown_answers
from pytest_nl2sql.reports.csv import write_csv
from pytest_nl2sql.reports.xlsx import write_xlsx
from pytest_nl2sql.vocab import Kind, Verdict

CASES: list[dict[str, Any]] = [
    {"id": "count", "question": "How many items?", "gold": "SELECT count(*) FROM item"},
    {"id": "flaky", "question": "The highest price", "gold": "SELECT max(price) FROM item"},
    {"id": "down", "question": "The lowest price", "gold": "SELECT min(price) FROM item"},
]

# rate limited twice on `flaky` before it answers; `down` cannot be reached at all
FLAKY_MODEL = '''
from collections import Counter

CALLS = Counter()


class RateLimited(Exception):
    status_code = 429


SQL = {"count": "SELECT count(*) FROM item", "flaky": "SELECT max(price) FROM item"}


def pytest_nl2sql_predict(case):
    CALLS[case.id] += 1
    if case.id == "down":
        raise ConnectionError("model endpoint unreachable")
    if case.id == "flaky" and CALLS[case.id] <= 2:
        raise RateLimited("429 Too Many Requests")
    return {"sql": SQL[case.id], "usage": {"prompt_tokens": 100 + case.sample, "completion_tokens": 20, "cost": 0.0005}}
'''

NO_WAIT = ("--nl2sql-neighbours=0", "--nl2sql-retries=2", "--nl2sql-retry-wait=0")


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    pytester.makeconftest(FLAKY_MODEL)
    return pytester


def _items(path: Path) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in read_report(path)["items"]}


# --- 1. retries are shown ----------------------------------------------------------------------------


def test_retries_are_shown_in_the_terminal_the_summary_and_every_report(shop: pytest.Pytester) -> None:
    result = shop.runpytest(*NO_WAIT, "--nl2sql-report=json:r.json", "--nl2sql-report=csv:r.csv",
                            "--nl2sql-report=xlsx:r.xlsx", "--nl2sql-report=md:r.md")
    result.assert_outcomes(passed=2, failed=1)
    # flaky: 2 retries before it answered; down: 2 retries, and still failing after 3 attempts
    line = "predictor: 4 retries on 2 cases (429/5xx/timeouts); 1 case still failing after 3 attempts"
    result.stdout.fnmatch_lines([line])
    report = read_report(shop.path / "r.json")
    assert report["summary"]["retries"] == {"retries": 4, "cases": 2, "failing": 1, "failing_attempts": 3}
    items = {item["id"]: item for item in report["items"]}
    assert {k: i["attempts"] for k, i in items.items()} == {"count": 1, "flaky": 3, "down": 3}
    assert {k: (i.get("extra") or {}).get("retries") for k, i in items.items()} == {"count": None, "flaky": 2, "down": 2}

    rows = {row["id"]: row for row in csv.DictReader((shop.path / "r.csv").read_text().splitlines())}
    assert {k: (r["attempts"], r["retries"]) for k, r in rows.items()} == {
        "count": ("1", ""), "flaky": ("3", "2"), "down": ("3", "2")}

    sheet = openpyxl.load_workbook(shop.path / "r.xlsx")["Overview"]
    header = [cell.value for cell in sheet[1]]
    by_id = {row[0]: dict(zip(header, row)) for row in sheet.iter_rows(min_row=2, values_only=True)}
    assert (by_id["flaky"]["attempts"], by_id["flaky"]["retries"]) == (3, 2)
    assert (by_id["count"]["attempts"], by_id["count"]["retries"]) == (1, None)

    assert f"- {line}" in (shop.path / "r.md").read_text()


def test_no_retry_line_when_nothing_was_retried(shop: pytest.Pytester) -> None:
    result = shop.runpytest(*NO_WAIT, "-k", "count", "--nl2sql-report=json:r.json")
    assert "retries on" not in result.stdout.str()
    assert read_report(shop.path / "r.json")["summary"]["retries"] is None


# --- 2. a recording keeps usage -------------------------------------------------------------------------


def test_a_replayed_recording_reports_the_usage_of_the_live_run(shop: pytest.Pytester) -> None:
    shop.runpytest(*NO_WAIT, "--nl2sql-repeat=2", "--nl2sql-record=rec.jsonl", "--nl2sql-report=json:live.json")
    records = {r["id"]: r for r in map(json.loads, (shop.path / "rec.jsonl").read_text().splitlines())}
    first = {"prompt_tokens": 100, "completion_tokens": 20, "cost": 0.0005}
    second = {"prompt_tokens": 101, "completion_tokens": 20, "cost": 0.0005}
    assert records["count"]["usage"] == first  # the first answer's; each answer keeps its own
    assert [s.get("usage") for s in records["count"]["samples"]] == [first, second]

    shop.makeconftest("def pytest_nl2sql_predict(case):\n    raise RuntimeError('the model was called')\n")
    replay = shop.runpytest(*NO_WAIT, "--nl2sql-repeat=2", "--nl2sql-predictions=rec.jsonl", "--nl2sql-report=json:replay.json")
    assert "the model was called" not in replay.stdout.str()
    live, replayed = read_report(shop.path / "live.json"), read_report(shop.path / "replay.json")
    assert replayed["summary"]["usage"] == live["summary"]["usage"] and live["summary"]["usage"]["cases"] == 2
    live_items = _items(shop.path / "live.json")
    for item in replayed["items"]:
        assert (item["usage"], item["attempts"]) == (live_items[item["id"]]["usage"], 0)  # the model was not asked
    replay.stdout.fnmatch_lines(["model usage over 2 case(s): 402 prompt + 80 completion tokens, cost 0.0020*"])

    # a replay of the first answer alone counts the first answer's usage alone
    shop.runpytest(*NO_WAIT, "--nl2sql-predictions=rec.jsonl", "--nl2sql-report=json:one.json")
    assert _items(shop.path / "one.json")["count"]["usage"] == first


def test_usage_in_a_predictions_file_is_reported_once_per_answer(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES[:1], database="shop.sqlite")
    write_jsonl(pytester.path / "p.jsonl", [{"id": "count", "predicted": "SELECT count(*) FROM item",
                                             "usage": {"prompt_tokens": 7, "completion_tokens": 3}}])
    pytester.runpytest("--nl2sql-neighbours=0", "--nl2sql-repeat=3", "--nl2sql-predictions=p.jsonl", "--nl2sql-report=json:r.json")
    assert _items(pytester.path / "r.json")["count"]["usage"] == {"prompt_tokens": 7, "completion_tokens": 3}


def test_malformed_usage_in_a_predictions_file_names_the_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "a", "predicted": "SELECT 1"},
                                              {"id": "b", "predicted": "SELECT 1", "usage": {"prompt_tokens": -3}}])
    with pytest.raises(PredictionsFileError, match=r"p.jsonl:2: .*usage 'prompt_tokens' must be a whole number"):
        load_predictions(path)
    loaded = load_predictions(write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "predicted": "SELECT 1", "usage": {"cost": 0.5}}]))
    assert loaded.lookup("a", 0, ()).usage == {"cost": 0.5}


# --- 3. the reports show Malloy and the model's figures ---------------------------------------------------


def _model_report() -> dict[str, Any]:
    results = [
        CaseResult("m", "s.nl2sql.yaml::m", "s.nl2sql.yaml", 0, Kind.SQL, Verdict.PASS, question="How many?",
                   gold="SELECT count(*) FROM singer", predicted="SELECT COUNT(1) AS n FROM singer AS base",
                   predicted_malloy="run: singer -> { aggregate: n is count() }", attempts=3,
                   usage={"prompt_tokens": 120, "completion_tokens": 9, "cost": 0.0012}, extra={"retries": 2}),
        CaseResult("s", "s.nl2sql.yaml::s", "s.nl2sql.yaml", 1, Kind.SQL, Verdict.MISMATCH, question="Names?",
                   gold="SELECT name FROM singer", predicted="SELECT 1", reason="values"),
    ]
    return {"summary": {"total": 2, "passed": 1, "errors": 0, "accuracy": 0.5}, "items": [r.to_json() for r in results]}


def test_the_csv_has_the_malloy_and_the_model_s_figures(tmp_path: Path) -> None:
    write_csv(_model_report(), tmp_path / "r.csv")
    rows = {row["id"]: row for row in csv.DictReader((tmp_path / "r.csv").read_text().splitlines())}
    m = rows["m"]
    assert m["predicted_malloy"] == "run: singer -> { aggregate: n is count() }" and m["predicted"].startswith("SELECT COUNT(1)")
    assert (m["attempts"], m["retries"], m["prompt_tokens"], m["completion_tokens"], m["cost"]) == ("3", "2", "120", "9", "0.0012")
    assert (rows["s"]["predicted_malloy"], rows["s"]["retries"], rows["s"]["cost"]) == ("", "", "")


def test_the_xlsx_has_the_malloy_and_the_model_s_figures(tmp_path: Path) -> None:
    write_xlsx(_model_report(), tmp_path / "r.xlsx")
    book = openpyxl.load_workbook(tmp_path / "r.xlsx")
    for name in ("Overview", "Failures"):
        sheet = book[name]
        header = [cell.value for cell in sheet[1]]
        assert "predicted Malloy" in header, name
    overview = book["Overview"]
    header = [cell.value for cell in overview[1]]
    rows = {row[0]: dict(zip(header, row)) for row in overview.iter_rows(min_row=2, values_only=True)}
    m = rows["m"]
    assert m["predicted Malloy"] == "run: singer -> { aggregate: n is count() }"
    assert (m["attempts"], m["retries"], m["prompt tokens"], m["completion tokens"], m["cost"]) == (3, 2, 120, 9, 0.0012)
    assert rows["s"]["predicted Malloy"] is None and rows["s"]["cost"] is None
    # a run without Malloy or a model has none of these columns
    plain = _model_report()
    plain["items"] = plain["items"][1:]
    plain["items"][0]["attempts"] = 0
    write_xlsx(plain, tmp_path / "plain.xlsx")
    header = [cell.value for cell in openpyxl.load_workbook(tmp_path / "plain.xlsx")["Overview"][1]]
    assert not {"predicted Malloy", "attempts", "retries", "cost"} & set(header)


# --- 4. Malloy answers are unfenced as SQL answers are ------------------------------------------------------

MALLOY = "run: singer -> { aggregate: n is count() }"
FENCED_MALLOY = f"Here is the query:\n\n```malloy\n{MALLOY}\n```\n\nIt counts the singers."


@pytest.mark.parametrize("answer", [FENCED_MALLOY, f"```\n{MALLOY}\n```", f"~~~malloy\n{MALLOY}\n~~~"])
def test_a_fenced_malloy_answer_is_the_malloy_inside(answer: str) -> None:
    value = unpack_answer({"malloy": answer}).value
    assert (value.text, value.raw) == (MALLOY, answer)
    assert PredictedMalloy.of(MALLOY) == PredictedMalloy(MALLOY)  # a bare query is kept as it is, no raw


@pytest.fixture(scope="module")
def compiler_home() -> Path:
    """Where the compiler is set up, found before pytester moves HOME to its own folder."""
    malloy = pytest.importorskip("pytest_nl2sql.malloy", reason="the Malloy package is not importable")
    from pytest_nl2sql.malloy.home import require_compiler

    try:
        return require_compiler()[1]
    except malloy.MalloyUnavailable as error:
        pytest.skip(f"no Malloy compiler here ({error})")


@pytest.fixture
def malloy_home(compiler_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NL2SQL_MALLOY_HOME", str(compiler_home))
    return compiler_home


SINGERS = """
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, age INTEGER);
INSERT INTO singer VALUES (1, 'Joe', 'France', 52), (2, 'Ann', 'Netherlands', 29), (3, 'Tim', 'France', 41);
"""


def test_a_fenced_malloy_answer_is_reported_and_recorded_unfenced(malloy_home: Path, pytester: pytest.Pytester) -> None:
    make_db(pytester.path / "singers.sqlite", SINGERS)
    write_suite(pytester.path, [{"id": "hook", "gold": "SELECT count(*) FROM singer"},
                                {"id": "case", "gold": "SELECT count(*) FROM singer", "predicted_malloy": FENCED_MALLOY}],
                database="singers.sqlite")
    pytester.makeconftest(f"def pytest_nl2sql_predict(case):\n    return {{'malloy': {FENCED_MALLOY!r}}} if case.id == 'hook' else None\n")
    pytester.runpytest("--nl2sql-neighbours=0", "--nl2sql-record=rec.jsonl", "--nl2sql-report=json:r.json").assert_outcomes(passed=2)
    items = _items(pytester.path / "r.json")
    for item in items.values():
        assert (item["predicted_malloy"], item["raw_prediction"]) == (MALLOY, FENCED_MALLOY)
        assert "SELECT" in item["predicted"].upper()
    record = json.loads((pytester.path / "rec.jsonl").read_text().splitlines()[0])
    assert (record["predicted_malloy"], record["raw_prediction"]) == (MALLOY, FENCED_MALLOY)

    pytester.makeconftest("def pytest_nl2sql_predict(case):\n    raise RuntimeError('the model was called')\n")
    pytester.runpytest("--nl2sql-neighbours=0", "-k", "hook", "--nl2sql-predictions=rec.jsonl",
                       "--nl2sql-report=json:replay.json").assert_outcomes(passed=1)
    replayed = _items(pytester.path / "replay.json")["hook"]
    assert {k: replayed[k] for k in ("verdict", "predicted", "predicted_malloy", "raw_prediction")} == \
        {k: items["hook"][k] for k in ("verdict", "predicted", "predicted_malloy", "raw_prediction")}
    from_file = load_predictions(write_jsonl(pytester.path / "p.jsonl", [{"id": "case", "predicted_malloy": FENCED_MALLOY}]))
    assert from_file.lookup("case", 0, ()).value == PredictedMalloy(MALLOY, raw=FENCED_MALLOY)


# --- 5. an answer that cannot be printed is the hook's failure ------------------------------------------------


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("__str__ failed")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ failed")


class SneakyText(str):
    def __str__(self) -> str:
        raise RuntimeError("__str__ failed")


def test_an_answer_whose_str_raises_is_a_predictor_error(tmp_path: Path) -> None:
    make_shop(tmp_path)
    suite = write_suite(tmp_path, CASES[:1], database="shop.sqlite")
    for answer in (Unprintable(), {"sql": Unprintable()}):
        item = evaluate_suite(suite, predict=lambda case, answer=answer: answer, neighbours=0, rootdir=tmp_path)["items"][0]
        assert item["verdict"] == "predictor_error", item
        assert "Unprintable" in item["reason"] and item["predicted"] is None
    # a str whose __str__ raises is still the text it holds
    item = evaluate_suite(suite, predict=lambda case: SneakyText("SELECT count(*) FROM item"), neighbours=0, rootdir=tmp_path)["items"][0]
    assert (item["verdict"], item["predicted"]) == ("pass", "SELECT count(*) FROM item")


def test_a_term_selection_holding_an_unprintable_object_is_a_predictor_error(tmp_path: Path) -> None:
    (tmp_path / "imf.nl2sql.yaml").write_text(MEXICO_YAML)
    target = yaml.safe_load(MEXICO_YAML)["conversation"][0]["target"]["indicator_selection"]
    inside = [{"dataset_id": "IMF.RES:WEO", "dimensions": [{"dimension_name": "INDICATOR", "values": [{"id": Unprintable()}]}]}]
    for answer in (inside, {"selection": [Unprintable()]}):
        item = evaluate_suite(tmp_path / "imf.nl2sql.yaml", predict=lambda case, answer=answer: answer, rootdir=tmp_path)["items"][0]
        assert item["verdict"] == "predictor_error" and "holds a Unprintable" in item["reason"], item["reason"]
    item = evaluate_suite(tmp_path / "imf.nl2sql.yaml", predict=lambda case: tuple(target), rootdir=tmp_path)["items"][0]
    assert item["verdict"] == "pass"


# --- 6. repeated answers are kept within bounds ---------------------------------------------------------------


def test_shown_answers_are_cut_each_and_in_all() -> None:
    answers = ["SELECT 1", "x" * 10_000, None, *(f"SELECT {n} -- " + "y" * 1_900 for n in range(20))]
    shown = shown_answers(answers)
    assert shown[0] == "SELECT 1" and shown[2] is None
    assert shown[1].startswith("x" * SHOWN_ANSWER_CHARS) and "cut: 10,000 characters in all" in shown[1] and "sha256 " in shown[1]
    assert sum(len(s) for s in shown if s) <= SHOWN_ANSWERS_CHARS + 200 * len(shown)
    assert shown[-1].startswith("[not kept: ") and "sha256 " in shown[-1]
    same = [s for s, a in zip(shown, answers) if a == answers[-1]]
    assert same == [shown[-1]]


def test_repeated_answers_are_bounded_in_the_report_and_the_recording(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES[:1], database="shop.sqlite")
    big = 300_000
    pytester.makeconftest(f'''
def pytest_nl2sql_predict(case):
    if case.sample == 2:
        return "SELECT 1 -- " + "z" * {MAX_ANSWER_CHARS}  # over the cap: refused
    return "SELECT count(*) FROM item -- " + str(case.sample) * {big}
''')
    pytester.runpytest("--nl2sql-neighbours=0", "--nl2sql-repeat=4", "--nl2sql-record=rec.jsonl",
                       "--nl2sql-report=json:r.json").assert_outcomes(passed=1)
    item = read_report(pytester.path / "r.json")["items"][0]
    assert len(item["predicted"]) > big  # the verdict's answer, whole
    assert item["repeats"]["verdicts"] == ["pass", "pass", "predictor_error", "pass"]
    assert all(entry is None or len(entry) < SHOWN_ANSWER_CHARS + 200 for entry in item["repeats"]["predicted"])
    assert "samples" not in (item.get("extra") or {})  # every answer whole is the recording's, not the report's
    assert (pytester.path / "r.json").stat().st_size < 2 * big

    record = json.loads((pytester.path / "rec.jsonl").read_text())
    samples = record["samples"]
    assert [len(s.get("predicted") or "") > big for s in samples] == [True, True, False, True]  # whole, under the cap
    assert "refused" in samples[2]["error"] and f"{MAX_ANSWER_CHARS:,}" in samples[2]["error"]


# --- 7. retry options are bounded --------------------------------------------------------------------------------


@pytest.mark.parametrize("option, complaint", [
    ("--nl2sql-retry-wait=1e300", f"--nl2sql-retry-wait must be a number of seconds from 0 to {MAX_RETRY_WAIT:g}, not 1e+300"),
    ("--nl2sql-retry-wait=inf", "--nl2sql-retry-wait must be a number of seconds from 0 to"),
    ("--nl2sql-retry-wait=nan", "--nl2sql-retry-wait must be a number of seconds from 0 to"),
    ("--nl2sql-retry-wait=-1", "--nl2sql-retry-wait must be a number of seconds from 0 to"),
    (f"--nl2sql-retries={MAX_RETRIES + 1}", f"--nl2sql-retries must be 0 (never ask again) or more, up to {MAX_RETRIES}, not"),
])
def test_out_of_range_retry_options_are_usage_errors(pytester: pytest.Pytester, option: str, complaint: str) -> None:
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{complaint}*"])
    assert "Traceback" not in result.stderr.str()


def test_the_api_refuses_them_too(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, CASES[:1], database="shop.sqlite")
    with pytest.raises(ValueError, match="retry_wait"):
        evaluate_suite(suite, retry_wait=1e300)
    with pytest.raises(ValueError, match="retries"):
        evaluate_suite(suite, retries=MAX_RETRIES + 1)


def test_each_backoff_wait_is_capped() -> None:
    assert [RetryPolicy(MAX_RETRIES, 10).delay(n) for n in range(1, 7)] == [10, 20, 40, MAX_BACKOFF, MAX_BACKOFF, MAX_BACKOFF]
    assert RetryPolicy(MAX_RETRIES, 1).delay(MAX_RETRIES) == MAX_BACKOFF
    assert RetryPolicy(3, MAX_RETRY_WAIT).delay(3) == MAX_RETRY_WAIT  # a base wait over the cap is kept as the user set it
    with pytest.raises(ValueError, match="retries"):
        RetryPolicy(MAX_RETRIES + 1, 1)


# --- 8. an oversize answer is refused before it is copied ----------------------------------------------------------


def test_an_answer_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    assert MAX_ANSWER_CHARS == Limits().max_sql_chars
    make_shop(tmp_path)
    suite = write_suite(tmp_path, CASES[:1], database="shop.sqlite")
    for answer in ("SELECT 1 -- " + "x" * MAX_ANSWER_CHARS, {"sql": "y" * (MAX_ANSWER_CHARS + 1)},
                   {"malloy": "z" * (MAX_ANSWER_CHARS + 1)}, b"w" * (MAX_ANSWER_CHARS + 1)):
        item = evaluate_suite(suite, predict=lambda case, answer=answer: answer, neighbours=0, rootdir=tmp_path)["items"][0]
        assert item["verdict"] == "predictor_error" and item["predicted"] is None and item["raw_prediction"] is None
        assert "refused unread" in item["reason"] and f"{MAX_ANSWER_CHARS:,}" in item["reason"], item["reason"]
    at_cap = "SELECT count(*) FROM item --" + "x" * (MAX_ANSWER_CHARS - 28)
    assert evaluate_suite(suite, predict=lambda case: at_cap, neighbours=0, rootdir=tmp_path)["items"][0]["verdict"] == "pass"


HUGE_ANSWER_MODEL = """
import json, resource

SIZE = {size}
SEEN = {{}}


def pytest_nl2sql_predict(case):
    SEEN["before"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return "x" * SIZE  # one allocation: what the plugin adds to it is what is measured


def pytest_unconfigure(config):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with open("growth.json", "w") as f:
        json.dump({{"growth": peak - SEEN["before"]}}, f)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in kilobytes on Linux")
def test_a_300_mb_answer_is_refused_without_copying_it(pytester: pytest.Pytester) -> None:
    """Before, a 300 MB answer was unfenced, judged, reported and sent on as it was: the pytest
    process grew by 3.5 GB (and took minutes) to refuse it."""
    size = 300 * 1024 * 1024
    make_shop(pytester.path)
    write_suite(pytester.path, CASES[:1], database="shop.sqlite")
    pytester.makeconftest(HUGE_ANSWER_MODEL.format(size=size))
    result = pytester.runpytest_subprocess("--nl2sql-neighbours=0", "--nl2sql-report=json:r.json", timeout=600)
    result.assert_outcomes(failed=1)
    item = read_report(pytester.path / "r.json")["items"][0]
    assert item["verdict"] == "predictor_error" and "refused unread" in item["reason"]
    growth = json.loads((pytester.path / "growth.json").read_text())["growth"]
    assert growth < 2 * size, f"peak grew by {growth:,} bytes for a {size:,}-byte answer"
    assert (pytester.path / "r.json").stat().st_size < 100_000


# --- 9. a predictions file gives each case once --------------------------------------------------------------------


@pytest.mark.parametrize("lines, line, complaint", [
    ([{"id": "a", "predicted": "SELECT 1", "predicted_malloy": MALLOY}], 2, "both \"predicted\" and \"predicted_malloy\""),
    ([{"id": "a", "selection": [], "predicted": "SELECT 1"}], 2, "both \"predicted\" and \"selection\""),
    ([{"id": "b", "predicted": "SELECT 2"}], 2, "id 'b' is given again (first on line 1, for every file)"),
    ([{"id": "x", "predicted": "SELECT 2"}, {"id": "b", "file": "s.nl2sql.yaml", "predicted": "SELECT 2"}], 3,
     "id 'b' is given again (first on line 1, for every file)"),
    ([{"id": "a", "predicted": "SELECT 2", "samples": [{"predicted": "SELECT 1", "predicted_malloy": MALLOY}]}], 2,
     "samples[0] has both \"predicted\" and \"predicted_malloy\""),
])
def test_a_case_given_twice_is_an_error_naming_file_and_line(tmp_path: Path, lines: list[dict[str, Any]], line: int,
                                                             complaint: str) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "b", "predicted": "SELECT 1"}, *lines])
    with pytest.raises(PredictionsFileError) as info:
        load_predictions(path)
    assert (info.value.path, info.value.line) == (path, line)
    assert complaint in info.value.message


def test_the_same_id_in_two_files_is_two_cases(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "b", "file": "x.nl2sql.yaml", "predicted": "SELECT 1"},
                                              {"id": "b", "file": "y.nl2sql.yaml", "predicted": "SELECT 2"},
                                              {"id": 7, "file": "x.nl2sql.yaml", "predicted": "SELECT 3"}])
    store = load_predictions(path)
    assert store.lookup("b", 0, ("y.nl2sql.yaml",)).value == "SELECT 2"
    path.write_text(path.read_text() + json.dumps({"id": "7", "file": "x.nl2sql.yaml", "predicted": "SELECT 4"}) + "\n")
    with pytest.raises(PredictionsFileError, match="p.jsonl:4: id '7' is given again"):
        load_predictions(path)


def test_a_case_given_twice_is_a_usage_error(shop: pytest.Pytester) -> None:
    write_jsonl(shop.path / "p.jsonl", [{"id": "count", "predicted": "SELECT 1"}, {"id": "count", "predicted": "SELECT 2"}])
    result = shop.runpytest("--nl2sql-predictions=p.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*p.jsonl:2: id 'count' is given again (first on line 1, for every file)*"])
