"""Database engines that run untrusted SQL read-only, and a per-process cache of open ones.

`open_engine` turns a case's `database` (a file path or a URL) into an `Engine`;
`EngineCache` opens each database once and remembers failures, so that the 62 cases of a missing
database report the same `DatabaseMissing` without 62 attempts to open it.
"""

from __future__ import annotations

from pathlib import Path

from pytest_nl2sql.engines.base import (
    DatabaseMissing,
    Engine,
    EngineError,
    Limits,
    QueryError,
    QueryResult,
    QueryTimeout,
    TooManyRows,
)
from pytest_nl2sql.engines.url import DatabaseSpec, EngineKind, parse_database

__all__ = [
    "DatabaseMissing",
    "DatabaseSpec",
    "Engine",
    "EngineCache",
    "EngineError",
    "EngineKind",
    "Limits",
    "QueryError",
    "QueryResult",
    "QueryTimeout",
    "TooManyRows",
    "open_engine",
    "open_spec",
    "parse_database",
]

DEFAULT_TEXT_ERRORS = "backslashreplace"


def open_engine(
    database: str, *, base_dir: Path | None = None, text_errors: str = DEFAULT_TEXT_ERRORS
) -> Engine:
    """Open `database` (a path relative to `base_dir`, or a URL) read-only.

    Raises `DatabaseMissing` when the file does not exist (nothing is ever created), the server
    cannot be reached, the URL scheme is unknown, or the driver is not installed.
    `text_errors` is the codec error handler for undecodable text in SQLite (`"ignore"` is what
    the official Spider evaluator does); server drivers decode text themselves.
    """
    return open_spec(parse_database(database, base_dir), text_errors=text_errors)


def open_spec(spec: DatabaseSpec, *, text_errors: str = DEFAULT_TEXT_ERRORS) -> Engine:
    """Open an already parsed database spec (see `open_engine`)."""
    if spec.kind is EngineKind.SQLITE:
        from pytest_nl2sql.engines.sqlite import SqliteEngine

        assert spec.path is not None
        return SqliteEngine(spec.path, text_errors=text_errors)
    if spec.kind is EngineKind.DUCKDB:
        from pytest_nl2sql.engines.duckdb import DuckdbEngine

        assert spec.path is not None
        return DuckdbEngine(spec.path)
    if spec.kind is EngineKind.POSTGRES:
        from pytest_nl2sql.engines.postgres import PostgresEngine

        return PostgresEngine(spec)
    from pytest_nl2sql.engines.mysql import MysqlEngine

    return MysqlEngine(spec)


class EngineCache:
    """Open engines (and failures to open them) by database, for one process.

    Two spellings of one database (a relative path from two case files, say) share one entry.
    Not thread-safe: one cache per pytest process (xdist workers each have their own).
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], Engine | DatabaseMissing] = {}
        self._keys: dict[tuple[str, Path | None, str], tuple[str, str]] = {}  # spelling -> entry key

    def get(
        self, database: str, base_dir: Path | None = None, text_errors: str = DEFAULT_TEXT_ERRORS
    ) -> Engine:
        """The engine for `database`, opening it on first use; re-raises a remembered failure."""
        spelling = (database, base_dir, text_errors)
        key = self._keys.get(spelling)  # every case asks twice: skip resolving its path again
        entry = self._entries.get(key) if key is not None else None
        if entry is None:
            spec = parse_database(database, base_dir)  # raises DatabaseMissing itself
            key = self._keys[spelling] = (spec.key, text_errors if spec.kind is EngineKind.SQLITE else "")
            entry = self._entries.get(key)
        if entry is None:
            try:
                entry = open_spec(spec, text_errors=text_errors)
            except DatabaseMissing as error:
                entry = error
            self._entries[key] = entry
        if isinstance(entry, DatabaseMissing):
            raise DatabaseMissing(str(entry))
        return entry

    def close_all(self) -> None:
        """Close every open engine and forget remembered failures."""
        entries, self._entries = self._entries, {}
        for entry in entries.values():
            if not isinstance(entry, DatabaseMissing):
                entry.close()

    def __len__(self) -> int:
        return len(self._entries)
