"""`confine=` (--nl2sql-confine): the files a case names must lie under the root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_nl2sql.cases.read import Case, InvalidCase, load_case_file, read_case_file


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(root, outside): the root holds the suites; `outside` is a sibling directory."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "suites").mkdir(parents=True)
    outside.mkdir()
    for directory in (root, outside):
        (directory / "d.sqlite").write_bytes(b"")
        (directory / "gold.csv").write_text("a\n1\n")
    return root, outside


def one(root: Path, case: str, **kw: object) -> Case | InvalidCase:
    path = root / "suites" / "s.nl2sql.yaml"
    path.write_text(case)
    (entry,) = load_case_file(path, confine=root, **kw)
    return entry


@pytest.mark.parametrize(
    "database",
    ["../d.sqlite", "{root}/d.sqlite", "sqlite:///{root}/d.sqlite", "duckdb:///{root}/d.duckdb",
     "postgresql://user:pw@db.example/shop", "mysql://localhost/shop"],
)
def test_databases_under_the_root_and_servers_are_allowed(layout: tuple[Path, Path], database: str) -> None:
    root, _ = layout
    entry = one(root, f"database: '{database.format(root=root)}'\ngold: SELECT 1\n")
    assert isinstance(entry, Case), entry


@pytest.mark.parametrize(
    "database",
    ["../../outside/d.sqlite", "{outside}/d.sqlite", "sqlite:///{outside}/d.sqlite", "duckdb:///{outside}/d.duckdb",
     "sqlite+pysqlite:///{outside}/d.sqlite", "{root}/../outside/d.sqlite"],
)
def test_databases_outside_the_root_are_invalid(layout: tuple[Path, Path], database: str) -> None:
    root, outside = layout
    entry = one(root, f"database: '{database.format(root=root, outside=outside)}'\ngold: SELECT 1\n")
    assert isinstance(entry, InvalidCase) and entry.line == 1
    assert entry.message.startswith("database ") and "lies outside the rootdir" in entry.message
    assert "(--nl2sql-confine)" in entry.message and str(outside.resolve()) in entry.message


def test_a_symlink_inside_the_root_is_followed(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.symlink(outside / "d.sqlite", root / "link.sqlite")
    os.symlink(outside, root / "dbs")
    assert isinstance(one(root, "database: ../link.sqlite\ngold: SELECT 1\n"), InvalidCase)
    assert isinstance(one(root, "db_id: d\ndb_dir: ../dbs\ngold: SELECT 1\n"), InvalidCase)
    assert isinstance(one(root, "gold_result: ../dbs/gold.csv\ndatabase: ../d.sqlite\n"), InvalidCase)


def test_gold_result_outside_the_root_is_invalid(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    assert isinstance(one(root, "database: ../d.sqlite\ngold_result: ../gold.csv\n"), Case)
    entry = one(root, "database: ../d.sqlite\ngold_result: [../gold.csv, ../../outside/gold.csv]\n")
    assert isinstance(entry, InvalidCase)
    assert entry.message.startswith("gold_result '../../outside/gold.csv' lies outside the rootdir")


def test_db_id_databases(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    assert isinstance(one(root, "db_id: shop\ndb_dir: ../dbs\ngold: SELECT 1\n"), Case)
    assert isinstance(one(root, "db_id: shop\ndb_dir: ../../outside\ngold: SELECT 1\n"), InvalidCase)
    # --nl2sql-db-dir is named by the user, not by the case file: allowed wherever it is ...
    assert isinstance(one(root, "db_id: shop\ngold: SELECT 1\n", db_dir=outside), Case)
    # ... but a db_id cannot climb out of it
    assert isinstance(one(root, "db_id: ../../x\ngold: SELECT 1\n", db_dir=outside / "dbs"), InvalidCase)


def test_source_files_outside_the_root_are_invalid(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    for directory in (root, outside):
        (directory / "dev.json").write_text(json.dumps([{"db_id": "a", "question": "q", "query": "SELECT 1"}]))
    assert isinstance(one(root, "source: {format: spider, questions: ../dev.json, db_dir: ../db}\n"), Case)
    for source in ("{format: spider, questions: ../../outside/dev.json, db_dir: ../db}",
                   "{format: spider, questions: ../dev.json, db_dir: ../../outside}",
                   "{format: spider, questions: ../dev.json, db_dir: ../db, gold: ../../outside/gold.csv}"):
        path = root / "suites" / "s.nl2sql.yaml"
        path.write_text(f"# Spider\nsource: {source}\n")
        contents = read_case_file(path, confine=root)  # the suite names no case it may read: the file is unreadable
        assert contents.entries == [] and contents.error is not None and contents.error.line == 2, source
        assert contents.error.message.startswith("source.") and "lies outside the rootdir" in contents.error.message


def test_without_confine_nothing_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    path = root / "suites" / "s.nl2sql.yaml"
    path.write_text(f"database: {outside}/d.sqlite\ngold_result: {outside}/gold.csv\n")
    (entry,) = load_case_file(path)
    assert isinstance(entry, Case)


def test_confine_holds_through_folders_of_databases_and_predictions_folders(pytester) -> None:  # type: ignore[no-untyped-def]
    """A symlink inside a folder of databases, or inside a predictions folder, that points out of
    the tree is not followed under --nl2sql-confine: nothing outside the rootdir is read (the case
    of the folder is a gold_error naming the link; the result file is a pred_error)."""
    import shutil

    from helpers import make_shop, read_report, write_suite

    outside = pytester.path.parent / f"{pytester.path.name}-outside"
    outside.mkdir()
    make_shop(outside, "secret.sqlite")
    (outside / "secret.csv").write_text("name\nthe secret\n")
    folder = pytester.path / "db" / "shop"
    folder.mkdir(parents=True)
    make_shop(folder, "shop.sqlite")
    (folder / "other.sqlite").symlink_to(outside / "secret.sqlite")  # a second database of the folder, outside
    predictions = pytester.path / "preds"
    predictions.mkdir()
    (predictions / "r.csv").symlink_to(outside / "secret.csv")
    write_suite(pytester.path, [{"id": "f", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item",
                                 "database": "db/shop"}], name="folder.nl2sql.yaml")
    write_suite(pytester.path, [{"id": "r", "gold": "SELECT 'x'", "database": "db/shop/shop.sqlite"}], name="results.nl2sql.yaml")
    try:
        pytester.runpytest("--nl2sql-confine", "--nl2sql-predictions=preds", "--nl2sql-report=json:r.json")
        items = {i["id"]: i for i in read_report(pytester.path / "r.json")["items"]}
        assert items["f"]["verdict"] == "gold_error" and items["f"]["neighbours"] is None  # the outside file was not judged on
        assert "other.sqlite is a symlink to" in items["f"]["reason"]
        assert items["r"]["verdict"] == "pred_error" and "--nl2sql-confine" in items["r"]["reason"]
        assert "the secret" not in (pytester.path / "r.json").read_text()
        pytester.runpytest("--nl2sql-predictions=preds", "--nl2sql-report=json:open.json")  # without the option: followed
        opened = {i["id"]: i for i in read_report(pytester.path / "open.json")["items"]}
        assert opened["f"]["neighbours"]["checked"] == 1 and opened["r"]["verdict"] == "mismatch"
    finally:
        shutil.rmtree(outside, ignore_errors=True)
