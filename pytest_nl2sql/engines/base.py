"""The small protocol every database engine implements, and the errors it raises.

Predicted SQL is untrusted: an engine must run it read-only, inside a time limit that really
interrupts the query, with a cap on rows and on result size, and leave no state behind for the
next query. Engines raise the exceptions below; callers turn them into verdicts.
"""

from __future__ import annotations

import datetime
import decimal
import importlib
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import sqlglot
from sqlglot.tokens import Token, TokenType

RowIds = tuple[tuple[str, tuple[int, ...]], ...]
"""Some rows of a database file: (table, the rowids kept) for every table (a shrink's attempt,
which a DuckDB engine copies from the file in memory instead of having a file written)."""


@dataclass(frozen=True)
class Limits:
    """Bounds applied to every query an engine runs."""

    timeout: float = 30.0  # seconds of wall time per query
    max_rows: int = 100_000  # more rows than this is TooManyRows
    max_bytes: int = 256 * 1024 * 1024  # rough size of a whole result held in memory
    max_value_bytes: int = 16 * 1024 * 1024  # largest single string/blob a query may build
    max_sql_chars: int = 1024 * 1024  # text of one prediction; a longer one is refused unsent
    # Rows of one result held in memory as Python rows. An engine that can stream (`stream`)
    # raises `ResultTooLarge` from `execute` past it, so that the caller compares the result
    # streamed (`judge/large.py`) instead; `max_rows` stays the cap for runaway predictions.
    # At or above `max_rows` it never applies (the row cap is reached first).
    memory_rows: int = 200_000


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows (tuples of plain Python values) of one executed query."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    seconds: float | None = None  # wall time of the execution (fetch included), when measured


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


class ResultTooLarge(EngineError):
    """The result has more rows than `Limits.memory_rows` (and, so far, no more than `max_rows`):
    too many to hold as Python rows, but not a runaway. Raised by `execute` of engines that can
    stream; the caller runs the query again as a stream (`StreamingEngine.stream`)."""


