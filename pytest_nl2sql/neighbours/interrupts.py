"""Ctrl-C while DuckDB runs in pytest's own thread: neighbour generation reads the source, writes
candidates and runs gold and mutants there (`schema.DuckdbSource`, `generate.create_duckdb`,
`distill.run_query`), and so does the shrinking of a counterexample.

DuckDB's Python client notices the signal inside its C code and ends the query with
`RuntimeError("Query interrupted")`, having consumed the KeyboardInterrupt (a connection
interrupted by `interrupt()` raises `duckdb.InterruptException`, which some versions raise for the
signal too). An `except` meant for a query's own failure then swallows the user's Ctrl-C (a
candidate dropped, the run going on and saying it completed) or reports it as the case's crash
(FAILED, `Query interrupted`). Turned back into KeyboardInterrupt, it stops the run as any Ctrl-C
stops pytest.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


def is_interrupt(error: BaseException) -> bool:
    """Whether `error` is DuckDB's report of an interrupted query (a signal, or `interrupt()`)."""
    if isinstance(error, RuntimeError) and str(error).startswith("Query interrupted"):
        return True
    duckdb = sys.modules.get("duckdb")  # never imported here: see `build._source_errors`
    return duckdb is not None and isinstance(error, getattr(duckdb, "InterruptException", ()))


def raise_if_interrupt(error: BaseException) -> None:
    """KeyboardInterrupt in place of DuckDB's report of one; nothing for any other error. For an
    `except` that catches DuckDB's errors where nothing of ours interrupts the connection."""
    if is_interrupt(error):
        raise KeyboardInterrupt from None


@contextmanager
def ctrl_c_stops() -> Iterator[None]:
    """Around code that runs DuckDB in this thread: a Ctrl-C leaves it as KeyboardInterrupt, never
    as an error that a caller would charge to the case."""
    try:
        yield
    except Exception as error:
        raise_if_interrupt(error)
        raise
