"""Reading case files: YAML (one case, several documents, or a suite) and JSONL, and suites that
name a Spider / BIRD data set (`sources.py`).

Every loader keeps the file and line each case came from, so that a malformed case is reported as
`path:line: what is wrong` and the rest of the file (and run) goes on: a bad entry becomes an
`InvalidCase`, never an exception that stops collection, and any unexpected exception while
building one case turns that case into an `InvalidCase`. A file that cannot be read as a whole
(not parsed, hostile: alias bombs and deep nesting are refused by the parser, `parse.py`; a suite
block that names no cases) has no entries but its `CaseFileContents.error`, naming the line where
the problem starts: the plugin makes it a collection error of that file, not a made-up case.

Item names are unique within a file and never contain `::` (pytest's node-id separator), so every
item can be selected and the summary counts what pytest counts:

- the first case with an id keeps it; a later case with the same id is an `InvalidCase` ("duplicate
  id 'a' (first used on line 3)") named `a [duplicate at line 7]` (`at position N` for a `source:`);
- an id that is not a string or number, is empty, contains `::` or a control character (a line
  break) is an `InvalidCase` named by its position (`case-0003`), as is an entry that is not a
  mapping or not JSON;
- such generated names give way to the ids cases give: a name already used gets ` (2)`, ` (3)`...

Public API (re-exported here for the rest of the package): `read_case_file`, `load_case_file`,
`Case`, `InvalidCase`, `CaseFileError`, `CaseFileWarning`, `CaseFileContents`, `Entry`.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_nl2sql.cases.confine import Confinement
from pytest_nl2sql.cases.model import (
    ALIASES,
    CASE_KEYS,
    IGNORED_KEYS,
    MAX_NEIGHBOURS,
    ORDER_VALUES,
    SOURCE_FORMATS,
    SOURCE_ONLY_KEYS,
    Broken,
    Case,
    CaseFileContents,
    CaseFileError,
    CaseFileWarning,
    Entry,
    InvalidCase,
    default_id,
    quarantine_of,
)
from pytest_nl2sql.cases.parse import load_json, yaml_documents, yaml_error
from pytest_nl2sql.cases.sources import read_gold_file, source_entries
from pytest_nl2sql.engines.url import absolute_file_url, looks_like_url, redact
from pytest_nl2sql.files import read_text_capped
from pytest_nl2sql.judge.compare import CompareOptions
from pytest_nl2sql.metrics import soft, termselection

__all__ = [
    "ALIASES", "CASE_KEYS", "IGNORED_KEYS", "ORDER_VALUES", "SOURCE_FORMATS", "SOURCE_ONLY_KEYS",
    "Case", "CaseFileContents", "CaseFileError", "CaseFileWarning", "Entry", "InvalidCase",
    "default_id", "load_case_file", "read_case_file", "read_gold_file",
]

NO_CASES = "no cases: the file is empty"
EMPTY_CASES = "no cases: `cases:` is empty"
EMPTY_SOURCE = "no cases: the source's questions file holds no questions"


def load_case_file(
    path: Path, *, db_dir: Path | None = None, dsn: str | None = None, confine: Path | None = None
) -> list[Entry]:
    """The entries of a `.yaml`/`.yml`/`.jsonl` case file (see `read_case_file`), without warnings.
    Raises `CaseFileError` for a file that cannot be read as a whole."""
    contents = read_case_file(path, db_dir=db_dir, dsn=dsn, confine=confine)
    if contents.error is not None:
        raise contents.error
    return contents.entries


def read_case_file(
    path: Path, *, db_dir: Path | None = None, dsn: str | None = None, confine: Path | None = None
) -> CaseFileContents:
    """Read a `.yaml`/`.yml`/`.jsonl` case file: its entries (cases, and `InvalidCase`s for the
    entries that cannot be read), and warnings (a file with no cases); for a file that cannot be
    read as a whole (not read, not parsed, a suite block that names no cases), its `error` and no
    entries. Never raises for a bad file.

    `db_dir` is the `--nl2sql-db-dir` fallback; with `dsn` (`--nl2sql-dsn`) every case runs there,
    so a case needs no database file of its own; with `confine` (`--nl2sql-confine`: the rootdir)
    a case whose database file, `gold_result` file or `source:` files lie outside that directory
    (symlinks resolved) is an `InvalidCase` (server URLs are allowed, and so are `db_id`
    databases under `db_dir`)."""
    path = Path(path)
    where = _Where(db_dir, dsn, Confinement.of(confine, db_dir))
    try:
        text = read_text_capped(path)
    except (OSError, UnicodeDecodeError) as e:
        return _unreadable(path, None, f"cannot read the file: {e}")
    if path.suffix == ".jsonl":
        raw = list(_jsonl_entries(text))
        if not raw:
            return CaseFileContents([], [CaseFileWarning(path, None, NO_CASES)])
        return CaseFileContents(_build_all(path, raw, {}, where))
    try:
        documents = list(yaml_documents(text))
    except yaml.YAMLError as e:
        line, message = yaml_error(e, text)
        return _unreadable(path, line, message)
    documents = [(node, data) for node, data in documents if data is not None]
    if not documents:
        return CaseFileContents([], [CaseFileWarning(path, None, NO_CASES)])
    if len(documents) == 1 and isinstance(documents[0][1], Mapping):
        node, data = documents[0]
        if "source" in data or "cases" in data:
            return _load_suite(path, node, data, where)
    raw = [(node.start_mark.line + 1, data) for node, data in documents]
    return CaseFileContents(_build_all(path, raw, {}, where))


def _unreadable(path: Path, line: int | None, message: str) -> CaseFileContents:
    return CaseFileContents([], error=CaseFileError(path, line, message))


def _jsonl_entries(text: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, load_json(line)
        except ValueError as e:
            detail = f"{e.msg} (column {e.colno})" if hasattr(e, "colno") else str(e)
            yield number, Broken(f"invalid JSON: {detail}")


def _mapping_value_node(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def _key_line(node: yaml.Node, keys: Any, default: int) -> int:
    """The line of the first of `keys` in a mapping node (else `default`)."""
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value in keys:
                return k.start_mark.line + 1
    return default


def _load_suite(path: Path, node: yaml.Node, data: Mapping[str, Any], where: _Where) -> CaseFileContents:
    line = node.start_mark.line + 1

    def broken(at: int, message: str) -> CaseFileContents:
        return _unreadable(path, at, message)

    if "source" in data and "cases" in data:
        return broken(line, "a suite has either `source:` or `cases:`, not both")
    defaults = {k: v for k, v in data.items() if k not in ("cases", "source")}
    problem = _check_keys(defaults, allow=CASE_KEYS - {"id"})
    if problem:
        bad = [str(k) for k in defaults if k not in CASE_KEYS - {"id"} and k not in ALIASES and k not in IGNORED_KEYS]
        return broken(_key_line(node, bad, line), f"suite defaults: {problem}")
    if "source" in data:
        source_node = _mapping_value_node(node, "source")
        source_line = source_node.start_mark.line + 1 if source_node else line
        try:
            raw = list(source_entries(path, data["source"], source_line, where.confine))
        except CaseFileError as e:
            return broken(e.line or source_line, e.message)
        if not raw:
            return CaseFileContents([], [CaseFileWarning(path, source_line, EMPTY_SOURCE)])
        return CaseFileContents(_build_all(path, raw, defaults, where, from_source=True))
    cases = data["cases"]
    cases_node = _mapping_value_node(node, "cases")
    cases_line = cases_node.start_mark.line + 1 if cases_node else line
    if cases is None or cases == []:
        return CaseFileContents([], [CaseFileWarning(path, cases_line, EMPTY_CASES)])
    if not isinstance(cases, list):
        return broken(cases_line, f"`cases:` must be a list of cases, not {_type_name(cases)}")
    lines = [n.start_mark.line + 1 for n in cases_node.value] if isinstance(cases_node, yaml.SequenceNode) else []
    raw = [(lines[i] if i < len(lines) else cases_line, c) for i, c in enumerate(cases)]
    return CaseFileContents(_build_all(path, raw, defaults, where))


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value), type(value).__name__)


# --- building cases ---------------------------------------------------------------------------


def _build_all(
    path: Path, raw: list[tuple[int, Any]], defaults: Mapping[str, Any], where: _Where, from_source: bool = False
) -> list[Entry]:
    built = [_build_case(path, line, position, data, defaults, where, from_source)
             for position, (line, data) in enumerate(raw)]
    return _unique_names(built, from_source)


def _unique_names(built: list[tuple[Entry, bool]], from_source: bool) -> list[Entry]:
    """Entries with names unique within the file (see the module docstring). `built` pairs each
    entry with whether it claims its `id`; the others get a name no claimed id uses."""
    taken = {entry.id for entry, own in built if own}
    first: dict[str, Entry] = {}
    out: list[Entry | None] = [None] * len(built)
    later: list[int] = []
    for index, (entry, own) in enumerate(built):
        if own and entry.id not in first:
            first[entry.id] = entry
            out[index] = entry
        else:
            later.append(index)

    def at(entry: Entry) -> str:
        return f"at position {entry.position}" if from_source or entry.line is None else f"on line {entry.line}"

    for index in later:
        entry, own = built[index]
        if own:  # a duplicate id
            where = f"position {entry.position}" if from_source or entry.line is None else f"line {entry.line}"
            base = f"{entry.id} [duplicate at {where}]"
            message = f"duplicate id {entry.id!r} (first used {at(first[entry.id])}); ids must be unique within a file"
            if isinstance(entry, InvalidCase):
                message += f"; also: {entry.message}"
        else:
            base = entry.id
            message = entry.message if isinstance(entry, InvalidCase) else ""
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base} ({n})"
        taken.add(name)
        out[index] = InvalidCase(name, entry.file, entry.line, entry.position, message)
    return [e for e in out if e is not None]


def _check_keys(data: Mapping[str, Any], allow: frozenset[str]) -> str | None:
    unknown = [k for k in data if k not in allow and k not in ALIASES and k not in IGNORED_KEYS]
    if unknown:
        return f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(_short(k) for k in unknown)} (known keys: {', '.join(sorted(CASE_KEYS))})"
    return None


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value) if isinstance(value, str) else repr(str(value))
    return text if len(text) <= limit else text[: limit - 4] + "...'"


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


_ID_TYPES = (str, int, float, datetime.date)  # bool is an int


def _case_id(value: Any, position: int) -> tuple[str, str | None]:
    """(the case's id, None) or (its positional name, what is wrong with the id it gives)."""
    fallback = default_id(position)
    if value is None:
        return fallback, None
    if not isinstance(value, _ID_TYPES):
        return fallback, f"`id` must be a string or a number, not {type(value).__name__}"
    text = str(value)
    if not text.strip():
        return fallback, f"`id` is empty: give the case an id, or leave `id` out for the default ({fallback})"
    if "::" in text:
        return fallback, (f"id {_short(text)} contains '::', which separates the parts of a pytest node id, "
                          "so the case could not be selected: use another separator")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return fallback, f"id {_short(text)} contains a line break or another control character"
    return text, None


def _build_case(
    path: Path, line: int, position: int, data: Any, defaults: Mapping[str, Any], where: _Where,
    from_source: bool = False,
) -> tuple[Entry, bool]:
    """The entry for one raw case, and whether it claims its `id` (see `_unique_names`): a case
    does; a broken entry only when it gives a usable id of its own (its positional name gives way)."""
    fallback_id = default_id(position)
    if isinstance(data, Broken):
        return InvalidCase(fallback_id, path, line, position, data.message), False
    if not isinstance(data, Mapping):
        return InvalidCase(fallback_id, path, line, position,
                           f"a case must be a mapping of case keys, not {_type_name(data)}"), False
    case_id, named = fallback_id, False
    try:
        case_data = _canonical(data)
        case_id, id_problem = _case_id(case_data.get("id"), position)
        if id_problem:
            return InvalidCase(case_id, path, line, position, id_problem), False
        named = case_data.get("id") is not None
        problem = _check_keys(data, allow=CASE_KEYS | (SOURCE_ONLY_KEYS if from_source else frozenset()))
        if problem:
            return InvalidCase(case_id, path, line, position, problem), named
        own_defaults = _canonical(defaults)
        merged = {**own_defaults, **case_data}
        return _case_from_mapping(path, line, position, case_id, merged, own_defaults, case_data, where), True
    except (ValueError, TypeError) as e:
        return InvalidCase(case_id, path, line, position, str(e)), named
    except Exception as e:  # a case file must never stop the run: an unforeseen shape is one bad case
        return InvalidCase(case_id, path, line, position, f"cannot read this case: {type(e).__name__}: {e}"), named


def _case_from_mapping(
    path: Path, line: int, position: int, case_id: str, merged: dict[str, Any], defaults: Mapping[str, Any],
    own: Mapping[str, Any], where: _Where,
) -> Case:
    base = path.parent
    tags = tuple(dict.fromkeys(_as_str_list(defaults.get("tags"), "tags") + _as_str_list(own.get("tags"), "tags")))
    for options in (defaults.get("compare"), own.get("compare")):
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(f"`compare` must be a mapping of comparison options, e.g. {{mode: {_short(options)}}}")
    compare = {**(defaults.get("compare") or {}), **(own.get("compare") or {})}
    suite_synonyms, case_synonyms = ((defaults.get("compare") or {}).get("synonyms"), (own.get("compare") or {}).get("synonyms"))
    if suite_synonyms is not None or case_synonyms is not None:  # the case's words add to the suite's
        compare["synonyms"] = {**soft.synonyms_from(suite_synonyms), **soft.synonyms_from(case_synonyms)}
    order = merged.get("order", "auto")
    if order not in ORDER_VALUES:
        raise ValueError(f"`order` must be one of {', '.join(ORDER_VALUES)}, not {_short(order)}")
    hardness = merged.get("hardness")
    conversation = merged.get("conversation")
    neighbours = merged.get("neighbours")
    if neighbours is not None and (isinstance(neighbours, bool) or not isinstance(neighbours, int)
                                   or not 0 <= neighbours <= MAX_NEIGHBOURS):
        raise ValueError(f"`neighbours` must be a whole number of neighbour databases from 0 to {MAX_NEIGHBOURS},"
                         f" not {_short(neighbours)}")

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
            quarantine=quarantine_of(merged.get("quarantine"), _opt_str(merged.get("database") or merged.get("db_id"))),
        )

    gold = _as_str_list(merged.get("gold"), "gold")
    gold_result_names = _as_str_list(merged.get("gold_result"), "gold_result")
    gold_result = tuple(base / p for p in gold_result_names)
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
    predicted_result_name = merged.get("predicted_result")
    if predicted_result_name is not None and not isinstance(predicted_result_name, str):
        raise ValueError(f"`predicted_result` must be the path of a CSV file, not {type(predicted_result_name).__name__}")
    if predicted_result_name is not None and predicted is not None:
        raise ValueError("a case has either `predicted` (SQL) or `predicted_result` (a CSV file), not both")
    predicted_result = base / predicted_result_name if predicted_result_name is not None else None
    predicted_malloy = merged.get("predicted_malloy")
    if predicted_malloy is not None and not isinstance(predicted_malloy, str):
        raise ValueError(f"`predicted_malloy` must be Malloy text, not {type(predicted_malloy).__name__}")
    if predicted_malloy is not None and (predicted is not None or predicted_result_name is not None):
        raise ValueError("a case has one of `predicted` (SQL), `predicted_malloy` (Malloy) or `predicted_result` (a CSV file)")
    malloy_model_name = merged.get("malloy_model")
    if malloy_model_name is not None and not isinstance(malloy_model_name, str):
        raise ValueError(f"`malloy_model` must be the path of a .malloy file, not {type(malloy_model_name).__name__}")
    malloy_model = base / malloy_model_name if malloy_model_name is not None else None
    _check_condition_cols(compare, gold, gold_result, merged.get("dialect"))
    database, target, trusted, named = _database_of(merged, base, where)
    if target is None and not where.dsn:
        raise ValueError("no database: give `database` (a file or URL) or `db_id` with `db_dir` (or --nl2sql-db-dir)")
    problem = where.confine.database_problem(database or "", target, trusted=trusted, named=named) if target else None
    for name, result_file in zip(gold_result_names, gold_result):
        problem = problem or where.confine.problem(f"gold_result {_short(name)}", result_file)
    if predicted_result is not None:
        problem = problem or where.confine.problem(f"predicted_result {_short(predicted_result_name)}", predicted_result)
    if malloy_model is not None:
        problem = problem or where.confine.problem(f"malloy_model {_short(malloy_model_name)}", malloy_model)
    if problem:
        raise ValueError(problem)
    return Case(
        id=case_id, file=path, line=line, position=position, question=_opt_str(merged.get("question")),
        database=database, database_target=target, gold=gold, gold_result=gold_result, predicted=predicted,
        predicted_result=predicted_result, predicted_malloy=predicted_malloy, malloy_model=malloy_model,
        dialect=_opt_str(merged.get("dialect")), order=order, tags=tags, hardness=_opt_str(hardness),
        compare=compare, hint=_opt_str(merged.get("hint")), name=_opt_str(merged.get("name")),
        tables_json=merged.get("tables_json"), neighbours=neighbours,
        quarantine=quarantine_of(merged.get("quarantine"), database),
    )


