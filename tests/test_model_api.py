"""The model in the loop from Python: `evaluate_suite` with a model, threads, retries, repeats and
reports; `to_dataframe`; and what a prompt is built from (a schema with UNIQUE constraints and
typed columns, `case.sample_rows`), on every engine."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import make_db, make_shop, read_report, write_suite
from pytest_nl2sql import evaluate_suite, to_dataframe
from pytest_nl2sql.engines import open_engine
from pytest_nl2sql.judge.pipeline import Pipeline
from pytest_nl2sql.judge.predict import SampleRows

CASES = [{"id": f"c{n}", "question": f"How many items? ({n})", "gold": "SELECT count(*) FROM item"} for n in range(8)]

TYPED_SQL = """
CREATE TABLE product(id INTEGER PRIMARY KEY, code VARCHAR(50) NOT NULL UNIQUE, price DECIMAL(10,2),
                     maker INTEGER, model VARCHAR(20), UNIQUE (maker, model));
CREATE TABLE review(id INTEGER PRIMARY KEY, product_id INTEGER REFERENCES product(id), stars SMALLINT);
CREATE UNIQUE INDEX one_review_each ON review(product_id);
INSERT INTO product VALUES (1, 'P-1', 9.99, 1, 'a'), (2, 'P-2', 19.50, 1, 'b'), (3, 'P-3', 5.00, 2, 'a'), (4, 'P-4', 1.25, 2, 'b');
INSERT INTO review VALUES (1, 1, 5), (2, 2, 3);
"""


def _model(answers: dict[str, Any] | None = None, delay: float = 0.0) -> Any:
    """A model answering in Markdown, with usage; records the threads it ran in."""
    threads: set[str] = set()

    def predict(case: Any) -> Any:
        threads.add(threading.current_thread().name)
        time.sleep(delay)
        sql = (answers or {}).get(case.id, "SELECT count(id) FROM item")
        return {"sql": f"```sql\n{sql}\n```", "usage": {"prompt_tokens": 10, "completion_tokens": 2}}

    predict.threads = threads  # type: ignore[attr-defined]
    return predict


def test_concurrent_predictions_give_the_report_in_case_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_shop(tmp_path)
    suite = write_suite(tmp_path, CASES, database="shop.sqlite")
    monkeypatch.chdir(tmp_path)
    answers = {"c3": "SELECT 1"}
    one = evaluate_suite(suite, predict=_model(answers), neighbours=0)
    model = _model(answers, delay=0.05)
    many = evaluate_suite(suite, predict=model, neighbours=0, concurrency=4, reports=["json:out/r.json", "csv"])
    assert len(model.threads) > 1 and all(name.startswith("nl2sql-predict") for name in model.threads)
    strip = ("latency", "execution_time")
    assert [{k: v for k, v in i.items() if k not in strip} for i in many["items"]] == \
        [{k: v for k, v in i.items() if k not in strip} for i in one["items"]]
    assert [i["id"] for i in many["items"]] == [c["id"] for c in CASES]
    assert many["items"][3]["verdict"] == "mismatch" and many["summary"]["passed"] == 7
    assert many["items"][0]["raw_prediction"] == "```sql\nSELECT count(id) FROM item\n```"
    assert many["summary"]["usage"]["total"] == {"prompt_tokens": 80, "completion_tokens": 16}
    assert many["run"]["options"]["concurrency"] == 4 and many["run"]["engine"] == "per case"
    written = read_report(tmp_path / "out" / "r.json")  # written through pytest_nl2sql.reports.write_report
    assert written["items"] == json.loads(json.dumps(many["items"]))
    assert (tmp_path / "nl2sql-report.csv").exists() and (tmp_path / "nl2sql-report.correct.csv").exists()


def test_retries_and_repeats_from_the_api(tmp_path: Path) -> None:
    make_shop(tmp_path)
    suite = write_suite(tmp_path, CASES[:2], database="shop.sqlite")
    calls: dict[str, int] = {}

    def flaky(case: Any) -> str:
        calls[case.id] = calls.get(case.id, 0) + 1
        if calls[case.id] == 1:
            raise TimeoutError("slow")
        return "SELECT count(*) FROM item" if case.sample != 1 else "SELECT 2"

    report = evaluate_suite(suite, predict=flaky, neighbours=0, retries=1, retry_wait=0, repeat=3, rootdir=tmp_path)
    item = report["items"][0]
    assert (item["attempts"], item["repeats"]["verdicts"]) == (4, ["pass", "mismatch", "pass"])
    assert report["summary"]["pass_at_k"] == pytest.approx({"1": 2 / 3, "2": 1.0, "3": 1.0})
    assert report["summary"]["consistency"] == 0.0


@pytest.mark.parametrize("keywords, complaint", [
    ({"concurrency": 0}, "concurrency"), ({"repeat": 0}, "repeat"), ({"retries": -1}, "retries"),
    ({"reports": ["pdf:x.pdf"]}, "unknown report format 'pdf'"),
])
def test_bad_api_options_are_value_errors(tmp_path: Path, keywords: dict[str, Any], complaint: str) -> None:
    suite = write_suite(tmp_path, CASES[:1], database="shop.sqlite")
    with pytest.raises(ValueError, match=complaint):
        evaluate_suite(suite, **keywords)


def test_to_dataframe_gives_one_row_per_item(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    make_shop(tmp_path)
    suite = write_suite(tmp_path, CASES[:3], database="shop.sqlite")
    report = evaluate_suite(suite, predict=_model({"c1": "SELECT 1"}), neighbours=0, repeat=2, rootdir=tmp_path)
    frame = to_dataframe(report)
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 3
    assert list(frame["id"]) == ["c0", "c1", "c2"] and list(frame["verdict"]) == ["pass", "mismatch", "pass"]
    assert list(frame["usage.prompt_tokens"]) == [20, 20, 20] and list(frame["repeats.passed"]) == [2, 0, 2]
    assert "soft_scores.row_f1" in frame.columns and "usage" not in frame.columns
    assert len(to_dataframe(json.loads(json.dumps(report)))) == 3  # a JSON report read back


def test_to_dataframe_without_pandas_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError, match="to_dataframe needs pandas.*pip install pandas"):
        to_dataframe({"items": []})


# --- what a prompt is built from ------------------------------------------------------------------


def test_a_request_shows_unique_constraints_types_and_rows(tmp_path: Path) -> None:
    make_db(tmp_path / "typed.sqlite", TYPED_SQL)
    suite = write_suite(tmp_path, [{"id": "q", "question": "?", "gold": "SELECT 1"}], database="typed.sqlite")
    seen: dict[str, Any] = {}

    def model(case: Any) -> str:  # the prompt's material, read while the case's database is open
        seen.update(schema=case.schema, tables=case.tables, rows=case.sample_rows("product"), review=case.sample_rows("REVIEW", n=5))
        for name, call in (("missing", lambda: case.sample_rows("nope")), ("negative", lambda: case.sample_rows("product", n=-1))):
            try:
                call()
            except ValueError as e:
                seen[name] = str(e)
        return "SELECT 1"

    evaluate_suite(suite, predict=model, neighbours=0, rootdir=tmp_path)
    for expected in ("code VARCHAR(50) NOT NULL UNIQUE", "price DECIMAL(10,2)", "UNIQUE (maker, model)",
                     "CREATE UNIQUE INDEX one_review_each ON review(product_id);"):
        assert expected in seen["schema"], expected
    assert seen["tables"] == ("product", "review")
    rows = seen["rows"]
    assert isinstance(rows, SampleRows) and len(rows) == 3
    assert rows.columns == ("id", "code", "price", "maker", "model") and rows.rows[0] == (1, "P-1", 9.99, 1, "a")
    assert str(rows) == ("/*\n3 example rows:\nSELECT * FROM product LIMIT 3;\nid\tcode\tprice\tmaker\tmodel\n"
                         "1\tP-1\t9.99\t1\ta\n2\tP-2\t19.5\t1\tb\n3\tP-3\t5\t2\ta\n*/")  # 5.00: an integer in SQLite
    assert len(seen["review"]) == 2  # as the database names it, whatever the case
    assert seen["missing"] == "no table 'nope' in this database (it has: product, review)"
    assert "n must be a whole number" in seen["negative"]


def test_sample_rows_are_read_ahead_for_a_concurrent_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under concurrency the model runs in other threads: the three rows it asks for are already read."""
    make_db(tmp_path / "typed.sqlite", TYPED_SQL)
    suite = write_suite(tmp_path, [{"id": f"q{n}", "question": "?", "gold": "SELECT 1"} for n in range(4)], database="typed.sqlite")
    prompts: list[str] = []

    def model(case: Any) -> str:
        prompts.append(f"{case.schema}\n{case.sample_rows('product')}\n{case.sample_rows('review')}")
        return "SELECT 1"

    reads: list[str] = []
    original = Pipeline.sample_rows

    def counted(self: Pipeline, engine: Any, table: str, n: int = 3) -> Any:
        if (id(engine), table, n) not in self._rows:
            reads.append(threading.current_thread().name)
        return original(self, engine, table, n)

    monkeypatch.setattr(Pipeline, "sample_rows", counted)
    report = evaluate_suite(suite, predict=model, neighbours=0, concurrency=3, rootdir=tmp_path)
    assert report["summary"]["passed"] == 4 and len(set(prompts)) == 1
    assert reads == ["MainThread", "MainThread"]  # one read per table, before any model thread asked


