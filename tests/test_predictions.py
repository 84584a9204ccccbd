"""Predictions files: JSONL by id (and file), aligned .sql lines, BIRD's JSON, recorded keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_nl2sql.cases.predictions import (
    Prediction,
    PredictionRecord,
    PredictionsFileError,
    load_predictions,
    prediction_key,
    read_aligned_predictions,
    record_lines,
)


def test_aligned_lines_keep_blank_predictions_and_cut_at_tab(tmp_path: Path) -> None:
    path = tmp_path / "p.sql"
    path.write_text("SELECT 1\n\nSELECT 3\tconcert_singer\r\n  SELECT 4  \n")
    assert read_aligned_predictions(path) == ["SELECT 1", "", "SELECT 3", "SELECT 4"]
    store = load_predictions(path)
    assert store.lookup("anything", 1, ()) == Prediction("")
    assert store.lookup("anything", 9, ()) is None


def test_bird_json_is_aligned_by_position(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"1": "SELECT 2\t----- bird -----\tdb", "0": "SELECT 1\t----- bird -----\tdb"}))
    assert read_aligned_predictions(path) == ["SELECT 1", "SELECT 2"]


def test_jsonl_matches_by_id_and_by_file_when_given(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "predicted": "SELECT 1"},
        {"id": "b", "file": "suites/x.nl2sql.yaml", "predicted": "SELECT 2"},
        {"id": "b", "file": "suites/y.nl2sql.yaml", "predicted": "SELECT 3"},
        {"id": "t", "selection": [{"dataset_id": "D", "dimensions": []}], "key": "k"},
    ]) + "\n")
    store = load_predictions(path)
    assert store.lookup("a", 0, ("whatever.yaml",)).value == "SELECT 1"
    assert store.lookup("b", 0, ("suites/y.nl2sql.yaml", "/abs/suites/y.nl2sql.yaml")).value == "SELECT 3"
    assert store.lookup("b", 0, ("/abs/suites/x.nl2sql.yaml",)).value == "SELECT 2"
    assert store.lookup("b", 0, ("z.yaml",)) is None
    assert store.lookup("t", 0, ()).key == "k"


@pytest.mark.parametrize(("line", "message"), [("{oops", "invalid JSON"), ('{"predicted": "x"}', "needs an \"id\""),
                                              ('{"id": 1}', "needs \"predicted\"")])
def test_bad_jsonl_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "ok", "predicted": "SELECT 1"}\n' + line + "\n")
    with pytest.raises(ValueError, match=rf"p.jsonl:2: .*{message}"):
        load_predictions(path)


def test_prediction_key_depends_on_question_and_schema() -> None:
    base = prediction_key("How many?", "CREATE TABLE t(a)")
    assert base == prediction_key("How many?", "CREATE TABLE t(a)")
    assert base != prediction_key("How many items?", "CREATE TABLE t(a)")
    assert base != prediction_key("How many?", "CREATE TABLE t(a, b)")


def test_record_lines_read_back(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text(record_lines([{"id": "a", "file": "s.yaml", "predicted": "SELECT 1", "key": "k1"}]))
    assert load_predictions(path).lookup("a", 0, ("s.yaml",)) == Prediction("SELECT 1", "k1")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"id": "deep", "predicted": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "invalid JSON: nested deeper than 100 levels"),
        (b'{"id": ["a"], "predicted": "SELECT 1"}', "\"id\" must be a string or a number, not list"),
        (b'{"id": "a", "file": 3, "predicted": "SELECT 1"}', "\"file\" must be a string, not int"),
        (b'{"id": "a", "predicted": "SELECT \xff"}', "not UTF-8 text"),
        (b'["a", "SELECT 1"]', "needs an \"id\""),
    ],
)
def test_every_malformed_jsonl_line_names_file_and_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "ok", "predicted": "SELECT 1"}\n\n' + content + b"\n")
    with pytest.raises(PredictionsFileError) as info:
        load_predictions(path)
    assert (info.value.path, info.value.line) == (path, 3)
    assert str(info.value) == f"{path}:3: {info.value.message}" and message in info.value.message
    assert isinstance(info.value, ValueError)  # what the plugin turns into a usage error


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("p.json", b'{"0": "SELECT 1",', "invalid JSON"),
        ("p.json", b'{"first": "SELECT 1"}', "'first' is not a position"),
        ("p.json", b'{"-1": "SELECT 1"}', "'-1' is not a position"),
        ("p.sql", b"SELECT 1\nSELECT '\xff'\n", "p.sql:2: not UTF-8 text"),
    ],
)
def test_malformed_aligned_files_name_the_file(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(PredictionsFileError, match=str(path)) as info:
        load_predictions(path)
    assert message in str(info.value)


def test_unused_lists_the_lines_that_match_no_case(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "predicted": "SELECT 1"},
        {"id": "b", "file": "suites/x.nl2sql.yaml", "predicted": "SELECT 2"},
        {"id": "b", "file": "suites/y.nl2sql.yaml", "predicted": "SELECT 3"},
        {"id": "typo", "predicted": "SELECT 4"},
        {"id": 7, "predicted": "SELECT 5"},
    ]) + "\n")
    store = load_predictions(path)
    cases = [("a", ("suites/x.nl2sql.yaml",)), ("b", ("suites/x.nl2sql.yaml", "/abs/suites/x.nl2sql.yaml")), ("7", ("z.yaml",))]
    assert store.unused(cases) == [PredictionRecord(3, "b", "suites/y.nl2sql.yaml"), PredictionRecord(4, "typo", None)]
    assert [r.line for r in store.unused([])] == [1, 2, 3, 4, 5]
    aligned = tmp_path / "p.sql"
    aligned.write_text("SELECT 1\n")
    assert load_predictions(aligned).unused([]) == []


def test_a_predictions_file_over_the_byte_cap_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_nl2sql.files as files

    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "a", "predicted": "SELECT 1"}) + "\n")
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", path.stat().st_size - 1)
    with pytest.raises(PredictionsFileError, match=f"{path}.*larger than the"):
        load_predictions(path)
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", path.stat().st_size)
    assert load_predictions(path).lookup("a", 0, ()) is not None
