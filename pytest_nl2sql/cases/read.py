"""Case files: the `Case` dataclass and the YAML / JSONL / Spider / BIRD loaders.

Every loader keeps the file and line each case came from, so that a malformed case is reported as
`path:line: what is wrong` and the rest of the file (and run) goes on: a bad entry becomes an
`InvalidCase`, never an exception that stops collection.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_nl2sql.metrics import termselection
from pytest_nl2sql.judge.compare import CompareOptions
from pytest_nl2sql.engines.url import dialect_of, looks_like_url

# Case keys of the contract, plus the free-text keys of the term-selection format.
CASE_KEYS = frozenset(
    {
        "id", "question", "database", "db_id", "db_dir", "gold", "gold_result", "predicted",
        "dialect", "order", "tags", "hardness", "compare", "conversation", "hint",
        "name", "comments",
    }
)
# Spider / BIRD spellings accepted for our keys.
ALIASES = {"query": "gold", "SQL": "gold", "difficulty": "hardness", "question_id": "id", "evidence": "hint"}
# Keys of Spider / BIRD question files that carry nothing we use.
IGNORED_KEYS = frozenset({"query_toks", "query_toks_no_value", "question_toks", "sql"})
# Keys only a `source:` loader sets.
SOURCE_ONLY_KEYS = frozenset({"tables_json"})
ORDER_VALUES = ("auto", "ordered", "unordered")
SOURCE_FORMATS = ("spider", "bird")


class CaseFileError(Exception):
    """A case file (or one entry of it) cannot be read; `str()` names the file and line."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        self.path, self.line, self.message = path, line, message
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")


@dataclass(frozen=True)
class Case:
    """One question to evaluate, with everything needed to run it, independent of pytest."""

    id: str
    file: Path  # the case file
    line: int | None  # 1-based line of the case in its file (None when unknown)
    position: int  # zero-based position of the case in its file or source
    question: str | None = None
    database: str | None = None  # as the case names it: a db_id, a path or a URL
    database_target: str | None = None  # what to open: an absolute path or a URL
    gold: tuple[str, ...] = ()
    gold_result: tuple[Path, ...] = ()
    predicted: Any = None
    dialect: str | None = None
    order: str = "auto"
    tags: tuple[str, ...] = ()
    hardness: str | None = None  # an explicit label; else computed from the gold SQL
    compare: Mapping[str, Any] = field(default_factory=dict)
    conversation: tuple[Mapping[str, Any], ...] | None = None
    hint: str | None = None
    name: str | None = None
    tables_json: Path | None = None  # Spider's tables.json beside a `source:` (schema + foreign keys)
    # Filled in at run time for the predictor hook:
    schema: str | None = None  # the database's DDL
    engine: Any = None  # the open database (an `Engine`), to run queries while predicting

    @property
    def is_term_selection(self) -> bool:
        return self.conversation is not None

    @property
    def written_in(self) -> str:
        """The sqlglot dialect of the case's SQL: its `dialect`, else its own database's."""
        return self.dialect or dialect_of(self.database_target or "")

    @property
    def gold_value(self) -> str | list[str] | None:
        """Gold as the JSON report shows it: a string, a list when several, None for gold_result."""
        if not self.gold:
            return None
        return self.gold[0] if len(self.gold) == 1 else list(self.gold)

    def replace(self, **changes: Any) -> "Case":
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class InvalidCase:
    """An entry of a case file that could not be read: reported as an error item, not a crash."""

    id: str
    file: Path
    line: int | None
    position: int
    message: str

    @property
    def error(self) -> CaseFileError:
        return CaseFileError(self.file, self.line, self.message)


Entry = Case | InvalidCase


def default_id(position: int) -> str:
    return f"case-{position:04d}"


