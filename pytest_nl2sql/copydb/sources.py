"""Reading a source database: its tables as `model.Table`s, checks of its data against the
constraints it declares, and its rows in batches.

Each engine reads its own catalog (SQLite's pragmas, DuckDB's `duckdb_constraints()`,
PostgreSQL's `pg_constraint`, MySQL's `information_schema`), on a connection that only reads.
The data checks run on the source, in its own SQL, so that a copy of a million rows needs no
second pass in Python: a duplicate or NULL in a key, a child row without its parent.

Values are read as they mean, not as the driver happens to hand them over: a PostgreSQL CHAR(n)
without its blank padding (`CAST(... AS TEXT)`, PostgreSQL's own conversion, see the package
docstring), and a date or timestamp Python cannot hold (PostgreSQL's and DuckDB's `'infinity'`, a
year BC) as `model.Unreadable` rather than a traceback (psycopg) or `9999-12-31` (DuckDB).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlglot import exp

from pytest_nl2sql.copydb.model import (
    Column,
    ColumnType,
    CopyError,
    ForeignKey,
    Kind,
    Table,
    Unreadable,
    UsageError,
    catalog_type,
    sqlite_column_type,
)
from pytest_nl2sql.engines.url import DatabaseSpec, EngineKind


def quote(name: str, dialect: str) -> str:
    """An identifier quoted for the dialect (the quote character doubled inside it)."""
    return exp.to_identifier(name, quoted=True).sql(dialect=dialect)


class Source:
    """What every source offers; the SQL checks are shared, the catalog is per engine."""

    dialect = ""
    _read_errors: tuple[type[Exception], ...] = ()  # the driver's: reading a row fails naming the table

    def tables(self) -> list[Table]:
        raise NotImplementedError

    def close(self) -> None:
        self._conn.close()

    # -- shared SQL ----------------------------------------------------------------------------

    _conn: Any

    def _fetch(self, sql: str) -> list[tuple[Any, ...]]:
        cursor = self._conn.cursor()
        try:
            cursor.execute(sql)
            return list(cursor.fetchall())
        finally:
            cursor.close()

    def q(self, name: str) -> str:
        return quote(name, self.dialect)

    def value_sql(self, table: Table, column: Column, alias: str = "") -> str:
        """How a column is read: as itself, or cast where SQLite's values need it (`Column.read_as`)."""
        ref = (f"{alias}." if alias else "") + self.q(column.name)
        if column.type.padded:
            return f"CAST({ref} AS TEXT)"  # PostgreSQL drops a CHAR(n)'s insignificant padding
        return f"CAST({ref} AS {column.read_as})" if column.read_as else ref

    def integers_as_text(self, table: Table, column: Column) -> bool:
        """Whether a text column holds only integers written as text (SQLite's `'12'`)."""
        return False

    def numbers_as_text(self, table: Table, column: Column) -> Kind | None:
        """INTEGER or REAL when a text column holds only numbers written as text, canonically."""
        return None

    def select_sql(self, table: Table) -> str:
        return f"SELECT {', '.join(self.read_sql(table))} FROM {self.q(table.name)}"

    def read_sql(self, table: Table) -> list[str]:
        """What `batches` selects: the columns, and whatever `read_rows` needs beside them."""
        return [self.value_sql(table, c) for c in table.columns]

    def read_rows(self, table: Table, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return rows

    def key_violation(self, table: Table, names: Sequence[str], nulls_allowed: bool) -> str | None:
        """Why `names` cannot be a key of the table's data (a NULL, a duplicate), or None."""
        columns = [table.column(name) for name in names]
        values = [self.value_sql(table, c) for c in columns if c is not None]
        if not nulls_allowed:
            any_null = " OR ".join(f"{v} IS NULL" for v in values)
            if self._fetch(f"SELECT 1 FROM {self.q(table.name)} WHERE {any_null} LIMIT 1"):
                return "a NULL in a key column"
        no_null = " AND ".join(f"{v} IS NOT NULL" for v in values)
        listed = ", ".join(values)
        rows = self._fetch(f"SELECT {listed}, count(*) FROM {self.q(table.name)} WHERE {no_null} "
                           f"GROUP BY {listed} HAVING count(*) > 1 LIMIT 1")
        if rows:
            *duplicate, times = rows[0]
            shown = duplicate[0] if len(duplicate) == 1 else tuple(duplicate)
            return f"the value {shown!r} occurs {times} times"
        return None

    def orphans(self, child: Table, fk: ForeignKey, parent: Table) -> tuple[int, Any]:
        """How many child rows name a parent row that does not exist, and one such value."""
        pairs = [(child.column(c), parent.column(p)) for c, p in zip(fk.columns, fk.ref_columns)]
        own = [self.value_sql(child, c, "c") for c, _ in pairs if c is not None]
        matches = " AND ".join(
            f"{self.value_sql(parent, p, 'p')} = {self.value_sql(child, c, 'c')}" for c, p in pairs if c and p
        )
        where = " AND ".join(f"{v} IS NOT NULL" for v in own)
        body = (f"FROM {self.q(child.name)} AS c WHERE {where} AND NOT EXISTS "
                f"(SELECT 1 FROM {self.q(parent.name)} AS p WHERE {matches})")
        count = self._fetch(f"SELECT count(*) {body}")[0][0]
        if not count:
            return 0, None
        example = self._fetch(f"SELECT {', '.join(own)} {body} LIMIT 1")[0]
        return count, example[0] if len(example) == 1 else tuple(example)

    def _stream_cursor(self) -> Any:
        return self._conn.cursor()

    def batches(self, table: Table, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """The table's rows, `size` at a time; a row the driver cannot read is a `CopyError`."""
        try:
            for rows in self._stream(self.select_sql(table), size):
                yield self.read_rows(table, rows)
        except self._read_errors as error:
            raise CopyError(f"table {table.name!r}: cannot read a row of the source: {str(error).strip()}") from None

    def _stream(self, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        cursor = self._stream_cursor()
        try:
            cursor.execute(sql)
            while rows := cursor.fetchmany(size):
                yield rows
        finally:
            cursor.close()

    def _text_lengths(self, table: str, columns: Sequence[tuple[str, ColumnType]], length_fn: str) -> tuple[int, dict[str, int | None]]:
        """The table's row count and its text columns' longest values (MySQL sizes VARCHARs by them)."""
        texts = [name for name, ctype in columns if ctype.kind is Kind.TEXT]
        parts = ["count(*)"] + [f"max({length_fn}({self.q(name)}))" for name in texts]
        row = self._fetch(f"SELECT {', '.join(parts)} FROM {self.q(table)}")[0]
        return row[0], dict(zip(texts, row[1:]))


def _group_keys(rows: Sequence[tuple[Any, ...]]) -> dict[Any, list[tuple[Any, ...]]]:
    grouped: dict[Any, list[tuple[Any, ...]]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row[1:])
    return grouped


def _source_file(spec: DatabaseSpec) -> Path:
    assert spec.path is not None
    if not spec.path.is_file():
        raise UsageError(f"source database not found: {spec.path}")
    return spec.path


def _uncopyable(table: str, column: str, declared: str) -> CopyError:
    return CopyError(f"table {table!r} column {column!r}: type {declared} has no counterpart on the other "
                     "engines (copy-db copies numbers, text, booleans, dates, times, timestamps and blobs)")


# -- SQLite --------------------------------------------------------------------------------------


class SqliteSource(Source):
    """A SQLite file, opened read-only; undecodable text is kept with U+FFFD, and counted."""

    dialect = "sqlite"

    def __init__(self, spec: DatabaseSpec) -> None:
        path = _source_file(spec)
        self.undecodable = 0
        self._read_errors = (sqlite3.Error,)
        self._conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        self._conn.text_factory = self._decode

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.undecodable += 1
            return raw.decode("utf-8", "replace")

    def integers_as_text(self, table: Table, column: Column) -> bool:
        ref = self.q(column.name)
        odd = self._fetch(f"SELECT 1 FROM {self.q(table.name)} WHERE {ref} IS NOT NULL AND (typeof({ref}) != 'text' "
                          f"OR CAST(CAST({ref} AS INTEGER) AS TEXT) != {ref}) LIMIT 1")
        return not odd

    def numbers_as_text(self, table: Table, column: Column) -> Kind | None:
        ref = self.q(column.name)
        as_int, as_real = f"CAST(CAST({ref} AS INTEGER) AS TEXT) = {ref}", f"CAST(CAST({ref} AS REAL) AS TEXT) = {ref}"
        total, text, integers, numbers = self._fetch(
            f"SELECT count(*), coalesce(sum(typeof({ref}) = 'text'), 0), coalesce(sum({as_int}), 0), "
            f"coalesce(sum({as_int} OR {as_real}), 0) FROM {self.q(table.name)} WHERE {ref} IS NOT NULL")[0]
        if not total or text != total:
            return None
        return Kind.INTEGER if integers == total else Kind.REAL if numbers == total else None

    def tables(self) -> list[Table]:
        try:
            names = [r[0] for r in self._fetch(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid")]
        except sqlite3.DatabaseError as error:
            raise UsageError(f"cannot read the source database: {error}") from None
        return [self._table(name) for name in names]

    def _table(self, name: str) -> Table:
        info = self._fetch(f"PRAGMA table_info({self.q(name)})")  # cid, name, type, notnull, default, pk
        probes = []
        for _, column, _, _, _, _ in info:
            ref = self.q(column)
            probes += [f"max(typeof({ref}) = '{storage}')" for storage in ("integer", "real", "text", "blob")]
            probes.append(f"max(CASE WHEN typeof({ref}) = 'text' THEN length({ref}) END)")
        profile = self._fetch(f"SELECT count(*), {', '.join(probes)} FROM {self.q(name)}")[0]
        rows, stats = profile[0], profile[1:]
        pk_columns = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
        rowid_alias = len(pk_columns) == 1 and next(r[2] for r in info if r[1] == pk_columns[0]).upper() == "INTEGER"
        columns = []
        for index, (_, column, declared, not_null, _, pk) in enumerate(info):
            flags = stats[index * 5: index * 5 + 4]
            storage = frozenset(s for s, seen in zip(("integer", "real", "text", "blob"), flags) if seen)
            ctype, read_as = sqlite_column_type(declared, storage)
            columns.append(Column(column, ctype, bool(not_null) or (rowid_alias and bool(pk)), declared or "(none)",
                                  max_length=stats[index * 5 + 4], read_as=read_as))
        uniques = []
        for _, index_name, unique, origin, partial in self._fetch(f"PRAGMA index_list({self.q(name)})"):
            if unique and origin in ("u", "c") and not partial:
                cols = [r[2] for r in sorted(self._fetch(f"PRAGMA index_info({self.q(index_name)})"))]
                if cols and all(c is not None for c in cols) and tuple(cols) != tuple(pk_columns):
                    uniques.append(tuple(cols))
        fks = []
        for _, parts in sorted(_group_keys(self._fetch(f"PRAGMA foreign_key_list({self.q(name)})")).items()):
            parts.sort()  # (seq, table, from, to, ...)
            refs = tuple(p[3] for p in parts)
            fks.append(ForeignKey(tuple(p[2] for p in parts), parts[0][1], () if any(r is None for r in refs) else refs))
        return Table(name, tuple(columns), tuple(pk_columns), tuple(dict.fromkeys(uniques)), tuple(dict.fromkeys(fks)), rows)


# -- DuckDB --------------------------------------------------------------------------------------


class DuckdbSource(Source):
    dialect = "duckdb"

    def __init__(self, spec: DatabaseSpec) -> None:
        import duckdb

        path = _source_file(spec)
        try:
            self._conn = duckdb.connect(str(path), read_only=True)
        except duckdb.Error as error:
            raise UsageError(f"cannot open the source database {path}: {error}") from None
        self._read_errors = (duckdb.Error, ValueError)
        self._beyond: dict[str, tuple[str, ...]] = {}  # per table: the columns `_beyond_python` found

    def tables(self) -> list[Table]:
        here = "database_name = current_database() AND schema_name = current_schema()"
        names = [r[0] for r in self._fetch(f"SELECT table_name FROM duckdb_tables() WHERE {here} ORDER BY table_oid")]
        columns = _group_keys(self._fetch(
            f"SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns() WHERE {here} ORDER BY table_name, column_index"))
        constraints = _group_keys(self._fetch(
            "SELECT table_name, constraint_type, constraint_column_names, referenced_table, referenced_column_names "
            f"FROM duckdb_constraints() WHERE {here} AND constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY') "
            "ORDER BY table_name, constraint_index"))
        tables = [_typed_table(self, name, [(c, d, not n) for c, d, n in columns.get(name, [])],
                               [(k, tuple(c), r, tuple(rc or ())) for k, c, r, rc in constraints.get(name, [])], "length")
                  for name in names]
        self._beyond = {table.name: self._beyond_python(table) for table in tables}
        return tables

    @staticmethod
    def _beyond_sql(ref: str) -> str:
        return f"CASE WHEN isinf({ref}) THEN true ELSE year({ref}) NOT BETWEEN 1 AND 9999 END"

    def _beyond_python(self, table: Table) -> tuple[str, ...]:
        """The date and timestamp columns holding a value Python's datetime cannot: DuckDB hands
        `'infinity'` over as `9999-12-31` (and a year BC as text), so these columns are read twice."""
        names = [c.name for c in table.columns if c.type.kind in (Kind.DATE, Kind.TIMESTAMP, Kind.TIMESTAMPTZ)]
        if not names:
            return ()
        probes = ", ".join(f"coalesce(bool_or({self._beyond_sql(self.q(name))}), false)" for name in names)
        found = self._fetch(f"SELECT {probes} FROM {self.q(table.name)}")[0]
        return tuple(name for name, beyond in zip(names, found) if beyond)

    def read_sql(self, table: Table) -> list[str]:
        """Beside each column `_beyond_python` found: its text where Python cannot hold the value."""
        extra = [f"CASE WHEN {self._beyond_sql(self.q(name))} THEN CAST({self.q(name)} AS VARCHAR) END"
                 for name in self._beyond.get(table.name, ())]
        return super().read_sql(table) + extra

    def read_rows(self, table: Table, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        beyond = self._beyond.get(table.name, ())
        if not beyond:
            return rows
        width = len(table.columns)
        where = [i for i, c in enumerate(table.columns) if c.name in beyond]
        out = []
        for row in rows:
            values = list(row[:width])
            for index, text in zip(where, row[width:]):
                if text is not None:
                    values[index] = Unreadable(text, self.dialect)
            out.append(tuple(values))
        return out


def _typed_table(source: Source, name: str, columns: list[tuple[str, str, bool]],
                 constraints: list[tuple[str, tuple[str, ...], str | None, tuple[str, ...]]], length_fn: str) -> Table:
    """A table of a typed engine, from its catalog rows: (column, type, not null) and
    (constraint type, columns, referenced table, referenced columns)."""
    typed = []
    for column, declared, not_null in columns:
        ctype = catalog_type(declared, source.dialect)
        if ctype is None:
            raise _uncopyable(name, column, declared)
        typed.append((column, declared, not_null, ctype))
    rows, lengths = source._text_lengths(name, [(c, t) for c, _, _, t in typed], length_fn)
    pk: tuple[str, ...] = ()
    uniques, fks = [], []
    for kind, cols, ref_table, ref_cols in constraints:
        if kind.upper().startswith("PRIMARY"):
            pk = cols
        elif kind.upper() == "UNIQUE":
            uniques.append(cols)
        elif ref_table:
            fks.append(ForeignKey(cols, ref_table, ref_cols))
    return Table(
        name,
        tuple(Column(c, t, n, d, max_length=lengths.get(c)) for c, d, n, t in typed),
        pk, tuple(dict.fromkeys(uniques)), tuple(dict.fromkeys(fks)), rows,
    )


# -- PostgreSQL ----------------------------------------------------------------------------------


class PostgresSource(Source):
    """The tables of the connection's current schema (`?options=-csearch_path%3D...` picks one)."""

    dialect = "postgres"

    def __init__(self, spec: DatabaseSpec) -> None:
        import psycopg

        try:
            self._conn = psycopg.connect(spec.url or "", connect_timeout=10)
        except psycopg.Error as error:
            raise UsageError(f"cannot connect to the source {spec.describe()}: {error}") from None
        self._conn.read_only = True
        self._cursors = 0
        self._read_errors = (psycopg.Error,)
        _read_unreadable_dates(self._conn)

    def tables(self) -> list[Table]:
        names = [r[0] for r in self._fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
            "AND relkind IN ('r', 'p') AND NOT relispartition ORDER BY oid")]
        columns = _group_keys(self._fetch(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE c.relnamespace = current_schema()::regnamespace AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY c.relname, a.attnum"))
        constraints = _group_keys(self._fetch(
            "SELECT cls.relname, con.contype::text, "
            "ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, i) "
            "      JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i), "
            "ref.relname, "
            "ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, i) "
            "      JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i) "
            "FROM pg_constraint con JOIN pg_class cls ON cls.oid = con.conrelid "
            "LEFT JOIN pg_class ref ON ref.oid = con.confrelid "
            "WHERE cls.relnamespace = current_schema()::regnamespace AND con.contype IN ('p', 'u', 'f') "
            "ORDER BY cls.relname, con.contype DESC, con.conname"))
        kinds = {"p": "PRIMARY KEY", "u": "UNIQUE", "f": "FOREIGN KEY"}
        return [_typed_table(self, name, columns.get(name, []),
                             [(kinds[k], tuple(c), r, tuple(rc or ())) for k, c, r, rc in constraints.get(name, [])],
                             "char_length")
                for name in names]

    def _stream(self, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        self._cursors += 1
        with self._conn.cursor(name=f"copydb_{self._cursors}") as cursor:  # server-side: streams
            cursor.execute(sql)
            while rows := cursor.fetchmany(size):
                yield rows


def _read_unreadable_dates(conn: Any) -> None:
    """psycopg fails a whole fetch on a date or timestamp Python's datetime cannot hold
    (`'infinity'`, a year BC or past 9999): such a value is read as `Unreadable` instead, with the
    text PostgreSQL sent; any other goes through psycopg's own (C) loader as before."""
    from psycopg import DataError
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    class Lenient(Loader):
        base: Any = None

        def __init__(self, oid: int, context: Any = None) -> None:
            super().__init__(oid, context)
            self._base = self.base(oid, context)

        def load(self, data: Any) -> Any:
            try:
                return self._base.load(data)
            except DataError:
                return Unreadable(bytes(data).decode(), "postgres")

    for name in ("date", "timestamp", "timestamptz"):
        info = conn.adapters.types[name]
        base = conn.adapters.get_loader(info.oid, Format.TEXT)
        conn.adapters.register_loader(name, type(f"Lenient_{name}", (Lenient,), {"base": base}))


# -- MySQL / MariaDB -----------------------------------------------------------------------------


class MysqlSource(Source):
    dialect = "mysql"

    def __init__(self, spec: DatabaseSpec) -> None:
        import pymysql

        server = spec.server
        assert server is not None
        if not server.database:
            raise UsageError(f"{spec.describe()} names no database")
        try:
            self._conn = pymysql.connect(
                host=server.host or "localhost", port=server.port or 3306, user=server.user or "root",
                password=server.password or "", database=server.database, charset="utf8mb4", connect_timeout=10,
            )
        except pymysql.Error as error:
            raise UsageError(f"cannot connect to the source {spec.describe()}: {error}") from None
        self._pymysql = pymysql
        self._read_errors = (pymysql.Error,)

    def tables(self) -> list[Table]:
        names = [r[0] for r in self._fetch(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_TYPE = 'BASE TABLE' ORDER BY CREATE_TIME, TABLE_NAME")]
        columns = _group_keys(self._fetch(
            "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE = 'NO' FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION"))
        usage = self._fetch(
            "SELECT k.TABLE_NAME, t.CONSTRAINT_TYPE, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME, "
            "k.REFERENCED_COLUMN_NAME FROM information_schema.TABLE_CONSTRAINTS t "
            "JOIN information_schema.KEY_COLUMN_USAGE k ON k.CONSTRAINT_SCHEMA = t.CONSTRAINT_SCHEMA "
            "AND k.TABLE_NAME = t.TABLE_NAME AND k.CONSTRAINT_NAME = t.CONSTRAINT_NAME "
            "WHERE t.CONSTRAINT_SCHEMA = DATABASE() AND t.CONSTRAINT_TYPE IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY') "
            "ORDER BY k.TABLE_NAME, t.CONSTRAINT_TYPE DESC, k.CONSTRAINT_NAME, k.ORDINAL_POSITION")
        grouped: dict[tuple[str, str, str], list[tuple[str, str | None, str | None]]] = {}
        for table, kind, name, column, ref_table, ref_column in usage:
            grouped.setdefault((table, kind, name), []).append((column, ref_table, ref_column))
        constraints: dict[str, list[tuple[str, tuple[str, ...], str | None, tuple[str, ...]]]] = {}
        for (table, kind, _), parts in grouped.items():
            refs = tuple(p[2] for p in parts if p[2])
            constraints.setdefault(table, []).append((kind, tuple(p[0] for p in parts), parts[0][1], refs))
        return [_typed_table(self, name, [(c, d, bool(n)) for c, d, n in columns.get(name, [])],
                             constraints.get(name, []), "char_length")
                for name in names]

    def _stream_cursor(self) -> Any:
        return self._conn.cursor(self._pymysql.cursors.SSCursor)  # unbuffered: streams


def open_source(spec: DatabaseSpec) -> Source:
    opener = {EngineKind.SQLITE: SqliteSource, EngineKind.DUCKDB: DuckdbSource,
              EngineKind.POSTGRES: PostgresSource, EngineKind.MYSQL: MysqlSource}[spec.kind]
    return opener(spec)
