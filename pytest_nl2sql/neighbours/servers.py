"""Neighbours for a case on a PostgreSQL or MySQL/MariaDB server: the server database is copied,
once per process, into a local DuckDB file (`copydb`, exactly or not at all), and neighbours are
generated from that copy as for any DuckDB database. The server is only read (a read-only login
works), and nothing is ever written there.

Two bounds keep this honest and cheap:

- size: a database over `ROW_BUDGET` rows in all (the catalogue's estimate first, then the exact
  counts the copy makes before it writes a table) is not copied: its cases get no neighbours;
- faithfulness (`faithful`): before a case uses neighbours made from the copy, its gold and the
  prediction run on the copy itself and must give what they gave on the server (the gold's
  results, the prediction's pass); a case whose SQL means something else on DuckDB gets none.

What keeps a case from neighbours is said once per database (copy refused, too big) or once per
case (not faithful), as a warning; the case's item then has `neighbours: null`, as with
neighbours off.

A SQLite file is copied the same way for a Malloy prediction (Malloy has no SQLite dialect: its
DuckDB SQL runs on the copy, and neighbours come from the copy, as for a server).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.engines.base import Engine, EngineError, Limits
from pytest_nl2sql.engines.url import DatabaseSpec, EngineKind
from pytest_nl2sql.judge.compare import CompareOptions
from pytest_nl2sql.judge.execute import GoldError, GoldOutcome, judge, judge_result, run_gold
from pytest_nl2sql.shown import ShownWarning
from pytest_nl2sql.vocab import Verdict

ROW_BUDGET = 200_000  # rows in all: a bigger server database (a warehouse) is never copied


class NoNeighbours(ShownWarning, UserWarning):
    """Why a server case (or database) is judged on its own database only."""


class _TooBig(Exception):
    pass


@dataclass(frozen=True)
class ServerCopy:
    path: Path | None  # the local DuckDB copy, or None with `problem`
    problem: str | None = None
    # The copy's content (tables, columns, rows in order): a DuckDB file's bytes differ from one
    # copy to the next, and neighbours must not (the same verdicts with and without -n 2, and
    # the neighbour cache reused by the next run).
    digest: str | None = None


class ServerCopies:
    """The DuckDB copies this process made, by server URL (password included, never shown) or file."""

    def __init__(self, folder: Path, row_budget: int = ROW_BUDGET) -> None:
        self.folder = Path(folder)
        self.row_budget = row_budget
        self._copies: dict[str, ServerCopy] = {}

    def copy_of(self, spec: DatabaseSpec) -> ServerCopy:
        url = _source_url(spec)
        if url not in self._copies:
            copy = self._copy(spec)
            self._copies[url] = copy
            if copy.problem is not None:
                warnings.warn(NoNeighbours(f"no neighbour databases for {spec.describe()}: {copy.problem}"), stacklevel=2)
        return self._copies[url]

    def _copy(self, spec: DatabaseSpec) -> ServerCopy:
        from pytest_nl2sql.copydb import CopyError, UsageError, copy_database
        from pytest_nl2sql.copydb.sources import open_source

        try:
            source = open_source(spec)
            try:
                estimate = _estimated_rows(source, spec.kind)
            finally:
                source.close()
        except (UsageError, CopyError, EngineError) as error:
            return ServerCopy(None, f"cannot read it: {error}")
        except Exception as error:  # a driver error reading the catalogue: no neighbours, never a broken case
            return ServerCopy(None, f"cannot read it: {type(error).__name__}: {error}")
        if estimate > self.row_budget:
            return ServerCopy(None, f"about {estimate:,} rows, over the {self.row_budget:,} rows copied for neighbours")
        self.folder.mkdir(parents=True, exist_ok=True)
        url = _source_url(spec)
        name = hashlib.sha256(url.encode()).hexdigest()[:16]
        path = self.folder / f"{name}-{os.getpid()}.duckdb"
        _remove(path)
        counted = [0]

        def bound(table: Any, done: int) -> None:  # every table is counted before its first row is written
            if done == 0:
                counted[0] += table.rows
                if counted[0] > self.row_budget:
                    raise _TooBig(f"over {self.row_budget:,} rows (copied for neighbours)")

        try:
            copy_database(url, f"duckdb:///{path}", progress=bound)
        except _TooBig as error:
            _remove(path)
            return ServerCopy(None, str(error))
        except (UsageError, CopyError) as error:
            _remove(path)
            return ServerCopy(None, f"copy-db cannot copy it exactly: {error}")
        except Exception as error:  # a driver error mid-copy: no neighbours, never a broken case
            _remove(path)
            return ServerCopy(None, f"copy-db failed: {type(error).__name__}: {error}")
        atexit.register(_remove, path)
        return ServerCopy(path, digest=content_digest(path))


def _source_url(spec: DatabaseSpec) -> str:
    """What copy-db reads: the server's URL, or a file's (a SQLite file, copied for a Malloy prediction)."""
    return spec.url or f"{spec.kind.value}:///{spec.path}"


def content_digest(path: Path) -> str:
    """A digest of a DuckDB file's tables as data: names, column names and types, and every row
    in a fixed order (the copy is at most `ROW_BUDGET` rows)."""
    import duckdb

    digest = hashlib.sha256()
    connection = duckdb.connect(str(path), read_only=True)
    try:
        tables = [name for (name,) in connection.execute(
            "SELECT table_name FROM duckdb_tables() WHERE NOT internal ORDER BY table_name").fetchall()]
        for table in tables:
            columns = connection.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
                [table]).fetchall()
            digest.update(repr((table, columns)).encode())
            quoted = '"' + table.replace('"', '""') + '"'
            for row in connection.execute(f"SELECT * FROM {quoted} ORDER BY ALL").fetchall():
                digest.update(repr(row).encode())
    finally:
        connection.close()
    return "content:" + digest.hexdigest()


def _estimated_rows(source: Any, kind: EngineKind) -> int:
    """The catalogue's row estimate for the tables copy-db would copy (no table is scanned; a file
    has no catalogue estimate: the copy counts each table before writing it)."""
    if kind in (EngineKind.SQLITE, EngineKind.DUCKDB):
        return 0
    if kind is EngineKind.POSTGRES:
        sql = ("SELECT coalesce(sum(greatest(reltuples, 0)), 0) FROM pg_class "
               "WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p')")
    else:
        sql = ("SELECT coalesce(sum(TABLE_ROWS), 0) FROM information_schema.TABLES "
               "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'")
    return int(source._fetch(sql)[0][0] or 0)


def _remove(path: Path) -> None:
    for each in (path, path.with_name(path.name + ".wal")):
        try:
            each.unlink(missing_ok=True)
        except OSError:
            pass


def faithful(copy: Engine, server_gold: GoldOutcome, golds: tuple[str, ...] | list[str], gold_dialect: str | None,
             predicted: str, predicted_dialect: str | None, *, limits: Limits, order: str,
             compare: Mapping[str, Any] | None, spider_compat: bool) -> str | None:
    """None when the copy means what the server means for this case: the gold gives the server's
    results on it and the prediction (which passed on the server) passes there too; else why not."""
    try:
        gold = run_gold(golds, copy, limits, dialect=gold_dialect, order=order, spider_compat=spider_compat, compare=compare)
    except (GoldError, EngineError) as error:
        return f"the gold does not run on the DuckDB copy ({error})"
    options = CompareOptions.from_mapping(dict(compare or {}))
    for result in gold.results:
        if judge_result(result, server_gold, options).verdict is not Verdict.PASS:
            return "the gold's result on the DuckDB copy is not its result on the server"
    verdict = judge(predicted, gold, copy, limits, dialect=predicted_dialect, compare=compare, spider_compat=spider_compat).verdict
    if verdict is not Verdict.PASS:
        return f"the prediction, right on the server, is {verdict.value} on the DuckDB copy"
    return None


def check_faithful(case_id: str, why: str | None, warn: Callable[[str], None] | None = None) -> bool:
    """True when `why` is None; else says once for this case why it gets no neighbours."""
    if why is None:
        return True
    message = f"case {case_id}: no neighbour databases: {why}"
    if warn is not None:
        warn(message)
    else:
        warnings.warn(NoNeighbours(message), stacklevel=3)
    return False
