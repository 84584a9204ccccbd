"""Per-query overhead of our guarded SQLite engine against a bare `sqlite3` call.

Runs every Spider dev gold query (`dev_gold.sql`) through
1. a bare `sqlite3.connect(path)` + `execute` + `fetchall` (one cached connection per database,
   as the official evaluator would do if it cached), with and without the statement cache;
2. the guarded connection in this process (`worker_child.SqliteSession`: read-only URI,
   authorizer, progress handler, text factory; rows counted with `SizeBudget`), which is what
   `SqliteEngine` did before queries moved to a worker process ("in-process guards");
3. `EngineCache.get(...).execute(sql, Limits())`: the same guards in the shared worker process,
   one round trip over a pipe per query, with the engine's reuse of deterministic results off
   ("SqliteEngine (worker)") and on ("... results reused"; each round starts with none kept, as
   a session does: a third of the dev golds repeat an earlier one),
and prints the totals, the mean per-query differences and the ratios to the in-process guards.
All run the same queries in the same order, several rounds, and the best round counts (less
noise on a shared machine).

    python benchmarks/engine_overhead.py [SPIDER_DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest_nl2sql.engines.sqlite as sqlite_engine  # noqa: E402
from pytest_nl2sql.engines import EngineCache, EngineError, Limits  # noqa: E402
from pytest_nl2sql.engines.base import SizeBudget  # noqa: E402
from pytest_nl2sql.engines.worker_child import Refusal, SqliteSession  # noqa: E402

DEFAULT_SPIDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "spider"


def load_golds(spider: Path) -> list[tuple[Path, str]]:
    """(database path, gold SQL) for every dev gold whose database exists."""
    pairs = []
    for line in (spider / "dev_gold.sql").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        sql, _, db_id = line.rpartition("\t")
        path = spider / "database" / db_id / f"{db_id}.sqlite"
        if path.exists():
            pairs.append((path, sql))
    return pairs


Runner = tuple[Callable[[], None], Callable[[], None]]


def bare_runner(pairs: list[tuple[Path, str]], cached_statements: int = 128) -> Runner:
    connections: dict[Path, sqlite3.Connection] = {}

    def run() -> None:
        for path, sql in pairs:
            conn = connections.get(path)
            if conn is None:
                conn = sqlite3.connect(path, cached_statements=cached_statements)
                connections[path] = conn
                conn.text_factory = lambda b: b.decode(errors="ignore")
            conn.execute(sql).fetchall()

    def close() -> None:
        for conn in connections.values():
            conn.close()

    return run, close


def engine_runner(pairs: list[tuple[Path, str]], reuse: bool = False) -> Runner:
    cache = EngineCache()
    limits = Limits()
    failures: list[str] = []
    cache_bytes = sqlite_engine.RESULT_CACHE_BYTES

    def run() -> None:
        # engines opened without a result cache never reuse; the others start each round empty
        sqlite_engine.RESULT_CACHE_BYTES = cache_bytes if reuse else 0
        sqlite_engine._RESULTS.clear()
        try:
            for path, sql in pairs:
                try:
                    cache.get(str(path), None).execute(sql, limits)
                except EngineError as error:  # keep going; failures are reported below
                    failures.append(f"{path.stem}: {error}")
        finally:
            sqlite_engine.RESULT_CACHE_BYTES = cache_bytes

    def close() -> None:
        cache.close_all()
        if failures:
            print(f"  engine errors: {len(failures)} (first: {failures[0]})")

    return run, close


def inprocess_runner(pairs: list[tuple[Path, str]]) -> Runner:
    """The guards without the worker process: what the engine cost before it had one."""
    sessions: dict[Path, SqliteSession] = {}
    limits = Limits()
    failures: list[str] = []

    def run() -> None:
        for path, sql in pairs:
            session = sessions.get(path)
            if session is None:
                session = sessions[path] = SqliteSession(str(path), "backslashreplace")
            try:
                _, rows, done, _ = session.run(
                    sql, limits.timeout, limits.timeout, limits.max_rows, limits.max_value_bytes
                )
                budget = SizeBudget(limits)
                while True:
                    for row in rows:
                        budget.add(row)
                    if done:
                        break
                    rows, done = session.more()
            except (Refusal, EngineError) as error:
                failures.append(f"{path.stem}: {error}")

    def close() -> None:
        for session in sessions.values():
            session.close()
        if failures:
            print(f"  in-process errors: {len(failures)} (first: {failures[0]})")

    return run, close


def best_of(rounds: int, runners: dict[str, Runner]) -> dict[str, float]:
    """Best wall time of each runner; rounds alternate between runners so noise hits all alike."""
    for run, _ in runners.values():
        run()  # warm-up: opens connections, as a real session would
    best = dict.fromkeys(runners, float("inf"))
    for _ in range(rounds):
        for name, (run, _) in runners.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    for _, close in runners.values():
        close()
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spider", nargs="?", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not (args.spider / "dev_gold.sql").exists():
        print(f"no Spider data at {args.spider}; nothing to measure")
        return 0
    pairs = load_golds(args.spider)
    n = len(pairs)
    print(f"{n} Spider dev gold queries on {len({p for p, _ in pairs})} databases, "
          f"best of {args.rounds} rounds, SQLite {sqlite3.sqlite_version}")
    best = best_of(
        args.rounds,
        {
            "bare sqlite3 (statement cache on)": bare_runner(pairs),
            "bare sqlite3 (no statement cache)": bare_runner(pairs, cached_statements=0),
            IN_PROCESS: inprocess_runner(pairs),
            WORKER: engine_runner(pairs),
            REUSED: engine_runner(pairs, reuse=True),
        },
    )
    for name, seconds in best.items():
        print(f"  {name:38s}: {seconds * 1e3:7.1f} ms total, {seconds / n * 1e6:6.1f} us/query")
    before = best[IN_PROCESS]
    for name in (WORKER, REUSED):
        print(
            f"  {name} vs {IN_PROCESS}: {(best[name] - before) / n * 1e6:+6.1f} us/query,"
            f" ratio {best[name] / before:.2f}"
        )
    return 0


IN_PROCESS = "in-process guards (before)"
WORKER = "SqliteEngine (worker)"
REUSED = "SqliteEngine (worker, results reused)"


if __name__ == "__main__":
    raise SystemExit(main())
