"""Reading a source database: its schema and constraints (to copy them), and small samples of its
rows (to build neighbours from). The source is opened read-only and never written.

Samples are cheap however big the table: SQLite reads a few short rowid ranges starting at
seeded points between min(rowid) and max(rowid) (both O(log n)); DuckDB does the same with its
`rowid` pseudo-column. Nothing sorts a whole table.
"""

from __future__ import annotations

import atexit
import bisect
import collections
import contextlib
import datetime
import decimal
import functools
import itertools
import os
import random
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_nl2sql.neighbours import budget

INT, REAL, TEXT, DATE, TIMESTAMP, BLOB, OTHER = "int", "real", "text", "date", "timestamp", "blob", "other"


@dataclass(frozen=True)
class Column:
    name: str
    declared_type: str
    value_class: str  # INT, REAL, TEXT, DATE, TIMESTAMP, BLOB or OTHER: what values we may put in it
    affinity: str  # SQLite's column affinity (INTEGER, REAL, NUMERIC, TEXT, BLOB); "" for DuckDB
    not_null: bool


@dataclass(frozen=True)
class ForeignKey:
    columns: tuple[str, ...]
    parent: str  # table name as the schema spells it
    parent_columns: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    uniques: tuple[tuple[str, ...], ...]  # every key that must stay unique (the primary key included)
    foreign_keys: tuple[ForeignKey, ...]
    create_sql: str
    has_rowid: bool

    @functools.cached_property
    def _positions(self) -> dict[str, int]:  # the first column of each lower-case name (generation asks often)
        found: dict[str, int] = {}
        for index, column in enumerate(self.columns):
            found.setdefault(column.name.lower(), index)
        return found

    def column(self, name: str) -> Column | None:
        index = self._positions.get(name.lower())
        return None if index is None else self.columns[index]

    def position(self, name: str) -> int:
        index = self._positions.get(name.lower())
        if index is None:
            raise KeyError(name)
        return index

    @functools.cached_property
    def capped_columns(self) -> str:
        """`capped_columns(self)`, made once (every sample and look-up of the table asks)."""
        return capped_columns(self)


@dataclass(frozen=True)
class Schema:
    kind: str  # "sqlite" or "duckdb"
    tables: tuple[Table, ...]  # in creation order
    extra_sql: tuple[str, ...]  # unique indexes and views, created after the tables are filled

    @functools.cached_property
    def _by_name(self) -> dict[str, Table]:
        found: dict[str, Table] = {}
        for table in self.tables:
            found.setdefault(table.name.lower(), table)
        return found

    def table(self, name: str) -> Table | None:
        return self._by_name.get(name.lower())

    @functools.cached_property
    def derived(self) -> collections.defaultdict[str, Any]:
        """What generation works out from this schema once and asks for per row or per candidate
        (`generate.parent_columns`, the repair's plan), by the name of what it is (a missing name
        is an empty dict)."""
        return collections.defaultdict(dict)


class SchemaUnsupported(Exception):
    """The source's schema has something the generator cannot copy faithfully."""


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sqlite_affinity(declared: str) -> str:
    """SQLite's rules (datatype3.html, 3.1), in their order."""
    upper = declared.upper()
    if "INT" in upper:
        return "INTEGER"
    if "CHAR" in upper or "CLOB" in upper or "TEXT" in upper:
        return "TEXT"
    if "BLOB" in upper or not upper.strip():
        return "BLOB"
    if "REAL" in upper or "FLOA" in upper or "DOUB" in upper:
        return "REAL"
    return "NUMERIC"


def _sqlite_value_class(declared: str, affinity: str) -> str:
    upper = declared.upper()
    if "TIMESTAMP" in upper or "DATETIME" in upper:
        return TIMESTAMP
    if "DATE" in upper:
        return DATE
    return {"INTEGER": INT, "REAL": REAL, "TEXT": TEXT, "BLOB": OTHER, "NUMERIC": REAL}[affinity]


def _duckdb_value_class(data_type: str) -> str:
    upper = data_type.upper()
    if upper in {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}:
        return INT
    if upper in {"FLOAT", "DOUBLE", "REAL"} or upper.startswith("DECIMAL"):
        return REAL
    if upper == "VARCHAR" or upper.startswith("VARCHAR"):
        return TEXT
    if upper == "DATE":
        return DATE
    if upper.startswith("TIMESTAMP"):
        return TIMESTAMP
    if upper == "BLOB":
        return BLOB
    return OTHER


