"""Writing a target database: its types for the logical ones, tables, rows in bulk, keys.

Text is created with a binary collation everywhere (PostgreSQL `"C"`, MySQL/MariaDB
`utf8mb4_nopad_bin` or `utf8mb4_0900_bin`), so that `=`, `ORDER BY`, `GROUP BY` and `DISTINCT`
on strings behave as in SQLite and DuckDB: case-sensitive, byte order, trailing spaces significant.

SQLite and DuckDB get their keys in `CREATE TABLE` (neither can add a foreign key later), and
DuckDB the rows parents first. The servers get their foreign keys after the rows (in any order,
cycles included), PostgreSQL its primary keys and UNIQUEs too (a faster load); a key the target
still refuses is left out with a warning, as `plan.py` does.

A value goes in only as itself: the converters (`Target.converters`) refuse, as `Unfit`, what the
target's column cannot hold exactly, and `Target.converted` turns that into a `CopyError` naming
the table, the column, the value and why. So NaN reaches neither SQLite (which would store NULL)
nor MySQL/MariaDB (no NaN, no infinity); an integer past 64 bits or a decimal reaches a double
(SQLite's NUMERIC, a DECIMAL wider than the target's) only when the double reads back as the same
number (0.1 does, 18446744073709551615 does not); a `model.Unreadable` date reaches PostgreSQL,
and DuckDB when it is `'infinity'`, `'-infinity'` or DuckDB's own spelling, and nothing else.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pytest_nl2sql.copydb.model import Column, CopyError, Kind, Table, Unreadable, UsageError
from pytest_nl2sql.copydb.sources import quote
from pytest_nl2sql.engines.url import DatabaseSpec, EngineKind

Convert = Callable[[Any], Any]
Batches = Iterator[list[tuple[Any, ...]]]
MYSQL_KEY_CHARS = 768  # InnoDB indexes up to 3072 bytes: 768 four-byte characters
INT64 = range(-2**63, 2**63)
TEMPORAL = (Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ)


class Unfit(Exception):
    """A value the target's column cannot hold exactly; `Target.converted` names where and why."""


def _as_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)  # UUID, an enum member


