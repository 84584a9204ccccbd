"""End to end through pytest: collection, verdicts, failure text, summary and JSON report.

xdist equivalence is checked once (the JSON, csv and xlsx reports identical with and without
`-n 2`), not by running every test three times.
"""

from __future__ import annotations

import csv
import json

import openpyxl
import pytest

from helpers import make_shop, neighbour_databases, read_report, write_jsonl, write_suite

CASES = [
    {"id": "count", "question": "How many items?", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item", "tags": ["agg"]},
    {"id": "swap", "question": "Names and prices", "gold": "SELECT name, price FROM item", "predicted": "SELECT price, name FROM item"},
    {"id": "cheap", "question": "Cheap items", "gold": "SELECT name FROM item WHERE price < 2", "predicted": "SELECT name FROM item WHERE price <= 2"},
    {"id": "typo", "question": "Typo", "gold": "SELECT name FROM item", "predicted": "SELECT nam FROM item"},
    {"id": "broken", "question": "Broken gold", "gold": "SELECT nope FROM item", "predicted": "SELECT 1"},
]


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    make_shop(pytester.path)
    return pytester


def test_verdicts_outcomes_and_summary(shop: pytest.Pytester) -> None:
    write_suite(shop.path, CASES, database="shop.sqlite")
    result = shop.runpytest("--nl2sql-report=json:report.json")
    result.assert_outcomes(passed=2, failed=2, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*= nl2sql =*",
        "execution accuracy with neighbour databases 2/4 = 50.0%",
        "errors: 1 case(s) could not be judged*",
    ])
    report = read_report(shop.path / "report.json")
    verdicts = {i["id"]: i["verdict"] for i in report["items"]}
    assert verdicts == {"count": "pass", "swap": "pass", "cheap": "mismatch", "typo": "pred_error", "broken": "gold_error"}
    s = report["summary"]
    assert (s["total"], s["passed"], s["errors"]) == (5, 2, 1)
    assert s["accuracy"] == pytest.approx(0.5)
    assert [i["id"] for i in report["items"]] == [c["id"] for c in CASES]  # collection order
    item = report["items"][2]
    assert item["nodeid"] == "shop.nl2sql.yaml::cheap"
    assert item["file"] == "shop.nl2sql.yaml"
    assert item["database"] == "shop.sqlite"
    assert item["reason"] == "row count"
    assert item["tags"] == [] and report["items"][0]["tags"] == ["agg"]
    assert s["by_tag"]["agg"] == {"total": 1, "passed": 1, "errors": 0, "accuracy": 1.0, "accuracy_ci": [0.206549, 1.0]}


def test_failure_explains_itself(shop: pytest.Pytester) -> None:
    cases = [{"id": "wrong", "question": "Office items", "gold": "SELECT name, price FROM item WHERE category = 'office'",
              "predicted": "SELECT price, name FROM item WHERE price < 3"}]
    write_suite(shop.path, cases, database="shop.sqlite")
    result = shop.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*nl2sql case wrong*mismatch (values)*",
        "question: Office items",
        "gold: SELECT name, price FROM item WHERE category = 'office'",
        "predicted: SELECT price, name FROM item WHERE price < 3",
        "columns paired (gold <-> predicted): name <-> name, price <-> price",
        "missing from the prediction (1 row):",
        "  - ('ink', 3.0)",
        "unexpected in the prediction (1 row):",
        "  + ('cap', 0.5)",
    ])


