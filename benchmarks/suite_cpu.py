"""Where the project's own test suite spends its time: each test's CPU (its process and the
children it reaped) and wall time, from every xdist worker.

As a pytest plugin, from the repo root (benchmarks/ on the path)::

    rm -rf /tmp/suite-cpu && PYTHONPATH=benchmarks SUITE_CPU_DIR=/tmp/suite-cpu python -m pytest -n 2 -p suite_cpu

then the summary (the costliest files and tests, and the totals)::

    python benchmarks/suite_cpu.py /tmp/suite-cpu [--most 40]

A child's CPU counts where it is reaped (a worker process kept across tests is counted in the test
that ends it), so the per-test figures of long-lived children are approximate; the totals are not.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections import defaultdict
from pathlib import Path

import pytest


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # noqa: ARG001
    own, children = _cpu()
    started = time.perf_counter()
    yield
    own_after, children_after = _cpu()
    wall = time.perf_counter() - started
    folder = Path(os.environ.get("SUITE_CPU_DIR", "suite-cpu"))
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.tsv", "a", encoding="utf-8") as out:
        out.write(f"{item.nodeid}\t{own_after - own:.3f}\t{children_after - children:.3f}\t{wall:.3f}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--most", type=int, default=25)
    args = parser.parse_args()
    rows = [line.rstrip("\n").split("\t") for path in sorted(args.folder.glob("*.tsv")) for line in path.open(encoding="utf-8")]
    tests = [(nodeid, float(own), float(children), float(wall)) for nodeid, own, children, wall in rows]
    own, children, wall = (sum(t[i] for t in tests) for i in (1, 2, 3))
    print(f"{len(tests)} tests: {own:.1f} s of CPU in the test processes, {children:.1f} s in their children, "
          f"{wall:.1f} s of wall time summed over the workers")
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for nodeid, own_s, children_s, wall_s in tests:
        totals = by_file[nodeid.split("::")[0]]
        totals[0] += own_s + children_s
        totals[1] += wall_s
        totals[2] += 1
    print(f"\nthe {args.most} costliest files (CPU s, wall s, tests):")
    for name, (cpu_s, wall_s, count) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:args.most]:
        print(f"  {cpu_s:7.1f} {wall_s:7.1f} {int(count):5d}  {name}")
    print(f"\nthe {args.most} costliest tests (own CPU s, children's CPU s, wall s):")
    for nodeid, own_s, children_s, wall_s in sorted(tests, key=lambda t: -(t[1] + t[2]))[:args.most]:
        print(f"  {own_s:6.2f} {children_s:6.2f} {wall_s:6.2f}  {nodeid}")


if __name__ == "__main__":
    main()