class SqliteSource:
    """A SQLite file opened read-only (`mode=ro` URI): the schema, and row samples."""

    def __init__(self, path: Path) -> None:
        uri = "file:" + str(path.resolve()).replace("?", "%3F").replace("#", "%23") + "?mode=ro"
        self.connection = sqlite3.connect(uri, uri=True)
        self.connection.text_factory = lambda data: data.decode("utf-8", "backslashreplace")
        # what a query that every candidate asks again returned (the source is read-only): the
        # schema, a table's rowid bounds, a small table's rows, a parent looked up by its key
        self._memo: dict[Any, Any] = {}

    def share(self, memo: dict[Any, Any]) -> None:
        """Keep what this reader reads in `memo`, and use what earlier readers of the same content
        kept there (`NeighbourCache`: one memo per source content)."""
        self._memo = memo

    def close(self) -> None:
        self.connection.close()

    def schema(self) -> Schema:
        found = self._memo.get("schema")
        if found is None:
            found = self._memo["schema"] = self._read_schema()
        return found  # type: ignore[no-any-return]

    def _read_schema(self) -> Schema:
        read = self.connection.execute
        objects = read(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL"
            " AND name NOT LIKE 'sqlite~_%' ESCAPE '~' ORDER BY rowid"
        ).fetchall()
        tables = []
        extra = []
        for kind, name, _, sql in objects:
            budget.check()
            if kind == "table":
                if sql.upper().lstrip().startswith("CREATE VIRTUAL"):
                    raise SchemaUnsupported(f"virtual table {name}")
                tables.append(self._table(name, sql))
            elif kind == "view":
                extra.append(sql)
        for kind, name, table_name, sql in objects:  # unique indexes made by CREATE UNIQUE INDEX
            budget.check()
            if kind == "index" and _is_unique_index(self.connection, table_name, name):
                extra.insert(0, sql)
        return Schema("sqlite", tuple(tables), tuple(extra))

    def _table(self, name: str, sql: str) -> Table:
        read = self.connection.execute
        info = read("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?) ORDER BY cid", (name,)).fetchall()
        columns = []
        for column_name, declared, not_null, _ in info:
            affinity = sqlite_affinity(declared or "")
            columns.append(Column(column_name, declared or "", _sqlite_value_class(declared or "", affinity), affinity, bool(not_null)))
        primary_key = tuple(column_name for column_name, _, _, pk in sorted(info, key=lambda row: row[3]) if pk)
        uniques = [primary_key] if primary_key else []
        for _, index_name, unique, _, partial in read("SELECT seq, name, \"unique\", origin, partial FROM pragma_index_list(?)", (name,)).fetchall():
            if not unique:
                continue
            index_columns = [row[0] for row in read("SELECT name FROM pragma_index_info(?) ORDER BY seqno", (index_name,)).fetchall()]
            if index_columns and None not in index_columns and tuple(index_columns) not in uniques:
                uniques.append(tuple(index_columns))  # a partial index is treated as full: stricter, still valid
        groups: dict[int, list[tuple[Any, ...]]] = {}
        for row in read("SELECT id, seq, \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?) ORDER BY id, seq", (name,)).fetchall():
            groups.setdefault(row[0], []).append(row)
        foreign_keys = []
        for rows in groups.values():
            parent = rows[0][2]
            child_columns = tuple(row[3] for row in rows)
            parent_columns = tuple(row[4] for row in rows)
            foreign_keys.append(ForeignKey(child_columns, parent, parent_columns if None not in parent_columns else ()))
        has_rowid = not _without_rowid(sql)
        return Table(name, tuple(columns), primary_key, tuple(uniques), tuple(foreign_keys), sql, has_rowid)

    def sample(self, table: Table, count: int, rng: random.Random) -> list[tuple[Any, ...]]:
        """Up to `count` rows read in a few short rowid runs from seeded starting points."""
        names = table.capped_columns
        source = quote(table.name)
        if not table.has_rowid:
            key = ("first rows", names, source, count)
            if key not in self._memo:
                self._memo[key] = self.connection.execute(f"SELECT {names} FROM {source} LIMIT ?", (count,)).fetchall()
            return list(self._memo[key])
        return sample_in_rowid_runs(self.connection, names, source, count, rng, bounded_runs=False, memo=self._memo)

    def rows_matching(self, table: Table, columns: Sequence[str], values: Sequence[tuple[Any, ...]], limit: int) -> list[tuple[Any, ...]]:
        """Rows whose `columns` equal one of the `values` tuples (parents of sampled children);
        a look-up of integers and texts is remembered (other values are bound as they are: 1.0
        and 1, or -0.0 and 0.0, may find other rows of a text column)."""
        names = table.capped_columns
        sql = f"SELECT {names} FROM {quote(table.name)} WHERE " + " AND ".join(f"{quote(c)} = ?" for c in columns) + " LIMIT 1"
        found: list[tuple[Any, ...]] = []
        for value in values[:limit]:
            key = (sql, value) if all(type(v) is int or type(v) is str for v in value) else None
            rows = self._memo.get(key) if key is not None else None
            if rows is None:
                rows = self.connection.execute(sql, list(value)).fetchall()
                if key is not None:
                    self._memo[key] = rows
            found.extend(rows)
        return found


