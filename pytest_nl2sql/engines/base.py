"""The small protocol every database engine implements, and the errors it raises.

Predicted SQL is untrusted: an engine must run it read-only, inside a time limit that really
interrupts the query, with a cap on rows and on result size, and leave no state behind for the
next query. Engines raise the exceptions below; callers turn them into verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Limits:
    """Bounds applied to every query an engine runs."""

    timeout: float = 30.0  # seconds of wall time per query
    max_rows: int = 100_000  # more rows than this is TooManyRows
    max_bytes: int = 256 * 1024 * 1024  # rough size of a whole result held in memory
    max_value_bytes: int = 16 * 1024 * 1024  # largest single string/blob a query may build


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows (tuples of plain Python values) of one executed query."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


class EngineError(Exception):
    """Base of the errors an engine raises; `str(error)` is what the user sees."""


class DatabaseMissing(EngineError):
    """The database file or server named by a case does not exist or cannot be reached."""


class QueryError(EngineError):
    """The database refused or failed the query (syntax error, unknown column, denied write...)."""


class QueryTimeout(EngineError):
    """The query ran longer than `Limits.timeout` and was interrupted."""


class TooManyRows(EngineError):
    """The result has more rows than `Limits.max_rows`, or is larger than `Limits.max_bytes`."""


class Engine(Protocol):
    """One open database. Engines are cached per worker and reused across cases."""

    dialect: str  # the sqlglot dialect name of this database (sqlite, postgres, mysql, duckdb)

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        """Run one statement read-only within `limits`; raise an `EngineError` subclass on failure."""
        ...

    def schema_ddl(self) -> str:
        """CREATE TABLE statements of the database, as text to put in a model's prompt."""
        ...

    def schema_columns(self) -> dict[str, list[str]]:
        """{table: [column, ...]} in declaration order."""
        ...

    def close(self) -> None: ...
