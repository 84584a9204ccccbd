"""The database schema as Spider's official evaluator sees it.

The evaluator identifies a column as ``__table.column__`` with both names lower-cased, and merges
columns linked by foreign keys into one representative (its ``kmap``) before comparing queries.
`SpiderSchema` holds exactly what is needed for that: tables with their columns in declaration order
and the foreign-key pairs. It is frozen and hashable so that parsed queries can be cached per schema.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

ColumnRef = tuple[str, str]
"""A column as ``(table, column)``, both lower-cased."""


@dataclass(frozen=True)
class SpiderSchema:
    """Tables -> columns (lower-cased original names, in declaration order) and foreign keys.

    Column order matters: when several columns are linked by foreign keys, the official evaluator
    maps all of them to the one declared first.
    """

    tables: tuple[tuple[str, tuple[str, ...]], ...]
    foreign_keys: tuple[tuple[ColumnRef, ColumnRef], ...] = ()

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_columns(
        cls,
        columns: Mapping[str, Sequence[str]],
        foreign_keys: Sequence[tuple[ColumnRef, ColumnRef]] = (),
    ) -> SpiderSchema:
        """Build from ``{table: [column, ...]}`` (names are lower-cased)."""
        merged: dict[str, list[str]] = {}
        for table, cols in columns.items():
            merged.setdefault(table.lower(), []).extend(c.lower() for c in cols)
        fks = tuple(
            ((a[0].lower(), a[1].lower()), (b[0].lower(), b[1].lower())) for a, b in foreign_keys
        )
        return cls(tuple((t, tuple(cs)) for t, cs in merged.items()), fks)

    @classmethod
    def from_tables_json(
        cls, path_or_loaded_list: str | os.PathLike[str] | Sequence[Mapping[str, Any]], db_id: str
    ) -> SpiderSchema:
        """The entry ``db_id`` of a Spider ``tables.json`` (a path, or the already loaded list).

        Uses ``table_names_original`` and ``column_names_original``, as the reference labels do.
        Loading a path is cached, so calling this once per case is cheap.
        """
        if isinstance(path_or_loaded_list, (str, os.PathLike)):
            resolved = str(Path(path_or_loaded_list).resolve())
            return _schema_from_tables_file(resolved, _mtime(resolved), db_id)
        for entry in path_or_loaded_list:
            if entry.get("db_id") == db_id:
                return _schema_from_entry(entry)
        raise KeyError(f"db_id {db_id!r} is not in the given tables.json data")

    @classmethod
    def from_sqlite(cls, path: str | os.PathLike[str]) -> SpiderSchema:
        """Read tables, columns and ``PRAGMA foreign_key_list`` from a SQLite file (read-only).

        Like the official ``get_schema``, every entry of ``sqlite_master`` of type ``table`` is a
        table (``sqlite_sequence`` included).
        """
        resolved = str(Path(path).resolve())
        return _schema_from_sqlite(resolved, _mtime(resolved))

    # ------------------------------------------------------------------ lookups
    @cached_property
    def columns(self) -> dict[str, frozenset[str]]:
        """Table -> set of its column names."""
        return {table: frozenset(cols) for table, cols in self.tables}

    @cached_property
    def column_ids(self) -> frozenset[str]:
        """Every ``__table.column__`` identifier of the schema."""
        return frozenset(col_id(t, c) for t, cols in self.tables for c in cols)

    @cached_property
    def kmap(self) -> dict[str, str]:
        """Foreign-key column merging: column id -> id of the first-declared column of its group.

        Groups are built as the official ``build_foreign_key_map`` builds them: a pair joins the
        first group that already holds either of its columns (groups are not merged further).
        """
        order = {(t, c): i for i, (t, c) in enumerate((t, c) for t, cols in self.tables for c in cols)}
        groups: list[set[ColumnRef]] = []
        for a, b in self.foreign_keys:
            group = next((g for g in groups if a in g or b in g), None)
            if group is None:
                group = set()
                groups.append(group)
            group.update((a, b))
        mapping: dict[str, str] = {}
        for group in groups:
            members = sorted(group, key=lambda ref: order.get(ref, len(order)))
            first = col_id(*members[0])
            for ref in members:
                mapping[col_id(*ref)] = first
        return mapping


def col_id(table: str, column: str) -> str:
    """The official evaluator's identifier of a column."""
    return f"__{table}.{column}__"


def table_id(table: str) -> str:
    """The official evaluator's identifier of a table."""
    return f"__{table}__"


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _schema_from_entry(entry: Mapping[str, Any]) -> SpiderSchema:
    names = [t.lower() for t in entry["table_names_original"]]
    cols: dict[str, list[str]] = {t: [] for t in names}
    refs: list[ColumnRef | None] = []
    for table_index, column in entry["column_names_original"]:
        if table_index < 0:
            refs.append(None)  # the '*' pseudo column
            continue
        ref = (names[table_index], column.lower())
        cols[ref[0]].append(ref[1])
        refs.append(ref)
    fks = []
    for a, b in entry.get("foreign_keys", ()):
        ra, rb = refs[a], refs[b]
        if ra is not None and rb is not None:
            fks.append((ra, rb))
    return SpiderSchema(tuple((t, tuple(c)) for t, c in cols.items()), tuple(fks))


@lru_cache(maxsize=8)
def _load_tables_file(path: str, mtime: float) -> dict[str, Mapping[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return {entry["db_id"]: entry for entry in json.load(handle)}


@lru_cache(maxsize=1024)
def _schema_from_tables_file(path: str, mtime: float, db_id: str) -> SpiderSchema:
    entries = _load_tables_file(path, mtime)
    if db_id not in entries:
        raise KeyError(f"db_id {db_id!r} is not in {path}")
    return _schema_from_entry(entries[db_id])


@lru_cache(maxsize=256)
def _schema_from_sqlite(path: str, mtime: float) -> SpiderSchema:
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    from pytest_nl2sql.engines.sqlite import sqlite_uri  # the engine's read-only open: never creates a file

    conn = sqlite3.connect(sqlite_uri(Path(path)), uri=True)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        tables: dict[str, list[str]] = {}
        original: dict[str, str] = {}
        for name in names:
            columns = [str(row[1]).lower() for row in conn.execute(f"PRAGMA table_info({_quote(name)})")]
            tables.setdefault(name.lower(), []).extend(columns)
            original[name.lower()] = name
        fks: list[tuple[ColumnRef, ColumnRef]] = []
        for name in names:
            for row in conn.execute(f"PRAGMA foreign_key_list({_quote(name)})"):
                # row: id, seq, table, from, to, on_update, on_delete, match
                target_table = str(row[2]).lower()
                target_col = row[4]
                if target_col is None:  # refers to the primary key of the target table
                    target_col = _primary_key(conn, original.get(target_table, target_table), int(row[1]))
                if target_col is None:
                    continue
                fks.append(((name.lower(), str(row[3]).lower()), (target_table, str(target_col).lower())))
    finally:
        conn.close()
    return SpiderSchema(tuple((t, tuple(c)) for t, c in tables.items()), tuple(fks))


def _primary_key(conn: sqlite3.Connection, table: str, seq: int) -> str | None:
    pk = sorted((row[5], row[1]) for row in conn.execute(f"PRAGMA table_info({_quote(table)})") if row[5])
    return pk[seq][1] if seq < len(pk) else None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
