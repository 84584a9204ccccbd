"""A model in the loop: a predictor that takes `--sleep` seconds per case (a real model answers in
about a second), `--cases` cases, sequential against `--nl2sql-concurrency=N`, plain and async hooks.

Run from the repo root: ``python benchmarks/concurrency.py [--cases 200] [--sleep 0.5] [--concurrency 16]``.
Prints the wall time of each run (the whole pytest process) and its ratio to the sequential run of
the same hook; the issue's target is at most 10%.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOOKS = {
    "plain": "import time\ndef pytest_nl2sql_predict(case):\n    time.sleep({sleep})\n    return 'SELECT count(id) FROM item'\n",
    "async": "import asyncio\nasync def pytest_nl2sql_predict(case):\n    await asyncio.sleep({sleep})\n    return 'SELECT count(id) FROM item'\n",
}


def run(directory: Path, *args: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=directory,
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        con = sqlite3.connect(root / "shop.sqlite")
        con.executescript("CREATE TABLE item(id INTEGER PRIMARY KEY); INSERT INTO item VALUES (1), (2);")
        con.commit()
        con.close()
        lines = ["database: shop.sqlite", "cases:"]
        lines += [f"  - {{id: c{n:04d}, question: 'q {n}', gold: 'SELECT count(*) FROM item'}}" for n in range(args.cases)]
        (root / "s.nl2sql.yaml").write_text("\n".join(lines) + "\n")
        print(f"{args.cases} cases, predictor sleeping {args.sleep}s per case")
        for name, hook in HOOKS.items():
            (root / "conftest.py").write_text(hook.format(sleep=args.sleep))
            sequential = run(root)
            concurrent = run(root, f"--nl2sql-concurrency={args.concurrency}")
            print(f"{name:>5} hook: sequential {sequential:7.2f}s, concurrency {args.concurrency}: {concurrent:6.2f}s "
                  f"= {100 * concurrent / sequential:.1f}% of sequential")


if __name__ == "__main__":
    main()
