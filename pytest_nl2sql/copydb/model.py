"""The engine-neutral schema `copy-db` copies: tables, columns with a logical type, keys.

A column's type is a `ColumnType` of one `Kind`: what its values are, not how an engine spells it,
so that each target can render the closest type of its own (`targets.py`). Types are read from a
typed engine's catalog with sqlglot; a SQLite column's type comes from the values it holds (its
storage classes), because that is how SQLite compares them (`sqlite_column_type`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import ParseError


class CopyError(Exception):
    """The copy cannot be done (exit code 1): the message names the table, column and why."""


class UsageError(Exception):
    """The command was asked for something it refuses (exit code 2): a bad URL, a non-empty target."""


class Kind(enum.Enum):
    INTEGER = "integer"
    REAL = "real"
    DECIMAL = "decimal"
    TEXT = "text"
    BOOLEAN = "boolean"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIMESTAMPTZ = "timestamptz"
    TIME = "time"
    BLOB = "blob"


@dataclass(frozen=True)
class ColumnType:
    kind: Kind
    bits: int = 64  # INTEGER: 16, 32 or 64; REAL: 32 or 64
    length: int | None = None  # TEXT: a maximum length the source enforced (never SQLite's)
    precision: int | None = None  # DECIMAL; None: unbounded (PostgreSQL's bare NUMERIC)
    scale: int | None = None
    padded: bool = False  # TEXT: PostgreSQL's CHAR(n), whose trailing blanks mean nothing (sources.py)


@dataclass(frozen=True, repr=False)
class Unreadable:
    """A date or timestamp the source's driver has no Python value for (`'infinity'`, a year BC
    or past 9999), as the source engine spells it: a target that reads that spelling gets it,
    any other refuses it naming the column (`targets.py`), instead of a traceback or `9999-12-31`."""

    text: str
    dialect: str  # the source engine's (`EngineKind.value`)

    def __repr__(self) -> str:
        return repr(self.text)


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    not_null: bool
    declared: str  # the source's own spelling, for messages
    max_length: int | None = None  # the longest text value, in characters (MySQL's VARCHAR sizes)
    read_as: str | None = None  # SQLite: read as CAST(... AS TEXT) (numbers and text mixed) or AS INTEGER


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]  # empty: the parent's primary key (SQLite's `REFERENCES t`)

    def describe(self, table: str) -> str:
        ref = f"{self.ref_table}({', '.join(self.ref_columns)})" if self.ref_columns else self.ref_table
        return f"{table}({', '.join(self.columns)}) -> {ref}"


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    uniques: tuple[tuple[str, ...], ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    rows: int = 0

    def column(self, name: str) -> Column | None:
        """The column so named, exactly or else case-insensitively (as SQLite and MySQL resolve)."""
        exact = next((c for c in self.columns if c.name == name), None)
        if exact is not None:
            return exact
        folded = [c for c in self.columns if c.name.lower() == name.lower()]
        return folded[0] if len(folded) == 1 else None

    @property
    def key_columns(self) -> frozenset[str]:
        """Columns in an index on the target (MySQL must size their text as VARCHAR)."""
        names = set(self.primary_key)
        for unique in self.uniques:
            names.update(unique)
        for fk in self.foreign_keys:
            names.update(fk.columns)
        return frozenset(names)


@dataclass(frozen=True)
class Plan:
    """What will be created: the tables in FK-safe order (parents first), and the warnings why
    something of the source is not (a dropped constraint, a column read as text)."""

    tables: tuple[Table, ...]
    warnings: tuple[str, ...] = field(default=())


# -- types from a typed engine's catalog -------------------------------------------------------

T = exp.DataType.Type
_SIMPLE: dict[exp.DataType.Type, ColumnType] = {
    T.TINYINT: ColumnType(Kind.INTEGER, 16), T.UTINYINT: ColumnType(Kind.INTEGER, 16),
    T.SMALLINT: ColumnType(Kind.INTEGER, 16), T.USMALLINT: ColumnType(Kind.INTEGER, 32),
    T.MEDIUMINT: ColumnType(Kind.INTEGER, 32), T.UMEDIUMINT: ColumnType(Kind.INTEGER, 32),
    T.INT: ColumnType(Kind.INTEGER, 32), T.UINT: ColumnType(Kind.INTEGER, 64),
    T.BIGINT: ColumnType(Kind.INTEGER, 64), T.YEAR: ColumnType(Kind.INTEGER, 32),
    T.UBIGINT: ColumnType(Kind.DECIMAL, precision=20, scale=0),
    T.INT128: ColumnType(Kind.DECIMAL, precision=38, scale=0),
    T.UINT128: ColumnType(Kind.DECIMAL, precision=39, scale=0),
    T.FLOAT: ColumnType(Kind.REAL, 32), T.DOUBLE: ColumnType(Kind.REAL, 64),
    T.BOOLEAN: ColumnType(Kind.BOOLEAN),
    T.DATE: ColumnType(Kind.DATE),
    T.DATETIME: ColumnType(Kind.TIMESTAMP), T.TIMESTAMP: ColumnType(Kind.TIMESTAMP),
    T.TIMESTAMPNTZ: ColumnType(Kind.TIMESTAMP), T.DATETIME64: ColumnType(Kind.TIMESTAMP),
    T.TIMESTAMP_S: ColumnType(Kind.TIMESTAMP), T.TIMESTAMP_MS: ColumnType(Kind.TIMESTAMP),
    T.TIMESTAMP_NS: ColumnType(Kind.TIMESTAMP),
    T.TIMESTAMPTZ: ColumnType(Kind.TIMESTAMPTZ), T.TIMESTAMPLTZ: ColumnType(Kind.TIMESTAMPTZ),
    T.TIME: ColumnType(Kind.TIME),
    T.BLOB: ColumnType(Kind.BLOB), T.BINARY: ColumnType(Kind.BLOB), T.VARBINARY: ColumnType(Kind.BLOB),
    T.LONGBLOB: ColumnType(Kind.BLOB), T.MEDIUMBLOB: ColumnType(Kind.BLOB), T.TINYBLOB: ColumnType(Kind.BLOB),
}
_TEXT_WITH_LENGTH = {T.VARCHAR, T.CHAR, T.NVARCHAR, T.NCHAR, T.BPCHAR}
_BLANK_PADDED = {T.CHAR, T.NCHAR, T.BPCHAR}  # on PostgreSQL; MySQL strips a CHAR's padding itself
# Text in every engine, though some are more (an enum's check, JSON's structure): kept as text.
_TEXT = {T.TEXT, T.MEDIUMTEXT, T.LONGTEXT, T.TINYTEXT, T.ENUM, T.SET, T.JSON, T.JSONB, T.UUID, T.NAME}


def catalog_type(declared: str, dialect: str) -> ColumnType | None:
    """The logical type of a type as a typed engine's catalog spells it; None: no counterpart."""
    try:
        data_type = exp.DataType.build(declared, dialect=dialect)
    except (ParseError, ValueError):
        return None
    kind = data_type.this
    params = [p.name for p in data_type.expressions]
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind in _TEXT_WITH_LENGTH:
        length = int(params[0]) if params and params[0].isdigit() else None
        return ColumnType(Kind.TEXT, length=length, padded=dialect == "postgres" and kind in _BLANK_PADDED)
    if kind in _TEXT:
        return ColumnType(Kind.TEXT)
    if kind in (T.DECIMAL, T.BIGDECIMAL, T.MONEY):
        precision = int(params[0]) if params and params[0].isdigit() else None
        scale = int(params[1]) if len(params) > 1 and params[1].isdigit() else (0 if precision else None)
        return ColumnType(Kind.DECIMAL, precision=precision, scale=scale)
    return None


