"""Distillation: of several candidate neighbours, keep the few on which the most mutants of the
gold give another result than the gold (greedy set cover), preferring candidates where the gold
returns rows. Queries here are the gold and its rewrites on databases we just built: plain
connections suffice, but each query has a bounded amount of work so a slow one cannot hang
generation (SQLite: a count of VM steps, the same on every machine; DuckDB: a timer).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_nl2sql.engines.worker_child import Alarm
from pytest_nl2sql.judge.compare import DEFAULT_OPTIONS, Mode, compare_results
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

        # Armed inside the try and disarmed in its finally (which waits for a firing interrupt to
        # end): no interrupt can reach the connection after this query, nor a closed connection.
        alarm, fired, token = _alarm(), [], None

        def bound() -> None:
            fired.append(True)
            connection.interrupt()

        try:
            token = alarm.arm(DUCKDB_SECONDS, bound)
            cursor = connection.execute(sql)
            rows = cursor.fetchmany(MAX_RESULT_ROWS + 1)
            width = len(cursor.description or ())
        except (duckdb.Error, RuntimeError, ValueError, OverflowError) as error:
            if isinstance(error, duckdb.InterruptException) and fired:
                return None  # our own work bound
            raise_if_interrupt(error)  # the user's Ctrl-C, which DuckDB reports as the query's error
            _FAILED.unbound = isinstance(error, (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException))
            return None
        finally:
            if token is not None:
                alarm.disarm(token)
    if len(rows) > MAX_RESULT_ROWS:
        return None
    return Outcome(width, tuple(tuple(row) for row in rows))


_ALARMS = threading.local()


def _alarm() -> Alarm:
    """This thread's alarm for DuckDB's work bound: one thread kept per generating thread, where a
    timer thread per query cost ~0.1-0.3 ms of CPU, a tenth of a small query."""
    alarm = getattr(_ALARMS, "alarm", None)
    if alarm is None:
        alarm = _ALARMS.alarm = Alarm()
    return alarm


Run = Callable[[Any, str, str], "Outcome | None"]


def score(connection: Any, golds: Sequence[str], mutants: Sequence[str], kind: str, order_matters: bool, *,
          skip: Collection[int] = (), run: Run = run_query, schema: Any = None) -> tuple[Outcome, frozenset[int]] | None:
    """(the first gold's result, the mutants whose result tells them apart from it) on one
    candidate, the mutants in `skip` left out; None when a gold fails there (a neighbour we keep
    runs every gold). `run`: how one query runs (`run_query`; the caller's, which a test may wrap).

    `schema`: the candidate's (`schema.Schema`, its tables created by their statements). On DuckDB
    a mutant that DuckDB could not parse or bind there (a column the rewrite names outside its GROUP
    BY, a text compared with a number) fails so on every candidate of the same tables, whatever
    their rows: it is not run again on them (`_UNBOUND`), a third of the mutants of Spider's golds
    and ~0.5 ms each."""
    outcomes = [run(connection, sql, kind) for sql in golds]
    gold = outcomes[0]
    if gold is None or None in outcomes:
        return None
    unbound = _unbound(schema) if kind == "duckdb" and schema is not None else None
    killed = set()
    for i in range(len(mutants)):
        if i in skip or (unbound is not None and mutants[i] in unbound):
            continue
        _FAILED.unbound = False
        outcome = run(connection, mutants[i], kind)
        if outcome is None and unbound is not None and _FAILED.unbound:
            unbound.add(mutants[i])
        elif differs(gold, outcome, order_matters):
            killed.add(i)
    return gold, frozenset(killed)


_FAILED = threading.local()  # `unbound`: the last DuckDB query of this thread failed to parse or bind
_UNBOUND: dict[tuple[str, ...], set[str]] = {}  # the statements of a candidate's tables -> mutants that fail to bind
_UNBOUND_MAX = 256
_UNBOUND_LOCK = threading.Lock()


def _unbound(schema: Any) -> set[str]:
    key = (*(table.create_sql for table in schema.tables), *schema.extra_sql)
    with _UNBOUND_LOCK:
        found = _UNBOUND.get(key)
        if found is None:
            while len(_UNBOUND) >= _UNBOUND_MAX:
                del _UNBOUND[next(iter(_UNBOUND))]
            found = _UNBOUND[key] = set()
        return found


def differs(gold: Outcome, other: Outcome | None, order_matters: bool) -> bool:
    """Does a mutant's result tell it apart from the gold, as the product compares results?"""
    if other is None:
        return False  # a mutant that fails separates nothing a prediction would pass with
    if other.columns == gold.columns and other.rows == gold.rows:
        return False  # the same rows in the same order: no need for the full comparison
    if len(other.rows) != len(gold.rows) and DEFAULT_OPTIONS.mode is Mode.EXEC:
        return True  # another number of rows never matches in the default mode (its first rule after equality)
    # only whether they match: no diff or reason made for a mismatch (most mutants' outcome)
    return not compare_results(gold.rows, other.rows, order_matters, gold_columns=gold.columns, pred_columns=other.columns,
                               explain=False).match


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
