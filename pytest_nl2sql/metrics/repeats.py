"""`--nl2sql-repeat=K`: pass@k and consistency over cases asked K times each.

pass@k is the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on
Code"): for a case with n answers of which c are right, the chance that at least one of k answers
drawn without replacement is right, `1 - C(n-c, k) / C(n, k)`, averaged over cases. Drawing from
the n answers, not taking the first k, is what makes it unbiased: pass@1 is the mean share of right
answers, not the first answer's accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that k of a case's n answers (c of them right), drawn without replacement,
    hold a right one. Exact (integer binomials), so it is the same on every machine."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, not n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def summarize_repeats(repeats: Iterable[Mapping[str, Any]]) -> tuple[dict[str, float] | None, float | None]:
    """(`pass_at_k` = {"1": …, "K": …}, `consistency`) over the cases' `repeats` items
    (`{"k", "passed", "verdicts"}`); (None, None) when no case was asked more than once. A case
    with fewer answers than some k is left out of that k's mean (it cannot estimate it)."""
    cases = [r for r in repeats if r and int(r.get("k") or 0) >= 1]
    if not cases:
        return None, None
    largest = max(int(r["k"]) for r in cases)
    means: dict[str, float] = {}
    for k in range(1, largest + 1):
        scores = [pass_at_k(int(r["k"]), int(r["passed"]), k) for r in cases if int(r["k"]) >= k]
        means[str(k)] = math.fsum(scores) / len(scores)
    steady = sum(1 for r in cases if len(set(r.get("verdicts") or ())) <= 1)
    return means, steady / len(cases)