def test_error_verdicts_timeout_row_cap_no_prediction(shop: pytest.Pytester) -> None:
    cases = [
        {"id": "forever", "gold": "SELECT 1", "predicted": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"},
        {"id": "big", "gold": "SELECT 1", "predicted": "SELECT * FROM item a, item b, item c"},
        {"id": "nothing", "gold": "SELECT 1"},
        {"id": "blank", "gold": "SELECT 1", "predicted": "   "},
        {"id": "gold-too-big", "gold": "SELECT * FROM item a, item b, item c", "predicted": "SELECT 1"},
    ]
    write_suite(shop.path, cases, database="shop.sqlite")
    result = shop.runpytest("--nl2sql-timeout=0.5", "--nl2sql-max-rows=100", "--nl2sql-report=json:r.json")
    result.assert_outcomes(failed=4, errors=1)
    verdicts = {i["id"]: i["verdict"] for i in read_report(shop.path / "r.json")["items"]}
    assert verdicts == {"forever": "pred_timeout", "big": "too_many_rows", "nothing": "no_prediction",
                        "blank": "no_prediction", "gold-too-big": "gold_error"}


def test_missing_database_is_an_error_not_a_crash(pytester: pytest.Pytester) -> None:
    write_suite(pytester.path, [{"id": "a", "gold": "SELECT 1", "predicted": "SELECT 1"},
                                {"id": "b", "gold": "SELECT 2"}], database="nowhere.sqlite")
    result = pytester.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*nowhere.sqlite*"])
    assert not (pytester.path / "nowhere.sqlite").exists()
    assert {i["verdict"] for i in read_report(pytester.path / "r.json")["items"]} == {"gold_error"}


def test_file_formats_and_inherited_defaults(shop: pytest.Pytester) -> None:
    (shop.path / "single.nl2sql.yaml").write_text(
        "id: one\nquestion: q\ndatabase: shop.sqlite\ngold: SELECT 1\npredicted: SELECT 1.0\n")
    (shop.path / "multi.nl2sql.yml").write_text(
        "database: shop.sqlite\ngold: SELECT 1\npredicted: SELECT 1\n---\n"
        "database: shop.sqlite\ngold: SELECT 2\npredicted: SELECT '2'\n")
    write_jsonl(shop.path / "lines.nl2sql.jsonl", [
        {"question_id": 7, "database": "shop.sqlite", "SQL": "SELECT name FROM item", "predicted": "SELECT name FROM item",
         "difficulty": "simple", "evidence": "names"},
        {"database": "shop.sqlite", "query": "SELECT 3", "predicted": "SELECT 4"},
    ])
    write_suite(shop.path, [{"id": "inherits", "gold": "SELECT count(*) FROM item"},
                            {"id": "overrides", "gold": "SELECT 1", "predicted": "SELECT 1", "tags": ["own"]}],
                database="shop.sqlite", tags=["suite"], predicted="SELECT 5")
    result = shop.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=5, failed=2)
    verdicts = {i["nodeid"]: i["verdict"] for i in read_report(shop.path / "r.json")["items"]}
    assert verdicts == {
        "lines.nl2sql.jsonl::7": "pass", "lines.nl2sql.jsonl::case-0001": "mismatch",
        "multi.nl2sql.yml::case-0000": "pass", "multi.nl2sql.yml::case-0001": "pass",
        # `SELECT 5` (inherited) answers `count(*)` on the shop's 5 items only: a neighbour tells them apart
        "shop.nl2sql.yaml::inherits": "mismatch", "shop.nl2sql.yaml::overrides": "pass", "single.nl2sql.yaml::one": "pass",
    }
    items = {i["nodeid"]: i for i in read_report(shop.path / "r.json")["items"]}
    assert items["lines.nl2sql.jsonl::7"]["hardness"] == "simple"
    assert items["shop.nl2sql.yaml::inherits"]["tags"] == ["suite"]
    assert items["shop.nl2sql.yaml::overrides"]["tags"] == ["suite", "own"]


