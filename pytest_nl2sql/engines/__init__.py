"""Database engines that run untrusted SQL read-only, and a per-process cache of open ones.

`open_engine` turns a case's `database` (a file path or a URL) into an `Engine`;
`EngineCache` opens each database once and remembers failures, so that the 62 cases of a missing
database report the same `DatabaseMissing` without 62 attempts to open it. `probe` opens and
closes a database once, so that a run's `--nl2sql-dsn` that cannot work stops the run up front.
`Table` and `create_table_ddl` give server schemas the CREATE TABLE text SQLite stores: a model
writing joins needs the keys, not just the column names, and one writing `DISTINCT` or a cast
needs the UNIQUE constraints and the types with their precision (`numeric(10,2)`, `varchar(50)`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
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
from pytest_nl2sql.engines.url import DatabaseSpec, EngineKind, mask_secrets, parse_database

__all__ = [
    "DatabaseMissing",
    "DatabaseSpec",
    "Engine",
    "EngineCache",
    "EngineError",
    "EngineKind",
    "ForeignKey",
    "Limits",
    "QueryError",
    "QueryResult",
    "QueryTimeout",
    "Table",
    "TooManyRows",
    "create_table_ddl",
    "open_engine",
    "open_spec",
    "parse_database",
    "probe",
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
    if spec.kind is EngineKind.SQLALCHEMY:
        from pytest_nl2sql.engines.sqlalchemy import SqlalchemyEngine

        return SqlalchemyEngine(spec)
    from pytest_nl2sql.engines.mysql import MysqlEngine

    return MysqlEngine(spec)


def probe(database: str, *, base_dir: Path | None = None) -> str:
    """Open `database` and close it again; return its label (a URL naming the engine, password
    masked). Raises `DatabaseMissing`, its message free of the password, when it cannot work
    (unknown scheme, missing driver, unreachable server, missing file, a schema it cannot read)."""
    try:
        spec = parse_database(database, base_dir)
        engine = open_spec(spec)
        try:
            engine.schema_columns()  # a login that cannot even read the catalogue cannot run a case
        finally:
            engine.close()
    except EngineError as error:
        raise DatabaseMissing(mask_secrets(str(error), database)) from None
    return spec.label()


@dataclass(frozen=True)
class ForeignKey:
    """`FOREIGN KEY (columns) REFERENCES table (references)`."""

    columns: tuple[str, ...]
    table: str
    references: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """One table of a schema as a prompt needs it: typed columns (with precision and length),
    NOT NULL, primary, unique and foreign keys."""

    name: str
    columns: tuple[tuple[str, str, bool], ...]  # (name, type, nullable), in declaration order
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()  # UNIQUE column sets (constraints or unique indexes), in order


def create_table_ddl(tables: Iterable[Table], quote: Callable[[str], str]) -> str:
    """CREATE TABLE statements (as SQLite stores them for a Spider database), one per table."""
    statements = []
    for table in tables:
        lines = [
            f"  {quote(name)} {kind}".rstrip() + ("" if nullable else " NOT NULL")
            for name, kind, nullable in table.columns
        ]
        if table.primary_key:
            lines.append(f"  PRIMARY KEY ({', '.join(map(quote, table.primary_key))})")
        shown: set[tuple[str, ...]] = {tuple(table.primary_key)}
        for columns in table.unique:
            if tuple(columns) not in shown:  # a unique index that only restates the key, or another index
                shown.add(tuple(columns))
                lines.append(f"  UNIQUE ({', '.join(map(quote, columns))})")
        for key in table.foreign_keys:
            lines.append(
                f"  FOREIGN KEY ({', '.join(map(quote, key.columns))}) REFERENCES"
                f" {quote(key.table)} ({', '.join(map(quote, key.references))})"
            )
        statements.append(f"CREATE TABLE {quote(table.name)} (\n" + ",\n".join(lines) + "\n);")
    return "\n\n".join(statements)


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
