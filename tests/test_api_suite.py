"""`evaluate_suite`: one case file through the same pipeline as a pytest run, without pytest."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import read_report
from pytest_nl2sql import evaluate_suite

EXAMPLES = Path(__file__).resolve().parents[1] / "example_suites"
RUN_SPECIFIC = ("latency", "execution_time", "extra")  # timings and provenance differ between two runs


def _comparable(report: dict) -> dict:
    items = [{k: v for k, v in item.items() if k not in RUN_SPECIFIC} for item in report["items"]]
    summary = {k: v for k, v in report["summary"].items() if k not in RUN_SPECIFIC}
    return {"summary": summary, "items": items}


@pytest.fixture
def examples(pytester: pytest.Pytester) -> pytest.Pytester:
    """The example suites without their conftest (the API gets the same model as a callable)."""
    for name in ("shop.nl2sql.yaml", "indicators.nl2sql.yaml", "shop.sqlite", "london_customers.csv"):
        shutil.copy(EXAMPLES / name, pytester.path / name)
    return pytester


@pytest.mark.parametrize("suite", ["shop.nl2sql.yaml", "indicators.nl2sql.yaml"])
def test_the_api_gives_the_json_report_of_a_pytest_run(examples: pytest.Pytester, suite: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("example_model", EXAMPLES / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.pytest_nl2sql_predict  # the example's stand-in model
    examples.makeconftest("from example_model import pytest_nl2sql_predict\n")
    shutil.copy(EXAMPLES / "conftest.py", examples.path / "example_model.py")
    # the example's runaway query times out either way (pred_timeout): half a second, not the ini's 2 s
    examples.runpytest(suite, "--nl2sql-timeout=0.5", "--nl2sql-report=json:r.json")
    from_pytest = read_report(examples.path / "r.json")
    monkeypatch.chdir(examples.path)
    from_api = evaluate_suite(suite, predict=model, timeout=0.5)
    assert _comparable(json.loads(json.dumps(from_api))) == _comparable(from_pytest)
    assert {i["verdict"] for i in from_api["items"]} > {"pass"}  # a real mix of verdicts, not all passes


def test_the_api_runs_where_pytest_cannot_be_imported(tmp_path: Path) -> None:
    for name in ("shop.nl2sql.yaml", "shop.sqlite", "london_customers.csv"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    script = (
        "import sys, json\n"
        "sys.modules['pytest'] = None; sys.modules['_pytest'] = None; sys.modules['pluggy'] = None\n"
        "from pytest_nl2sql import evaluate_suite\n"
        "report = evaluate_suite('shop.nl2sql.yaml', timeout=0.5)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest', 'pluggy') and sys.modules[m]]\n"
        "print(json.dumps(report['summary']['total']), json.dumps(sorted({i['verdict'] for i in report['items']})))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    total, verdicts = done.stdout.split(" ", 1)
    assert int(total) > 10 and "mismatch" in verdicts and "pass" in verdicts


def test_a_broken_case_file_is_one_error_item(tmp_path: Path) -> None:
    (tmp_path / "bad.nl2sql.yaml").write_text("cases:\n  - id: a\n    gold_sql: SELECT 1\n")
    report = evaluate_suite(tmp_path / "bad.nl2sql.yaml", rootdir=tmp_path)
    (item,) = report["items"]
    assert (item["nodeid"], item["verdict"]) == ("bad.nl2sql.yaml::a", "gold_error")
    assert item["reason"].startswith("invalid case: bad.nl2sql.yaml:2: unknown key 'gold_sql'")  # file and line, as the terminal shows
    assert report["summary"]["errors"] == 1
