"""End to end: every case file entry is one item with its own node id, selectable by it."""

from __future__ import annotations

import json

import pytest

from helpers import make_shop, read_report


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    make_shop(pytester.path)
    return pytester


def test_duplicate_ids_are_distinct_items_and_the_counts_agree(shop: pytest.Pytester) -> None:
    (shop.path / "s.nl2sql.yaml").write_text(
        "database: shop.sqlite\ncases:\n"
        "  - {id: a, gold: SELECT 1, predicted: SELECT 1}\n"
        "  - {id: a, gold: SELECT 2, predicted: SELECT 2}\n"
        "  - {id: a-duplicate-1, gold: SELECT 3, predicted: SELECT 3}\n")
    collected = shop.runpytest("--collect-only", "-q")
    nodeids = [line for line in collected.outlines if line.startswith("s.nl2sql.yaml::")]
    assert nodeids == ["s.nl2sql.yaml::a", "s.nl2sql.yaml::a [duplicate at line 4]", "s.nl2sql.yaml::a-duplicate-1"]
    result = shop.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*s.nl2sql.yaml:4: *duplicate id 'a' (first used on line 3)*"])
    report = read_report(shop.path / "r.json")
    assert [i["nodeid"] for i in report["items"]] == nodeids
    assert (report["summary"]["total"], report["summary"]["passed"], report["summary"]["errors"]) == (3, 2, 1)
    shop.runpytest("s.nl2sql.yaml::a [duplicate at line 4]").assert_outcomes(errors=1)


def test_an_id_with_double_colon_is_an_error_item_that_can_be_selected(shop: pytest.Pytester) -> None:
    (shop.path / "s.nl2sql.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "ok", "database": "shop.sqlite", "gold": "SELECT 1", "predicted": "SELECT 1"},
        {"id": "suite::case", "database": "shop.sqlite", "gold": "SELECT 1", "predicted": "SELECT 1"},
    ]))
    result = shop.runpytest("s.nl2sql.jsonl::case-0001")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*s.nl2sql.jsonl:2: *id 'suite::case' contains '::'*"])
    shop.runpytest().assert_outcomes(passed=1, errors=1)
