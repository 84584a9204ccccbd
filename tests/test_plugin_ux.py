"""The first day of a new user: help, traceback styles, empty input, names of files in failures,
what junitxml carries, and summary tables that say what they count."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from helpers import make_shop, write_jsonl, write_suite

CASES = [
    {"id": "ok", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item", "tags": ["good"]},
    {"id": "wrong", "gold": "SELECT name FROM item WHERE price < 2", "predicted": "SELECT name FROM item", "tags": ["bad"]},
    {"id": "typo", "gold": "SELECT name FROM item", "predicted": "SELECT nam FROM item", "tags": ["bad"]},
]


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    make_shop(pytester.path)
    return pytester


def test_help_lists_the_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*--nl2sql-fail-under*", "*80%*", "*--nl2sql-confine*"])


def test_tb_line_gives_one_line_per_failing_case(shop: pytest.Pytester) -> None:
    write_suite(shop.path, CASES, database="shop.sqlite")
    full = shop.runpytest()
    line = shop.runpytest("--tb=line")
    line.assert_outcomes(passed=1, failed=2)
    line.stdout.fnmatch_lines([
        "*shop.nl2sql.yaml:*: nl2sql case wrong * mismatch (row count)",
        "*shop.nl2sql.yaml:*: nl2sql case typo * pred_error (no such column: nam)",
    ])
    assert "missing from the prediction" not in line.stdout.str()
    assert len(line.stdout.lines) < len(full.stdout.lines) - 10


# `--tb=line` under xdist: in test_plugin_core.py::test_json_report_identical_with_and_without_xdist,
# whose xdist run is there anyway.


def test_the_failures_summary_does_not_scan_every_quiet_report_per_failure(shop: pytest.Pytester) -> None:
    # pytest looks for each failed item's teardown output in every passed setup/teardown report
    # (O(failures x items): a tenth of a Spider run); a case's, which show nothing, are dropped first
    write_suite(shop.path, CASES, database="shop.sqlite")
    shop.makeconftest("""
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_terminal_summary(terminalreporter):
            quiet = terminalreporter.stats.get("", [])
            terminalreporter.write_line(f"quiet reports: {sorted(r.nodeid for r in quiet)}")
    """)
    (shop.path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    full = shop.runpytest("-rA")
    full.assert_outcomes(passed=2, failed=2)
    full.stdout.fnmatch_lines(["*_ nl2sql case wrong _*", "*mismatch (row count)", "*_ nl2sql case typo _*",
                               "quiet reports: ['test_plain.py::test_plain', 'test_plain.py::test_plain']"])


def test_tb_short_gives_the_verdict_and_reason_only(shop: pytest.Pytester) -> None:
    write_suite(shop.path, CASES, database="shop.sqlite")
    result = shop.runpytest("--tb=short")
    result.stdout.fnmatch_lines(["nl2sql case wrong [[]shop.nl2sql.yaml:*[]]: mismatch (row count)"])
    text = result.stdout.str()
    assert "missing from the prediction" not in text and "question:" not in text


@pytest.mark.parametrize("content", ["", "cases: []\n", "# only a comment\n"], ids=["empty", "no-cases", "comment"])
def test_an_empty_case_file_is_a_warning_naming_it(shop: pytest.Pytester, content: str) -> None:
    (shop.path / "empty.nl2sql.yaml").write_text(content)
    write_suite(shop.path, CASES[:1], database="shop.sqlite")
    result = shop.runpytest("-W", "default")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*NL2SQLWarning: empty.nl2sql.yaml*: no cases*"])


def test_predictions_matching_no_case_are_a_warning_and_no_prediction_says_where_it_looked(shop: pytest.Pytester) -> None:
    write_suite(shop.path, [{"id": "q", "gold": "SELECT 1"}], database="shop.sqlite")
    write_jsonl(shop.path / "preds.jsonl", [{"id": "other", "predicted": "SELECT 1"}])
    result = shop.runpytest("--nl2sql-predictions=preds.jsonl", "-W", "default")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "no_prediction: no prediction for this case (no pytest_nl2sql_predict hook (a model) in a conftest.py;"
        " no entry for id 'q' in *preds.jsonl; the case has no `predicted` or `predicted_result`)",
        "*preds.jsonl: none of its 1 ids matches one of the 1 collected cases*",
    ])
    assert "returned nothing" not in result.stdout.str()  # no hook: none to blame
    shop.makeconftest("def pytest_nl2sql_predict(case):\n    return None\n")
    shop.runpytest("--nl2sql-predictions=preds.jsonl").stdout.fnmatch_lines([
        "no_prediction: no prediction for this case (the pytest_nl2sql_predict hook returned nothing; no entry*"])


def test_junitxml_carries_readable_properties_not_the_record(shop: pytest.Pytester) -> None:
    write_suite(shop.path, CASES, database="shop.sqlite")
    shop.runpytest("--junitxml=out.xml")
    root = ET.parse(shop.path / "out.xml").getroot()
    properties = {(p.get("name"), p.get("value")) for p in root.iter("property")}
    assert ("nl2sql_verdict", "mismatch") in properties and ("nl2sql_hardness", "easy") in properties
    assert {name for name, _ in properties} <= {"nl2sql_verdict", "nl2sql_hardness", "nl2sql_baseline"}


def test_failures_and_errors_name_the_case_file_as_the_nodeid_does(shop: pytest.Pytester) -> None:
    for folder in ("a", "b"):
        (shop.path / folder).mkdir()
        make_shop(shop.path / folder)
        write_suite(shop.path / folder, [CASES[1], {"id": "broken", "gold": "SELECT nope FROM item"}], database="shop.sqlite")
    result = shop.runpytest()
    result.assert_outcomes(failed=2, errors=2)
    result.stdout.fnmatch_lines([
        "nl2sql case broken is broken (gold_error) [[]a/shop.nl2sql.yaml:*[]]",
        "nl2sql case broken is broken (gold_error) [[]b/shop.nl2sql.yaml:*[]]",
        "nl2sql case wrong [[]a/shop.nl2sql.yaml:*[]]: mismatch*",
        "nl2sql case wrong [[]b/shop.nl2sql.yaml:*[]]: mismatch*",
    ])
    failures = result.stdout.str().split("= ERRORS =")[1].split("= nl2sql =")[0]
    assert str(shop.path) not in failures


def test_partial_components_no_query_has_are_not_applicable(shop: pytest.Pytester) -> None:
    write_suite(shop.path, CASES[:2], database="shop.sqlite")
    result = shop.runpytest("-v")
    result.stdout.fnmatch_lines(["partial component match (Spider):", "  group * n/a * n/a * n/a*"])
    assert not any(line.strip().startswith("group ") and "0.000" in line for line in result.stdout.lines)


def test_a_cut_tag_table_shows_the_worst_tags_first(shop: pytest.Pytester) -> None:
    cases = [{"id": f"t{n:02d}", "gold": "SELECT 1", "predicted": "SELECT 1", "tags": [f"a{n:02d}"]} for n in range(20)]
    cases.append({"id": "z", "gold": "SELECT 1", "predicted": "SELECT 2", "tags": ["zz-worst"]})
    write_suite(shop.path, cases, database="shop.sqlite")
    result = shop.runpytest()
    result.stdout.fnmatch_lines(["by tag (SQL cases) (the 15 worst of 21):", "  zz-worst *0/1 = 0.0%*"])


def test_help_shows_percent_signs_as_written(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    assert "80%%" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*nl2sql_fail_under (linelist):*", "*fail when accuracy is below RATE*0.8, 80%,*"])


def test_help_works_before_the_baseline_the_ini_names_is_written(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nnl2sql_baseline = not-written-yet.json\n")
    assert pytester.runpytest("--help").ret == pytest.ExitCode.OK
    assert pytester.runpytest().ret == pytest.ExitCode.USAGE_ERROR  # a run still needs it
