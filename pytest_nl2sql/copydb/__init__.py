"""`nl2sql copy-db SOURCE TARGET`: copy a database between SQLite, DuckDB, PostgreSQL and
MySQL/MariaDB, so that a suite written for one runs on another (`--nl2sql-dsn`, `database:`).

Schema first (types, primary keys, UNIQUE, foreign keys, NOT NULL; `plan.py` decides what the
target can hold and warns about what it leaves out), then the rows in batches, streamed from the
source (`sources.py`) into the target's bulk path (`targets.py`: COPY, multi-row INSERT).

Every value is copied exactly, or the copy fails naming table, column and why (`--strict` or
not: a lost value is never a warning). What "exactly" means where the engines differ:

- NaN and the infinities of a double or a numeric: copied where the target's type has them
  (PostgreSQL; DuckDB's DOUBLE; SQLite's REAL has the infinities), refused where it has not:
  SQLite would store NaN as NULL, MySQL/MariaDB and DuckDB's DECIMAL have neither.
- An integer past 64 bits (MySQL's `BIGINT UNSIGNED` 18446744073709551615) is a DECIMAL(20, 0):
  exact on DuckDB, PostgreSQL and MySQL; SQLite holds 64-bit integers and doubles only, so it is
  refused there, as is any decimal whose double would read back as another number.
- Dates and timestamps Python cannot hold (`'infinity'`, `'-infinity'`, a year BC or past 9999)
  go to PostgreSQL and DuckDB, which have them, and are refused by SQLite and MySQL/MariaDB.
- PostgreSQL's `CHAR(n)` is copied without its blank padding ('ab', not 'ab   '), onto a
  CHAR(n) again on PostgreSQL. PostgreSQL calls the padding insignificant: `code = 'ab'` is
  true, `length(code)` is 2, `code || '!'` is 'ab!', `GROUP BY` and keys ignore it, and every
  cast to another string type drops it. Kept on a VARCHAR target, where trailing blanks count,
  it would break all of those; dropped, only what sees the padding differs off PostgreSQL:
  `SELECT code` shows 'ab', `octet_length`, `concat`, `LIKE 'ab'` (false on the source), and a
  literal with trailing blanks (`code = 'ab '`, true on the source).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from pytest_nl2sql.copydb.model import CopyError, Plan, Table, UsageError
from pytest_nl2sql.copydb.plan import make_plan
from pytest_nl2sql.copydb.sources import SqliteSource, open_source
from pytest_nl2sql.copydb.targets import open_target
from pytest_nl2sql.engines.base import DatabaseMissing
from pytest_nl2sql.engines.url import DatabaseSpec, EngineKind, parse_database

__all__ = ["CopyError", "CopyReport", "TextProgress", "UsageError", "copy_database"]

Progress = Callable[[Table, int], None]  # (table, rows copied so far), after every batch


@dataclass(frozen=True)
class CopyReport:
    tables: int
    rows: int
    seconds: float
    warnings: tuple[str, ...]


def _spec(url: str, role: str) -> DatabaseSpec:
    try:
        return parse_database(url)
    except DatabaseMissing as error:
        raise UsageError(f"{role}: {error}") from None


def copy_database(source_url: str, target_url: str, *, replace: bool = False, create: bool = False,
                  strict: bool = False, numeric_text: bool = False, batch_size: int = 5000, progress: Progress | None = None,
                  warn: Callable[[str], None] | None = None) -> CopyReport:
    """Copy every table of the source into the target; raise `UsageError` or `CopyError`."""
    started = time.perf_counter()
    source_spec, target_spec = _spec(source_url, "source"), _spec(target_url, "target")
    if source_spec.key == target_spec.key:
        raise UsageError("the source and the target are the same database")
    warnings: list[str] = []

    def note(message: str) -> None:
        warnings.append(message)
        if warn is not None:
            warn(message)

    source = open_source(source_spec)
    try:
        tables = source.tables()
        if not tables:
            raise UsageError(f"the source {source_spec.describe()} has no tables")
        plan = make_plan(source, tables, target_spec.kind, numeric_text)
        for message in plan.warnings:
            note(message)
        if strict and plan.warnings:
            raise CopyError(f"--strict: {len(plan.warnings)} thing(s) of the source would not be copied as they are")
        rows = _copy_into(source, plan, target_spec, replace, create, strict, batch_size, progress, note)
    finally:
        source.close()
    return CopyReport(len(plan.tables), rows, time.perf_counter() - started, tuple(warnings))


def _copy_into(source: Any, plan: Plan, spec: DatabaseSpec, replace: bool, create: bool, strict: bool,
               batch_size: int, progress: Progress | None, note: Callable[[str], None]) -> int:
    target = open_target(spec, create)
    copied = 0
    try:
        existing = target.existing_tables()
        if existing and not replace:
            shown = ", ".join(sorted(existing)[:5]) + (", ..." if len(existing) > 5 else "")
            raise UsageError(f"the target {spec.describe()} is not empty (tables: {shown}); "
                             "pass --replace to drop the tables this copy creates")
        folds = spec.kind in (EngineKind.SQLITE, EngineKind.DUCKDB)  # where `t` and `T` are one table

        def fold(name: str) -> str:
            return name.lower() if folds else name

        present = {fold(name): name for name in existing}
        target.drop_tables([present[fold(t.name)] for t in reversed(plan.tables) if fold(t.name) in present])
        for table in plan.tables:
            target.create(table)
        for table in plan.tables:
            done = 0

            def advance(count: int, table: Table = table) -> None:
                nonlocal done
                done += count
                if progress is not None:
                    progress(table, done)

            if progress is not None:
                progress(table, 0)
            undecodable = getattr(source, "undecodable", 0)
            batches = source.batches(table, batch_size)
            try:
                target.load(table, batches, advance)
            finally:
                batches.close()  # a failed load leaves the source's cursor open otherwise
            if isinstance(source, SqliteSource) and source.undecodable > undecodable:
                note(f"table {table.name!r}: {source.undecodable - undecodable} text value(s) were not valid UTF-8; "
                     "the undecodable bytes were replaced by U+FFFD")
            copied += done
        target.add_keys(plan.tables)
        for message in target.warnings:
            note(message)
        if strict and target.warnings:
            raise CopyError(f"--strict: the target refused {len(target.warnings)} key(s)")
        target.commit()
    except BaseException:
        target.abort()
        target.close()
        _remove_new_file(target)
        raise
    target.close()
    return copied


def _remove_new_file(target: Any) -> None:
    """A file this copy created is removed again when the copy fails."""
    if getattr(target, "created_file", False):
        for path in (target.path, target.path.with_name(target.path.name + ".wal"),
                     target.path.with_name(target.path.name + "-journal")):
            path.unlink(missing_ok=True)


class TextProgress:
    """A one-line progress bar for a terminal: `copy-db table 3: city  2,000/4,079 rows [#####     ]`."""

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.seen: list[str] = []
        self.width = 0

    def __call__(self, table: Table, done: int) -> None:
        if not self.seen or self.seen[-1] != table.name:
            self.seen.append(table.name)
        total = max(table.rows, done, 1)
        filled = int(20 * done / total)
        line = (f"copy-db table {len(self.seen)}: {table.name}  {done:,}/{table.rows:,} rows "
                f"[{'#' * filled}{' ' * (20 - filled)}]")
        self.stream.write("\r" + line.ljust(self.width))
        self.width = len(line)
        self.stream.flush()

    def finish(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
