"""Comparing results too big for memory (issues 11 and 20): CPU time and peak memory of `judge_large`
on results of 1,000,000 and 2,000,000 rows, compared inside the engine (`judge/in_engine.py`) and
streamed through Python (`judge/large.py`, its fallback), side by side, on SQLite, DuckDB,
PostgreSQL and MariaDB.

Each (engine, size, method) runs in a fresh subprocess, so its peak RSS (`VmHWM`) is its own (the
databases are built in another, so that this process stays small: a child's `ru_maxrss` counts
what it inherited); the database worker's peak (a child of that subprocess, reaped before its
`ru_maxrss` is read) is shown beside it, and for PostgreSQL the server backend's (`VmHWM`; the
server is on this machine, and its shared buffers count as they are touched). CPU is this
process's plus its workers' (read from /proc around each comparison), plus the PostgreSQL backend's,
or the whole MariaDB server's (`mariadbd`, one process of threads: any other client's work on it
counts too). For MariaDB the server column is how far the comparisons raised the server's own peak
RSS (`VmHWM` after minus before: its buffer pool is allocated once, sorts and temporary tables come
and go).
Per size: an equal result (columns permuted, rows reversed) compared with the gold, and the same
result with one value changed, whose diff must show that one row as missing and extra. The
prediction calls `instr()` (`strpos()` on PostgreSQL), so on SQLite it runs in the worker process.

`--methods pytest` (SQLite and DuckDB files) runs the same two comparisons as a user meets them:
a suite of two cases (the reordered copy, the copy with one changed value) through `python -m
pytest` with `--nl2sql-max-rows` above the size, the default neighbours and an empty neighbour
cache (a first run): CPU of pytest and every process it reaped (its database worker), wall time
and the largest process's peak RSS.

PostgreSQL needs the loopback server (127.0.0.1:5432, trust auth, database `test`), MariaDB its own
(127.0.0.1:3306, root without a password): a database of its own is made for the run and dropped
after it; an engine is skipped when its server is absent. The MariaDB prediction calls `instr()` too.

    python benchmarks/large_results.py [--sizes 1000000 2000000] [--engines sqlite duckdb postgres mariadb]
                                       [--methods in-engine streamed pytest]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GOLD = "SELECT id, name, grp FROM t"
EQUAL = "SELECT grp, id, name FROM t WHERE instr(name, 'x') = 0 ORDER BY id DESC"
PG_HOST = "127.0.0.1:5432"
MY_HOST, MY_PORT = "127.0.0.1", 3306


def _mariadb_admin() -> Any:
    import pymysql

    return pymysql.connect(host=MY_HOST, port=MY_PORT, user="root", password="", autocommit=True)


def build(engine: str, rows: int, folder: Path) -> str:
    """A table of `rows` rows: id, name (text), grp (10 values); returns how to reach it."""
    if engine == "sqlite":
        path = folder / f"large_{rows}.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, grp INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", ((i, f"name{i * 7 % 100_003}", i % 10) for i in range(rows)))
        conn.commit()
        conn.close()
        return str(path)
    if engine == "postgres":
        import psycopg

        name = f"nl2sql_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(f"postgresql://postgres@{PG_HOST}/test", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        url = f"postgresql://postgres@{PG_HOST}/{name}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT, grp INTEGER)")
            conn.execute(f"INSERT INTO t SELECT g, 'name' || (g * 7 % 100003), g % 10 FROM generate_series(0, {rows - 1}) g")
            conn.execute("VACUUM ANALYZE t")
        return url
    if engine == "mariadb":
        name = f"nl2sql_bench_{uuid.uuid4().hex[:10]}"
        admin = _mariadb_admin()
        try:
            with admin.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE `{name}`")
                cursor.execute(f"USE `{name}`")
                cursor.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT, grp INTEGER)")
                cursor.execute("INSERT INTO t SELECT seq, CONCAT('name', seq * 7 % 100003), seq % 10"
                               f" FROM seq_0_to_{rows - 1}")  # the Sequence engine's table of 0 .. rows - 1
                cursor.execute("ANALYZE TABLE t")
        finally:
            admin.close()
        return f"mysql://root@{MY_HOST}:{MY_PORT}/{name}"
    import duckdb

    path = folder / f"large_{rows}.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(f"CREATE TABLE t AS SELECT range AS id, 'name' || (range * 7 % 100003) AS name,"
                 f" range % 10 AS grp FROM range({rows})")
    conn.close()
    return str(path)


def drop(engine: str, where: str) -> None:
    if engine == "postgres":
        import psycopg

        with psycopg.connect(f"postgresql://postgres@{PG_HOST}/test", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{where.rsplit("/", 1)[1]}" WITH (FORCE)')
    elif engine == "mariadb":
        admin = _mariadb_admin()
        try:
            with admin.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS `{where.rsplit('/', 1)[1]}`")
        finally:
            admin.close()
    else:
        Path(where).unlink()


def _peak_mib(pid: int | str = "self") -> float:
    """Peak resident memory of a process (`VmHWM`), in MiB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def _ticks(pid: int) -> float:
    """CPU seconds (user + system) of a process, from /proc; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> list[int]:
    """This process's child processes (the database workers)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == me:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                pass
    return found


