"""Result files (spec 004's execution-result mode), soft scores and near misses, end to end.

`predicted_result: PATH` on a case and `--nl2sql-predictions=DIR` of `<id>.csv` results are compared
like the results of predicted SQL and count in the accuracy; CSV cells are typed. The JSON report
carries `soft_scores` and `near_miss` per item and their means and counts in the summary; a failure
names its near miss. xdist equivalence of the new fields is checked once, in
`test_plugin_core.py::test_json_report_identical_with_and_without_xdist` (its suite holds these
result-file, near-miss and soft-score cases).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from helpers import make_shop, read_report, write_suite
from pytest_nl2sql.cases.read import Case, load_case_file
from pytest_nl2sql.judge.execute import read_result_csv
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions

OFFICE = "SELECT name, price FROM item WHERE category = 'office'"


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    make_shop(pytester.path)
    return pytester


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ------------------------------------------------------------------------ typed CSV values

def test_csv_cells_are_typed(tmp_path: Path) -> None:
    path = write(tmp_path / "r.csv", "n,x,d,t,s,z\n1,1.50,2024-01-02,2024-01-02T03:04:05+02:00,abc,007\n,,,,,\n")
    result = read_result_csv(path)
    assert result.columns == ("n", "x", "d", "t", "s", "z")
    first, empty = result.rows
    assert first[:3] == (1, 1.5, dt.date(2024, 1, 2))
    assert first[3] == dt.datetime(2024, 1, 2, 1, 4, 5, tzinfo=dt.timezone.utc)  # the same instant
    assert first[4:] == ("abc", "007")  # leading zeros stay as written (the comparison still equates 7)
    assert empty == (None,) * 6


def test_a_blank_line_of_a_one_column_csv_is_null(tmp_path: Path) -> None:
    assert read_result_csv(write(tmp_path / "r.csv", "n\n1\n\n2\n\n")).rows == [(1,), (None,), (2,)]


def test_a_ragged_csv_names_its_row(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="row 3 has 1 cells, the header 2"):
        read_result_csv(write(tmp_path / "r.csv", "a,b\n1,2\n3\n"))


# ------------------------------------------------------------------------ end to end

def test_predicted_result_files_count_in_the_accuracy(shop: pytest.Pytester) -> None:
    write(shop.path / "results" / "office.csv", "price,name\n1.5,pen\n3,ink\n2.0,pad\n")
    write(shop.path / "results" / "wide.csv", "name,price,category\npen,1.5,office\nink,3,office\npad,2,office\n")
    write(shop.path / "gold" / "office.csv", "name,price\npen,1.50\nink,3.0\npad,2\n")
    write_suite(shop.path, [
        {"id": "office", "gold": OFFICE, "predicted_result": "results/office.csv"},
        {"id": "both-files", "gold_result": "gold/office.csv", "predicted_result": "results/office.csv"},
        {"id": "wide", "gold": OFFICE, "predicted_result": "results/wide.csv"},
        {"id": "absent", "gold": OFFICE, "predicted_result": "results/absent.csv"},
    ], database="shop.sqlite")
    result = shop.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*nl2sql case wide*: mismatch (column count), near miss: extra_columns",
        "predicted result: results/wide.csv",
        "near miss: extra_columns (every gold column is there, plus others)",
        "soft scores: columns P 0.67 R 1.00 F1 0.80; rows P 1.00 R 1.00 F1 1.00",
    ])
    result.stdout.fnmatch_lines(["*nl2sql case absent*: pred_error*cannot read predicted_result*absent.csv*"])
    report = read_report(shop.path / "r.json")
    items = {i["id"]: i for i in report["items"]}
    assert items["office"]["predicted"] is None and items["office"]["predicted_result"] == "results/office.csv"
    assert items["office"]["soft_scores"] == {"column_precision": 1.0, "column_recall": 1.0, "column_f1": 1.0,
                                              "row_precision": 1.0, "row_recall": 1.0, "row_f1": 1.0}
    assert items["wide"]["near_miss"] == "extra_columns"
    assert items["absent"]["soft_scores"] is None and items["absent"]["near_miss"] is None
    summary = report["summary"]
    assert summary["accuracy"] == 0.5 and summary["near_miss"]["extra_columns"] == 1
    # means over the four judged cases, the one that did not run counting 0
    assert summary["soft_scores"]["row_f1"] == 0.75
    assert summary["soft_scores"]["column_f1"] == pytest.approx((1 + 1 + 0.8) / 4)


def test_predictions_directory_of_result_files(shop: pytest.Pytester) -> None:
    write(shop.path / "preds" / "office.csv", "name,price\npen,1.5\nink,3.0\npad,2.0\n")
    write(shop.path / "preds" / "cheap.csv", "name\npen\ncap\n")
    write(shop.path / "preds" / "unrelated.csv", "x\n1\n")
    write_suite(shop.path, [
        {"id": "office", "gold": OFFICE, "predicted": "SELECT 1"},  # the directory answers first
        {"id": "cheap", "gold": "SELECT name, price FROM item WHERE price < 2"},
        {"id": "missing", "gold": OFFICE},
    ], database="shop.sqlite")
    result = shop.runpytest("--nl2sql-predictions=preds", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*nl2sql case cheap*: mismatch (column count), near miss: missing_columns"])
    result.stdout.fnmatch_lines(["*no_prediction*no result file missing.csv in *preds*"])
    items = {i["id"]: i for i in read_report(shop.path / "r.json")["items"]}
    assert items["office"]["verdict"] == "pass" and items["office"]["extra"]["prediction_source"] == "file"
    assert items["cheap"]["soft_scores"]["column_recall"] == 0.5
    assert items["missing"]["verdict"] == "no_prediction"


def test_near_misses_named_and_counted(shop: pytest.Pytester) -> None:
    write_suite(shop.path, [
        {"id": "order", "gold": "SELECT name FROM item ORDER BY price", "predicted": "SELECT name FROM item ORDER BY price DESC"},
        {"id": "dups", "gold": "SELECT item_id FROM sale", "predicted": "SELECT DISTINCT item_id FROM sale"},
        {"id": "limit", "gold": "SELECT name FROM item ORDER BY price", "predicted": "SELECT name FROM item ORDER BY price LIMIT 2"},
        {"id": "case", "gold": "SELECT name FROM item", "predicted": "SELECT upper(name) FROM item"},
        {"id": "null", "gold": "SELECT NULL", "predicted": "SELECT 0"},
        {"id": "float", "gold": "SELECT sum(price) FROM item", "predicted": "SELECT sum(price) * 1.00001 FROM item"},
        {"id": "wrong", "gold": "SELECT name FROM item", "predicted": "SELECT category FROM item"},
        {"id": "error", "gold": "SELECT name FROM item", "predicted": "SELECT nope FROM item"},
    ], database="shop.sqlite")
    result = shop.runpytest("--nl2sql-report=json:r.json", "--nl2sql-report=md:r.md")
    result.assert_outcomes(failed=8)
    result.stdout.fnmatch_lines(["*nl2sql case order*: mismatch (order), near miss: order_only"])
    items = {i["id"]: i for i in read_report(shop.path / "r.json")["items"]}
    assert {k: v["near_miss"] for k, v in items.items()} == {
        "order": "order_only", "dups": "duplicates", "limit": "limit_prefix", "case": "case_or_whitespace",
        "null": "null_vs_zero_or_empty", "float": "float_tolerance", "wrong": None, "error": None,
    }
    summary = read_report(shop.path / "r.json")["summary"]
    assert sum(summary["near_miss"].values()) == 6 and summary["near_miss"]["limit_prefix"] == 1
    md = (shop.path / "r.md").read_text()
    assert "- near misses: `order_only` 1, `duplicates` 1" in md and "| near miss | row F1 |" in md


def test_condition_cols_by_name(shop: pytest.Pytester) -> None:
    columns = {"mode": "columns", "condition_cols": ["NAME", 1]}
    write_suite(shop.path, [
        {"id": "named", "gold": OFFICE, "predicted": "SELECT category, price, name FROM item WHERE category = 'office'",
         "compare": columns},
        # each column right on its own, the prices moved to other names: Spider 2.0's checker passes it
        {"id": "scrambled", "gold": "SELECT name, price FROM item",
         "predicted": "SELECT name, (SELECT price FROM item AS i2 WHERE i2.id = 6 - item.id) FROM item", "compare": columns},
        {"id": "unknown", "gold": OFFICE, "predicted": OFFICE, "compare": {"mode": "columns", "condition_cols": ["colour"]}},
        {"id": "star", "gold": "SELECT * FROM item", "predicted": "SELECT * FROM item",
         "compare": {"mode": "columns", "condition_cols": ["colour"]}},
    ], database="shop.sqlite")
    result = shop.runpytest("-rE")
    result.assert_outcomes(passed=1, failed=1, errors=2)
    result.stdout.fnmatch_lines(["*nl2sql case scrambled*: mismatch (values)",
                                 "*no choice of predicted columns keeps the gold's rows together*"])
    result.stdout.fnmatch_lines(["*ERROR at setup of nl2sql case unknown*",
                                 "shop.nl2sql.yaml:*: compare option condition_cols names column 'colour', which the gold result does not have*"])
    result.stdout.fnmatch_lines(["*star is broken (gold_error)*", "*condition_cols names column 'colour'*its columns: 'id', 'name', 'price', 'category'*"])


def test_unknown_condition_name_is_found_at_collection(tmp_path: Path) -> None:
    make_shop(tmp_path)
    write(tmp_path / "gold.csv", "Name,Price\npen,1.5\n")
    path = write_suite(tmp_path, [
        {"id": "sql", "gold": "SELECT name AS label FROM item", "compare": {"mode": "columns", "condition_cols": ["name"]}},
        {"id": "csv", "gold_result": "gold.csv", "compare": {"mode": "columns", "condition_cols": ["price", "colour"]}},
        {"id": "ok", "gold_result": "gold.csv", "compare": {"mode": "columns", "condition_cols": ["price"]}},
    ], database="shop.sqlite")
    sql, csv_case, ok = load_case_file(path)
    assert "'name'" in sql.message and "'label'" in sql.message
    assert "'colour'" in csv_case.message
    assert isinstance(ok, Case)


def test_synonyms_from_the_suite_the_case_and_the_run(tmp_path: Path) -> None:
    make_shop(tmp_path)
    path = write_suite(tmp_path, [
        {"id": "a", "gold": "SELECT name AS colour, price AS cost FROM item",
         "predicted": "SELECT name AS color, price AS expense FROM item", "compare": {"synonyms": {"expense": "cost"}}},
    ], database="shop.sqlite", compare={"synonyms": {"colour": "color"}})
    (case,) = load_case_file(path)
    assert case.compare["synonyms"] == {"colour": "color", "expense": "cost"}  # the case's words add to the suite's
    outcome = Pipeline().evaluate(case, CaseLabel("a", "a"))
    assert outcome.result.verdict.value == "pass" and outcome.result.soft_scores["column_f1"] == 1.0
    # the run's synonyms (the ini option nl2sql_synonyms) add to the map too
    path = write_suite(tmp_path, [{"id": "b", "gold": "SELECT name AS colour FROM item", "predicted": "SELECT name AS hue FROM item"}],
                       name="b.nl2sql.yaml", database="shop.sqlite")
    (case,) = load_case_file(path)
    assert Pipeline().evaluate(case, CaseLabel("b", "b")).result.soft_scores["column_f1"] == 0.0
    run = Pipeline(RunOptions(synonyms=(("hue", "colour"),)))
    assert run.evaluate(case, CaseLabel("b", "b")).result.soft_scores["column_f1"] == 1.0


def test_a_bad_synonym_map_is_an_invalid_case(tmp_path: Path) -> None:
    make_shop(tmp_path)
    path = write_suite(tmp_path, [{"id": "a", "gold": "SELECT 1", "compare": {"synonyms": {"two words": "x"}}}],
                       database="shop.sqlite")
    (entry,) = load_case_file(path)
    assert "one word" in entry.message


def test_a_result_file_is_capped_before_it_is_held(tmp_path: Path) -> None:
    """Bytes checked before reading, rows as they are read: a file past either cap is refused
    without holding it (a 20 MB CSV once took 1.7 GB before the row cap was looked at)."""
    from pytest_nl2sql.engines.base import Limits
    from pytest_nl2sql.judge.execute import ResultFileTooLarge, read_result_csv

    path = tmp_path / "big.csv"
    path.write_text("n\n" + "".join(f"{i}\n" for i in range(5000)))
    with pytest.raises(ResultFileTooLarge, match="over the size cap of 100"):
        read_result_csv(path, limits=Limits(max_bytes=100))
    with pytest.raises(ResultFileTooLarge, match="more than 1000 rows"):
        read_result_csv(path, limits=Limits(max_rows=1000))
    assert len(read_result_csv(path, limits=Limits(max_rows=5000)).rows) == 5000


def test_a_predicted_result_past_the_row_cap_is_too_many_rows(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    (pytester.path / "pred.csv").write_text("n\n" + "".join(f"{i}\n" for i in range(50)))
    write_suite(pytester.path, [{"id": "r", "gold": "SELECT 1", "predicted_result": "pred.csv"}], database="shop.sqlite")
    result = pytester.runpytest("--nl2sql-max-rows=10", "--nl2sql-report=json:r.json")
    result.assert_outcomes(failed=1)
    (item,) = read_report(pytester.path / "r.json")["items"]
    assert item["verdict"] == "too_many_rows" and "more than 10 rows" in item["reason"]
