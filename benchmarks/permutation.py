"""How long the column-permutation search takes on wide, repetitive and adversarial results.

Each scenario is compared several times and the best time counts (less noise on a shared machine).
The official test-suite-sql-eval loop over `itertools.product` of candidate columns would need
up to 30! tries on the first scenario; ours must stay in milliseconds everywhere.

    python benchmarks/permutation.py [--rounds N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_nl2sql.judge.compare import CompareOptions, compare_results  # noqa: E402


def shuffled_columns(rows: list[tuple], rng: random.Random) -> list[tuple]:
    perm = list(range(len(rows[0])))
    rng.shuffle(perm)
    return [tuple(r[p] for p in perm) for r in rows]


def scenarios() -> list[tuple[str, Callable[[], object], bool]]:
    """(name, comparison to time, expected verdict)."""
    rng = random.Random(7)
    identical = [tuple([1] * 30) for _ in range(200)]
    small = [tuple(rng.choice([0, 1, 2]) for _ in range(12)) for _ in range(500)]
    small_pred = shuffled_columns(small, rng)
    small_broken = list(small_pred)
    small_broken[17] = tuple(x + 1 for x in small_broken[17])
    # every column a rotation of the same values: equal signatures, only the rows tell them apart
    rotations = [tuple((i + k) % 16 for k in range(16)) for i in range(2000)]
    rotations_pred = shuffled_columns(rotations, rng)
    # two groups of interchangeable columns plus distinct ones
    mixed = [tuple([i % 3] * 10 + [i % 5] * 10 + [i, -i]) for i in range(1000)]
    mixed_pred = shuffled_columns(mixed, rng)
    wide = [tuple(rng.randint(0, 9) for _ in range(40)) for _ in range(5000)]
    wide_pred = shuffled_columns(wide, rng)
    tolerant = [tuple(rng.choice([0.5, 1.5, 2.5]) + rng.random() * 1e-4 for _ in range(8)) for _ in range(300)]
    tolerant_pred = shuffled_columns([tuple(v + 1e-6 for v in r) for r in tolerant], rng)
    tol = CompareOptions(abs_tol=1e-3)
    return [
        ("30 identical columns x 200 rows", lambda: compare_results(identical, list(identical)), True),
        ("12 shuffled columns x 500 rows, values {0,1,2}", lambda: compare_results(small, small_pred), True),
        ("same, one row broken", lambda: compare_results(small, small_broken), False),
        ("16 rotated columns x 2000 rows (equal signatures)", lambda: compare_results(rotations, rotations_pred), True),
        ("22 columns in 2 interchangeable groups x 1000 rows", lambda: compare_results(mixed, mixed_pred), True),
        ("40 shuffled columns x 5000 rows", lambda: compare_results(wide, wide_pred), True),
        ("same, ordered", lambda: compare_results(wide, wide_pred, order_matters=True), True),
        ("spider mode, 40 columns x 5000 rows",
         lambda: compare_results(wide, wide_pred, options=CompareOptions(mode="spider")), True),
        ("8 float columns x 300 rows, abs_tol", lambda: compare_results(tolerant, tolerant_pred, options=tol), True),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'scenario':55} {'verdict':>8} {'best ms':>9}")
    for name, run, expected in scenarios():
        best, verdict = float("inf"), None
        for _ in range(args.rounds):
            start = time.perf_counter()
            verdict = bool(run())
            best = min(best, time.perf_counter() - start)
        flag = "" if verdict == expected else "   <-- WRONG VERDICT"
        print(f"{name:55} {str(verdict):>8} {best * 1000:9.2f}{flag}")


if __name__ == "__main__":
    main()
