"""The small protocol every database engine implements, and the errors it raises.

Predicted SQL is untrusted: an engine must run it read-only, inside a time limit that really
interrupts the query, with a cap on rows and on result size, and leave no state behind for the
next query. Engines raise the exceptions below; callers turn them into verdicts.
"""

from __future__ import annotations

import datetime
import importlib
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlglot
from sqlglot.tokens import Token, TokenType


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


def text_errors_for(spider_compat: bool) -> str:
    """How undecodable text bytes are read: dropped as the official Spider evaluator does
    (`bytes.decode(errors="ignore")`) in compat mode, else kept, backslash-escaped."""
    return "ignore" if spider_compat else "backslashreplace"


class EngineError(Exception):
    """Base of the errors an engine raises; `str(error)` is what the user sees."""


class DatabaseMissing(EngineError):
    """The database file or server named by a case does not exist or cannot be reached."""


class QueryError(EngineError):
    """The database refused or failed the query (syntax error, unknown column, denied write...)."""


class QueryTimeout(EngineError):
    """The query ran longer than `Limits.timeout` and was interrupted."""


class ConnectionLost(EngineError):
    """The database went away under a query (a killed backend, a dropped socket): a fault of the
    run's infrastructure, never of the prediction. The engine re-opens its connection on the next
    `execute`; the pipeline retries the query once and otherwise reports an error of the run."""


class TooManyRows(EngineError):
    """The result has more rows than `Limits.max_rows`, or is larger than `Limits.max_bytes`."""


INSTALL_HINT = "pip install 'pytest-nl2sql[all]'"


def import_driver(module: str, needed_for: str) -> Any:
    """Import an optional database driver; without it, the case's database cannot be opened."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise DatabaseMissing(f"{needed_for}: {INSTALL_HINT}") from None


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


def plain_value(value: Any) -> Any:
    """A driver's value as a plain Python value (int, float, str, bytes or None).

    Results from every engine must look like SQLite's, the reference of the benchmarks: a
    Decimal with an integral value becomes an int (as SQLite's NUMERIC affinity stores `3.00`)
    and any other a float; dates and times become ISO strings (SQLite stores them as text).
    """
    if value is None or type(value) in _PLAIN_TYPES:
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str, bytes)):
        return value
    if isinstance(value, decimal.Decimal):
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        return float(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return _format_timedelta(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return str(value)  # UUID, JSON, arrays, intervals...: their text form


_PLAIN_TYPES = frozenset({int, float, str, bytes})


def _format_timedelta(delta: datetime.timedelta) -> str:
    """MySQL TIME values arrive as timedelta: `[-]HH:MM:SS[.ffffff]` as MySQL prints them."""
    sign = "-" if delta < datetime.timedelta(0) else ""
    micro = abs(delta) // datetime.timedelta(microseconds=1)
    seconds, micro = divmod(micro, 1_000_000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{text}.{micro:06d}" if micro else text


def plain_row(row: Sequence[Any]) -> tuple[Any, ...]:
    """`plain_value` of each value of a row."""
    return tuple(plain_value(value) for value in row)


class SizeBudget:
    """A running, approximate byte count of a result being fetched, checked against `Limits`."""

    ROW_OVERHEAD = 64
    VALUE_OVERHEAD = 16

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.rows = 0
        self.bytes = 0

    def add(self, row: Sequence[Any]) -> None:
        """Count one fetched row; raise `TooManyRows` when a cap is passed."""
        self.rows += 1
        if self.rows > self.limits.max_rows:
            raise TooManyRows(
                f"the result has more than {self.limits.max_rows} rows (the row cap)"
            )
        size = self.ROW_OVERHEAD
        for value in row:
            size += len(value) if isinstance(value, (str, bytes)) else self.VALUE_OVERHEAD
        self.bytes += size
        if self.bytes > self.limits.max_bytes:
            raise TooManyRows(
                f"the result is larger than {self.limits.max_bytes} bytes (the size cap)"
                f" after {self.rows} rows"
            )


FETCH_BATCH = 500  # rows per fetchmany() of the server engines


def fetch_within(cursor: Any, limits: Limits) -> list[tuple[Any, ...]]:
    """Every row of a DB-API cursor as plain values, in batches, stopping at the row and size caps."""
    rows: list[tuple[Any, ...]] = []
    budget = SizeBudget(limits)
    batch = max(1, min(FETCH_BATCH, limits.max_rows + 1))
    while chunk := cursor.fetchmany(batch):
        for raw in chunk:
            row = plain_row(raw)
            budget.add(row)
            rows.append(row)
    return rows


def columns_by_table(schema_rows: Sequence[Sequence[Any]]) -> dict[str, list[str]]:
    """{table: [column, ...]} from (table, column, ...) rows in declaration order."""
    columns: dict[str, list[str]] = {}
    for table, column, *_ in schema_rows:
        columns.setdefault(table, []).append(column)
    return columns


def ddl_from_columns(schema_rows: Sequence[Sequence[Any]], quote: Any) -> str:
    """CREATE TABLE text from (table, column, type) rows, for a model's prompt."""
    tables: dict[str, list[str]] = {}
    for table, column, column_type in schema_rows:
        tables.setdefault(table, []).append(f"  {quote(column)} {column_type}")
    return "\n\n".join(f"CREATE TABLE {quote(table)} (\n" + ",\n".join(cols) + "\n);" for table, cols in tables.items())


def check_single_select(
    sql: str,
    dialect: str,
    *,
    denied_functions: frozenset[str] = frozenset(),
    forbid_into: bool = False,
) -> None:
    """Refuse, before it reaches a server, SQL that is not exactly one read-only query.

    Server engines also run each query in a READ ONLY transaction that is rolled back; this
    check closes what a transaction does not: a second statement after a `COMMIT`, statements
    that commit implicitly (MySQL DDL) or act outside the database (`COPY ... TO PROGRAM`),
    `SELECT ... INTO OUTFILE` and `@var :=` (MySQL), and functions that read files or hold
    session locks. It reads tokens only (sqlglot's tokenizer), so no valid query is refused for
    a parser gap; the server still parses and judges the query itself.
    """
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except sqlglot.errors.TokenError as error:
        raise QueryError(f"cannot read the query: {error}") from None
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    statements = [statement for statement in statements if statement]
    if not statements:
        raise QueryError("the query contains no SQL statement")
    if len(statements) > 1:
        raise QueryError("only one SQL statement may run per query; found more than one")
    (statement,) = statements
    first = next((t for t in statement if t.token_type != TokenType.L_PAREN), statement[0])
    if first.token_type not in _QUERY_STARTS and first.text.upper() not in {"TABLE", "VALUES"}:
        raise QueryError(f"only a read-only SELECT may run, not {first.text.upper()}")
    for token, following in zip(statement, statement[1:]):
        if token.token_type == TokenType.INTO and forbid_into:
            raise QueryError("not allowed: SELECT ... INTO (only a read-only SELECT may run)")
        if token.token_type == TokenType.COLON_EQ and forbid_into:
            raise QueryError(
                "not allowed: variable assignment := (only a read-only SELECT may run)"
            )
        if (
            following.token_type == TokenType.L_PAREN
            and token.token_type in (TokenType.VAR, TokenType.IDENTIFIER)
            and token.text.lower() in denied_functions
        ):
            raise QueryError(
                f"not allowed: function {token.text}() (only a read-only SELECT may run)"
            )


_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.VALUES})