class Watchdog:
    """Runs `action` (cancel or kill the query) `timeout` seconds after `start()`, unless
    `stop()` comes first; `expired()` then tells a time-limit interruption from any other."""

    SLACK = 0.01  # seconds: a server-side limit set to the same timeout may answer this early

    def __init__(self, timeout: float, action: Callable[[], None]) -> None:
        self.timeout = timeout
        self.fired = False
        self.overran = False
        self.deadline: float | None = None
        self._action = action
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        self.deadline = time.monotonic() + self.timeout
        self._timer = threading.Timer(self.timeout, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        try:
            self._action()
        except Exception:  # noqa: BLE001 - the query may have just finished; nothing to stop
            pass

    def stop(self) -> None:
        """Disarm, right after the query answered; returns once a firing action (if any) has
        finished. Whether the answer came too late is kept for `raise_if_overran`."""
        self.overran = self.expired()
        if self._timer is not None:
            self._timer.cancel()
            if self._timer.is_alive():  # not so if a Ctrl-C came inside `start()`: no error on top of it
                self._timer.join()

    def expired(self) -> bool:
        """Whether the time limit has been reached (the action ran, or the deadline passed)."""
        if self.fired:
            return True
        return self.deadline is not None and time.monotonic() >= self.deadline - self.SLACK

    def raise_if_overran(self, limit: float) -> None:
        """After `stop()`: a query that answered at or past its deadline outlived its `limit`,
        whatever it answered. Some queries swallow the cancel and return normally (MariaDB's
        `BENCHMARK` answers 0 to `KILL QUERY` and to its own `max_statement_time`), so their
        rows are no result."""
        if self.overran:
            raise timed_out(limit)


def timed_out(limit: float) -> QueryTimeout:
    """The error of a query stopped at its time limit, worded alike on every engine."""
    return QueryTimeout(f"the query ran longer than {limit:g} s and was stopped")


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


class StreamingEngine(Engine, Protocol):
    """An engine that can also give a result as a stream of bounded batches (SQLite, DuckDB).

    `stream` applies the containment of `execute` (read-only, the statement checks, the time
    limit, `max_value_bytes`, and `max_rows`: the stream raises `TooManyRows` once more rows
    arrive), but the result is never held: `max_bytes` and `memory_rows` do not apply. The time
    limit counts the database's own time (run and fetch), not the consumer's between batches.
    At most one stream per engine is open at a time; on the SQLite and DuckDB workers, a stream
    holds the worker until it is closed (another thread's query waits; the same thread's query
    raises RuntimeError), so a stream must be consumed or closed before the next query.
    """

    def stream(
        self, sql: str, limits: Limits, *, trusted: bool = False
    ) -> AbstractContextManager["BatchStream"]:
        """`with engine.stream(sql, limits) as result:` `result.columns`, then `for batch in
        result:` lists of plain-value row tuples. `trusted`: the suite's own SQL (gold)."""
        ...


def can_stream(engine: Any) -> bool:
    """Whether `engine` implements `StreamingEngine.stream`."""
    return callable(getattr(engine, "stream", None))


class BatchStream:
    """The batches of one streamed result: `columns`, and an iterator over lists of row tuples.

    Engines build it from their first batch, a `more(seconds_left)` that returns the next
    `(rows, done)` within the time still left to the query, and a `stop()` that drops the
    database's cursor. It counts rows against `max_rows` (`TooManyRows` past it) and the time
    spent inside `more` against `timeout`, so the consumer's own work between batches is never
    the query's time. Iterate it once; `close()` (the engine's context manager calls it) stops a
    stream that was not read to its end.
    """

    def __init__(
        self,
        columns: Sequence[str],
        first: list[tuple[Any, ...]],
        done: bool,
        more: Callable[[float], tuple[list[tuple[Any, ...]], bool]],
        stop: Callable[[], None],
        limits: Limits,
        spent: float = 0.0,
    ) -> None:
        self.columns = tuple(columns)
        self.rows = 0  # rows delivered so far
        self._pending: list[tuple[Any, ...]] | None = first
        self._done = done
        self._more = more
        self._stop = stop
        self._limits = limits
        self._spent = spent  # seconds of the time limit used by the database so far
        self._open = not done

    def __iter__(self) -> Iterator[list[tuple[Any, ...]]]:
        try:
            while True:
                batch, self._pending = self._pending, None
                if batch is None:
                    if self._done:
                        return
                    started = time.monotonic()
                    batch, self._done = self._more(max(0.0, self._limits.timeout - self._spent))
                    self._spent += time.monotonic() - started
                    if self._done:
                        self._open = False
                self.rows += len(batch)
                if self.rows > self._limits.max_rows:
                    raise TooManyRows(
                        f"the result has more than {self._limits.max_rows} rows (the row cap)"
                    )
                if batch:
                    yield batch
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop the query if it has not been read to its end (idempotent)."""
        if self._open:
            self._open = False
            self._done = True
            self._pending = None
            self._stop()


def plain_value(value: Any) -> Any:
    """A driver's value as a plain Python value (int, float, str, bytes or None).

    Results from every engine must look like SQLite's, the reference of the benchmarks: a
    Decimal with an integral value becomes an int (as SQLite's NUMERIC affinity stores `3.00`)
    and any other a float; dates and times become ISO strings (SQLite stores them as text).
    """
    kind = type(value)
    if value is None or kind in _PLAIN_TYPES:
        return value
    convert = _CONVERTERS.get(kind)
    if convert is not None:
        return convert(value)
    return _plain_other(value)


def _plain_decimal(value: decimal.Decimal) -> int | float:
    """An integral Decimal as an int, any other as a float. An integral one of more than
    `INT_DIGITS` digits becomes a float too (as SQLite stores an integer too big for 64 bits as
    REAL): converting it to an int costs time quadratic in its length (half a second for the
    100,000 digits of a PostgreSQL NUMERIC), which a hostile query could repeat on every row."""
    if value.is_finite() and value.adjusted() < INT_DIGITS and value == value.to_integral_value():
        return int(value)
    return float(value)


INT_DIGITS = 4300  # Python's own default limit on int <-> str conversions (int_max_str_digits)


def _plain_other(value: Any) -> Any:
    """`plain_value` of a value of no exact type `_CONVERTERS` knows (subclasses, the rest)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str, bytes)):
        return value
    if isinstance(value, decimal.Decimal):
        return _plain_decimal(value)
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
    plain = _PLAIN_TYPES
    return tuple(
        [value if value is None or type(value) in plain else plain_value(value) for value in row]
    )