def test_malformed_files_name_file_and_line_and_the_rest_runs(shop: pytest.Pytester) -> None:
    (shop.path / "bad.nl2sql.yaml").write_text("cases:\n  - id: a\n    gold: SELECT 1\n    predicted: [unclosed\n")
    (shop.path / "keys.nl2sql.yaml").write_text(
        "database: shop.sqlite\ncases:\n  - id: fine\n    gold: SELECT 1\n    predicted: SELECT 1\n"
        "  - id: typo\n    gold_sql: SELECT 1\n  - id: fine\n    gold: SELECT 2\n")
    (shop.path / "lines.nl2sql.jsonl").write_text('{"database": "shop.sqlite", "gold": "SELECT 1", "predicted": "SELECT 1"}\n{oops\n')
    write_suite(shop.path, [{"id": "ok", "gold": "SELECT 1", "predicted": "SELECT 1"}], database="shop.sqlite")
    result = shop.runpytest()
    result.assert_outcomes(passed=3, errors=4)
    result.stdout.fnmatch_lines_random([
        "*bad.nl2sql.yaml:4: invalid YAML*",
        "*keys.nl2sql.yaml:6: unknown key 'gold_sql'*",
        "*keys.nl2sql.yaml:8: duplicate id 'fine' (first used on line 3)*",
        "*lines.nl2sql.jsonl:2: invalid JSON*",
    ])


def test_keyword_selection_by_tag_database_and_hardness(shop: pytest.Pytester) -> None:
    write_suite(shop.path, [
        {"id": "a", "gold": "SELECT 1", "predicted": "SELECT 1", "tags": ["joins"]},
        {"id": "b", "gold": "SELECT name FROM item", "predicted": "SELECT name FROM item", "hardness": "extra"},
        {"id": "c", "gold": "SELECT 1", "predicted": "SELECT 1"},
    ], database="shop.sqlite")
    shop.runpytest("-k", "joins").assert_outcomes(passed=1)
    shop.runpytest("-k", "extra").assert_outcomes(passed=1)
    shop.runpytest("-k", "shop.sqlite and not joins").assert_outcomes(passed=2)


def test_predictions_files_jsonl_and_aligned(shop: pytest.Pytester) -> None:
    cases = [{"id": "a", "gold": "SELECT 1"}, {"id": "b", "gold": "SELECT 2"}, {"id": "c", "gold": "SELECT 3", "predicted": "SELECT 3"}]
    write_suite(shop.path, cases, database="shop.sqlite")
    write_jsonl(shop.path / "p.jsonl", [{"id": "a", "predicted": "SELECT 1"}, {"id": "b", "predicted": "SELECT 9"}])
    shop.runpytest("--nl2sql-predictions=p.jsonl").assert_outcomes(passed=2, failed=1)
    # one query per line, aligned with the cases; a blank line is an empty prediction, never a shift
    (shop.path / "p.sql").write_text("SELECT 1\n\nSELECT 3\tshop\n")
    result = shop.runpytest("--nl2sql-predictions=p.sql", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=2, failed=1)
    assert [i["verdict"] for i in read_report(shop.path / "r.json")["items"]] == ["pass", "no_prediction", "pass"]


def test_aligned_predictions_with_several_suites_is_a_usage_error(shop: pytest.Pytester) -> None:
    write_suite(shop.path, [{"id": "a", "gold": "SELECT 1"}], database="shop.sqlite")
    write_suite(shop.path, [{"id": "b", "gold": "SELECT 1"}], name="other.nl2sql.yaml", database="shop.sqlite")
    (shop.path / "p.sql").write_text("SELECT 1\n")
    result = shop.runpytest("--nl2sql-predictions=p.sql")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*aligned with one suite*2 case files*"])