def _check_condition_cols(compare: Mapping[str, Any], gold: tuple[str, ...], gold_result: tuple[Path, ...],
                          dialect: Any) -> None:
    """A `condition_cols` name the gold cannot have is an invalid case, found at collection where
    the gold's column names can be known without running it: the header of a `gold_result` CSV,
    or a gold query whose every output column has a name sqlglot can read (no `*`, no unnamed
    expression). Otherwise it is checked when the gold has run (a `gold_error`)."""
    names = [c for c in compare.get("condition_cols") or () if isinstance(c, str)]
    if not names or compare.get("mode") != "columns":
        return
    options = CompareOptions.from_mapping(compare)
    for number, columns in enumerate(_gold_column_names(gold, gold_result, dialect), start=1):
        if columns is None:
            continue
        try:
            options.chosen_columns(len(columns), columns)
        except ValueError as e:
            count = len(gold) or len(gold_result)
            raise ValueError(f"{e}" + (f" [gold {number} of {count}]" if count > 1 else "")) from None


def _gold_column_names(gold: tuple[str, ...], gold_result: tuple[Path, ...], dialect: Any) -> Iterator[list[str] | None]:
    import csv

    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    for path in gold_result:
        try:
            with open(path, newline="", encoding="utf-8-sig") as handle:
                yield next(csv.reader(handle), None)
        except (OSError, UnicodeDecodeError, csv.Error):
            yield None  # the gold_error says why when the case runs
    for sql in gold:
        try:
            tree = sqlglot.parse_one(sql, read=str(dialect) if dialect else None)
        except (SqlglotError, RecursionError, ValueError):
            yield None
            continue
        select = tree if isinstance(tree, exp.Select) else None
        if select is None or not select.expressions or any(
            not isinstance(e, (exp.Column, exp.Alias)) or isinstance(e, exp.Column) and isinstance(e.this, exp.Star)
            for e in select.expressions
        ):
            yield None
            continue
        yield [e.alias_or_name for e in select.expressions]


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _last_user_content(conversation: list[Any]) -> str | None:
    for turn in reversed(conversation):
        if isinstance(turn, Mapping) and turn.get("role") == "user":
            return _opt_str(turn.get("content"))
    return None