# -- SQLite: the type its values have -----------------------------------------------------------


def sqlite_affinity(declared: str) -> str:
    """SQLite's column affinity rules (https://sqlite.org/datatype3.html, 3.1)."""
    upper = declared.upper()
    if "INT" in upper:
        return "INTEGER"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if "BLOB" in upper or not upper.strip():
        return "BLOB"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def sqlite_column_type(declared: str, storage: frozenset[str]) -> tuple[ColumnType, str | None]:
    """The type under which a SQLite column's values keep comparing as SQLite compares them, and
    whether it must be read as text (`"TEXT"`: numbers and text mixed in one column).

    SQLite stores each value with its own storage class; the declared type only nudges it. So
    integers stay integers (64-bit), any real makes the column double precision, text stays text
    (dates stored as text included: SQLite compares them as text), whatever was declared. An
    empty column falls back on the declared affinity.
    """
    if storage == {"integer"}:
        return ColumnType(Kind.INTEGER, 64), None
    if storage and storage <= {"integer", "real"}:
        return ColumnType(Kind.REAL, 64), None
    if storage == {"text"}:
        return ColumnType(Kind.TEXT), None
    if storage == {"blob"}:
        return ColumnType(Kind.BLOB), None
    if storage:
        return ColumnType(Kind.TEXT), "TEXT"
    affinity = sqlite_affinity(declared)
    upper = declared.upper()
    if affinity == "INTEGER" or "BOOL" in upper:
        return ColumnType(Kind.INTEGER, 64), None
    if affinity == "REAL" or (affinity == "NUMERIC" and not any(w in upper for w in ("DATE", "TIME"))):
        return ColumnType(Kind.REAL, 64), None
    return ColumnType(Kind.TEXT), None