_CONVERTERS: dict[type, Callable[[Any], Any]] = {
    bool: int,
    decimal.Decimal: _plain_decimal,
    datetime.datetime: lambda value: value.isoformat(sep=" "),
    datetime.date: datetime.date.isoformat,
    datetime.time: datetime.time.isoformat,
    datetime.timedelta: _format_timedelta,
    bytearray: bytes,
    memoryview: bytes,
}


class SizeBudget:
    """A running, approximate byte count of a result being fetched, checked against `Limits`.

    Strings and bytes count their length; small numbers, floats and NULL a fixed overhead; a
    number too big for 64 bits (a PostgreSQL NUMERIC or a MySQL DECIMAL can hold 100,000
    digits) and any other object count their real size in memory (`sys.getsizeof`).
    """

    ROW_OVERHEAD = 64
    VALUE_OVERHEAD = 16

    def __init__(self, limits: Limits, *, spill: bool = False) -> None:
        """`spill`: the engine can stream, so a result past `Limits.memory_rows` (and within
        `max_rows`) raises `ResultTooLarge` instead of being held."""
        self.limits = limits
        self.rows = 0
        self.bytes = 0
        self._memory_rows = limits.memory_rows if spill else None

    def add(self, row: Sequence[Any]) -> None:
        """Count one fetched row; raise `TooManyRows` when a cap is passed (`ResultTooLarge`
        past `memory_rows`, when spilling)."""
        self.add_all((row,))

    def add_all(self, rows: Iterable[Sequence[Any]]) -> None:
        """`add` for each row of a batch in turn, in one call: this loop sees every value of
        every result."""
        max_rows, max_bytes, memory_rows = self.limits.max_rows, self.limits.max_bytes, self._memory_rows
        count, total = self.rows, self.bytes
        try:
            for row in rows:
                count += 1
                if count > max_rows:
                    raise self._past_row_cap()
                if memory_rows is not None and count > memory_rows:
                    raise self._past_memory_rows()
                size = self.ROW_OVERHEAD
                for value in row:
                    kind = type(value)
                    if kind is str or kind is bytes:
                        size += len(value)
                    elif value is None or kind is float or (kind is int and -_INT64 <= value < _INT64):
                        size += self.VALUE_OVERHEAD
                    else:
                        size += value_size(value)
                total += size
                if total > max_bytes:
                    raise self._past_size_cap(count)
        finally:
            self.rows, self.bytes = count, total

    def add_counted(self, rows: int, size: int) -> None:
        """Count a batch whose size the fetcher has already counted with the same formula (the
        SQLite session sizes its batches row by row): the caps are checked once per batch."""
        self.rows += rows
        self.bytes += size
        if self.rows > self.limits.max_rows:
            raise self._past_row_cap()
        if self._memory_rows is not None and self.rows > self._memory_rows:
            raise self._past_memory_rows()
        if self.bytes > self.limits.max_bytes:
            raise self._past_size_cap(self.rows)

    def _past_row_cap(self) -> TooManyRows:
        return TooManyRows(f"the result has more than {self.limits.max_rows} rows (the row cap)")

    def _past_memory_rows(self) -> ResultTooLarge:
        return ResultTooLarge(
            f"the result has more than {self._memory_rows} rows, more than are held in"
            " memory (Limits.memory_rows): compare it streamed"
        )

    def _past_size_cap(self, rows: int) -> TooManyRows:
        return TooManyRows(f"the result is larger than {self.limits.max_bytes} bytes (the size cap) after {rows} rows")


_INT64 = 2**64  # an int within +-2**64 counts as a fixed-size number


def value_size(value: Any) -> int:
    """Approximate bytes of one result value, for `SizeBudget`."""
    kind = type(value)
    if kind is str or kind is bytes:
        return len(value)
    if value is None or kind is float or kind is bool:
        return SizeBudget.VALUE_OVERHEAD
    if kind is int:
        if value.bit_length() <= 64:
            return SizeBudget.VALUE_OVERHEAD
        return sys.getsizeof(value)
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    return max(SizeBudget.VALUE_OVERHEAD, sys.getsizeof(value))