def load_case_file(path: Path, *, db_dir: Path | None = None, dsn: str | None = None) -> list[Entry]:
    """Read a `.yaml`/`.yml`/`.jsonl` case file. `db_dir` is the `--nl2sql-db-dir` fallback; with
    `dsn` (`--nl2sql-dsn`) every case runs there, so a case needs no database file of its own."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return [InvalidCase(default_id(0), path, None, 0, f"cannot read the file: {e}")]
    if path.suffix == ".jsonl":
        raw = list(_jsonl_entries(path, text))
        return _build_all(path, raw, {}, _Where(db_dir, dsn))
    try:
        documents = list(_yaml_documents(text))
    except yaml.YAMLError as e:
        # the context mark is where the broken construct starts; the problem mark may be the file's end
        mark = getattr(e, "context_mark", None) or getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        return [InvalidCase(default_id(0), path, line, 0, f"invalid YAML: {problem}" + (f" ({context})" if context else ""))]
    documents = [(node, data) for node, data in documents if data is not None]
    if len(documents) == 1 and isinstance(documents[0][1], Mapping):
        node, data = documents[0]
        if "source" in data or "cases" in data:
            return _load_suite(path, node, data, _Where(db_dir, dsn))
    raw = []
    for node, data in documents:
        raw.append((node.start_mark.line + 1, data))
    return _build_all(path, raw, {}, _Where(db_dir, dsn))


def _yaml_documents(text: str) -> Iterator[tuple[yaml.Node, Any]]:
    """Each YAML document as (node, data): the node keeps line numbers for error messages."""
    loader = yaml.SafeLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            yield node, loader.construct_document(node)
    finally:
        loader.dispose()


def _jsonl_entries(path: Path, text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as e:
            yield number, _Broken(f"invalid JSON: {e.msg} (column {e.colno})")


@dataclass(frozen=True)
class _Broken:
    message: str


def _mapping_value_node(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def _load_suite(path: Path, node: yaml.Node, data: Mapping[str, Any], where: _Where) -> list[Entry]:
    line = node.start_mark.line + 1
    if "source" in data and "cases" in data:
        return [InvalidCase(default_id(0), path, line, 0, "a suite has either `source:` or `cases:`, not both")]
    defaults = {k: v for k, v in data.items() if k not in ("cases", "source")}
    problem = _check_keys(defaults, allow=CASE_KEYS - {"id"})
    if problem:
        return [InvalidCase(default_id(0), path, line, 0, f"suite defaults: {problem}")]
    if "source" in data:
        source_node = _mapping_value_node(node, "source")
        source_line = source_node.start_mark.line + 1 if source_node else line
        try:
            raw = list(_source_entries(path, data["source"], source_line))
        except CaseFileError as e:
            return [InvalidCase(default_id(0), path, e.line, 0, e.message)]
        return _build_all(path, raw, defaults, where, from_source=True)
    cases = data["cases"]
    cases_node = _mapping_value_node(node, "cases")
    if not isinstance(cases, list):
        return [InvalidCase(default_id(0), path, line, 0, "`cases:` must be a list of cases")]
    lines = [n.start_mark.line + 1 for n in cases_node.value] if isinstance(cases_node, yaml.SequenceNode) else []
    raw = [(lines[i] if i < len(lines) else line, c) for i, c in enumerate(cases)]
    return _build_all(path, raw, defaults, where)


def _build_all(
    path: Path, raw: list[tuple[int, Any]], defaults: Mapping[str, Any], where: _Where, from_source: bool = False
) -> list[Entry]:
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for position, (line, data) in enumerate(raw):
        entry = _build_case(path, line, position, data, defaults, where, from_source)
        if isinstance(entry, Case) and entry.id in seen:
            entry = InvalidCase(
                f"{entry.id}-duplicate-{position}", path, line, position,
                f"duplicate id {entry.id!r} (first used on line {seen[entry.id]}); ids must be unique within a file",
            )
        elif isinstance(entry, Case):
            seen[entry.id] = line
        entries.append(entry)
    return entries


def _check_keys(data: Mapping[str, Any], allow: frozenset[str]) -> str | None:
    unknown = [k for k in data if k not in allow and k not in ALIASES and k not in IGNORED_KEYS]
    if unknown:
        return f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} (known keys: {', '.join(sorted(CASE_KEYS))})"
    return None


def _canonical(data: Mapping[str, Any]) -> dict[str, Any]:
    """Rename Spider/BIRD aliases to our keys (an explicit key wins over its alias)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in IGNORED_KEYS:
            continue
        target = ALIASES.get(key, key)
        if target in out and key != target:
            continue
        out[target] = value
    return out


