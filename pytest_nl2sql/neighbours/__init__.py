"""Neighbour databases: small databases derived from a case's own database and gold query, on
which wrong SQL that happens to return the gold's rows on the real data shows itself (test-suite
accuracy, Zhong, Yu and Klein, EMNLP 2020). A prediction passes only if it matches the gold on
the real database and on every neighbour where the gold runs.

    neighbours_for(source, golds, count, cache_dir=...)  -> the neighbours (cached on disk)
    shrink_counterexample(neighbour, differs)            -> the few rows that still tell two queries apart

Modules: `schema` (reading the source), `literals` (reading the gold), `values` (values next to
literals, stored as a column stores them), `generate` (one candidate's rows, repaired to respect
the constraints, and written), `mutants` and `distill` (keeping the candidates that separate the
gold's mutants), `build` (the whole generation), `cache` (on disk), `shrink` (counterexamples),
`interrupts` (a Ctrl-C inside DuckDB, which runs in pytest's thread here, still stops the run).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_nl2sql.neighbours.cache import Neighbour
    from pytest_nl2sql.neighbours.shrink import Counterexample, shrink_counterexample

GENERATOR_VERSION = "20"  # the cache's key: bumped whenever generation changes
# The random draws' salt, kept across versions: a new seed alone moves a few verdicts either way,
# so a change of rules, measured at the same seed, moves only what the rules move.
GENERATOR_SEED = "13"

# The generator's modules load on first use, not with the package: a run without neighbours (whose
# judging imports `literals`, `schema`, `invariants`) never needs them (~0.1 s of every start-up)
_LAZY = {"Neighbour": "cache", "Counterexample": "shrink", "shrink_counterexample": "shrink"}


def __getattr__(name: str) -> Any:
    if name == "NeighbourCache":
        value: Any = _versioned_cache()
    elif name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value


@functools.cache  # one class
def _versioned_cache() -> type:
    from pytest_nl2sql.neighbours.cache import NeighbourCache as Cache

    class NeighbourCache(Cache):
        """Neighbours cached under `cache_dir`, for this generator version."""

        def __init__(self, cache_dir: Path, *, time_limit: float | None = None) -> None:
            super().__init__(cache_dir, GENERATOR_VERSION, seed=GENERATOR_SEED, time_limit=time_limit)

    NeighbourCache.__module__, NeighbourCache.__qualname__ = __name__, "NeighbourCache"
    return NeighbourCache


def neighbours_for(source: Path, golds: Sequence[str], count: int, *, cache_dir: Path, dialect: str = "sqlite",
                   kind: str = "sqlite") -> tuple[Neighbour, ...]:
    """Up to `count` neighbours of `source` for these golds (see `NeighbourCache.neighbours_for`).
    A caller that asks often should keep one `NeighbourCache`, which remembers source hashes."""
    cache = _versioned_cache()(cache_dir)
    return cache.neighbours_for(source, golds, count, dialect=dialect, kind=kind)  # type: ignore[no-any-return]


__all__ = ["GENERATOR_VERSION", "Counterexample", "Neighbour", "NeighbourCache", "neighbours_for", "shrink_counterexample"]