def collect_within(source: Iterable[Sequence[Any]], limits: Limits, *, spill: bool = False) -> list[tuple[Any, ...]]:
    """Rows of a row-by-row stream (a driver's unbuffered cursor) as plain values, checking the
    caps as each row arrives: the caller stops the stream when `TooManyRows` propagates (or
    `ResultTooLarge`, with `spill`: see `SizeBudget`)."""
    rows: list[tuple[Any, ...]] = []
    budget = SizeBudget(limits, spill=spill)
    for raw in source:
        row = plain_row(raw)
        budget.add(row)
        rows.append(row)
    return rows


def connect_error(opened: bool, where: str, error: object) -> EngineError:
    """A failed (re)connection: once the engine has been open the server is lost (the pipeline
    retries), before that the URL reaches no database (a usage error)."""
    if opened:
        return ConnectionLost(f"lost {where} and cannot reconnect: {error}")
    return DatabaseMissing(f"cannot connect to {where}: {error}")


def close_quietly(conn: Any) -> None:
    """Close a connection that may be broken already, or be closed from another thread."""
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - already broken, or racing the query's own error
        pass


def columns_by_table(schema_rows: Sequence[Sequence[Any]]) -> dict[str, list[str]]:
    """{table: [column, ...]} from (table, column, ...) rows in declaration order."""
    columns: dict[str, list[str]] = {}
    for table, column, *_ in schema_rows:
        columns.setdefault(table, []).append(column)
    return columns


def types_by_table(schema_rows: Sequence[Sequence[Any]]) -> dict[str, dict[str, str]]:
    """{table: {column: type as the catalogue names it}} from (table, column, type, ...) rows."""
    types: dict[str, dict[str, str]] = {}
    for table, column, kind, *_ in schema_rows:
        types.setdefault(table, {})[column] = str(kind)
    return types


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
    forbid_executable_comments: bool = False,
) -> None:
    """Refuse, before it reaches a server, SQL that is not exactly one read-only query.

    This is one layer of several, never the only one: server engines also run each query in a
    READ ONLY transaction that is rolled back, as a role that may only read, and reset the
    session after every query (see each engine's module), so what this check misses cannot
    outlive the query. It closes what those layers do not: a second statement after a `COMMIT`,
    statements that commit implicitly (MySQL DDL) or act outside the database (`COPY ... TO
    PROGRAM`), `SELECT ... INTO OUTFILE` and `@var :=` (MySQL), and, by name, functions that read
    files or hold session locks (also when the name is written with unicode escapes, `U&"..."`).

    `forbid_executable_comments` (MySQL/MariaDB) refuses `/*! ... */` and `/*M! ... */`: the
    server executes their text as SQL while every tokenizer reads them as comments, so nothing
    else this check sees would describe what the server runs. The rule is structural (where the
    server reads code), not a list of words; see `executable_comment`.

    It reads tokens only (sqlglot's tokenizer), so no valid query is refused for a parser gap;
    the server still parses and judges the query itself.
    """
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except sqlglot.errors.TokenError as error:
        raise QueryError(f"cannot read the query: {error}") from None
    if forbid_executable_comments and (found := executable_comment(sql, tokens)):
        raise QueryError(
            f"not allowed: an executable comment {found}...*/ (MySQL runs its text as SQL;"
            " only a read-only SELECT may run)"
        )
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
    if forbid_into:
        for token in statement:
            if token.token_type == TokenType.INTO:
                raise QueryError("not allowed: SELECT ... INTO (only a read-only SELECT may run)")
            if token.token_type == TokenType.COLON_EQ:
                raise QueryError(
                    "not allowed: variable assignment := (only a read-only SELECT may run)"
                )
    if denied_functions:
        for name, written in _called_functions(statement):
            if name.lower() in denied_functions:
                spelled = "" if name == written else " (written in unicode escapes)"
                raise QueryError(
                    f"not allowed: function {name}(){spelled} (only a read-only SELECT may run)"
                )


_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.VALUES})