class _Backends:
    """The PostgreSQL server processes of the benchmark's database (CPU and peak memory)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.database = url.rsplit("/", 1)[1]
        self.admin = psycopg.connect(f"postgresql://postgres@{PG_HOST}/test", autocommit=True)

    def pids(self) -> list[int]:
        rows = self.admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.database,)).fetchall()
        return [pid for (pid,) in rows]

    def peak_mib(self) -> float:
        return max(map(_peak_mib, self.pids()), default=0.0)


class _MariadbServer:
    """The MariaDB server process (`mariadbd`, or `mysqld`), on this machine: its CPU and peak."""

    def __init__(self) -> None:
        found = [int(entry.name) for entry in Path("/proc").iterdir()
                 if entry.name.isdigit() and _comm(entry) in ("mariadbd", "mysqld")]
        self.pid = found[0] if len(found) == 1 else None
        self.start_peak = _peak_mib(self.pid) if self.pid else 0.0

    def pids(self) -> list[int]:
        return [self.pid] if self.pid else []

    def peak_mib(self) -> float | None:
        """How far the server's peak RSS rose since this object was made (None: no server seen)."""
        return round(_peak_mib(self.pid) - self.start_peak, 1) if self.pid else None


def _comm(entry: Path) -> str:
    try:
        return (entry / "comm").read_text().strip()
    except OSError:
        return ""


def measure(engine_name: str, where: str, rows: int, method: str) -> dict:
    """In the fresh subprocess: the two comparisons, their CPU and wall times, the peaks."""
    from pytest_nl2sql.engines import worker
    from pytest_nl2sql.engines.base import Limits
    from pytest_nl2sql.judge.compare import CompareOptions
    from pytest_nl2sql.judge.large import judge_large

    equal = EQUAL
    backends: Any = None
    if engine_name == "sqlite":
        from pytest_nl2sql.engines.sqlite import SqliteEngine

        engine: Any = SqliteEngine(Path(where))
    elif engine_name == "duckdb":
        from pytest_nl2sql.engines.duckdb import DuckdbEngine

        engine = DuckdbEngine(Path(where))
    elif engine_name == "mariadb":
        from pytest_nl2sql.engines import open_engine

        engine = open_engine(where)
        backends = _MariadbServer()
    else:
        from pytest_nl2sql.engines import open_engine

        engine = open_engine(where)
        backends = _Backends(where)
        equal = EQUAL.replace("instr(name, 'x')", "strpos(name, 'x')")
    limits = Limits(timeout=600.0, max_rows=10 * rows, memory_rows=200_000)
    options = CompareOptions()
    out: dict = {"engine": engine_name, "rows": rows, "method": method}
    changed_id = rows * 7 // 9  # 777,777 of 1,000,000
    changed = equal.replace("SELECT grp,", f"SELECT CASE WHEN id = {changed_id} THEN -1 ELSE grp END,")
    for label, pred in (("equal", equal), ("one_value", changed)):
        server = backends.pids() if backends else []
        workers = _children()
        cpu = time.process_time() + sum(map(_ticks, workers)) + sum(map(_ticks, server))
        started = time.perf_counter()
        judged = judge_large(pred, GOLD, engine, limits, order_matters=False, options=options,
                             in_engine=method == "in-engine")
        out[f"{label}_seconds"] = round(time.perf_counter() - started, 2)
        workers = sorted(set(workers) | set(_children()))
        server = sorted(set(server) | set(backends.pids() if backends else []))
        out[f"{label}_cpu"] = round(time.process_time() + sum(map(_ticks, workers)) + sum(map(_ticks, server)) - cpu, 2)
        out[f"{label}_verdict"] = judged.verdict.value
        if label == "one_value":
            comparison = judged.comparison
            out["missing"] = [list(r) for r in comparison.missing]
            out["extra"] = [list(r) for r in comparison.extra]
            out["counts"] = [comparison.missing_count, comparison.extra_count]
    out["server_peak_rss_mib"] = backends.peak_mib() if backends else None
    engine.close()
    worker._shutdown_all()  # reap the workers, so that their peak is in RUSAGE_CHILDREN
    out["peak_rss_mib"] = _peak_mib()
    out["worker_peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    return out


def through_pytest(engine_name: str, where: str, rows: int) -> dict:
    """The two cases as a suite through pytest, in a fresh subprocess with an empty neighbour cache."""
    changed_id = rows * 7 // 9
    changed = EQUAL.replace("SELECT grp,", f"SELECT CASE WHEN id = {changed_id} THEN -1 ELSE grp END,")
    with tempfile.TemporaryDirectory() as folder:
        suite = Path(folder) / "large.nl2sql.yaml"
        suite.write_text(json.dumps({"database": where, "cases": [
            {"id": "reordered", "question": "Every row.", "gold": GOLD, "predicted": EQUAL},
            {"id": "one-value", "question": "Every row.", "gold": GOLD, "predicted": changed}]}))
        (Path(folder) / "pytest.ini").write_text("[pytest]\n")
        report = Path(folder) / "report.json"
        env = {**os.environ, "NL2SQL_CACHE_DIR": str(Path(folder) / "cache")}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider",
                        f"--rootdir={folder}", f"--nl2sql-max-rows={2 * rows}", "--nl2sql-timeout=600",
                        f"--nl2sql-report=json:{report}"], cwd=folder, env=env, capture_output=True, check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        items = {item["id"]: item for item in json.loads(report.read_text())["items"]}
    return {"engine": engine_name, "rows": rows, "method": "pytest", "seconds": round(wall, 2),
            "cpu": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "verdicts": [items["reordered"]["verdict"], items["one-value"]["verdict"]],
            "peak_rss_mib": round(after.ru_maxrss / 1024, 1)}