def _server_schema_checks(url: str, types: tuple[str, ...]) -> None:
    engine = open_engine(url)
    try:
        schema = Pipeline().schema_ddl(engine)
        for expected in types:
            assert expected in schema, (expected, schema)
        assert "UNIQUE (" in schema and schema.count("UNIQUE (") >= 3  # code; (maker, model); the unique index
        rows = Pipeline().sample_rows(engine, "product", 2)
        assert len(rows) == 2 and rows.columns[:2] == ("id", "code")
    finally:
        engine.close()


@pytest.mark.services
def test_postgres_schema_shows_precision_and_unique(tmp_path: Path) -> None:
    from servers import postgres_schema

    with postgres_schema("nl2sql_schema", TYPED_SQL) as scratch:
        _server_schema_checks(scratch.url, ('"code" character varying(50) NOT NULL', '"price" numeric(10,2)',
                                            'UNIQUE ("maker", "model")', 'UNIQUE ("product_id")'))


@pytest.mark.services
def test_mariadb_schema_shows_precision_and_unique(tmp_path: Path) -> None:
    from servers import mariadb_database

    with mariadb_database("nl2sql_schema", TYPED_SQL) as scratch:
        _server_schema_checks(scratch.url, ("`code` varchar(50) NOT NULL", "`price` decimal(10,2)",
                                            "UNIQUE (`maker`, `model`)", "UNIQUE (`product_id`)"))


