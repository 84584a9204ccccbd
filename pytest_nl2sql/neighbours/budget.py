"""The time a case's neighbour generation may take (`--nl2sql-timeout`), held in every phase:
reading the source's schema, learning its invariants, building, repairing and settling
candidates, running gold and mutants on them, the stress neighbours, writing the chosen ones.

Each phase works table by table (or candidate by candidate) in Python, and calls `check()` at
every step: past the deadline it raises `CutShort`, naming the phase, and the cache keeps nothing
of a generation cut short (its partial work may be incomplete: a query interrupted and taken for
a failure). A query on a SQLite source is interrupted at the deadline too (`bounded_source`: a
progress handler); a DuckDB source's queries are each short, and checked between.

The deadline is a context variable set for the duration of one generation (`deadline()`), so the
many functions a generation calls need no extra parameter; outside one, `check()` does nothing.
Each thread has its own context: generations in several threads never share a deadline.
"""

from __future__ import annotations

import contextvars
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

SOURCE_STEPS = 10_000  # SQLite VM steps between two looks at the clock while the source is read


class CutShort(Exception):
    """Neighbour generation went past its deadline; `phase` says what it was doing."""

    def __init__(self, seconds: float, phase: str) -> None:
        super().__init__(f"past {seconds:g} s while {phase}")
        self.seconds, self.phase = seconds, phase


@dataclass(frozen=True)
class Deadline:
    """When the current generation must stop (`time.monotonic()`), and the limit it came from."""

    at: float
    seconds: float

    def expired(self) -> bool:
        return time.monotonic() >= self.at


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("nl2sql_neighbour_deadline", default=None)
_PHASE: contextvars.ContextVar[str] = contextvars.ContextVar("nl2sql_neighbour_phase", default="generating neighbours")


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Generation inside this block stops `seconds` from now (None: no limit)."""
    token = _CURRENT.set(Deadline(time.monotonic() + seconds, seconds) if seconds is not None else None)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """What the generation is doing, for the message of a `CutShort` raised inside; an error
    leaving the block past the deadline (a source query interrupted by `bounded_source`) is
    that `CutShort` too."""
    token = _PHASE.set(name)
    try:
        yield
    except Exception as error:
        current = _CURRENT.get()
        if isinstance(error, CutShort) or current is None or not current.expired():
            raise
        raise CutShort(current.seconds, name) from error
    finally:
        _PHASE.reset(token)


def expired() -> bool:
    current = _CURRENT.get()
    return current is not None and current.expired()


def check() -> None:
    """Raise `CutShort` once the current generation's deadline has passed."""
    current = _CURRENT.get()
    if current is not None and time.monotonic() >= current.at:  # `Deadline.expired`, inline: asked a million times a run
        raise CutShort(current.seconds, _PHASE.get())


@contextmanager
def bounded_source(connection: Any, kind: str) -> Iterator[None]:
    """Reading a SQLite source: a query still running at the deadline is interrupted (it fails as
    `sqlite3.OperationalError`; the next `check()` says why). Other kinds: nothing to install."""
    current = _CURRENT.get()
    if current is None or kind != "sqlite" or not isinstance(connection, sqlite3.Connection):
        yield
        return
    connection.set_progress_handler(lambda: 1 if current.expired() else 0, SOURCE_STEPS)
    try:
        yield
    finally:
        connection.set_progress_handler(None, SOURCE_STEPS)
