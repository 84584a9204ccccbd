"""McNemar's exact test and the latency percentiles."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_nl2sql.gate.stats import is_significant, latency_percentiles, mcnemar_exact, percentile

try:
    import numpy
except ImportError:  # numpy is the oracle of the dev extra; the check is only skipped without it
    numpy = None


def minimum_likelihood_p(b: int, c: int) -> Fraction:
    """Independent definition: total probability of the splits no likelier than the one seen."""
    n = b + c
    pmf = [Fraction(math.comb(n, k), 2**n) for k in range(n + 1)]
    return sum((p for p in pmf if p <= pmf[b]), Fraction(0))


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 5, 0.0625),  # 2 / 2**5
        (1, 9, 0.021484375),  # 2 * (1 + 10) / 2**10
        (5, 0, 0.0625),
        (3, 3, 1.0),
        (0, 1, 1.0),
        (0, 0, 1.0),  # nothing changed
        (2, 8, 0.109375),  # 2 * (1 + 10 + 45) / 1024
    ],
)
def test_known_values(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == expected


@given(st.integers(0, 60), st.integers(0, 60))
def test_matches_the_minimum_likelihood_definition(b: int, c: int) -> None:
    if b + c == 0:
        assert mcnemar_exact(b, c) == 1.0
    else:
        assert mcnemar_exact(b, c) == float(min(Fraction(1), minimum_likelihood_p(b, c)))


@given(st.integers(0, 500), st.integers(0, 500))
def test_symmetric_and_a_probability(b: int, c: int) -> None:
    p = mcnemar_exact(b, c)
    assert p == mcnemar_exact(c, b)
    assert 0 < p <= 1


def test_large_counts_stay_exact_and_tiny() -> None:
    p = mcnemar_exact(0, 2000)  # 2 / 2**2000 underflows to 0.0 as a float, but stays >= 0
    assert 0 <= p < 1e-300
    assert mcnemar_exact(400, 600) < 1e-9
    assert is_significant(mcnemar_exact(400, 600))
    assert not is_significant(mcnemar_exact(5, 6))


def test_negative_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        mcnemar_exact(-1, 3)


@pytest.mark.skipif(numpy is None, reason="numpy is not installed")
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_agrees_with_numpy(values: list[float], q: float) -> None:
    assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)), rel=1e-9, abs=1e-9)


def test_percentile_edges() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    assert percentile([4, 1, 3, 2], 50) == 2.5  # unsorted input
    assert latency_percentiles([1, 2, 3, 4, 5]) == {"p50": 3.0, "p95": 4.8}
    assert latency_percentiles([]) == {"p50": None, "p95": None}
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_wilson_interval_known_values() -> None:
    from pytest_nl2sql.gate.stats import wilson_interval

    assert wilson_interval(0, 0) is None
    low, high = wilson_interval(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert wilson_interval(0, 10)[0] == 0.0 and round(wilson_interval(0, 10)[1], 4) == 0.2775
    assert round(wilson_interval(10, 10)[0], 4) == 0.7225 and wilson_interval(10, 10)[1] == 1.0