def test_sqlalchemy_schema_shows_precision_and_unique(tmp_path: Path) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    # a scheme of no native engine, so that the SQLite file is read through SQLAlchemy's inspector
    sqlalchemy.dialects.registry.register("nl2sqlschema", "sqlalchemy.dialects.sqlite.pysqlite", "SQLiteDialect_pysqlite")
    path = make_db(tmp_path / "typed.sqlite", TYPED_SQL)
    engine = open_engine(f"nl2sqlschema:///{path}")
    try:
        assert type(engine).__name__ == "SqlalchemyEngine"
        schema = Pipeline().schema_ddl(engine)
        # (SQLAlchemy's SQLite reflection does not report a column's inline UNIQUE; servers' does)
        for expected in ('"code" VARCHAR(50) NOT NULL', '"price" DECIMAL(10, 2)', 'UNIQUE ("maker", "model")',
                         'UNIQUE ("product_id")'):
            assert expected in schema, (expected, schema)
        assert len(Pipeline().sample_rows(engine, "product")) == 3
    finally:
        engine.close()


def test_duckdb_schema_shows_precision_and_unique(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "typed.duckdb"
    connection = duckdb.connect(str(path))
    connection.execute(TYPED_SQL.replace("REFERENCES product(id)", ""))
    connection.close()
    engine = open_engine(f"duckdb:///{path}")
    try:
        schema = Pipeline().schema_ddl(engine)
        for expected in ("code VARCHAR NOT NULL UNIQUE", "price DECIMAL(10,2)", "UNIQUE(maker, model)",
                         "CREATE UNIQUE INDEX one_review_each ON review(product_id);"):
            assert expected in schema, (expected, schema)
        assert len(Pipeline().sample_rows(engine, "product")) == 3
    finally:
        engine.close()


def test_sqlite_schema_of_a_database_without_constraints_is_unchanged(tmp_path: Path) -> None:
    """The Spider databases have no unique index: their schema text (and so the keys of recorded
    predictions) stays what it was."""
    path = make_shop(tmp_path)
    with sqlite3.connect(path) as connection:
        stored = [sql for (sql,) in connection.execute("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid")]
    connection.close()
    engine = open_engine(str(path))
    try:
        assert Pipeline().schema_ddl(engine) == "\n\n".join(f"{sql.strip()};" for sql in stored)
    finally:
        engine.close()