# Tokens whose text the server reads as data (quoted), not as code: a comment marker inside
# them is text. Looked up by name, as sqlglot versions differ in which of these they have.
_QUOTED_TOKENS = frozenset(
    getattr(TokenType, name)
    for name in (
        "STRING", "IDENTIFIER", "NATIONAL_STRING", "HEX_STRING", "BIT_STRING", "BYTE_STRING",
        "RAW_STRING", "HEREDOC_STRING", "UNICODE_STRING",
    )
    if hasattr(TokenType, name)
)  # fmt: skip
_EXECUTABLE_MARKERS = ("/*!", "/*m!")  # compared in lower case: MySQL's, and MariaDB's /*M!


def executable_comment(sql: str, tokens: Sequence[Token]) -> str | None:
    """The marker of a MySQL/MariaDB executable comment (`/*!`, `/*M!`) in `sql`, or None.

    Looks everywhere the server could read code: all text outside quoted tokens (string
    literals and quoted identifiers as sqlglot delimits them). Inside a quoted token the marker
    is data, except when the token holds a backslash: whether a backslash escapes the quote
    depends on the server's `sql_mode` (`NO_BACKSLASH_ESCAPES`, `ANSI_QUOTES`), so the server
    might end the literal earlier than the tokenizer did; such a token is searched too.
    """
    lowered = sql.lower()
    regions: list[tuple[int, int]] = []  # [start, end) of text the server may read as code
    position = 0
    for token in tokens:
        if token.token_type not in _QUOTED_TOKENS:
            continue
        start, end = token.start, token.end + 1
        if not 0 <= start < end <= len(sql) or start < position or sql[end - 1] not in "'\"`$":
            continue  # positions that do not map onto the text: keep the whole span searched
        regions.append((position, start))
        if "\\" in sql[start:end]:
            regions.append((start, end))
        position = end
    regions.append((position, len(sql)))
    for begin, end in regions:
        for marker in _EXECUTABLE_MARKERS:
            # a marker may straddle a region's edge only if it starts inside the region
            found = lowered.find(marker, begin, min(len(sql), end + len(marker) - 1))
            if found != -1:
                return sql[found : found + len(marker)]
    return None


def _called_functions(statement: Sequence[Token]) -> Iterator[tuple[str, str]]:
    """(name, name as written) of every `name(` call in a statement's tokens.

    A PostgreSQL name in unicode escapes (`U&"pg\\005fsleep"`, optionally with `UESCAPE 'c'`)
    is decoded, so that it cannot hide from `denied_functions`.
    """
    count = len(statement)
    for index, token in enumerate(statement):
        if token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING):
            continue
        name, after = token.text, index + 1
        if index >= 2 and _is_unicode_prefix(statement[index - 2], statement[index - 1], token):
            escape = "\\"
            if (
                after + 1 < count
                and statement[after].text.upper() == "UESCAPE"
                and statement[after + 1].token_type == TokenType.STRING
            ):
                escape = statement[after + 1].text
                after += 2
            name = _decode_unicode_escapes(name, escape)
        elif token.token_type == TokenType.STRING:
            continue  # a plain string literal is never a function name
        if after < count and statement[after].token_type == TokenType.L_PAREN:
            yield name, token.text


def _is_unicode_prefix(u: Token, amp: Token, quoted: Token) -> bool:
    """`U&"..."`: the three tokens written together, as PostgreSQL requires."""
    return (
        u.token_type == TokenType.VAR
        and u.text.upper() == "U"
        and amp.token_type == TokenType.AMP
        and u.end + 1 == amp.start
        and amp.end + 1 == quoted.start
    )


def _decode_unicode_escapes(text: str, escape: str) -> str:
    """PostgreSQL's `U&` escapes: `<e><e>`, `<e>XXXX`, `<e>+XXXXXX`; anything unreadable stays."""
    if len(escape) != 1:
        return text
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != escape:
            out.append(char)
            index += 1
            continue
        if text[index + 1 : index + 2] == escape:
            out.append(escape)
            index += 2
            continue
        width, skip = (6, 2) if text[index + 1 : index + 2] == "+" else (4, 1)
        digits = text[index + skip : index + skip + width]
        try:
            out.append(chr(int(digits, 16)) if len(digits) == width else char)
        except ValueError:
            out.append(char)
            index += 1
            continue
        index += skip + width if len(digits) == width else 1
    return "".join(out)
