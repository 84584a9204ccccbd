"""External data sets named by a suite's `source:` block: Spider and BIRD question files."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.confine import Confinement
from pytest_nl2sql.cases.model import ALIASES, CASE_KEYS, SOURCE_FORMATS, Broken, CaseFileError, default_id
from pytest_nl2sql.cases.parse import MAX_DEPTH, load_json, nested_too_deep
from pytest_nl2sql.files import read_text_capped

SOURCE_KEYS = ("format", "questions", "db_dir", "gold", "predictions", "tables")


def source_entries(
    path: Path, source: Any, line: int, confine: Confinement = Confinement()
) -> Iterator[tuple[int, Any]]:
    """The cases of a `source:` block, as raw mappings with our keys (and the block's line).
    Raises `CaseFileError` when the block or a file it names is unusable."""
    if not isinstance(source, Mapping):
        raise CaseFileError(path, line, "`source:` must be a mapping with format, questions and db_dir")
    unknown = set(source) - set(SOURCE_KEYS)
    if unknown:
        raise CaseFileError(path, line, f"unknown key(s) in `source:`: {', '.join(sorted(map(str, unknown)))}")
    fmt = source.get("format")
    if fmt not in SOURCE_FORMATS:
        raise CaseFileError(path, line, f"`source.format` must be one of {', '.join(SOURCE_FORMATS)}, not {fmt!r}")
    for key in ("questions", "db_dir"):
        if not source.get(key):
            raise CaseFileError(path, line, f"`source.{key}` is required")
    base = path.parent
    for key in ("questions", "db_dir", "gold", "predictions", "tables"):
        if source.get(key):
            problem = confine.problem(f"source.{key}", base / str(source[key]))
            if problem:
                raise CaseFileError(path, line, problem)
    questions_path = base / str(source["questions"])
    try:
        questions = load_json(read_text_capped(questions_path), walked=False)  # walked per question
    except (OSError, ValueError) as e:
        raise CaseFileError(path, line, f"cannot read source.questions {questions_path}: {e}") from e
    if not isinstance(questions, list):
        raise CaseFileError(path, line, f"{questions_path} must hold a JSON list of questions")
    golds: list[tuple[str, str | None]] | None = None
    if source.get("gold"):
        golds = read_gold_file(base / str(source["gold"]), path, line)
        if len(golds) != len(questions):
            raise CaseFileError(path, line, f"source.gold has {len(golds)} queries for {len(questions)} questions")
    predictions: list[str] | None = None
    if source.get("predictions"):
        from pytest_nl2sql.cases.predictions import read_aligned_predictions  # one concern per module

        try:
            predictions = read_aligned_predictions(base / str(source["predictions"]))
        except (OSError, ValueError) as e:
            raise CaseFileError(path, line, f"cannot read source.predictions: {e}") from e
    db_dir = str((base / str(source["db_dir"])).resolve())
    tables = base / str(source["tables"]) if source.get("tables") else questions_path.parent / "tables.json"
    tables_json = tables.resolve() if tables.is_file() and not confine.outside(tables) else None
    for index, question in enumerate(questions):
        if not isinstance(question, Mapping):
            yield line, Broken(f"source question {index} is not a JSON object")
            continue
        entry = {k: v for k, v in question.items() if k in ALIASES or k in CASE_KEYS}
        if nested_too_deep(entry, MAX_DEPTH - 1):  # the entry sits one level inside the list
            yield line, Broken(f"source question {index} is nested deeper than {MAX_DEPTH} levels")
            continue
        entry["db_dir"] = db_dir
        if tables_json is not None:
            entry["tables_json"] = tables_json
        if golds is not None:
            entry.pop("query", None)
            entry.pop("SQL", None)
            entry["gold"] = golds[index][0]
        if fmt == "bird" and "question_id" not in question:
            entry["id"] = default_id(index)
        if predictions is not None:
            entry["predicted"] = predictions[index] if index < len(predictions) else ""
        yield line, entry


def read_gold_file(gold_path: Path, suite: Path, line: int) -> list[tuple[str, str | None]]:
    """A Spider gold file: one `SQL<TAB>db_id` per line."""
    try:
        text = read_text_capped(gold_path)
    except (OSError, UnicodeDecodeError) as e:
        raise CaseFileError(suite, line, f"cannot read source.gold {gold_path}: {e}") from e
    out = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        sql, _, db_id = raw.strip().partition("\t")
        out.append((sql, db_id or None))
    return out
