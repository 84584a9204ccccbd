"""Efficiency of right answers, as BIRD's R-VES scores it: a prediction that returns the gold's
rows ten times slower than the gold is a finding even though it passes.

Timings are noisy, so a verdict never depends on them. Noise only ever adds time (a cold cache,
another process), so a case whose first timings look unusual (prediction more than twice as slow
or fast as the gold) has the side that looks slow timed again, `REPEATS` timings in all, and its
fastest timing kept. Fast queries (both under `FLOOR_S`) are too short to tell apart (a
prediction also crosses a process boundary that the gold does not): they count as equally fast.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

REPEATS = 3
FLOOR_S = 0.001
SLOW = 10.0  # a prediction this many times slower than its gold is counted in the summary

# BIRD's reward by time ratio gold / prediction (the faster the prediction, the higher).
_REWARDS = ((2.0, 1.25), (1.0, 1.0), (0.5, 0.75), (0.25, 0.5))
_SLOWEST_REWARD = 0.25


def reward(gold_s: float, predicted_s: float) -> float:
    """R-VES reward of a correct prediction."""
    ratio = gold_s / predicted_s if predicted_s > 0 else float("inf")
    for bound, value in _REWARDS:
        if ratio >= bound:
            return value
    return _SLOWEST_REWARD


@dataclass(frozen=True)
class Efficiency:
    gold_s: float
    predicted_s: float
    repeats: int  # how many timings the slower-looking side's time is the fastest of

    @property
    def slowdown(self) -> float:
        """How many times slower than the gold the prediction ran (below 1: faster)."""
        if max(self.gold_s, self.predicted_s) < FLOOR_S or self.gold_s <= 0:
            return 1.0  # too short to tell
        return self.predicted_s / self.gold_s

    def to_json(self) -> dict[str, Any]:
        return {"gold_s": round(self.gold_s, 6), "predicted_s": round(self.predicted_s, 6),
                "slowdown": round(self.slowdown, 3), "reward": reward(1.0, self.slowdown),
                "repeats": self.repeats}


def measure(gold_s: float, predicted_s: float, time_gold: Callable[[], float], time_predicted: Callable[[], float]) -> Efficiency:
    """The efficiency of a right prediction from its first timings; when they look unusual, the
    side that looks slow is timed again and its fastest timing kept."""
    ratio = predicted_s / gold_s if gold_s > 0 else 1.0
    if 0.5 <= ratio <= 2.0 or max(gold_s, predicted_s) < FLOOR_S:
        return Efficiency(gold_s, predicted_s, 1)
    if ratio > 2.0:
        predicted_s = min(predicted_s, *(time_predicted() for _ in range(REPEATS - 1)))
    else:
        gold_s = min(gold_s, *(time_gold() for _ in range(REPEATS - 1)))
    return Efficiency(gold_s, predicted_s, REPEATS)


def summarize_efficiency(cases: Iterable[tuple[bool, dict[str, Any] | None]]) -> dict[str, Any] | None:
    """R-VES over judged SQL cases (`(passed, efficiency json)`): the mean reward, a wrong or
    untimed case counting 0; and how many right predictions ran `SLOW` times slower than the gold."""
    cases = list(cases)
    timed = [e for passed, e in cases if passed and e]
    if not timed:
        return None
    return {
        "r_ves": sum(e["reward"] for e in timed) / len(cases),
        "timed": len(timed),
        "slower_10x": sum(1 for e in timed if e["slowdown"] >= SLOW),
        "median_slowdown": statistics.median(e["slowdown"] for e in timed),
    }
