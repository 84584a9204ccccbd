"""Case files without pytest: formats, defaults, aliases, sources, and errors with file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_nl2sql.cases.read import Case, InvalidCase, load_case_file


def load(tmp_path: Path, name: str, text: str, **kw: object) -> list[Case | InvalidCase]:
    path = tmp_path / name
    path.write_text(text)
    return load_case_file(path, **kw)


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
    ("text", "line", "fragment"),
    [
        ("cases:\n  - id: a\n    gold: [unclosed\n", 3, "invalid YAML"),
        ("database: d\ncases:\n  - id: a\n    gold_sql: SELECT 1\n", 3, "unknown key 'gold_sql'"),
        ("database: d\ncases:\n  - id: a\n  - id: b\n    gold: SELECT 1\n", 3, "needs `gold`"),
        ("database: d\ncases:\n  - id: a\n    gold: SELECT 1\n    order: sorted\n", 3, "`order` must be one of"),
        ("database: d\ncases:\n  - id: a\n    gold: SELECT 1\n    gold_result: x.csv\n", 3, "either `gold` or `gold_result`"),
        ("database: d\ncases:\n  - just a string\n", 3, "must be a mapping"),
        ("source: {format: spider, questions: q.json, db_dir: d}\ncases: []\n", 1, "not both"),
        ("source: {format: sparql, questions: q.json, db_dir: d}\n", 1, "source.format"),
        ("database: d\ncases:\n  - id: a\n    predicted: 3\n    gold: SELECT 1\n", 3, "`predicted` must be SQL text"),
    ],
)
def test_errors_name_the_line_and_what_is_wrong(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    entries = load(tmp_path, "bad.yaml", text)
    bad = [e for e in entries if isinstance(e, InvalidCase)]
    assert bad, entries
    assert bad[0].line == line
    assert fragment in bad[0].message
    assert str(bad[0].error).startswith(f"{tmp_path / 'bad.yaml'}:{line}: ")


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
    (entry,) = load(tmp_path, "dev.yaml", "source: {format: spider, questions: dev.json, db_dir: db, gold: gold.sql}\n")
    assert isinstance(entry, InvalidCase) and "2 queries for 1 questions" in entry.message


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
