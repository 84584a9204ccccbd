"""`--nl2sql-dsn` that cannot work is one usage error before any case runs (not one ERROR per
case), with its password masked; `evaluate_suite(dsn=...)` raises `ValueError` up front; reports
name the engine of the run. The last test kills the server connection under cases, through the
pipeline, and checks that the case says so and the next one runs on a reopened connection."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import make_shop, read_report, write_suite
from pytest_nl2sql.api import evaluate_suite
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.engines import open_engine
from pytest_nl2sql.gate.run import engine_label
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline
from pytest_nl2sql.vocab import Verdict
from servers import PG_HOST, Scratch

SECRET = "hunter2-secret"
CASES = [{"id": "a", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"},
         {"id": "b", "gold": "SELECT 1", "predicted": "SELECT 1"}]


def _suite(directory: Path) -> Path:
    make_shop(directory)
    return write_suite(directory, CASES, database="shop.sqlite")


@pytest.mark.parametrize(
    ("dsn", "says"),
    [
        (f"nosuchdb://me:{SECRET}@db.example/x", "unknown database URL scheme 'nosuchdb'"),
        (f"mssql+pyodbc://me:{SECRET}@db.example/x", "driver 'pyodbc'"),
        ("missing-dir/nope.sqlite", "nope.sqlite"),
    ],
)
def test_a_dsn_that_cannot_work_is_one_usage_error(pytester: pytest.Pytester, dsn: str, says: str) -> None:
    _suite(pytester.path)
    result = pytester.runpytest(f"--nl2sql-dsn={dsn}", "--nl2sql-report=json:r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "--nl2sql-dsn cannot be used" in text and says in text
    assert SECRET not in text
    assert "passed" not in result.stdout.str() and "error" not in result.stdout.str().lower().replace("error: --nl2sql", "")
    assert not (pytester.path / "r.json").exists()  # no case ran, no report


def test_an_unreachable_server_is_a_usage_error_with_the_password_masked(pytester: pytest.Pytester) -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed")
    _suite(pytester.path)
    result = pytester.runpytest(f"--nl2sql-dsn=postgresql://me:{SECRET}@127.0.0.1:1/test")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert "postgresql://me:***@127.0.0.1:1/test" in text and SECRET not in text


def test_under_xdist_the_controller_stops_the_run_once(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    _suite(pytester.path)
    result = pytester.runpytest_subprocess("-n", "2", f"--nl2sql-dsn=nosuchdb://me:{SECRET}@h/x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert text.count("unknown database URL scheme") == 1 and SECRET not in text


def test_a_working_dsn_runs_and_the_report_names_its_engine(pytester: pytest.Pytester) -> None:
    database = make_shop(pytester.path, "copy.sqlite")
    _suite(pytester.path)
    result = pytester.runpytest(f"--nl2sql-dsn={database}", "--nl2sql-report=json:r.json", "--nl2sql-report=md:r.md")
    result.assert_outcomes(passed=2)
    label = f"sqlite:///{database.name}"  # a file inside the rootdir: named relative to it
    report = read_report(pytester.path / "r.json")
    assert report["run"]["engine"] == report["summary"]["engine"] == label
    result.stdout.fnmatch_lines([f"  every case ran on {label} (the databases below are the cases' own labels)"])
    assert f"every case ran on `{label}`" in (pytester.path / "r.md").read_text()


def test_evaluate_suite_raises_value_error_up_front(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    with pytest.raises(ValueError, match="dsn cannot be used.*unknown database URL scheme") as error:
        evaluate_suite(suite, dsn=f"nosuchdb://me:{SECRET}@h/x")
    assert SECRET not in str(error.value)
    assert evaluate_suite(suite, dsn=str(tmp_path / "shop.sqlite"))["summary"]["passed"] == 2


def test_engine_label_masks_the_password_and_names_the_engine() -> None:
    assert engine_label(None) == "per case"
    assert engine_label(f"postgresql+psycopg://user:{SECRET}@127.0.0.1:5432/db") == "postgresql://user:***@127.0.0.1:5432/db"
    assert engine_label(f"mysql://root:{SECRET}@localhost/test") == "mysql://root:***@localhost/test"
    assert engine_label(f"nosuchdb://u:{SECRET}@h/x") == "nosuchdb://u:***@h/x"  # unusable, still masked
    assert engine_label("/data/shop.sqlite") == "sqlite:////data/shop.sqlite"


# -- on the server ------------------------------------------------------------------------------


@pytest.fixture
def postgres_url(postgres_shop: Scratch) -> tuple[str, Any, str]:
    """(URL of the shop schema, admin connection, the URL's application name)."""
    schema = postgres_shop.name
    # trust auth ignores the password: it is there to be masked
    url = f"postgresql://{postgres_shop.user}:{SECRET}@{PG_HOST}/test?options=-csearch_path%3D{schema}&application_name={schema}"
    return url, postgres_shop.admin, schema


@pytest.mark.services
def test_reports_name_the_server_with_its_password_masked(pytester: pytest.Pytester, postgres_url: tuple[str, Any, str]) -> None:
    url, _, _ = postgres_url
    _suite(pytester.path)
    result = pytester.runpytest(f"--nl2sql-dsn={url}", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=2)
    report_text = (pytester.path / "r.json").read_text()
    assert json.loads(report_text)["run"]["engine"].startswith("postgresql://postgres:***@127.0.0.1:5432/test?")
    assert SECRET not in report_text and SECRET not in result.stdout.str()


class _Killer:
    """Terminates the engine's backend whenever a query of it has run 0.16 s (only the slow
    prediction does; the gold takes 0.12 s), `times` times."""

    def __init__(self, admin: Any, application: str, times: int) -> None:
        self.admin, self.application, self.left = admin, application, times
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.left > 0 and not self.stop.is_set():
            killed = self.admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s"
                " AND state = 'active' AND now() - query_start > interval '0.16 seconds'",
                (self.application,),
            ).fetchall()
            self.left -= len(killed)
            time.sleep(0.02)

    def __enter__(self) -> _Killer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()


GOLD = "SELECT (SELECT count(*) FROM item) FROM pg_sleep(0.12)"


@pytest.mark.services
def test_a_killed_backend_under_a_case_is_retried_reported_and_reopened(tmp_path: Path, postgres_url: tuple[str, Any, str]) -> None:
    url, admin, application = postgres_url
    engine = open_engine(url)
    pipeline = Pipeline()

    def case(name: str, predicted: str) -> Any:
        entry = Case(id=name, file=tmp_path / "shop.nl2sql.yaml", line=1, position=0, question="?",
                     database="shop", database_target=url, gold=(GOLD,), predicted=predicted)
        return pipeline.evaluate(entry, CaseLabel(f"shop.nl2sql.yaml::{name}", "shop.nl2sql.yaml"), engine=engine)

    # as slow as the gold give or take a factor 2: a right prediction is timed once, not again
    sleepy = "SELECT (SELECT count(id) FROM item) FROM pg_sleep(0.2)"
    try:
        with _Killer(admin, application, times=1) as killer:  # once: the retry passes
            assert case("once", sleepy).result.verdict is Verdict.PASS
        assert killer.left == 0
        with _Killer(admin, application, times=2) as killer:  # twice: the run's fault, said so
            outcome = case("twice", sleepy)
        assert killer.left == 0
        assert outcome.result.verdict is Verdict.GOLD_ERROR
        assert "connection was lost" in (outcome.result.reason or "")
        assert case("next", "SELECT (SELECT count(name) FROM item) FROM pg_sleep(0.1)").result.verdict is Verdict.PASS  # the reopened connection
    finally:
        engine.close()