def _postgres_reachable() -> bool:
    if importlib.util.find_spec("psycopg") is None:
        return False
    host, port = PG_HOST.split(":")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError:
        return False
    return True


def _mariadb_reachable() -> bool:
    if importlib.util.find_spec("pymysql") is None:
        return False
    try:
        socket.create_connection((MY_HOST, MY_PORT), timeout=3).close()
    except OSError:
        return False
    return True


def _in_child(*args: str) -> str:
    """The last line this script prints when run with `args` (building, dropping: not in this process)."""
    result = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 2_000_000])
    parser.add_argument("--engines", nargs="+", default=["sqlite", "duckdb", "postgres", "mariadb"])
    parser.add_argument("--methods", nargs="+", default=["in-engine", "streamed", "pytest"],
                        choices=["in-engine", "streamed", "pytest"])
    parser.add_argument("--child", nargs=4, metavar=("ENGINE", "WHERE", "ROWS", "METHOD"), help=argparse.SUPPRESS)
    parser.add_argument("--build", nargs=3, metavar=("ENGINE", "FOLDER", "ROWS"), help=argparse.SUPPRESS)
    parser.add_argument("--drop", nargs=2, metavar=("ENGINE", "WHERE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, where, rows, method = args.child
        print(json.dumps(measure(name, where, int(rows), method)))
        return
    if args.build:
        print(build(args.build[0], int(args.build[2]), Path(args.build[1])))
        return
    if args.drop:
        drop(*args.drop)
        return
    engines = []
    for engine in args.engines:
        if engine == "duckdb" and not importlib.util.find_spec("duckdb"):
            print("duckdb: skipped (the duckdb package is not installed)")
        elif engine == "postgres" and not _postgres_reachable():
            print(f"postgres: skipped (no server at {PG_HOST} database test)")
        elif engine == "mariadb" and not _mariadb_reachable():
            print(f"mariadb: skipped (no server at {MY_HOST}:{MY_PORT}, or PyMySQL is not installed)")
        else:
            engines.append(engine)
    print(f"{'engine':8} {'rows':>9} {'method':9} {'equal cpu/wall s':>16} {'1-value cpu/wall s':>18}"
          f" {'peak RSS':>9} {'worker':>7} {'server':>7}  diff")
    with tempfile.TemporaryDirectory() as folder:
        for engine in engines:
            for rows in args.sizes:
                where = _in_child("--build", engine, folder, str(rows))
                try:
                    for method in args.methods:
                        if method == "pytest":
                            if engine in ("sqlite", "duckdb"):
                                r = through_pytest(engine, where, rows)
                                assert r["verdicts"] == ["pass", "mismatch"], r
                                print(f"{engine:8} {rows:>9} pytest    two cases (first run): {r['cpu']} s CPU,"
                                      f" {r['seconds']} s wall, largest process {r['peak_rss_mib']} MiB", flush=True)
                            continue
                        r = json.loads(_in_child("--child", engine, where, str(rows), method))
                        assert r["equal_verdict"] == "pass", r
                        assert r["one_value_verdict"] == "mismatch" and r["counts"] == [1, 1], r
                        peak = r["server_peak_rss_mib"]
                        server = "      -" if peak is None else f"{'+' if engine == 'mariadb' else ''}{peak:>4} MiB"
                        print(f"{engine:8} {rows:>9} {method:9} {r['equal_cpu']:>7} /{r['equal_seconds']:>7}"
                              f" {r['one_value_cpu']:>8} /{r['one_value_seconds']:>8}"
                              f" {r['peak_rss_mib']:>5} MiB {r['worker_peak_rss_mib']:>3} MiB {server}"
                              f"  missing {r['missing']} extra {r['extra']}", flush=True)
                finally:
                    _in_child("--drop", engine, where)


if __name__ == "__main__":
    main()
