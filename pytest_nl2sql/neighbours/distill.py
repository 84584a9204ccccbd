"""Distillation: of several candidate neighbours, keep the few on which the most mutants of the
gold give another result than the gold (greedy set cover), preferring candidates where the gold
returns rows. Queries here are the gold and its rewrites on databases we just built: plain
connections suffice, but each query has a bounded amount of work so a slow one cannot hang
generation (SQLite: a count of VM steps, the same on every machine; DuckDB: a timer).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_nl2sql.engines.base import Watchdog
from pytest_nl2sql.judge.compare import compare_results
from pytest_nl2sql.neighbours.interrupts import raise_if_interrupt

SQLITE_STEP_CALLS = 2000  # progress-handler calls (every 1000 VM steps): ~2M steps, ~0.1-0.3 s
DUCKDB_SECONDS = 0.5
MAX_RESULT_ROWS = 5000


@dataclass(frozen=True)
class Outcome:
    columns: int
    rows: tuple[tuple[Any, ...], ...]


def run_query(connection: Any, sql: str, kind: str) -> Outcome | None:
    """The query's result, or None if it fails, overruns its work bound or returns too much."""
    if kind == "sqlite":
        calls = [0]

        def handler() -> int:
            calls[0] += 1
            return 1 if calls[0] > SQLITE_STEP_CALLS else 0

        connection.set_progress_handler(handler, 1000)
        try:
            cursor = connection.execute(sql)
            rows = cursor.fetchmany(MAX_RESULT_ROWS + 1)
            width = len(cursor.description or ())
        except (sqlite3.Error, sqlite3.Warning, OverflowError, ValueError, MemoryError):
            return None
        finally:
            connection.set_progress_handler(None, 1000)
    else:
        import duckdb

        # Started inside the try and stopped (joined) in its finally: no interrupt can reach the
        # connection after this query, nor a closed connection (a traceback in the timer's thread).
        watchdog = Watchdog(DUCKDB_SECONDS, connection.interrupt)
        try:
            watchdog.start()
            cursor = connection.execute(sql)
            rows = cursor.fetchmany(MAX_RESULT_ROWS + 1)
            width = len(cursor.description or ())
        except (duckdb.Error, RuntimeError, ValueError, OverflowError) as error:
            if isinstance(error, duckdb.InterruptException) and watchdog.fired:
                return None  # our own work bound
            raise_if_interrupt(error)  # the user's Ctrl-C, which DuckDB reports as the query's error
            return None
        finally:
            watchdog.stop()
    if len(rows) > MAX_RESULT_ROWS:
        return None
    return Outcome(width, tuple(tuple(row) for row in rows))


def differs(gold: Outcome, other: Outcome | None, order_matters: bool) -> bool:
    """Does a mutant's result tell it apart from the gold, as the product compares results?"""
    if other is None:
        return False  # a mutant that fails separates nothing a prediction would pass with
    if other.columns == gold.columns and other.rows == gold.rows:
        return False  # the same rows in the same order: no need for the full comparison
    return not compare_results(gold.rows, other.rows, order_matters, gold_columns=gold.columns, pred_columns=other.columns).match


@dataclass(frozen=True)
class Scored:
    index: int  # the candidate's number
    gold_rows: int  # rows the (first) gold returns there
    killed: frozenset[int]  # mutants told apart there


def choose(scored: Sequence[Scored], count: int) -> list[Scored]:
    """Greedy set cover over killed mutants; ties go to candidates where the gold returns rows,
    then to more kills in all, then to the lower candidate number (deterministic)."""
    left = list(scored)
    chosen: list[Scored] = []
    covered: set[int] = set()
    while left and len(chosen) < count:
        best = max(left, key=lambda s: (len(s.killed - covered), s.gold_rows > 0, len(s.killed), -s.index))
        chosen.append(best)
        covered |= best.killed
        left.remove(best)
    return sorted(chosen, key=lambda s: s.index)
