"""The little statistics the reports need, exact and without scipy.

McNemar's exact test asks whether a change in accuracy between two runs on the *same* cases could
be noise: only the discordant pairs count (b: passed before, fails now; c: failed before, passes
now), and under "no real change" each of them is a fair coin flip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

SIGNIFICANCE = 0.05  # the level at which the summary calls a change distinguishable from noise


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: P(as unbalanced a split of b + c fair coin flips).

    Computed with exact integer arithmetic, so it is correct for any number of cases.
    No discordant pair at all gives 1.0 (nothing changed).
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


def is_significant(p_value: float, level: float = SIGNIFICANCE) -> bool:
    return p_value < level


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between ranks (numpy's default).

    None for no values, so that a report can say "n/a" instead of inventing a latency.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be between 0 and 100, got {q}")
    ordered = sorted(values)
    if not ordered:
        return None
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return float(ordered[low])
    weight = position - low
    return float(ordered[low] + (ordered[high] - ordered[low]) * weight)


def latency_percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50 and p95 of predictor latencies, in the units given (seconds in our reports)."""
    return {"p50": percentile(values, 50), "p95": percentile(values, 95)}


def wilson_interval(passed: int, total: int, z: float = 1.959964) -> tuple[float, float] | None:
    """The Wilson score interval of an accuracy (95% by default): unlike the normal approximation
    it stays inside [0, 1] and is honest for small suites and for accuracies near 0 or 1."""
    if total <= 0:
        return None
    p = passed / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    low, high = max(0.0, centre - half), min(1.0, centre + half)
    return (0.0 if passed == 0 else low), (1.0 if passed == total else high)  # exact at the ends, no rounding noise
