"""Comparing results too big for memory (issue 11): peak memory and time of `judge_large` on
results of 1,000,000 and 2,000,000 rows, on SQLite and DuckDB.

Each size runs in a fresh subprocess, so its peak RSS (`ru_maxrss`) is its own; the database
worker's peak (a child of that subprocess, reaped before it is read) is shown beside it. Per size:
an equal result (columns permuted, rows reversed) compared with the gold, and the same result with
one value changed among all rows, whose diff must show that one row as missing and extra. The
prediction calls `instr()`, so on SQLite it runs in the worker process (the gold in this one).

    python benchmarks/large_results.py [--sizes 1000000 2000000] [--engines sqlite duckdb]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GOLD = "SELECT id, name, grp FROM t"
EQUAL = "SELECT grp, id, name FROM t WHERE instr(name, 'x') = 0 ORDER BY id DESC"


def build(engine: str, rows: int, folder: Path) -> Path:
    """A table of `rows` rows: id, name (text), grp (10 values)."""
    if engine == "sqlite":
        path = folder / f"large_{rows}.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, grp INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", ((i, f"name{i * 7 % 100_003}", i % 10) for i in range(rows)))
        conn.commit()
        conn.close()
        return path
    import duckdb

    path = folder / f"large_{rows}.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(f"CREATE TABLE t AS SELECT range AS id, 'name' || (range * 7 % 100003) AS name,"
                 f" range % 10 AS grp FROM range({rows})")
    conn.close()
    return path


def measure(engine_name: str, path: Path, rows: int) -> dict:
    """In the fresh subprocess: the two comparisons, their times and the peak RSS."""
    from pytest_nl2sql.engines import worker
    from pytest_nl2sql.engines.base import Limits
    from pytest_nl2sql.judge.compare import CompareOptions
    from pytest_nl2sql.judge.large import judge_large

    if engine_name == "sqlite":
        from pytest_nl2sql.engines.sqlite import SqliteEngine

        engine = SqliteEngine(path)
    else:
        from pytest_nl2sql.engines.duckdb import DuckdbEngine

        engine = DuckdbEngine(path)
    limits = Limits(timeout=120.0, max_rows=10 * rows, memory_rows=200_000)
    options = CompareOptions()
    out: dict = {"engine": engine_name, "rows": rows}
    started = time.perf_counter()
    equal = judge_large(EQUAL, GOLD, engine, limits, order_matters=False, options=options)
    out["equal_seconds"] = round(time.perf_counter() - started, 2)
    out["equal_verdict"] = equal.verdict.value
    changed_id = rows * 7 // 9  # 777,777 of 1,000,000
    changed = EQUAL.replace("SELECT grp,", f"SELECT CASE WHEN id = {changed_id} THEN -1 ELSE grp END,")
    started = time.perf_counter()
    differs = judge_large(changed, GOLD, engine, limits, order_matters=False, options=options)
    out["one_value_seconds"] = round(time.perf_counter() - started, 2)
    comparison = differs.comparison
    out["one_value_verdict"] = differs.verdict.value
    out["missing"] = [list(r) for r in comparison.missing]
    out["extra"] = [list(r) for r in comparison.extra]
    out["counts"] = [comparison.missing_count, comparison.extra_count]
    engine.close()
    worker._shutdown_all()  # reap the workers, so that their peak is in RUSAGE_CHILDREN
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["worker_peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 2_000_000])
    parser.add_argument("--engines", nargs="+", default=["sqlite", "duckdb"])
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "PATH", "ROWS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, path, rows = args.child
        print(json.dumps(measure(name, Path(path), int(rows))))
        return
    engines = [e for e in args.engines if e != "duckdb" or importlib.util.find_spec("duckdb")]
    print(f"{'engine':8} {'rows':>9} {'equal s':>8} {'1-value s':>9} {'peak RSS':>9} {'worker RSS':>10}  diff")
    with tempfile.TemporaryDirectory() as folder:
        for engine in engines:
            for rows in args.sizes:
                path = build(engine, rows, Path(folder))
                result = subprocess.run([sys.executable, __file__, "--child", engine, str(path), str(rows)],
                                        capture_output=True, text=True, check=True)
                r = json.loads(result.stdout.strip().splitlines()[-1])
                assert r["equal_verdict"] == "pass", r
                assert r["one_value_verdict"] == "mismatch" and r["counts"] == [1, 1], r
                print(f"{engine:8} {rows:>9} {r['equal_seconds']:>8} {r['one_value_seconds']:>9}"
                      f" {r['peak_rss_mib']:>6} MiB {r['worker_peak_rss_mib']:>6} MiB"
                      f"  missing {r['missing']} extra {r['extra']}", flush=True)
                path.unlink()


if __name__ == "__main__":
    main()
