"""What a case file is read into: `Case`, `InvalidCase`, warnings, and the case keys.

Independent of pytest and of the file formats: the loaders (`read.py`, `sources.py`) fill these in.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.url import dialect_of

MAX_NEIGHBOURS = 16  # neighbour databases a case (or a run) may ask for: each is generated, cached and judged

# Case keys of the contract, plus the free-text keys of the term-selection format.
CASE_KEYS = frozenset(
    {
        "id", "question", "database", "db_id", "db_dir", "gold", "gold_result", "predicted", "predicted_result",
        "predicted_malloy", "malloy_model", "dialect", "order", "tags", "hardness", "compare", "conversation", "hint", "neighbours",
        "name", "comments", "quarantine",
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
    predicted_result: Path | None = None  # a CSV file holding the predicted result, instead of SQL
    predicted_malloy: str | None = None  # a Malloy query, instead of SQL (compiled for the case's engine)
    malloy_model: Path | None = None  # the Malloy model a Malloy prediction is compiled against (None: generated)
    dialect: str | None = None
    order: str = "auto"
    tags: tuple[str, ...] = ()
    hardness: str | None = None  # an explicit label; else computed from the gold SQL
    compare: Mapping[str, Any] = field(default_factory=dict)
    conversation: tuple[Mapping[str, Any], ...] | None = None
    hint: str | None = None
    name: str | None = None
    tables_json: Path | None = None  # Spider's tables.json beside a `source:` (schema + foreign keys)
    neighbours: int | None = None  # generated neighbour databases for this case (None: the run's setting)
    quarantine: str | None = None  # why this case's failure is expected and fails nothing (it still runs, reported)

    @property
    def is_term_selection(self) -> bool:
        return self.conversation is not None

    @functools.cached_property  # asked at every stage of the case; a frozen dataclass allows it
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


def quarantine_of(value: Any, database: str | None) -> str | None:
    """The case's `quarantine` reason: a text (this case; a suite's default, every case of it), or
    a mapping `{DATABASE: reason}` (the cases on that database, as they name it: a Spider `db_id`
    missing from a download). A ValueError says what is wrong."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise ValueError("`quarantine` must be a reason (a non-empty text), or a mapping of database to reason")
        return value
    if isinstance(value, Mapping):
        for name, reason in value.items():
            if not isinstance(name, str) or not isinstance(reason, str) or not reason.strip():
                raise ValueError("`quarantine` must map each database (as cases name it) to a reason (a non-empty text)")
        return value.get(database) if database is not None else None
    raise ValueError(f"`quarantine` must be a reason (a non-empty text), or a mapping of database to reason, "
                     f"not {type(value).__name__}")


@dataclass(frozen=True)
class InvalidCase:
    """An entry of a case file that could not be read: reported as an error item, not a crash.

    `id` is the item's name, unique within the file and free of `::` (so the item can be
    selected): the case's own id when it has a usable one, else a generated name such as
    `case-0003` or `a [duplicate at line 7]`."""

    id: str
    file: Path
    line: int | None
    position: int
    message: str

    @property
    def error(self) -> CaseFileError:
        return CaseFileError(self.file, self.line, self.message)


Entry = Case | InvalidCase


@dataclass(frozen=True)
class CaseFileWarning:
    """Something suspicious but not broken in a case file (e.g. it holds no cases).
    `str()` is `path:line: message` (or `path: message`), like `CaseFileError`."""

    path: Path
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass(frozen=True)
class CaseFileContents:
    """What `read_case_file` returns: the entries (cases and broken entries, in file order) and
    the warnings about the file; or, for a file that cannot be read as a whole (not parsed, a
    suite block that names no cases), no entries and the `error` (file and line): which of its
    cases exist is unknown, so none is made up."""

    entries: list[Entry]
    warnings: list[CaseFileWarning] = field(default_factory=list)
    error: CaseFileError | None = None


@dataclass(frozen=True)
class Broken:
    """A raw entry that could not even be parsed (e.g. a JSONL line that is not JSON)."""

    message: str


def default_id(position: int) -> str:
    return f"case-{position:04d}"