def _is_unique_index(connection: sqlite3.Connection, table: str, index: str) -> bool:
    for _, name, unique, _, _ in connection.execute("SELECT seq, name, \"unique\", origin, partial FROM pragma_index_list(?)", (table,)):
        if name == index:
            return bool(unique)
    return False


@functools.lru_cache(maxsize=1024)  # a pure function of the text: every neighbour of a database repeats its tables
def _without_rowid(create_sql: str) -> bool:
    """`WITHOUT ROWID` read from the statement's tokens (never a regex over SQL)."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        words = [t.text.upper() for t in sqlglot.tokenize(create_sql, read="sqlite")]
    except SqlglotError:
        return False
    return words[-2:] == ["WITHOUT", "ROWID"] or words[-3:-1] == ["WITHOUT", "ROWID"]


class AttachedDuckdb:
    """A database attached to this process's DuckDB instance (`DuckdbHost`), seen through a
    connection of its own whose default database it is: what `duckdb.connect(path)` gave the
    generator (`execute`, `interrupt`, `close`; anything else is the connection's), without
    starting a DuckDB instance. `close` detaches the database (a file is then complete at its
    path); a source shared by readers is detached once the last of them closes."""

    def __init__(self, host: DuckdbHost, cursor: Any, alias: str, *, source: str | None = None,
                 staged: tuple[str, str] | None = None) -> None:
        self._host = host
        self._cursor = cursor
        self._alias = alias
        self._source = source  # the path of a source shared by readers (`DuckdbHost.source`)
        self._staged = staged  # (where DuckDB writes the file, where it goes once detached)

    def execute(self, sql: Any, parameters: Any = None) -> Any:
        return self._cursor.execute(sql) if parameters is None else self._cursor.execute(sql, parameters)

    def interrupt(self) -> None:
        self._cursor.interrupt()

    def close(self) -> None:
        cursor, self._cursor = self._cursor, None
        if cursor is not None:
            self._host.release(cursor, self._alias, self._source, self._staged)

    def __getattr__(self, name: str) -> Any:
        cursor = self.__dict__.get("_cursor")
        if cursor is None:
            raise AttributeError(name)
        return getattr(cursor, name)


class DuckdbHost:
    """This process's DuckDB instance for the neighbours: an in-memory one (one thread, as each
    candidate's own instance had) to which each source and each candidate is attached (`ATTACH`,
    about a millisecond) instead of being opened as an instance of its own (`duckdb.connect`:
    15-20 ms of CPU, DuckDB setting up its catalog each time; generation opens hundreds per case
    file). Queries run as on an instance of their own: each database is the default one of its
    connection, and unqualified names resolve in it alone. A process started by fork starts its own.

    A new file (a neighbour in the cache, a shrink's attempt) is written by DuckDB in a folder in
    memory (`/dev/shm`) and copied to its path once detached: DuckDB syncs every file it
    checkpoints to disk (tens of milliseconds each, megabytes for a few rows: a block per column),
    which a file that is rebuilt from its rows when lost does not need (SQLite's are written so)."""

    STAGING_PARENT = "/dev/shm"
    FILE_BLOCK_BYTES = 16384  # DuckDB's smallest block size

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = -1
        self._connection: Any = None
        self._default = "memory"
        self._names = itertools.count(1)
        self._sources: dict[str, list[Any]] = {}  # path -> [alias, readers]
        self._staging: str | None = None
        self._inherited: list[Any] = []
        self._templates: collections.OrderedDict[tuple[str, ...], str | None] = collections.OrderedDict()

    def _instance(self) -> Any:
        if self._pid != os.getpid():
            import duckdb

            if self._connection is not None:  # the parent's, inherited through fork: never closed here
                self._inherited.append(self._connection)
            self._connection = duckdb.connect(":memory:", config={"threads": 1})
            (self._default,) = self._connection.execute("SELECT current_database()").fetchone()
            self._sources = {}
            self._templates = collections.OrderedDict()
            self._staging = self._staging_folder()
            self._pid = os.getpid()
        return self._connection

    def _staging_folder(self) -> str | None:
        if not os.path.isdir(self.STAGING_PARENT) or not os.access(self.STAGING_PARENT, os.W_OK | os.X_OK):
            return None
        try:
            folder = tempfile.mkdtemp(prefix="nl2sql-duckdb-", dir=self.STAGING_PARENT)
        except OSError:
            return None
        atexit.register(shutil.rmtree, folder, True)
        return folder

    def attach(self, target: str | Path) -> AttachedDuckdb:
        """A new database of our own: in memory (`:memory:`), or a file (created if missing)."""
        target = str(target)
        with self._lock:
            cursor = self._instance().cursor()
            staging = self._staging
        alias = f"nl2sql_{next(self._names)}"
        staged = None
        if target != ":memory:" and staging is not None and not os.path.exists(target):
            staged = (os.path.join(staging, f"{alias}.duckdb"), target)
        try:
            self._attach_new(cursor, staged[0] if staged else target, alias)
        except BaseException:
            cursor.close()
            raise
        return self._used(AttachedDuckdb(self, cursor, alias, staged=staged))

    def _attach_new(self, cursor: Any, target: str, alias: str) -> None:
        """A file is written in blocks of `FILE_BLOCK_BYTES` where this DuckDB can (1.2 and later):
        a neighbour of a few tables takes a block per column at least, 2-4 MB in DuckDB's default
        256 KB blocks, 15 times less in 16 KB ones (and less to write and copy)."""
        options = f" (BLOCK_SIZE {self.FILE_BLOCK_BYTES})" if target != ":memory:" and duckdb_version() >= (1, 2) else ""
        cursor.execute(f"ATTACH {_literal(target)} AS {quote(alias)}{options}")

    TEMPLATES = 16  # schemas whose empty tables are kept attached to copy from (`create_tables`)
    TEMPLATE_PREFIX = "nl2sql_tables_"

    def create_tables(self, attached: AttachedDuckdb, statements: tuple[str, ...]) -> None:
        """Run `statements` (CREATE TABLE, in order) in `attached`: as one `COPY FROM DATABASE ...
        (SCHEMA)` from a database where they were run once (a candidate of five tables: one
        statement where there were five, each ~0.5 ms of DuckDB's parsing, binding and catalog
        work), where that copy was found to make the very catalog the statements make (tables in
        their order, their SQL, columns, types, defaults, constraints); else each statement."""
        template = self._template(statements)
        if template is None:
            for sql in statements:
                attached.execute(sql)
            return
        attached.execute(f"COPY FROM DATABASE {quote(template)} TO {quote(attached._alias)} (SCHEMA)")

    def _template(self, statements: tuple[str, ...]) -> str | None:
        import duckdb

        with self._lock:
            connection = self._instance()  # first: a forked process forgets its parent's templates
            if statements in self._templates:
                self._templates.move_to_end(statements)
                return self._templates[statements]
            template = f"{self.TEMPLATE_PREFIX}{next(self._names)}"
            probe = f"nl2sql_{next(self._names)}"
            cursor = connection.cursor()
            kept = None
            try:
                cursor.execute(f"ATTACH ':memory:' AS {quote(template)}")
                cursor.execute(f"USE {quote(template)}")
                for sql in statements:
                    cursor.execute(sql)
                cursor.execute(f"USE {quote(self._default)}")
                cursor.execute(f"ATTACH ':memory:' AS {quote(probe)}")
                cursor.execute(f"COPY FROM DATABASE {quote(template)} TO {quote(probe)} (SCHEMA)")
                if _catalog(cursor, template) == _catalog(cursor, probe):
                    kept = template
            except duckdb.Error as error:
                from pytest_nl2sql.neighbours.interrupts import raise_if_interrupt

                raise_if_interrupt(error)  # a Ctrl-C stops the run; any other failure: each statement runs
            finally:
                with contextlib.suppress(duckdb.Error):
                    cursor.execute(f"USE {quote(self._default)}")
                    cursor.execute(f"DETACH DATABASE IF EXISTS {quote(probe)}")
                    if kept is None:
                        cursor.execute(f"DETACH DATABASE IF EXISTS {quote(template)}")
                cursor.close()
            self._templates[statements] = kept
            while len(self._templates) > self.TEMPLATES:
                _, dropped = self._templates.popitem(last=False)
                if dropped is not None:
                    with contextlib.suppress(duckdb.Error):
                        connection.execute(f"DETACH DATABASE IF EXISTS {quote(dropped)}")
            return kept

    def source(self, path: Path) -> AttachedDuckdb:
        """A DuckDB file attached read-only, once for all its open readers (DuckDB refuses to
        attach one file twice)."""
        key = str(path.resolve())
        with self._lock:
            cursor = self._instance().cursor()
            entry = self._sources.get(key)
            if entry is None:
                alias = f"nl2sql_{next(self._names)}"
                try:
                    cursor.execute(f"ATTACH {_literal(key)} AS {quote(alias)} (TYPE duckdb, READ_ONLY)")
                except BaseException:
                    cursor.close()
                    raise
                entry = self._sources[key] = [alias, 0]
            entry[1] += 1
        return self._used(AttachedDuckdb(self, cursor, entry[0], source=key))

    @staticmethod
    def _used(attached: AttachedDuckdb) -> AttachedDuckdb:
        try:
            attached.execute(f"USE {quote(attached._alias)}")
        except BaseException:
            attached.close()
            raise
        return attached

    def release(self, cursor: Any, alias: str, source: str | None, staged: tuple[str, str] | None) -> None:
        """Detach `alias` (a shared source: once its last reader closes), close the cursor, and
        put a staged file in its place. A Ctrl-C that DuckDB reports as an error of these
        statements stops the run still."""
        from pytest_nl2sql.neighbours.interrupts import raise_if_interrupt

        try:
            with self._lock:
                if source is not None:
                    entry = self._sources.get(source)
                    if entry is None or entry[0] != alias:
                        return
                    entry[1] -= 1
                    if entry[1] > 0:
                        return
                    del self._sources[source]
                cursor.execute(f"USE {quote(self._default)}")  # DuckDB detaches no connection's default database
                cursor.execute(f"DETACH {quote(alias)}")
        except Exception as error:
            raise_if_interrupt(error)
            if staged is not None:
                raise  # no file to put in place
            return  # an alias left attached costs memory only
        finally:
            cursor.close()
        if staged is not None:
            try:
                shutil.copyfile(*staged)
            finally:
                for leftover in (staged[0], staged[0] + ".wal"):
                    with contextlib.suppress(OSError):
                        os.unlink(leftover)


def _catalog(cursor: Any, database: str) -> list[Any]:
    """What DuckDB's catalog holds of `database`'s own objects, without their identifiers: the
    tables in creation order with their SQL, then columns, constraints (in their order; their
    numbers count across databases), indexes, sequences, types, views."""
    where = "database_name = ? AND NOT internal"
    return [cursor.execute(sql, [database]).fetchall() for sql in (
        f"SELECT schema_name, table_name, sql, temporary, column_count, has_primary_key FROM duckdb_tables() WHERE {where} ORDER BY table_oid",
        ("SELECT schema_name, table_name, column_name, column_index, column_default, is_nullable, data_type, numeric_precision,"
         " numeric_scale FROM duckdb_columns() WHERE database_name = ? AND NOT internal ORDER BY table_name, column_index"),
        ("SELECT schema_name, table_name, constraint_type, constraint_text, expression, constraint_column_indexes,"
         " constraint_column_names FROM duckdb_constraints() WHERE database_name = ? ORDER BY table_name, constraint_index"),
        "SELECT schema_name, index_name, table_name, is_unique, expressions, sql FROM duckdb_indexes() WHERE database_name = ? ORDER BY index_name",
        "SELECT schema_name, sequence_name, sql FROM duckdb_sequences() WHERE database_name = ? ORDER BY sequence_name",
        f"SELECT schema_name, type_name, logical_type, labels FROM duckdb_types() WHERE {where} ORDER BY type_name",
        f"SELECT schema_name, view_name, sql FROM duckdb_views() WHERE {where} ORDER BY view_name",
    )]


def duckdb_version() -> tuple[int, ...]:
    import duckdb

    major, minor, *_ = (duckdb.__version__ + ".0").split(".")
    return (int(major), int("".join(c for c in minor if c.isdigit()) or 0))


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


DUCKDB_HOST = DuckdbHost()


@dataclass
class _Remembered:
    """What the DuckDB reader learnt of one file: its schema, and its answers to the reader's own
    queries (samples, parents of sampled rows), by SQL and parameters."""

    schema: Schema | None = None
    answers: dict[tuple[Any, ...], list[tuple[Any, ...]]] = field(default_factory=dict)
    tables: dict[tuple[str, str], tuple[list[int], list[tuple[Any, ...]]]] = field(default_factory=dict)  # rowids, rows


_DUCKDB_FILES: dict[tuple[str, int, int, int, int], _Remembered] = {}  # by path, device, inode, size, mtime
_DUCKDB_FILES_KEPT = 64  # files remembered (sources, and the neighbours a shrink reads), the least recently read dropped
_ANSWERS_KEPT = 20_000  # answers remembered per file; all dropped past it
WHOLE_TABLE_ROWS = 50_000  # a source table of at most this many rowids is read whole for sampling (`DuckdbSource._run_reader`)


def _remembered(path: Path) -> _Remembered:
    info = os.stat(path)
    key = (str(path.resolve()), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    found = _DUCKDB_FILES.pop(key, None) or _Remembered()
    while len(_DUCKDB_FILES) >= _DUCKDB_FILES_KEPT:
        _DUCKDB_FILES.pop(next(iter(_DUCKDB_FILES)), None)
    _DUCKDB_FILES[key] = found  # the most recently read last
    return found


class _Asking:
    """The reader's connection for its own queries, answering from `_Remembered.answers` what was
    asked before. A source is read once per gold and many golds share it; a gold's candidates, and
    the next gold's, ask the same (`min(rowid)` of each table, a small table read whole), and a
    DuckDB query costs about a millisecond of planning however small. The file is attached
    read-only and its path, inode, size and mtime name it, so an answer is the one DuckDB would
    give again (the reader's queries have one answer: `ORDER BY rowid`, one thread)."""

    def __init__(self, connection: Any, answers: dict[tuple[Any, ...], list[tuple[Any, ...]]]) -> None:
        self._connection = connection
        self._answers = answers

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> _Answer:
        # each value by type and repr: 1, 1.0 and True are equal keys, as are Decimal('1.0') and
        # Decimal('1.00'), but not to DuckDB
        key = (sql, *((type(value), repr(value)) for value in parameters))
        rows = self._answers.get(key)
        if rows is None:
            rows = self._connection.execute(sql, list(parameters)).fetchall()
            if len(self._answers) >= _ANSWERS_KEPT:
                self._answers.clear()
            self._answers[key] = rows
        return _Answer(rows)


class _Answer:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self._rows)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None


class DuckdbSource:
    """A DuckDB file attached read-only (`DuckdbHost.source`): the schema, and row samples, both
    remembered per file (`_Remembered`, `_Asking`)."""

    def __init__(self, path: Path) -> None:
        self._remembered = _remembered(path)
        self.connection = DUCKDB_HOST.source(path)
        self._asking = _Asking(self.connection, self._remembered.answers)

    def close(self) -> None:
        self.connection.close()

    def schema(self) -> Schema:
        if self._remembered.schema is None:
            self._remembered.schema = self._read_schema()
        return self._remembered.schema

    def _read_schema(self) -> Schema:
        read = self.connection.execute
        tables = []
        rows = read(
            "SELECT table_name, sql FROM duckdb_tables() WHERE NOT internal AND schema_name = current_schema()"
            " AND database_name = current_database() ORDER BY table_oid"
        ).fetchall()
        for name, sql in rows:
            budget.check()
            columns = tuple(
                Column(column_name, data_type, _duckdb_value_class(data_type), "", not nullable)
                for column_name, data_type, nullable in read(
                    "SELECT column_name, data_type, is_nullable FROM duckdb_columns() WHERE table_name = ?"
                    " AND schema_name = current_schema() AND database_name = current_database() ORDER BY column_index", [name]
                ).fetchall()
            )
            primary_key: tuple[str, ...] = ()
            uniques: list[tuple[str, ...]] = []
            foreign_keys = []
            for kind, names, parent, parent_names in read(
                "SELECT constraint_type, constraint_column_names, referenced_table, referenced_column_names"
                " FROM duckdb_constraints() WHERE table_name = ? AND schema_name = current_schema()"
                " AND database_name = current_database() ORDER BY constraint_index", [name]
            ).fetchall():
                if kind == "PRIMARY KEY":
                    primary_key = tuple(names)
                    uniques.insert(0, tuple(names))
                elif kind == "UNIQUE":
                    uniques.append(tuple(names))
                elif kind == "FOREIGN KEY":
                    foreign_keys.append(ForeignKey(tuple(names), parent, tuple(parent_names or ())))
            tables.append(Table(name, columns, primary_key, tuple(uniques), tuple(foreign_keys), sql, True))
        extra = [sql for (sql,) in read(
            "SELECT sql FROM duckdb_indexes() WHERE is_unique AND sql IS NOT NULL AND schema_name = current_schema()"
            " AND database_name = current_database() ORDER BY index_oid"
        ).fetchall()]
        extra += [sql for (sql,) in read(
            "SELECT sql FROM duckdb_views() WHERE NOT internal AND schema_name = current_schema()"
            " AND database_name = current_database() ORDER BY view_oid"
        ).fetchall()]
        return Schema("duckdb", tuple(tables), tuple(extra))

    def sample(self, table: Table, count: int, rng: random.Random) -> list[tuple[Any, ...]]:
        names = capped_columns(table)
        source = quote(table.name)
        return sample_in_rowid_runs(self._asking, names, source, count, rng, bounded_runs=True,
                                    read_run=self._run_reader(names, source))

    def _run_reader(self, names: str, source: str) -> Callable[[int, int, int], Sequence[tuple[Any, ...]]] | None:
        """For a table of at most `WHOLE_TABLE_ROWS` rowids, its rows read once in rowid order (and
        remembered with the file): a run is then a slice of them, where DuckDB would plan and scan
        for each (the rowid range is no index to it). None for a bigger or an empty table."""
        table = self._remembered.tables.get((source, names))
        if table is None:
            low, high = self._asking.execute(f"SELECT min(rowid), max(rowid) FROM {source}").fetchone()  # type: ignore[misc]
            if low is None or high - low >= WHOLE_TABLE_ROWS:
                return None
            rows = self.connection.execute(f"SELECT rowid, {names} FROM {source} ORDER BY rowid").fetchall()
            table = self._remembered.tables[source, names] = ([row[0] for row in rows], rows)
        rowids, rows = table

        def read_run(low: int, high: int, limit: int) -> Sequence[tuple[Any, ...]]:
            start = bisect.bisect_left(rowids, low)
            return rows[start:min(bisect.bisect_right(rowids, high), start + limit)]

        return read_run

    def rows_matching(self, table: Table, columns: Sequence[str], values: Sequence[tuple[Any, ...]], limit: int) -> list[tuple[Any, ...]]:
        """Rows whose `columns` equal one of the `values` tuples (parents of sampled children)."""
        return rows_matching(self._asking, table, columns, values, limit)


def sample_in_rowid_runs(connection: Any, names: str, source: str, count: int, rng: random.Random, *,
                         bounded_runs: bool, read_run: Callable[[int, int, int], Sequence[tuple[Any, ...]]] | None = None,
                         memo: dict[Any, Any] | None = None) -> list[tuple[Any, ...]]:
    """Up to `count` rows of `source` (columns `names`, quoted) read in a few short rowid runs from
    seeded starting points (a sqlite3 or a duckdb connection). `bounded_runs`: a run's rows also
    lie within 4 run-lengths of its start (the DuckDB reader's query). `read_run(low, high, limit)`:
    the rows (rowid first) that bounded query would return, read from a copy of the table instead.
    `memo`: where the bounds and a small table's rows are kept for the next sample of the same
    source (a read-only one)."""
    bounds = memo.get(("bounds", source)) if memo is not None else None
    if bounds is not None:
        low, high = bounds
    elif isinstance(connection, sqlite3.Connection):  # each alone is O(log n); both in one SELECT scan the table
        low, high = connection.execute(f"SELECT (SELECT min(rowid) FROM {source}), (SELECT max(rowid) FROM {source})").fetchone()
    else:
        low, high = connection.execute(f"SELECT min(rowid), max(rowid) FROM {source}").fetchone()
    if memo is not None:
        memo[("bounds", source)] = (low, high)
    if low is None:
        return []
    if high - low < 4 * count:  # a small table: one read of all of it is as cheap
        key = ("small", names, source, 4 * count)
        rows = memo.get(key) if memo is not None else None
        if rows is None:
            rows = connection.execute(f"SELECT {names} FROM {source} ORDER BY rowid LIMIT ?", [4 * count]).fetchall()
            if memo is not None:
                memo[key] = rows
        rows = list(rows)
        return rng.sample(rows, min(count, len(rows))) if len(rows) > count else rows
    if memo is not None and read_run is None and not bounded_runs and high - low <= COPIED_ROWIDS:
        read_run = _copied_runs(connection, names, source, memo)
    runs = 3
    per_run = -(-count // runs)
    seen: dict[int, tuple[Any, ...]] = {}
    for _ in range(runs):
        start = rng.randint(low, high)
        if read_run is not None:
            run = read_run(start, start + 4 * per_run, per_run)
        elif bounded_runs:
            run = connection.execute(f"SELECT rowid, {names} FROM {source} WHERE rowid BETWEEN ? AND ? ORDER BY rowid LIMIT ?",
                                     [start, start + 4 * per_run, per_run]).fetchall()
        else:
            run = connection.execute(f"SELECT rowid, {names} FROM {source} WHERE rowid >= ? ORDER BY rowid LIMIT ?", [start, per_run])
        for row in run:
            seen.setdefault(row[0], row[1:])
    return [seen[key] for key in sorted(seen)][:count]


COPIED_ROWIDS = 5000  # a table whose rowids span at most this many is read whole once for the samples of a memo's source


def _copied_runs(connection: Any, names: str, source: str, memo: dict[Any, Any]) -> Callable[[int, int, int], Sequence[tuple[Any, ...]]] | None:
    """For a small SQLite table: what `WHERE rowid >= low ORDER BY rowid LIMIT limit` returns (the
    unbounded runs of `sample_in_rowid_runs`; `high` is not a bound there), read from a copy of the
    table made once per memo. None where the rowids read are not strictly increasing integers (a
    column named rowid), where the query's order among equal values would be the database's."""
    key = ("all rows", names, source)
    copy = memo.get(key)
    if copy is None:
        rows = connection.execute(f"SELECT rowid, {names} FROM {source} ORDER BY rowid").fetchall()
        rowids = [row[0] for row in rows]
        usable = all(type(r) is int for r in rowids) and all(a < b for a, b in itertools.pairwise(rowids))
        copy = memo[key] = (rowids, rows) if usable else ()
    if not copy:
        return None
    rowids, rows = copy

    def read_run(low: int, high: int, limit: int) -> Sequence[tuple[Any, ...]]:
        start = bisect.bisect_left(rowids, low)
        return rows[start:start + limit]

    return read_run


def rows_matching(connection: Any, table: Table, columns: Sequence[str], values: Sequence[tuple[Any, ...]],
                  limit: int) -> list[tuple[Any, ...]]:
    """One row of `table` for each of (at most `limit` of) the `values` of `columns` (a sqlite3 or
    a duckdb connection: both take a list of parameters)."""
    names = capped_columns(table)
    condition = " AND ".join(f"{quote(c)} = ?" for c in columns)
    found: list[tuple[Any, ...]] = []
    for value in values[:limit]:
        found.extend(connection.execute(f"SELECT {names} FROM {quote(table.name)} WHERE {condition} LIMIT 1", list(value)).fetchall())
    return found


VALUE_BYTES_KEPT = 4096  # a text or blob longer than this is cut when read into a neighbour (a 1 GB blob is not copied)


def capped_columns(table: Table) -> str:
    """The table's columns for a SELECT, texts and blobs cut to `VALUE_BYTES_KEPT` where longer, so
    that a neighbour's rows stay small whatever the source holds (both SQLite and DuckDB read it)."""
    parts = []
    for column in table.columns:
        name = quote(column.name)
        if column.value_class == TEXT or (column.affinity and column.value_class in (BLOB, OTHER)):  # SQLite's any value; DuckDB's VARCHAR
            parts.append(f"CASE WHEN length({name}) > {VALUE_BYTES_KEPT} THEN substr({name}, 1, {VALUE_BYTES_KEPT}) ELSE {name} END")
        else:
            parts.append(name)
    return ", ".join(parts)


def open_source(path: Path, kind: str, memo: dict[Any, Any] | None = None) -> SqliteSource | DuckdbSource:
    """A reader of the source; `memo` (SQLite): where the reader keeps what it read, for the
    next reader of the same content."""
    if kind == "sqlite":
        reader = SqliteSource(path)
        if memo is not None:
            reader.share(memo)
        return reader
    if kind == "duckdb":
        return DuckdbSource(path)
    raise SchemaUnsupported(f"unknown database kind {kind!r}")


def plain_number(value: Any) -> Any:
    """Decimal as int/float, so that arithmetic on neighbouring values works."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


DATE_TYPES = (datetime.date, datetime.datetime)