def test_db_id_layout_and_db_dir_option(pytester: pytest.Pytester) -> None:
    (pytester.path / "dbs" / "shop").mkdir(parents=True)
    make_shop(pytester.path / "dbs" / "shop", "shop.sqlite")
    write_suite(pytester.path, [{"id": "a", "db_id": "shop", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"}])
    result = pytester.runpytest("--nl2sql-db-dir=dbs", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1)
    assert read_report(pytester.path / "r.json")["items"][0]["database"] == "shop"


# The xdist run below also holds the cases whose xdist equivalence other files leave to it (one
# pair of runs instead of one per feature): result files, soft scores and near misses (those of
# test_result_files.py), neighbour verdicts, a counterexample and a fragile pass (the accidental
# passes of test_neighbours_judging.py, and three cases checked on the same neighbours), and
# term-selection cases, whose csv and xlsx reports must not depend on xdist either (those of
# test_plugin_reports.py); and it shows `--tb=line` under xdist (test_plugin_ux.py tests the
# traceback styles without it).
OFFICE = "SELECT name, price FROM item WHERE category = 'office'"
RESULT_FILE_CASES = [
    {"id": "wide", "gold": OFFICE, "predicted_result": "results/wide.csv"},
    {"id": "order", "gold": "SELECT name FROM item ORDER BY price", "predicted": "SELECT name FROM item ORDER BY price DESC"},
    {"id": "pass", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) AS n FROM item"},
    {"id": "error", "gold": "SELECT 1", "predicted": "SELECT nope"},
]
NEIGHBOUR_CASES = [
    # the shop's names are all distinct and no price sits on 2.5: the real data hides both mistakes
    {"id": "distinct", "gold": "SELECT DISTINCT name FROM item", "predicted": "SELECT name FROM item"},
    {"id": "boundary", "gold": "SELECT name FROM item WHERE price >= 2.5", "predicted": "SELECT name FROM item WHERE price > 2.5"},
    {"id": "rewrite", "gold": "SELECT name FROM item WHERE price >= 2.5",
     "predicted": "select i.\"name\" from item as i where not (i.price < 2.5)"},
] + [{"id": f"count-{n}", "gold": "SELECT count(*) FROM item WHERE price > 1",
      "predicted": "SELECT count(id) FROM item WHERE price > 1"} for n in range(3)]


def _terms(*ids: str) -> list[dict[str, object]]:
    values = [{"id": i, "name": f"indicator {i}"} for i in ids]
    return [{"dataset_id": "IMF.RES:WEO", "dimensions": [{"dimension_name": "INDICATOR", "values": values}]}]


# spec 002's worked example (precision 2/3, recall 1) and a term-selection case that passes
TERM_CASES = [
    {"id": "gdp", "predicted": _terms("GDP", "GDPPC", "GDP_CONST"),
     "conversation": [{"role": "user", "content": "Show GDP and GDP per capita", "target": {"indicator_selection": _terms("GDP", "GDPPC")}}]},
    {"id": "population", "predicted": _terms("LP"),
     "conversation": [{"role": "user", "content": "Population of Mexico", "target": {"indicator_selection": _terms("LP")}}]},
]


def test_json_report_identical_with_and_without_xdist(shop: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write_suite(shop.path, CASES * 1, database="shop.sqlite")
    (shop.path / "results").mkdir()
    (shop.path / "results" / "wide.csv").write_text("name,price,category\npen,1.5,office\nink,3,office\npad,2,office\n")
    write_suite(shop.path, RESULT_FILE_CASES, name="results.nl2sql.yaml", database="shop.sqlite")
    write_suite(shop.path, NEIGHBOUR_CASES, name="neighbours.nl2sql.yaml", database="shop.sqlite")
    write_suite(shop.path, TERM_CASES, name="imf.nl2sql.yaml")
    reports, tables, caches = [], [], []
    for args in ([], ["-n", "2"]):
        # each run generates its neighbours itself (the workers each theirs): the same whatever the workers
        caches.append(shop.path / f"cache{len(caches)}")
        monkeypatch.setenv("NL2SQL_CACHE_DIR", str(caches[-1]))
        # a deselected case, too; and --tb=line, whose one line per failure must come from the workers
        result = shop.runpytest(*args, "-k", "not count-2", "--tb=line", "--nl2sql-report=json:r.json",
                                "--nl2sql-report=csv:r.csv", "--nl2sql-report=xlsx:r.xlsx")
        result.stdout.fnmatch_lines(["*shop.nl2sql.yaml:*: nl2sql case cheap * mismatch (row count)"])
        data = read_report(shop.path / "r.json")
        for item in data["items"]:
            item.pop("latency"), item.pop("execution_time")  # timings differ between any two runs
        data["summary"].pop("latency"), data["summary"].pop("execution_time")
        data.pop("run")  # when and how long: differs between any two runs
        reports.append(data)
        # the csv (every item's fields) and the xlsx cells, but for when the run started
        with open(shop.path / "r.csv", newline="") as handle:
            rows = [{k: v for k, v in row.items() if k != "run_started"} for row in csv.DictReader(handle)]
        cells = [[[c.value for c in row] for ws in openpyxl.load_workbook(shop.path / "r.xlsx") for row in ws.iter_rows()
                  if row[0].value != "started"]]
        tables.append((rows, cells))
    assert reports[0] == reports[1]
    assert tables[0] == tables[1]
    generated = [neighbour_databases(cache) for cache in caches]
    assert generated[0] == generated[1] and len(generated[0]) >= 3  # every gold's neighbours, row for row
    items = {(i["file"], i["id"]): i for i in reports[0]["items"]}
    assert len(items) == len(CASES) + len(RESULT_FILE_CASES) + len(NEIGHBOUR_CASES) + len(TERM_CASES) - 1
    assert len(tables[0][0]) == len(items) and tables[0][1]  # the csv has every item; the workbook its sheets
    # both term-selection cases ran: spec 002's worked example (precision 2/3) and a full match
    assert [i["kind"] for i in reports[0]["items"]].count("term_selection") == 2
    assert reports[0]["summary"]["term_selection"]["macro_precision"] == pytest.approx(5 / 6)
    assert ("neighbours.nl2sql.yaml", "count-2") not in items and ("neighbours.nl2sql.yaml", "count-1") in items
    # what the new fields hold, so that their equality above means something
    assert items["results.nl2sql.yaml", "order"]["near_miss"] == "order_only"
    assert items["results.nl2sql.yaml", "wide"]["predicted_result"] and items["results.nl2sql.yaml", "wide"]["soft_scores"]
    assert reports[0]["summary"]["soft_scores"] and reports[0]["summary"]["near_miss"]
    # ... and the neighbours: one mistake caught on a neighbour, one fragile pass
    assert reports[0]["summary"]["neighbours"]["caught"] == 1 and reports[0]["summary"]["fragile"] == 1
    assert items["neighbours.nl2sql.yaml", "boundary"]["reason"] == "neighbour database"


def test_without_xdist_plugin(shop: pytest.Pytester) -> None:
    write_suite(shop.path, CASES, database="shop.sqlite")
    shop.runpytest("-p", "no:xdist").assert_outcomes(passed=2, failed=2, errors=1)


def test_assert_on_query_results_shows_the_diff(shop: pytest.Pytester) -> None:
    shop.makepyfile(
        """
        from pytest_nl2sql.engines import open_engine
        from pytest_nl2sql.engines.base import Limits

        def test_results():
            db = open_engine("shop.sqlite")
            pred = db.execute("SELECT name FROM item WHERE price < 3", Limits())
            gold = db.execute("SELECT name FROM item WHERE price <= 3", Limits())
            assert pred == gold
        """
    )
    result = shop.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*query results differ (row count)*", "*missing from the prediction (1 row):*", "*'ink'*"])


def test_report_paths_are_relative_to_the_invocation_dir(shop: pytest.Pytester) -> None:
    write_suite(shop.path, [{"id": "a", "gold": "SELECT 1", "predicted": "SELECT 1"}], database="shop.sqlite")
    result = shop.runpytest("--nl2sql-report=json", "--nl2sql-report=json:out/x.json")
    result.assert_outcomes(passed=1)
    assert json.loads((shop.path / "nl2sql-report.json").read_text())["summary"]["passed"] == 1
    assert (shop.path / "out" / "x.json").exists()
    result.stdout.fnmatch_lines(["json report: *nl2sql-report.json"])


def test_no_case_at_all_still_writes_the_requested_report_and_checks_thresholds(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_other():\n    pass\n")
    result = pytester.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1)
    report = read_report(pytester.path / "r.json")
    assert report["items"] == [] and report["summary"]["total"] == 0 and report["summary"]["accuracy"] is None
    result.stdout.fnmatch_lines(["*= nl2sql =*", "no nl2sql case ran"])
    gated = pytester.runpytest("--nl2sql-fail-under=0.5")  # a gate over no cases is a misconfiguration
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    quiet = pytester.runpytest()
    assert "= nl2sql =" not in quiet.stdout.str()


def test_no_case_drops_out_of_the_report(shop: pytest.Pytester) -> None:
    """Whatever goes wrong while judging, every case keeps a result in the report."""
    deep = "SELECT " + "(" * 400 + "1" + ")" * 400
    write_suite(shop.path, [
        {"id": "deep", "gold": "SELECT 1", "predicted": deep, "dialect": "postgres"},
        {"id": "refused", "gold": "SELECT 1"},
        {"id": "fine", "gold": "SELECT 1", "predicted": "SELECT 1"},
    ], database="shop.sqlite")
    shop.makeconftest(
        "import pytest\n"
        "def pytest_nl2sql_predict(case):\n"
        "    if case.id == 'refused':\n"
        "        pytest.fail('the model refused')\n")
    result = shop.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, failed=2)
    items = {i["id"]: i for i in read_report(shop.path / "r.json")["items"]}
    assert set(items) == {"deep", "refused", "fine"}
    assert items["deep"]["verdict"] == "pred_error"
    assert (items["refused"]["verdict"], items["refused"]["reason"]) == ("predictor_error", "Failed: the model refused")


def test_aligned_predictions_must_match_the_suite(shop: pytest.Pytester) -> None:
    write_suite(shop.path, [{"id": "a", "gold": "SELECT 1"}, {"id": "b", "gold": "SELECT 2"}], database="shop.sqlite")
    (shop.path / "p.sql").write_text("SELECT 1\nSELECT\n2\n")  # one prediction broken over two lines
    result = shop.runpytest("--nl2sql-predictions=p.sql")
    assert result.ret in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.TESTS_FAILED)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert "p.sql has 3 lines for the 2 cases of shop.nl2sql.yaml" in result.stdout.str() + result.stderr.str()
    # -k selects cases of one suite: the other suite no longer stands in the way
    write_suite(shop.path, [{"id": "c", "gold": "SELECT 1"}], name="other.nl2sql.yaml", database="shop.sqlite")
    (shop.path / "p.sql").write_text("SELECT 1\nSELECT 2\n")
    shop.runpytest("--nl2sql-predictions=p.sql", "shop.nl2sql.yaml").assert_outcomes(passed=2)


def test_unwritable_report_and_unreadable_old_baseline_do_not_crash(shop: pytest.Pytester) -> None:
    write_suite(shop.path, [{"id": "a", "gold": "SELECT 1", "predicted": "SELECT 1"}], database="shop.sqlite")
    (shop.path / "taken").mkdir()
    (shop.path / "base.json").write_text("<<<<<<< HEAD\n{}\n=======\n")  # a merge conflict
    result = shop.runpytest("--nl2sql-report=json:taken", "--nl2sql-report=md:ok.md",
                            "--nl2sql-baseline=base.json", "--nl2sql-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the report that could not be written fails the run
    assert "INTERNALERROR" not in result.stdout.str()
    result.stdout.fnmatch_lines_random(["nl2sql: cannot write the json report *taken*", "md report: *ok.md",
                                        "the old baseline could not be read *: written from scratch"])
    assert (shop.path / "ok.md").exists()
    assert '"a"' in (shop.path / "base.json").read_text()
