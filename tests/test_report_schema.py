"""The JSON Schema of the JSON report (pytest_nl2sql/reports/report.schema.json, draft 2020-12):
the reports real runs write validate against it, a field of the wrong type does not, and it names
exactly the fields the code writes, with the vocabularies the code uses.

Besides these, tests/conftest.py checks every JSON report the test suite writes in process against
the schema, every field described (`closed`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import make_shop, write_suite
from pytest_nl2sql import evaluate_suite
from pytest_nl2sql.gate.run import RunInfo
from pytest_nl2sql.judge.answer import USAGE_KEYS
from pytest_nl2sql.judge.predict import PredictionSource
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.exact import COMPONENTS
from pytest_nl2sql.metrics.soft import SCORE_NAMES
from pytest_nl2sql.metrics.summary import summarize
from pytest_nl2sql.reports.schema import VALIDATORS, closed_schema, load_schema, report_errors
from pytest_nl2sql.vocab import NEAR_MISSES, BaselineStatus, Kind, Verdict

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema()
DEFS = SCHEMA["$defs"]


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.Draft202012Validator.check_schema(closed_schema(SCHEMA))
    assert SCHEMA["required"] == ["run", "summary", "items"]


def test_the_example_suites_report_validates(pytester: pytest.Pytester) -> None:
    """The quick start's run: every kind of verdict, a baseline, a model hook, term selection."""
    shutil.copytree(ROOT / "example_suites", pytester.path / "example_suites",
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    pytester.runpytest("example_suites", "--nl2sql-report=json:report.json", "--nl2sql-label=examples",
                       "--nl2sql-timeout=0.5")  # the runaway query need not spend the suite's 2 s to time out
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert report_errors(report, closed=True) == []
    verdicts = Counter(item["verdict"] for item in report["items"])
    # the report exercises the schema: most verdicts, both kinds, a baseline, diffs, term scores
    assert len(verdicts) >= 6 and {item["kind"] for item in report["items"]} == {"sql", "term_selection"}
    assert report["summary"]["baseline"] is not None
    assert any(item["diff"] for item in report["items"]) and any(item["term_selection"] for item in report["items"])


# Spider dev questions whose report holds each kind of item: easy, hard, two mismatches with their
# diffs, two fragile passes with their counterexamples (DAIL-SQL's predictions, concert_singer)
SPIDER_PICKS = (0, 6, 12, 16, 22, 23)


@pytest.mark.spider
def test_a_spider_dev_report_validates(pytester: pytest.Pytester, spider_dir: Path) -> None:
    """Six Spider dev questions with a real model's predictions, neighbour databases on: real data
    in diffs and counterexamples. (The whole dev set, without neighbours, runs in
    tests/test_plugin_spider.py, whose report the conftest check sees.)"""
    predictions = spider_dir / "predictions" / "dail_sql_gpt4.sql"
    if not predictions.exists():
        pytest.skip(f"no predictions file {predictions}")
    questions = json.loads((spider_dir / "dev.json").read_text(encoding="utf-8"))
    answers = predictions.read_text().splitlines()
    (pytester.path / "dev.json").write_text(json.dumps([questions[n] for n in SPIDER_PICKS]), encoding="utf-8")
    (pytester.path / "predictions.sql").write_text("".join(answers[n] + "\n" for n in SPIDER_PICKS))
    (pytester.path / "spider_dev.nl2sql.yaml").write_text(yaml.safe_dump({"source": {
        "format": "spider", "questions": str(pytester.path / "dev.json"), "db_dir": str(spider_dir / "database"),
        "predictions": str(pytester.path / "predictions.sql")}}))
    pytester.runpytest("-p", "no:cacheprovider", "--nl2sql-report=json:report.json")
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert len(report["items"]) == len(SPIDER_PICKS)
    assert report_errors(report, closed=True) == []
    assert sum(1 for item in report["items"] if item["diff"]) == 2
    assert any(item["neighbours"] and item["neighbours"]["counterexample"] for item in report["items"])


@pytest.fixture(scope="module")
def shop_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A small run's JSON report as written (evaluate_suite, no pytest run): a pass, a mismatch
    with its diff, a prediction that does not run."""
    folder = tmp_path_factory.mktemp("shop")
    make_shop(folder)
    suite = write_suite(folder, [
        {"id": "count", "question": "How many items?", "gold": "SELECT count(*) FROM item",
         "predicted": "SELECT count(id) FROM item", "tags": ["easy"]},
        {"id": "cheap", "question": "Which items cost under 2?", "gold": "SELECT name FROM item WHERE price < 2",
         "predicted": "SELECT name FROM item WHERE price <= 2"},
        {"id": "broken", "question": "Which items?", "gold": "SELECT name FROM item", "predicted": "SELECT nme FROM item"},
    ], database="shop.sqlite")
    path = folder / "report.json"
    evaluate_suite(suite, rootdir=folder, reports=[f"json:{path}"], timeout=30)
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(params=VALIDATORS)
def validator(request: pytest.FixtureRequest) -> str:
    """Each validator `report_errors` can use: they must agree (the test suite's own check uses the
    faster, jsonschema-rs; a user may have only jsonschema)."""
    pytest.importorskip(request.param)
    return request.param


def test_a_report_with_a_field_of_the_wrong_type_does_not_validate(shop_report: dict[str, Any], validator: str) -> None:
    report = copy.deepcopy(shop_report)
    assert report_errors(report, closed=True, validator=validator) == []
    wrong: list[tuple[str, Any]] = [
        ("items/0/passed", "yes"),
        ("items/0/verdict", "passed"),
        ("items/0/tags", "shop"),
        ("items/0/attempts", -1),
        ("items/0/gold", 42),
        ("summary/total", "3"),
        ("summary/accuracy", 1.5),
        ("summary/by_hardness/easy/passed", 1.5),
        ("summary/by_verdict/won", 1),
        ("summary/accuracy_ci", [0.1]),
        ("run/complete", 1),
        ("run/started", 20240101),
        ("run/started", "yesterday"),
    ]
    for where, value in wrong:
        broken = copy.deepcopy(report)
        *path, last = where.split("/")
        target = broken
        for step in path:
            target = target[int(step)] if isinstance(target, list) else target[step]
        target[last] = value
        errors = report_errors(broken, validator=validator)
        assert len(errors) == 1 and errors[0].split(":")[0] in (where, "/".join(path)), (where, errors)  # the field, or its object
    for missing in ("run", "summary", "items"):
        assert report_errors({k: v for k, v in report.items() if k != missing}, validator=validator), missing
    item = {k: v for k, v in report["items"][0].items() if k != "verdict"}
    errors = report_errors({**report, "items": [item]}, validator=validator)
    assert len(errors) == 1 and errors[0].startswith("items/0:") and "verdict" in errors[0], errors


def test_a_field_the_schema_does_not_describe_is_an_error_when_closed_only(shop_report: dict[str, Any], validator: str) -> None:
    """Readers may validate a newer plugin's report with this schema; the project's tests may not
    write a field it does not describe."""
    report = copy.deepcopy(shop_report)
    report["items"][0]["new_field"] = 1
    report["summary"]["by_hardness"]["easy"]["new_figure"] = 0.5
    assert report_errors(report, validator=validator) == []
    errors = sorted(report_errors(report, closed=True, validator=validator))
    assert [e.split(":")[0] for e in errors] == ["items/0", "summary/by_hardness/easy"], errors
    assert "'new_field'" in errors[0] and "'new_figure'" in errors[1], errors
    # keys that are data (tags, databases, the run's options) are never closed
    report = copy.deepcopy(shop_report)
    report["summary"]["by_tag"]["any tag at all"] = report["summary"]["by_hardness"]["easy"]
    report["run"]["options"]["a_new_option"] = [1, 2]
    assert report_errors(report, closed=True, validator=validator) == []


# --- the schema names what the code writes ------------------------------------------------------

def _every_field_result() -> CaseResult:
    """A result with every optional field set to something (a field written only when it is set
    included): its JSON holds every field an item can have."""
    samples = (("dict", {"prediction_source": "hook"}), ("tuple", ("x",)), ("list", ["x"]), ("str", "x"),
               ("float", 1.0), ("int", 1), ("bool", True), ("Any", "x"))
    given: dict[str, Any] = {}
    for field in dataclasses.fields(CaseResult):
        if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
            given[field.name] = next(value for name, value in samples if name in str(field.type))
    return CaseResult(id="c", nodeid="s.yaml::c", file="s.yaml", position=0, kind=Kind.SQL, verdict=Verdict.PASS, **given)


def test_the_item_schema_lists_exactly_the_fields_an_item_has() -> None:
    item = DEFS["item"]
    assert set(item["properties"]) == set(_every_field_result().to_json())
    always = CaseResult(id="c", nodeid="s.yaml::c", file="s.yaml", position=0, kind=Kind.SQL, verdict=Verdict.PASS).to_json()
    assert set(item["required"]) == set(always)


def test_the_summary_schema_lists_exactly_the_fields_a_summary_has() -> None:
    result = CaseResult(id="c", nodeid="s.yaml::c", file="s.yaml", position=0, kind=Kind.SQL, verdict=Verdict.PASS)
    written = set(summarize([result])) | {"engine"}  # gate.finish adds the engine; every other key is always there
    assert set(DEFS["summary"]["properties"]) == written
    assert set(DEFS["summary"]["required"]) <= written


def test_the_run_schema_lists_exactly_the_fields_a_run_has() -> None:
    run = RunInfo(started="2026-01-01T00:00:00+00:00", duration_s=1.0, label=None, git_commit=None, engine="per case",
                  complete=True).to_json()
    assert set(DEFS["run"]["properties"]) == set(run) and set(DEFS["run"]["required"]) == set(run)


def test_the_vocabularies_are_the_code_s() -> None:
    assert DEFS["verdict"]["enum"] == [v.value for v in Verdict]
    assert DEFS["kind"]["enum"] == [k.value for k in Kind]
    assert DEFS["baseline_status"]["enum"] == [b.value for b in BaselineStatus]
    assert DEFS["near_miss"]["enum"] == list(NEAR_MISSES)
    assert DEFS["component"]["enum"] == list(COMPONENTS)
    assert list(DEFS["summary"]["properties"]["near_miss"]["properties"]) == list(NEAR_MISSES)
    assert list(DEFS["soft_scores"]["properties"]) == list(SCORE_NAMES)
    assert list(DEFS["usage"]["properties"]) == list(USAGE_KEYS)
    sources = [v for k, v in vars(PredictionSource).items() if k.isupper()]
    assert DEFS["extra"]["properties"]["prediction_source"]["enum"] == sources