def _as_str_list(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"`{key}` must be a string or a list of strings, not {type(value).__name__}")


def _build_case(
    path: Path, line: int, position: int, data: Any, defaults: Mapping[str, Any], where: _Where,
    from_source: bool = False,
) -> Entry:
    fallback_id = default_id(position)
    if isinstance(data, _Broken):
        return InvalidCase(fallback_id, path, line, position, data.message)
    if not isinstance(data, Mapping):
        return InvalidCase(fallback_id, path, line, position, f"a case must be a mapping of case keys, not {type(data).__name__}")
    problem = _check_keys(data, allow=CASE_KEYS | (SOURCE_ONLY_KEYS if from_source else frozenset()))
    if problem:
        return InvalidCase(_id_of(data, fallback_id), path, line, position, problem)
    case_data = _canonical(data)
    merged = {**_canonical(defaults), **case_data}
    try:
        return _case_from_mapping(path, line, position, merged, _canonical(defaults), case_data, where)
    except (ValueError, TypeError) as e:
        return InvalidCase(_id_of(data, fallback_id), path, line, position, str(e))


def _id_of(data: Mapping[str, Any], fallback: str) -> str:
    value = data.get("id", data.get("question_id"))
    return str(value) if value is not None and str(value).strip() else fallback


def _case_from_mapping(
    path: Path, line: int, position: int, merged: dict[str, Any], defaults: Mapping[str, Any],
    own: Mapping[str, Any], where: _Where,
) -> Case:
    case_id = str(merged["id"]) if merged.get("id") is not None and str(merged["id"]).strip() else default_id(position)
    base = path.parent
    tags = tuple(dict.fromkeys(_as_str_list(defaults.get("tags"), "tags") + _as_str_list(own.get("tags"), "tags")))
    for options in (defaults.get("compare"), own.get("compare")):
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(f"`compare` must be a mapping of comparison options, e.g. {{mode: {options}}}")
    compare = {**(defaults.get("compare") or {}), **(own.get("compare") or {})}
    order = merged.get("order", "auto")
    if order not in ORDER_VALUES:
        raise ValueError(f"`order` must be one of {', '.join(ORDER_VALUES)}, not {order!r}")
    hardness = merged.get("hardness")
    conversation = merged.get("conversation")

    if conversation is not None:
        if not isinstance(conversation, list):
            raise ValueError("`conversation` must be a list of turns")
        termselection.validate_conversation(conversation)
        termselection.thresholds(compare)  # a bad min_precision / min_recall is an invalid case
        question = merged.get("question") or _last_user_content(conversation)
        return Case(
            id=case_id, file=path, line=line, position=position, question=question,
            database=_opt_str(merged.get("database") or merged.get("db_id")), predicted=merged.get("predicted"),
            tags=tags, compare=compare, conversation=tuple(conversation), hint=_opt_str(merged.get("hint")),
            name=_opt_str(merged.get("name")), hardness=_opt_str(hardness),
        )

    gold = _as_str_list(merged.get("gold"), "gold")
    gold_result = tuple(base / p for p in _as_str_list(merged.get("gold_result"), "gold_result"))
    if gold and gold_result:
        raise ValueError("a case has either `gold` or `gold_result`, not both")
    if not gold and not gold_result:
        raise ValueError("a SQL case needs `gold` (SQL) or `gold_result` (a CSV file); a term-selection case needs `conversation`")
    if any(not g.strip() for g in gold):
        raise ValueError("`gold` is empty")
    CompareOptions.from_mapping(compare)  # a bad comparison option is an invalid case, not a crash later
    predicted = merged.get("predicted")
    if predicted is not None and not isinstance(predicted, str):
        raise ValueError(f"`predicted` must be SQL text, not {type(predicted).__name__}")
    database, target = _database_of(merged, base, where)
    if target is None and not where.dsn:
        raise ValueError("no database: give `database` (a file or URL) or `db_id` with `db_dir` (or --nl2sql-db-dir)")
    return Case(
        id=case_id, file=path, line=line, position=position, question=_opt_str(merged.get("question")),
        database=database, database_target=target, gold=gold, gold_result=gold_result, predicted=predicted,
        dialect=_opt_str(merged.get("dialect")), order=order, tags=tags, hardness=_opt_str(hardness),
        compare=compare, hint=_opt_str(merged.get("hint")), name=_opt_str(merged.get("name")),
        tables_json=merged.get("tables_json"),
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _last_user_content(conversation: list[Any]) -> str | None:
    for turn in reversed(conversation):
        if isinstance(turn, Mapping) and turn.get("role") == "user":
            return _opt_str(turn.get("content"))
    return None


@dataclass(frozen=True)
class _Where:
    """Where databases are: `--nl2sql-db-dir` for bare `db_id`s, and `--nl2sql-dsn` for all."""

    db_dir: Path | None = None
    dsn: str | None = None


def _database_of(data: Mapping[str, Any], base: Path, where: _Where) -> tuple[str | None, str | None]:
    """(the database as the case names it, the case's own database to open: a path or a URL).

    With `--nl2sql-dsn` every case runs on that database, so a case may then name only a
    `db_id` (as a label) or nothing: its own database is None."""
    database = data.get("database")
    db_id = data.get("db_id")
    if database is not None:
        label = str(database)
        return label, label if looks_like_url(label) else str((base / label).resolve())
    if db_id is None:
        return None, None
    label = str(db_id)
    directory = data.get("db_dir")
    root = (base / str(directory)) if directory is not None else where.db_dir
    if root is None:
        if where.dsn:
            return label, None
        raise ValueError(f"`db_id: {label}` needs `db_dir` (in the case or suite) or --nl2sql-db-dir")
    return label, str((Path(root) / label / f"{label}.sqlite").resolve())


# --- external data sets (Spider, BIRD) -------------------------------------------------------


def _source_entries(path: Path, source: Any, line: int) -> Iterator[tuple[int, Any]]:
    """The cases of a `source:` block, as raw mappings with our keys (and the block's line)."""
    if not isinstance(source, Mapping):
        raise CaseFileError(path, line, "`source:` must be a mapping with format, questions and db_dir")
    unknown = set(source) - {"format", "questions", "db_dir", "gold", "predictions", "tables"}
    if unknown:
        raise CaseFileError(path, line, f"unknown key(s) in `source:`: {', '.join(sorted(unknown))}")
    fmt = source.get("format")
    if fmt not in SOURCE_FORMATS:
        raise CaseFileError(path, line, f"`source.format` must be one of {', '.join(SOURCE_FORMATS)}, not {fmt!r}")
    for key in ("questions", "db_dir"):
        if not source.get(key):
            raise CaseFileError(path, line, f"`source.{key}` is required")
    base = path.parent
    questions_path = base / str(source["questions"])
    try:
        questions = json.loads(questions_path.read_text(encoding="utf-8"))
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
    tables_json = tables.resolve() if tables.is_file() else None
    for index, question in enumerate(questions):
        if not isinstance(question, Mapping):
            yield line, _Broken(f"source question {index} is not a JSON object")
            continue
        entry = {k: v for k, v in question.items() if k in ALIASES or k in CASE_KEYS}
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
        text = gold_path.read_text(encoding="utf-8")
    except OSError as e:
        raise CaseFileError(suite, line, f"cannot read source.gold {gold_path}: {e}") from e
    out = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        sql, _, db_id = raw.strip().partition("\t")
        out.append((sql, db_id or None))
    return out