@dataclass(frozen=True)
class _Where:
    """Where databases are: `--nl2sql-db-dir` for bare `db_id`s, `--nl2sql-dsn` for all; and
    `--nl2sql-confine`: where the files a case names must lie."""

    db_dir: Path | None = None
    dsn: str | None = None
    confine: Confinement = field(default_factory=Confinement)
    # (case file folder, db_dir, db_id) -> the database file (as named, resolved): a Spider suite
    # names 20 databases 1034 times
    resolved: dict[tuple[Path, str | None, str], tuple[str, str]] = field(default_factory=dict, compare=False)


def _database_of(
    data: Mapping[str, Any], base: Path, where: _Where
) -> tuple[str | None, str | None, bool, str | None]:
    """(the database as the case names it, the case's own database to open: a path or a URL,
    whether it was found under the command line's --nl2sql-db-dir, and a database file's path as
    named, before symlinks are resolved, so that a refusal can name the link).

    With `--nl2sql-dsn` every case runs on that database, so a case may then name only a
    `db_id` (as a label) or nothing: its own database is None."""
    database = data.get("database")
    db_id = data.get("db_id")
    if database is not None:
        written = str(database)
        if looks_like_url(written):  # what reports show (every one of them) holds no password; the target does
            target = absolute_file_url(written, base)  # `duckdb:///rel` is relative to the case file
            return redact(written), target, False, None
        return written, str((base / written).resolve()), False, os.path.abspath(base / written)
    if db_id is None:
        return None, None, False, None
    label = str(db_id)
    directory = data.get("db_dir")
    key = (base, None if directory is None else str(directory), label)
    if key not in where.resolved:
        root = (base / str(directory)) if directory is not None else where.db_dir
        if root is None:
            if where.dsn:
                return label, None, False, None
            raise ValueError(f"`db_id: {label}` needs `db_dir` (in the case or suite) or --nl2sql-db-dir")
        named = Path(root) / label / f"{label}.sqlite"
        where.resolved[key] = (os.path.abspath(named), str(named.resolve()))
    named, resolved = where.resolved[key]
    return label, resolved, directory is None, named
