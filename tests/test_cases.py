"""Case files without pytest: formats, defaults, aliases, sources, and errors with file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_nl2sql.cases.read import Case, CaseFileError, InvalidCase, load_case_file, read_case_file


def load(tmp_path: Path, name: str, text: str, **kw: object) -> list[Case | InvalidCase]:
    path = tmp_path / name
    path.write_text(text)
    return load_case_file(path, **kw)


def first_problem(tmp_path: Path, name: str, text: str) -> tuple[str, CaseFileError]:
    """("file", the error) for a file that cannot be read as a whole (a collection error), else
    ("entry", the first broken entry's error)."""
    path = tmp_path / name
    path.write_text(text)
    contents = read_case_file(path)
    if contents.error is not None:
        assert contents.entries == []
        return "file", contents.error
    bad = [e for e in contents.entries if isinstance(e, InvalidCase)]
    assert bad, contents.entries
    return "entry", bad[0].error


def test_single_case_mapping(tmp_path: Path) -> None:
    (case,) = load(tmp_path, "one.nl2sql.yaml", "id: a\nquestion: q\ndatabase: x.sqlite\ngold: SELECT 1\n")
    assert isinstance(case, Case)
    assert (case.id, case.question, case.gold, case.line, case.position) == ("a", "q", ("SELECT 1",), 1, 0)
    assert case.database == "x.sqlite"
    assert case.database_target == str((tmp_path / "x.sqlite").resolve())


def test_multi_document_yaml_gets_default_ids_and_lines(tmp_path: Path) -> None:
    entries = load(tmp_path, "m.yaml", "database: d.sqlite\ngold: SELECT 1\n---\ndatabase: d.sqlite\ngold: SELECT 2\n")
    assert [(e.id, e.line) for e in entries] == [("case-0000", 1), ("case-0001", 4)]


def test_suite_defaults_are_inherited_and_tags_add_up(tmp_path: Path) -> None:
    text = """
database: d.sqlite
tags: [suite]
compare: {abs_tol: 0.1}
cases:
  - id: a
    gold: SELECT 1
  - id: b
    gold: SELECT 2
    database: other.sqlite
    tags: [own]
    compare: {case_sensitive: false}
"""
    a, b = load(tmp_path, "s.yaml", text)
    assert a.database == "d.sqlite" and a.tags == ("suite",) and dict(a.compare) == {"abs_tol": 0.1}
    assert b.database == "other.sqlite" and b.tags == ("suite", "own")
    assert dict(b.compare) == {"abs_tol": 0.1, "case_sensitive": False}
    assert (a.line, b.line) == (6, 8)


def test_jsonl_with_spider_and_bird_aliases(tmp_path: Path) -> None:
    lines = [
        {"question_id": 12, "db_id": "shop", "db_dir": "dbs", "SQL": "SELECT 1", "difficulty": "moderate", "evidence": "hint"},
        {"db_id": "shop", "db_dir": "dbs", "query": "SELECT 2", "query_toks": ["SELECT", "2"]},
    ]
    a, b = load(tmp_path, "c.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert (a.id, a.gold, a.hardness, a.hint, a.database) == ("12", ("SELECT 1",), "moderate", "hint", "shop")
    assert a.database_target == str((tmp_path / "dbs" / "shop" / "shop.sqlite").resolve())
    assert (b.id, b.gold, b.line) == ("case-0001", ("SELECT 2",), 2)


def test_db_dir_option_is_the_fallback(tmp_path: Path) -> None:
    (case,) = load(tmp_path, "a.yaml", "db_id: shop\ngold: SELECT 1\n", db_dir=tmp_path / "elsewhere")
    assert case.database_target == str((tmp_path / "elsewhere" / "shop" / "shop.sqlite").resolve())
    (missing,) = load(tmp_path, "b.yaml", "db_id: shop\ngold: SELECT 1\n")
    assert isinstance(missing, InvalidCase) and "db_dir" in missing.message


@pytest.mark.parametrize(
    ("text", "kind", "line", "fragment"),
    [
        ("cases:\n  - id: a\n    gold: [unclosed\n", "file", 3, "invalid YAML"),
        ("database: d\ncases:\n  - id: a\n    gold_sql: SELECT 1\n", "entry", 3, "unknown key 'gold_sql'"),
        ("database: d\ncases:\n  - id: a\n  - id: b\n    gold: SELECT 1\n", "entry", 3, "needs `gold`"),
        ("database: d\ncases:\n  - id: a\n    gold: SELECT 1\n    order: sorted\n", "entry", 3, "`order` must be one of"),
        ("database: d\ncases:\n  - id: a\n    gold: SELECT 1\n    gold_result: x.csv\n", "entry", 3, "either `gold` or `gold_result`"),
        ("database: d\ncases:\n  - just a string\n", "entry", 3, "must be a mapping"),
        ("source: {format: spider, questions: q.json, db_dir: d}\ncases: []\n", "file", 1, "not both"),
        ("source: {format: sparql, questions: q.json, db_dir: d}\n", "file", 1, "source.format"),
        ("database: d\ncases:\n  - id: a\n    predicted: 3\n    gold: SELECT 1\n", "entry", 3, "`predicted` must be SQL text"),
    ],
)
def test_errors_name_the_line_and_what_is_wrong(tmp_path: Path, text: str, kind: str, line: int, fragment: str) -> None:
    found, error = first_problem(tmp_path, "bad.yaml", text)
    assert (found, error.line) == (kind, line)
    assert fragment in error.message
    assert str(error).startswith(f"{tmp_path / 'bad.yaml'}:{line}: ")


def test_one_bad_case_does_not_hide_the_others(tmp_path: Path) -> None:
    entries = load(tmp_path, "s.yaml", "database: d\ncases:\n  - {id: a, gold: SELECT 1}\n  - {id: a, gold: SELECT 2}\n  - {id: c, gold: SELECT 3}\n")
    assert [type(e).__name__ for e in entries] == ["Case", "InvalidCase", "Case"]
    assert "duplicate id 'a'" in entries[1].message


def test_invalid_json_line(tmp_path: Path) -> None:
    entries = load(tmp_path, "c.jsonl", '{"database": "d", "gold": "SELECT 1"}\n{nope\n')
    assert isinstance(entries[0], Case)
    assert isinstance(entries[1], InvalidCase) and entries[1].line == 2 and "invalid JSON" in entries[1].message


def test_spider_source_with_gold_file_and_predictions(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text(json.dumps([
        {"db_id": "a", "question": "q0", "query": "SELECT 0"},
        {"db_id": "b", "question": "q1", "query": "SELECT 1"},
    ]))
    (tmp_path / "gold.sql").write_text("SELECT 10\ta\nSELECT 11\tb\n")
    (tmp_path / "preds.sql").write_text("SELECT 10\n\n")
    (tmp_path / "tables.json").write_text("[]")
    entries = load(tmp_path, "dev.nl2sql.yaml",
                   "source: {format: spider, questions: dev.json, db_dir: db, gold: gold.sql, predictions: preds.sql}\n")
    assert [(e.id, e.gold, e.predicted, e.database) for e in entries] == [
        ("case-0000", ("SELECT 10",), "SELECT 10", "a"),
        ("case-0001", ("SELECT 11",), "", "b"),
    ]
    assert entries[0].tables_json == (tmp_path / "tables.json").resolve()


def test_spider_source_gold_count_must_match(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text(json.dumps([{"db_id": "a", "question": "q", "query": "SELECT 0"}]))
    (tmp_path / "gold.sql").write_text("SELECT 1\ta\nSELECT 2\ta\n")
    kind, error = first_problem(tmp_path, "dev.yaml", "source: {format: spider, questions: dev.json, db_dir: db, gold: gold.sql}\n")
    assert kind == "file" and "2 queries for 1 questions" in error.message


def test_term_selection_case(tmp_path: Path) -> None:
    text = """
id: t
name: n
conversation:
- role: user
  content: GDP?
  target:
    indicator_selection:
    - dataset_id: D
      dimensions:
      - dimension_name: INDICATOR
        values: [{id: GDP, name: gross domestic product}]
"""
    (case,) = load(tmp_path, "t.yaml", text)
    assert isinstance(case, Case) and case.is_term_selection
    assert case.question == "GDP?" and case.name == "n" and case.gold == ()


def test_bad_comparison_option_is_an_invalid_case(tmp_path: Path) -> None:
    (entry,) = load(tmp_path, "c.yaml", "database: d\ngold: SELECT 1\ncompare: {mode: fuzzy}\n")
    assert isinstance(entry, InvalidCase) and "mode" in entry.message
    (entry,) = load(tmp_path, "d.yaml", "database: d\ngold: SELECT 1\ncompare: {abs_tolerance: 0.1}\n")
    assert isinstance(entry, InvalidCase) and "abs_tolerance" in entry.message


# --- where a malformed file's error points --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "line", "fragment"),
    [
        # the offending token's line, not the start of the block (line 2)
        ("cases:\n  - id: a\n    gold: SELECT 1\n   question: q\n", "file", 4, "invalid YAML: expected <block end>"),
        ("database: d\ncases:\n  - id: a\n    gold: SELECT 1\n    question: a: b\n", "file", 5, "mapping values are not allowed"),
        # a quote never closed: where it opens
        ('database: d\ncases:\n  - id: a\n    gold: "SELECT 1\n  - id: b\n', "file", 4, "a quoted value opens on line 4 and is never closed"),
        # `cases:` that is not a list: the line of its value
        ("database: d\ncases:\n  id: a\n  gold: SELECT 1\n", "file", 3, "`cases:` must be a list of cases, not a mapping"),
        ("database: d\n\ncases: SELECT 1\n", "file", 3, "`cases:` must be a list of cases, not a string"),
        # a case that is not a mapping: its own line
        ("database: d\ncases:\n  - id: a\n    gold: SELECT 1\n  - id: b\n    gold: SELECT 2\n  - [id, c]\n", "entry", 7, "not a list"),
        # a bad suite default: the line of that key
        ("database: d\ntags: [x]\ngold_sql: SELECT 1\ncases:\n  - id: a\n    gold: SELECT 1\n", "file", 3, "suite defaults: unknown key 'gold_sql'"),
    ],
)
def test_malformed_files_point_at_the_offending_line(tmp_path: Path, text: str, kind: str, line: int, fragment: str) -> None:
    found, error = first_problem(tmp_path, "bad.yaml", text)
    assert (found, error.line, fragment in error.message) == (kind, line, True), error


def test_jsonl_line_that_is_not_an_object_names_its_line(tmp_path: Path) -> None:
    entries = load(tmp_path, "c.jsonl", '{"database": "d", "gold": "SELECT 1"}\n\n[1, 2]\n')
    assert isinstance(entries[1], InvalidCase) and entries[1].line == 3 and "not a list" in entries[1].message


# --- ids: unique item names, and ids pytest cannot select ------------------------------------


def test_duplicate_ids_get_names_that_cannot_collide(tmp_path: Path) -> None:
    text = "database: d\ncases:\n  - {id: a, gold: SELECT 1}\n  - {id: a, gold: SELECT 2}\n  - {id: a-duplicate-1, gold: SELECT 3}\n"
    entries = load(tmp_path, "s.yaml", text)
    assert [(type(e).__name__, e.id) for e in entries] == [
        ("Case", "a"), ("InvalidCase", "a [duplicate at line 4]"), ("Case", "a-duplicate-1")]
    assert entries[1].message == "duplicate id 'a' (first used on line 3); ids must be unique within a file"


def test_a_generated_name_never_takes_a_name_in_use(tmp_path: Path) -> None:
    text = ("database: d\ncases:\n  - {id: a, gold: SELECT 1}\n  - {id: a, gold: SELECT 2}\n"
            "  - {id: 'a [duplicate at line 4]', gold: SELECT 3}\n  - {id: a, gold: SELECT 4}\n")
    entries = load(tmp_path, "s.yaml", text)
    assert [e.id for e in entries] == ["a", "a [duplicate at line 4] (2)", "a [duplicate at line 4]", "a [duplicate at line 6]"]
    assert [type(e).__name__ for e in entries] == ["Case", "InvalidCase", "Case", "InvalidCase"]


def test_a_broken_case_keeps_its_id_and_a_later_case_with_it_is_a_duplicate(tmp_path: Path) -> None:
    text = "database: d\ncases:\n  - {id: a, gold_sql: SELECT 1}\n  - {id: a, gold: SELECT 2}\n  - {gold: SELECT 3}\n  - {id: case-0002, gold: SELECT 4}\n"
    entries = load(tmp_path, "s.yaml", text)
    assert [(type(e).__name__, e.id) for e in entries] == [
        ("InvalidCase", "a"), ("InvalidCase", "a [duplicate at line 4]"), ("Case", "case-0002"),
        ("InvalidCase", "case-0002 [duplicate at line 6]")]
    assert len({e.id for e in entries}) == len(entries)


def test_duplicates_in_a_source_are_named_by_position(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text(json.dumps([{"question_id": 7, "db_id": "a", "SQL": "SELECT 1"}] * 2))
    a, b = load(tmp_path, "dev.yaml", "source: {format: bird, questions: dev.json, db_dir: db}\n")
    assert (a.id, b.id) == ("7", "7 [duplicate at position 1]")
    assert "first used at position 0" in b.message


@pytest.mark.parametrize(
    ("case_id", "fragment"),
    [
        ("'c::d'", "contains '::'"),
        ("''", "`id` is empty"),
        ("'   '", "`id` is empty"),
        ('"a\\nb"', "line break"),
        ("[a, b]", "must be a string or a number, not list"),
        ("{a: b}", "must be a string or a number, not dict"),
    ],
)
def test_ids_pytest_cannot_select_are_invalid(tmp_path: Path, case_id: str, fragment: str) -> None:
    text = f"database: d\ncases:\n  - {{id: ok, gold: SELECT 1}}\n  - id: {case_id}\n    gold: SELECT 2\n"
    ok, bad = load(tmp_path, "s.yaml", text)
    assert isinstance(ok, Case)
    assert isinstance(bad, InvalidCase) and fragment in bad.message and bad.line == 4
    assert bad.id == "case-0001"  # named by its position: no `::`, never empty


def test_a_bad_ids_positional_name_gives_way_to_a_case_that_uses_it(tmp_path: Path) -> None:
    entries = load(tmp_path, "s.yaml", "database: d\ncases:\n  - {id: 'x::y', gold: SELECT 1}\n  - {id: case-0000, gold: SELECT 2}\n")
    assert [(type(e).__name__, e.id) for e in entries] == [("InvalidCase", "case-0000 (2)"), ("Case", "case-0000")]


@pytest.mark.parametrize("case_id", ["a/b", "p[1]", "x y", "ü-1", 12])
def test_ids_pytest_can_select_are_kept(tmp_path: Path, case_id: object) -> None:
    (case,) = load(tmp_path, "c.jsonl", json.dumps({"id": case_id, "database": "d", "gold": "SELECT 1"}) + "\n")
    assert isinstance(case, Case) and case.id == str(case_id)


# --- empty input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "line", "message"),
    [
        ("e.yaml", "", None, "no cases: the file is empty"),
        ("e.yaml", "# all cases commented out\n---\n", None, "no cases: the file is empty"),
        ("e.jsonl", "\n  \n", None, "no cases: the file is empty"),
        ("e.yaml", "database: d\ncases: []\n", 2, "no cases: `cases:` is empty"),
        ("e.yaml", "database: d\ncases:\n# - id: a\n", 2, "no cases: `cases:` is empty"),
    ],
)
def test_empty_input_is_a_warning(tmp_path: Path, name: str, text: str, line: int | None, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    contents = read_case_file(path)
    assert contents.entries == [] and load_case_file(path) == []
    (warning,) = contents.warnings
    assert (warning.path, warning.line, warning.message) == (path, line, message)
    assert str(warning) == (f"{path}:{line}: {message}" if line else f"{path}: {message}")


def test_empty_source_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text("[]")
    path = tmp_path / "dev.yaml"
    path.write_text("# Spider\nsource: {format: spider, questions: dev.json, db_dir: db}\n")
    contents = read_case_file(path)
    assert contents.entries == []
    assert [(w.line, w.message) for w in contents.warnings] == [(2, "no cases: the source's questions file holds no questions")]


def test_a_file_with_cases_has_no_warnings(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("database: d\ncases:\n  - {id: a, gold: SELECT 1}\n  - {id: a}\n")
    contents = read_case_file(path)
    assert len(contents.entries) == 2 and contents.warnings == []


def test_an_unforeseen_exception_is_one_invalid_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_nl2sql.metrics import termselection

    def explode(conversation: object) -> None:
        raise KeyError("surprise")

    monkeypatch.setattr(termselection, "validate_conversation", explode)
    entries = load(tmp_path, "t.yaml", "cases:\n  - {id: t, conversation: []}\n  - {id: u, database: d, gold: SELECT 1}\n")
    assert isinstance(entries[0], InvalidCase) and entries[0].id == "t"
    assert entries[0].message == "cannot read this case: KeyError: 'surprise'"
    assert isinstance(entries[1], Case)


def test_a_broken_lines_positional_name_gives_way_too(tmp_path: Path) -> None:
    entries = load(tmp_path, "c.jsonl", '{oops\n{"id": "case-0000", "database": "d", "gold": "SELECT 1"}\n')
    assert [(type(e).__name__, e.id) for e in entries] == [("InvalidCase", "case-0000 (2)"), ("Case", "case-0000")]