def _iso(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return value


def _nonfinite(value: Any) -> str | None:
    """`NaN`, `Infinity` or `-Infinity` for such a float or decimal, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, decimal.Decimal) and not value.is_finite():
        return "NaN" if value.is_nan() else "Infinity" if value > 0 else "-Infinity"
    return None


def _shown(value: Any) -> str:
    return _nonfinite(value) or (repr(value) if isinstance(value, (str, bytes, Unreadable)) else str(value))


def _double(value: Any) -> Any:
    """A decimal or an integer as a double, only when the double reads back as the same number
    (its shortest spelling): 0.1 does, 18446744073709551615 does not. NaN and the infinities stay
    what they are; whether the target has them is the caller's business (`_finite`)."""
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        return value
    if isinstance(value, decimal.Decimal) and not value.is_finite():
        return float(value)
    try:
        number = float(value)
    except OverflowError:
        raise Unfit("it is beyond the range of a double") from None
    if math.isinf(number) or decimal.Decimal(repr(number)) != value:
        raise Unfit(f"as a double it would be {number!r}")
    return number


def _finite(engine: str, then: Convert | None = None, infinities: bool = False, note: str = "") -> Convert:
    """A converter refusing NaN, and the infinities unless `infinities`, which `engine`'s type has
    not (SQLite stores NaN as NULL; MySQL/MariaDB and DECIMALs have neither), then `then`."""
    def convert(value: Any) -> Any:
        special = _nonfinite(value)
        if special is not None and not (infinities and special != "NaN"):
            raise Unfit(f"{engine} has no {special}{note}")
        return then(value) if then is not None else value
    return convert


def _sqlite_number(value: Any) -> Any:
    """SQLite's NUMERIC holds a 64-bit integer or a double: a decimal becomes one exactly, or is
    refused (SQLite itself would round 18446744073709551615 to a double, silently)."""
    if isinstance(value, decimal.Decimal) and value.is_nan():
        raise Unfit("SQLite has no NaN (it would store NULL)")  # the infinities it has, as doubles
    exact_int = isinstance(value, int) or (isinstance(value, decimal.Decimal) and value.is_finite()
                                           and value == value.to_integral_value())
    if exact_int and not isinstance(value, bool) and int(value) in INT64:
        return int(value)
    try:
        return _double(value)
    except Unfit as why:
        raise Unfit(f"SQLite holds 64-bit integers and doubles; {why}") from None


def _wide_decimal(engine: str, widest: int, nonfinite: bool) -> Convert:
    """A DECIMAL wider than `engine`'s widest goes to a DOUBLE column (`type_sql`): exactly, or refused."""
    def convert(value: Any) -> Any:
        try:
            return _double(value)
        except Unfit as why:
            raise Unfit(f"{engine}'s DECIMAL holds {widest} digits, so the column is a double; {why}") from None
    return convert if nonfinite else _finite(engine, convert)


def _no_unreadable(why: str, then: Convert | None = None) -> Convert:
    """A converter refusing `model.Unreadable` dates (the target has no such date), then `then`."""
    def convert(value: Any) -> Any:
        if isinstance(value, Unreadable):
            raise Unfit(why)
        return then(value) if then is not None else value
    return convert


def _utc_naive(value: Any) -> Any:
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def _bool_int(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


class Target:
    """What every target offers; `inline_keys`: keys in CREATE TABLE (else added after the rows)."""

    kind: EngineKind
    inline_keys = True
    _conn: Any

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def create(self, table: Table) -> None:
        self._conn.execute(self.create_sql(table))

    def close(self) -> None:
        self._conn.close()

    def q(self, name: str) -> str:
        return quote(name, self.kind.value)

    def existing_tables(self) -> list[str]:
        raise NotImplementedError

    def column_sql(self, column: Column, key: bool) -> str:
        sql = f"{self.q(column.name)} {self.type_sql(column, key)}"
        return sql + (" NOT NULL" if column.not_null else "")

    def type_sql(self, column: Column, key: bool) -> str:
        raise NotImplementedError

    def names(self, names: tuple[str, ...]) -> str:
        return ", ".join(self.q(name) for name in names)

    def key_sql(self, table: Table) -> list[str]:
        cols = self.names
        clauses = [f"PRIMARY KEY ({cols(table.primary_key)})"] if table.primary_key else []
        clauses += [f"UNIQUE ({cols(u)})" for u in table.uniques]
        return clauses

    def fk_sql(self, table: Table) -> list[str]:
        cols = self.names
        return [f"FOREIGN KEY ({cols(fk.columns)}) REFERENCES {self.q(fk.ref_table)} ({cols(fk.ref_columns)})"
                for fk in table.foreign_keys]

    def inline_clauses(self, table: Table) -> list[str]:
        """The keys that go in CREATE TABLE."""
        return self.key_sql(table) + self.fk_sql(table) if self.inline_keys else []

    def create_sql(self, table: Table) -> str:
        keys = table.key_columns
        parts = [self.column_sql(c, c.name in keys) for c in table.columns] + self.inline_clauses(table)
        return f"CREATE TABLE {self.q(table.name)} (\n  " + ",\n  ".join(parts) + "\n)" + self.table_options()

    def table_options(self) -> str:
        return ""

    def converters(self, table: Table) -> list[Convert | None]:
        return [None] * len(table.columns)

    def converted(self, table: Table, batches: Batches) -> Batches:
        """The rows with each value as the target's driver takes it (a date as text for SQLite)."""
        convert = self.converters(table)
        if not any(convert):
            yield from batches
            return
        pairs = [(i, f) for i, f in enumerate(convert) if f is not None]
        for rows in batches:
            out = []
            for row in rows:
                values = list(row)
                for index, function in pairs:
                    try:
                        values[index] = function(values[index])
                    except Unfit as why:
                        raise CopyError(f"table {table.name!r} column {table.columns[index].name!r}: the value "
                                        f"{_shown(values[index])} cannot be copied exactly to {self.kind.value}: {why}") from None
                out.append(tuple(values))
            yield out

    def add_keys(self, tables: tuple[Table, ...]) -> None:
        """Servers only: primary keys and UNIQUEs, then foreign keys, each on its own."""

    def rejected(self, table: Table, error: Exception, rows: Sequence[tuple[Any, ...]] = ()) -> CopyError:
        where = ""
        if "NUL" in str(error) or "0x00" in str(error):  # refused by the driver: no column named yet
            where = next((f" (column {column.name}, value {value!r})" for row in rows
                          for column, value in zip(table.columns, row) if isinstance(value, str) and "\x00" in value), "")
        return CopyError(f"table {table.name!r}: {self.kind.value} rejected a row: {_message(error)}{where}")


def _target_file(spec: DatabaseSpec) -> Path:
    assert spec.path is not None
    if not spec.path.parent.is_dir():
        raise UsageError(f"target folder does not exist: {spec.path.parent}")
    return spec.path


def _typed_converters(table: Table, rules: dict[Kind, Convert]) -> list[Convert | None]:
    return [rules.get(c.type.kind) if not c.read_as else None for c in table.columns]


def _message(error: Exception) -> str:
    diag = getattr(error, "diag", None)
    text = str(error).strip()
    context = getattr(diag, "context", None) if diag is not None else None
    return f"{text} ({context.strip()})" if context and context.strip() not in text else text


# -- SQLite --------------------------------------------------------------------------------------


class SqliteTarget(Target):
    kind = EngineKind.SQLITE

    def __init__(self, spec: DatabaseSpec) -> None:
        super().__init__()
        self.path = _target_file(spec)
        self.created_file = not self.path.exists()
        self._conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            self._conn.execute("BEGIN")
            self.existing_tables()
        except sqlite3.DatabaseError as error:
            self._conn.close()
            raise UsageError(f"cannot open the target {self.path} as SQLite: {error}") from None

    def existing_tables(self) -> list[str]:
        return [r[0] for r in self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")]

    def drop_tables(self, names: list[str]) -> None:
        for name in names:
            self._conn.execute(f"DROP TABLE {self.q(name)}")

    def type_sql(self, column: Column, key: bool) -> str:
        t = column.type
        if t.kind is Kind.TEXT:
            return f"VARCHAR({t.length})" if t.length else "TEXT"
        if t.kind is Kind.DECIMAL:
            return f"DECIMAL({t.precision}, {t.scale})" if t.precision else "NUMERIC"
        return {Kind.INTEGER: "INTEGER", Kind.REAL: "REAL", Kind.BOOLEAN: "BOOLEAN", Kind.DATE: "DATE",
                Kind.TIMESTAMP: "TIMESTAMP", Kind.TIMESTAMPTZ: "TIMESTAMPTZ", Kind.TIME: "TIME", Kind.BLOB: "BLOB"}[t.kind]

    def converters(self, table: Table) -> list[Convert | None]:
        dates = _no_unreadable("SQLite keeps dates as ISO text, and its date functions know no infinity and "
                               "no year outside 0 to 9999", _iso)
        return _typed_converters(table, {Kind.REAL: _finite("SQLite", infinities=True, note=" (it would store NULL)"),
                                         Kind.DECIMAL: _sqlite_number, Kind.BOOLEAN: _bool_int,
                                         Kind.DATE: dates, Kind.TIMESTAMP: dates, Kind.TIMESTAMPTZ: dates, Kind.TIME: _iso,
                                         Kind.TEXT: _as_text})

    def load(self, table: Table, batches: Batches, done: Callable[[int], None]) -> None:
        marks = ", ".join("?" * len(table.columns))
        sql = f"INSERT INTO {self.q(table.name)} VALUES ({marks})"
        for rows in self.converted(table, batches):
            try:
                self._conn.executemany(sql, rows)
            except sqlite3.Error as error:
                raise self.rejected(table, error) from None
            done(len(rows))

    def commit(self) -> None:
        self._conn.execute("COMMIT")

    def abort(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")


# -- DuckDB --------------------------------------------------------------------------------------


class DuckdbTarget(Target):
    kind = EngineKind.DUCKDB

    def __init__(self, spec: DatabaseSpec) -> None:
        super().__init__()
        import duckdb

        self.path = _target_file(spec)
        self.created_file = not self.path.exists()
        self._duckdb = duckdb
        try:
            self._conn = duckdb.connect(str(self.path))
        except duckdb.Error as error:
            raise UsageError(f"cannot open the target {self.path} as DuckDB: {error}") from None
        self._conn.execute("BEGIN TRANSACTION")

    def existing_tables(self) -> list[str]:
        return [r[0] for r in self._conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = current_schema()").fetchall()]

    def drop_tables(self, names: list[str]) -> None:
        for name in names:
            try:
                self._conn.execute(f"DROP TABLE {self.q(name)}")
            except self._duckdb.Error as error:
                raise CopyError(f"cannot drop the target's table {name!r}: {error}") from None

    def type_sql(self, column: Column, key: bool) -> str:
        t = column.type
        if t.kind is Kind.INTEGER:
            return {16: "SMALLINT", 32: "INTEGER"}.get(t.bits, "BIGINT")
        if t.kind is Kind.REAL:
            return "REAL" if t.bits == 32 else "DOUBLE"
        if t.kind is Kind.DECIMAL:
            return f"DECIMAL({t.precision}, {t.scale})" if t.precision and t.precision <= 38 else "DOUBLE"
        if t.kind is Kind.TEXT:
            return f"VARCHAR({t.length})" if t.length else "VARCHAR"
        return {Kind.BOOLEAN: "BOOLEAN", Kind.DATE: "DATE", Kind.TIMESTAMP: "TIMESTAMP",
                Kind.TIMESTAMPTZ: "TIMESTAMPTZ", Kind.TIME: "TIME", Kind.BLOB: "BLOB"}[t.kind]

    def converters(self, table: Table) -> list[Convert | None]:
        def rule(column: Column) -> Convert | None:
            if column.read_as:
                return None
            if column.type.kind is Kind.DECIMAL and not (column.type.precision and column.type.precision <= 38):
                return _wide_decimal("DuckDB", 38, nonfinite=True)  # a DOUBLE, as type_sql says: NaN included
            if column.type.kind is Kind.DECIMAL:
                return _finite("DuckDB's DECIMAL")
            if column.type.kind in TEMPORAL:
                return self._dates
            return _as_text if column.type.kind is Kind.TEXT else None

        return [rule(c) for c in table.columns]

    @staticmethod
    def _dates(value: Any) -> Any:
        """`'infinity'`, `'-infinity'` and DuckDB's own spelling of a year BC or past 9999, as text."""
        if not isinstance(value, Unreadable):
            return value
        if value.text in ("infinity", "-infinity") or value.dialect == "duckdb":
            return value.text
        raise Unfit(f"DuckDB does not read it as {value.dialect} spells it")

    def load(self, table: Table, batches: Batches, done: Callable[[int], None]) -> None:
        """Multi-row INSERTs with parameters: DuckDB's executemany runs one statement per row."""
        width = len(table.columns)
        per_statement = max(1, 2000 // width)
        row_marks = "(" + ", ".join("?" * width) + ")"
        head = f"INSERT INTO {self.q(table.name)} VALUES "
        full_sql = head + ", ".join([row_marks] * per_statement)
        for rows in self.converted(table, batches):
            for start in range(0, len(rows), per_statement):
                chunk = rows[start:start + per_statement]
                sql = full_sql if len(chunk) == per_statement else head + ", ".join([row_marks] * len(chunk))
                try:
                    self._conn.execute(sql, [value for row in chunk for value in row])
                except self._duckdb.Error as error:
                    raise self.rejected(table, error) from None
            done(len(rows))

    def commit(self) -> None:
        self._conn.execute("COMMIT")

    def abort(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except self._duckdb.Error:
            pass


# -- PostgreSQL ----------------------------------------------------------------------------------


class PostgresTarget(Target):
    """One transaction for the whole copy: a failure leaves the target as it was."""

    kind = EngineKind.POSTGRES
    inline_keys = False

    def __init__(self, spec: DatabaseSpec, create: bool) -> None:
        super().__init__()
        import psycopg

        self._psycopg = psycopg
        self.spec = spec
        try:
            self._conn = psycopg.connect(spec.url or "", connect_timeout=10)
        except psycopg.OperationalError as error:
            database = spec.server.database if spec.server else None
            if not (create and database and "does not exist" in str(error)):
                hint = " (pass --create to create it)" if "does not exist" in str(error) else ""
                raise UsageError(f"cannot connect to the target {spec.describe()}: {str(error).strip()}{hint}") from None
            self._create_database(spec, database)
            self._conn = psycopg.connect(spec.url or "", connect_timeout=10)
        schema = self._conn.execute("SELECT current_schema()").fetchone()[0]
        if schema is None:
            raise UsageError(f"{spec.describe()}: the search_path names no existing schema to create tables in")

    def _create_database(self, spec: DatabaseSpec, database: str) -> None:
        from psycopg.conninfo import make_conninfo

        try:
            with self._psycopg.connect(make_conninfo(spec.url or "", dbname="postgres"), autocommit=True,
                                       connect_timeout=10) as admin:
                admin.execute(f"CREATE DATABASE {self.q(database)}")
        except self._psycopg.Error as error:
            raise UsageError(f"cannot create the database {database!r}: {str(error).strip()}") from None

    def existing_tables(self) -> list[str]:
        return [r[0] for r in self._conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
            "AND relkind IN ('r', 'p', 'f')").fetchall()]

    def drop_tables(self, names: list[str]) -> None:
        for name in names:  # CASCADE drops other tables' foreign keys to it, never the tables
            self._conn.execute(f"DROP TABLE {self.q(name)} CASCADE")

    def type_sql(self, column: Column, key: bool) -> str:
        t = column.type
        if t.kind is Kind.INTEGER:
            return {16: "SMALLINT", 32: "INTEGER"}.get(t.bits, "BIGINT")
        if t.kind is Kind.REAL:
            return "REAL" if t.bits == 32 else "DOUBLE PRECISION"
        if t.kind is Kind.DECIMAL:
            return f"NUMERIC({t.precision}, {t.scale})" if t.precision and t.precision <= 1000 else "NUMERIC"
        if t.kind is Kind.TEXT and t.padded:  # PostgreSQL's own CHAR(n): blank-padded again
            return (f"CHAR({t.length})" if t.length else "BPCHAR") + ' COLLATE "C"'
        if t.kind is Kind.TEXT:
            return (f"VARCHAR({t.length})" if t.length else "TEXT") + ' COLLATE "C"'
        return {Kind.BOOLEAN: "BOOLEAN", Kind.DATE: "DATE", Kind.TIMESTAMP: "TIMESTAMP",
                Kind.TIMESTAMPTZ: "TIMESTAMPTZ", Kind.TIME: "TIME", Kind.BLOB: "BYTEA"}[t.kind]

    def converters(self, table: Table) -> list[Convert | None]:
        def dates(value: Any) -> Any:  # PostgreSQL reads its own text; another's it rejects naming the column
            return value.text if isinstance(value, Unreadable) else value

        return _typed_converters(table, {Kind.TEXT: _as_text, Kind.DATE: dates, Kind.TIMESTAMP: dates,
                                         Kind.TIMESTAMPTZ: dates})

    def load(self, table: Table, batches: Batches, done: Callable[[int], None]) -> None:
        columns = ", ".join(self.q(c.name) for c in table.columns)
        rows: list[tuple[Any, ...]] = []
        try:
            with self._conn.cursor() as cursor, cursor.copy(f"COPY {self.q(table.name)} ({columns}) FROM STDIN") as copy:
                for rows in self.converted(table, batches):
                    for row in rows:
                        copy.write_row(row)
                    done(len(rows))
        except (self._psycopg.Error, ValueError, TypeError) as error:
            raise self.rejected(table, error, rows) from None

    def add_keys(self, tables: tuple[Table, ...]) -> None:
        statements = [(t, clause) for t in tables for clause in self.key_sql(t)]
        statements += [(t, clause) for t in tables for clause in self.fk_sql(t)]
        for table, clause in statements:
            try:
                with self._conn.transaction():  # a savepoint: a refused key leaves the rest
                    self._conn.execute(f"ALTER TABLE {self.q(table.name)} ADD {clause}")
            except self._psycopg.Error as error:
                self.warnings.append(f"table {table.name!r}: {clause} not created: {str(error).strip()}")

    def commit(self) -> None:
        self._conn.commit()

    def abort(self) -> None:
        self._conn.rollback()


# -- MySQL / MariaDB -----------------------------------------------------------------------------


class MysqlTarget(Target):
    """DDL commits on its own in MySQL: on failure the tables this copy created are dropped.
    Keys are in CREATE TABLE, foreign keys are added after the rows."""

    kind = EngineKind.MYSQL
    inline_keys = False

    def __init__(self, spec: DatabaseSpec, create: bool) -> None:
        super().__init__()
        import pymysql

        self._pymysql = pymysql
        server = spec.server
        assert server is not None
        if not server.database:
            raise UsageError(f"{spec.describe()} names no database")
        self.database = server.database
        try:
            self._conn = pymysql.connect(
                host=server.host or "localhost", port=server.port or 3306, user=server.user or "root",
                password=server.password or "", charset="utf8mb4", autocommit=True, connect_timeout=10,
            )
        except pymysql.Error as error:
            raise UsageError(f"cannot connect to the target {spec.describe()}: {error}") from None
        self.collation = self._binary_collation()
        if not self._run("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", self.database):
            if not create:
                raise UsageError(f"the target database {self.database!r} does not exist on {spec.describe()} "
                                 "(pass --create to create it)")
            self._run(f"CREATE DATABASE {self.q(self.database)} CHARACTER SET utf8mb4 COLLATE {self.collation}")
        self._run(f"USE {self.q(self.database)}")
        # strict: a value the column cannot hold is an error, never silently truncated or zeroed
        self._run("SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,NO_ENGINE_SUBSTITUTION'")
        self._run("SET SESSION foreign_key_checks = 0")  # for drops; set back before keys are added
        self.created: list[str] = []

    def _run(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with self._conn.cursor() as cursor:
            cursor.execute(sql, params or None)
            return list(cursor.fetchall())

    def _binary_collation(self) -> str:
        """Case-sensitive and without PAD SPACE ('a' != 'a '), as SQLite compares."""
        for name in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin"):
            if self._run("SHOW COLLATION WHERE Collation = %s", name):
                return name
        return "utf8mb4_bin"

    def existing_tables(self) -> list[str]:
        return [r[0] for r in self._run("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")]

    def drop_tables(self, names: list[str]) -> None:
        for name in names:
            self._run(f"DROP TABLE {self.q(name)}")

    def type_sql(self, column: Column, key: bool) -> str:
        t = column.type
        if t.kind is Kind.INTEGER:
            return {16: "SMALLINT", 32: "INT"}.get(t.bits, "BIGINT")
        if t.kind is Kind.REAL:
            return "FLOAT" if t.bits == 32 else "DOUBLE"
        if t.kind is Kind.DECIMAL:
            return f"DECIMAL({t.precision}, {t.scale})" if t.precision and t.precision <= 65 else "DOUBLE"
        if t.kind is Kind.TEXT:
            return self._text_type(column, key) + f" COLLATE {self.collation}"
        if t.kind is Kind.BLOB:
            return f"VARBINARY({max(column.max_length or 0, 1)})" if key else "LONGBLOB"
        return {Kind.BOOLEAN: "BOOLEAN", Kind.DATE: "DATE", Kind.TIMESTAMP: "DATETIME(6)",
                Kind.TIMESTAMPTZ: "DATETIME(6)", Kind.TIME: "TIME(6)"}[t.kind]

    @staticmethod
    def _text_type(column: Column, key: bool) -> str:
        """An indexed text must be a VARCHAR of at most 768 characters; others are TEXT types."""
        longest = max(column.max_length or 0, column.type.length or 0, 1)
        if key:
            if longest > MYSQL_KEY_CHARS:
                raise CopyError(f"column {column.name!r} is in a key but holds text of {longest} characters; "
                                f"MySQL/MariaDB indexes at most {MYSQL_KEY_CHARS}")
            return f"VARCHAR({longest})"
        if column.type.length and column.type.length <= 255:
            return f"VARCHAR({column.type.length})"
        return "TEXT" if longest <= 16383 else "MEDIUMTEXT" if longest <= 4_000_000 else "LONGTEXT"

    def table_options(self) -> str:
        return f" ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE={self.collation}"

    def converters(self, table: Table) -> list[Convert | None]:
        dates = "MySQL/MariaDB dates and timestamps know no infinity and no year outside 1 to 9999"
        rules = {Kind.TEXT: _as_text, Kind.REAL: _finite("MySQL/MariaDB"), Kind.DECIMAL: _finite("MySQL/MariaDB"),
                 Kind.DATE: _no_unreadable(dates), Kind.TIMESTAMP: _no_unreadable(dates),
                 Kind.TIMESTAMPTZ: _no_unreadable(dates, _utc_naive)}
        wide = _wide_decimal("MySQL/MariaDB", 65, nonfinite=False)  # a DOUBLE, as type_sql says

        def rule(column: Column) -> Convert | None:
            if column.read_as:
                return None
            if column.type.kind is Kind.DECIMAL and not (column.type.precision and column.type.precision <= 65):
                return wide
            return rules.get(column.type.kind)

        return [rule(c) for c in table.columns]

    def create(self, table: Table) -> None:
        try:
            self._run(self.create_sql(table))
        except CopyError as error:
            raise CopyError(f"table {table.name!r}: {error}") from None
        self.created.append(table.name)

    def load(self, table: Table, batches: Batches, done: Callable[[int], None]) -> None:
        """pymysql's executemany sends `INSERT ... VALUES (...), (...)` statements of up to 1 MB."""
        columns = ", ".join(self.q(c.name) for c in table.columns).replace("%", "%%")
        marks = ", ".join(["%s"] * len(table.columns))
        sql = f"INSERT INTO {self.q(table.name).replace('%', '%%')} ({columns}) VALUES ({marks})"
        self._conn.begin()
        with self._conn.cursor() as cursor:
            for rows in self.converted(table, batches):
                try:
                    cursor.executemany(sql, rows)
                except self._pymysql.Error as error:
                    raise self.rejected(table, error) from None
                done(len(rows))
        self._conn.commit()

    def inline_clauses(self, table: Table) -> list[str]:
        """Primary keys and UNIQUEs in CREATE TABLE (each ALTER rebuilds an InnoDB table)."""
        return self.key_sql(table)

    def add_keys(self, tables: tuple[Table, ...]) -> None:
        """A table's foreign keys in one ALTER; if it is refused, one by one, to name the culprit."""
        self._run("SET SESSION foreign_key_checks = 1")  # ADD FOREIGN KEY checks the rows only then
        for table in tables:
            clauses = self.fk_sql(table)
            if not clauses:
                continue
            try:
                self._run(f"ALTER TABLE {self.q(table.name)} " + ", ".join(f"ADD {c}" for c in clauses))
                continue
            except self._pymysql.Error:
                pass
            for clause in clauses:
                try:
                    self._run(f"ALTER TABLE {self.q(table.name)} ADD {clause}")
                except self._pymysql.Error as error:
                    self.warnings.append(f"table {table.name!r}: {clause} not created: {error.args[-1]}")

    def commit(self) -> None:
        pass

    def abort(self) -> None:
        try:
            self._conn.rollback()
            for name in reversed(self.created):
                self._run(f"DROP TABLE IF EXISTS {self.q(name)}")
        except self._pymysql.Error:
            pass


def open_target(spec: DatabaseSpec, create: bool) -> Any:
    if spec.kind is EngineKind.SQLITE:
        return SqliteTarget(spec)
    if spec.kind is EngineKind.DUCKDB:
        return DuckdbTarget(spec)
    if spec.kind is EngineKind.POSTGRES:
        return PostgresTarget(spec, create)
    return MysqlTarget(spec, create)

