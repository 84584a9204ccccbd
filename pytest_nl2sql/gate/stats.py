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


EXACT_UP_TO = 2048  # discordant pairs up to which the tail is summed in integers, exactly


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: P(as unbalanced a split of b + c fair coin flips).

    Up to `EXACT_UP_TO` discordant pairs the binomial tail is summed exactly in integers (one
    term from the last by a multiplication and a division each); beyond, in floating point from
    its largest term down (its logarithm from `lgamma`), stopping once the terms no longer move the
    sum: a few hundred terms for 20,000 pairs, relative error about 1e-11. Never a sum of
    binomial coefficients each computed afresh, which took minutes at that size.
    No discordant pair at all gives 1.0 (nothing changed).
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    low = min(b, c)
    if 2 * low >= n:  # b == c: the most balanced split there is
        return 1.0
    if n <= EXACT_UP_TO:
        term = tail = 1  # C(n, 0)
        for k in range(1, low + 1):
            term = term * (n - k + 1) // k  # C(n, k), exact
            tail += term
        return float(min(Fraction(1), Fraction(2 * tail, 2**n)))
    return _binomial_tail_p(n, low)


def _binomial_tail_p(n: int, low: int) -> float:
    """2 * P(X <= low) for X ~ Binomial(n, 1/2), low < n / 2, in floating point."""
    log_largest = math.lgamma(n + 1) - math.lgamma(low + 1) - math.lgamma(n - low + 1) - n * math.log(2)
    ratio = total = 1.0  # the terms relative to the largest, C(n, low), going down in k
    for k in range(low, 0, -1):
        ratio *= k / (n - k + 1)
        total += ratio
        if ratio < 1e-17 * total:
            break
    log_p = math.log(2) + log_largest + math.log(total)
    return 1.0 if log_p >= 0 else math.exp(log_p)


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
