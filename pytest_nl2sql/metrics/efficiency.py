"""Efficiency of right answers, as BIRD's R-VES scores it: a prediction that returns the gold's
rows ten times slower than the gold is a finding even though it passes.

Timings are noisy, so a verdict never depends on them, and the reward depends on them no more
than the measurement can tell. The first timings come from different moments (the gold's from the
item's setup, perhaps cold; the prediction's from the call), so both sides are timed again,
interleaved (gold then prediction, prediction then gold, ...: a burst of load or a warm cache
falls on both), and each side's time is its fastest re-timing (noise only ever adds time; the
first timings are left out, as a machine's speed drifts between setup and call). At least
`MIN_ROUNDS` rounds are timed, and more while the slowdown sits within `MARGIN` of a reward
boundary, up to `MAX_ROUNDS` rounds or `BUDGET_S` seconds of re-timing per case (at least one
round, however slow the queries); `UNDER_FLOOR_ROUNDS` once both sides' fastest re-timings are
under the floor, which further rounds could only lower: the two are equally fast whatever they
show (the first timings of a DuckDB query, in a run busy with other work, are 1.2-1.9 times its
re-timings: most of its re-timed cases end here). Three differences stay below what a timing can tell, and count
as equally fast: both queries under the floor (`FLOOR_S` beyond what an empty query costs on the
engine, or `OVERHEAD_FACTOR` times that cost where that is more, at most `FLOOR_CAP_S`: every query
pays the engine's fixed cost first, 15 us on SQLite, ~0.3 ms on DuckDB, whose queries cross to its
worker process and are parsed and planned, ~1 ms on PostgreSQL; a query's own work is what it takes
beyond that, and two queries whose own work is under `FLOOR_S` are too short to tell apart); timings
whose fastest did not come back (a side's second-fastest more than `STEADY`, and more than half
of `FLOOR_S`, above it: on a busy machine a fast query's timings are mostly the scheduler's tick,
and further rounds are not spent on it), unless the two sides differ by more than that noise (a
query of 0.5 s against one of 1 ms is slower however its timings scatter); and a prediction at most `TIE` times its gold's time
(the same query timed twice differs by a few per cent, and a prediction runs under guards the
trusted gold does not: BIRD's boundary at exactly 1x made an equivalent prediction a coin flip
between 1 and 0.75).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

FLOOR_S = 0.001
OVERHEAD_FACTOR = 3.0  # a query at most this many times an empty query's time is mostly the engine's overhead
FLOOR_CAP_S = 0.005  # however slow the empty query was timed (a burst of load when it was measured)
TIE = 1.2  # a prediction at most this many times slower than its gold counts as equally fast
MIN_ROUNDS = 5  # interleaved re-timings of both sides, at the least (within the budget)
UNDER_FLOOR_ROUNDS = 2  # ... unless both sides' fastest are under the floor by then (one round in each order)
MAX_ROUNDS = 15
STEADY = 0.1  # a side's fastest timing counts when its second-fastest is this close (relatively)
MARGIN = 0.1  # a slowdown this close (relatively) to a reward boundary is timed again
BUDGET_S = 0.5  # seconds of re-timing per case after which no new round starts
SLOW = 10.0  # a prediction this many times slower than its gold is counted in the summary

# BIRD's reward by time ratio gold / prediction (the faster the prediction, the higher).
_REWARDS = ((2.0, 1.25), (1.0, 1.0), (0.5, 0.75), (0.25, 0.5))
_SLOWEST_REWARD = 0.25


def reward(gold_s: float, predicted_s: float) -> float:
    """R-VES reward of a correct prediction, BIRD's table as it is."""
    ratio = gold_s / predicted_s if predicted_s > 0 else float("inf")
    for bound, value in _REWARDS:
        if ratio >= bound:
            return value
    return _SLOWEST_REWARD


def slowdown_reward(slowdown: float) -> float:
    """The reward of a measured slowdown (prediction time / gold time), a tie counting as 1x."""
    return reward(1.0, 1.0 if 1.0 <= slowdown <= TIE else slowdown)


@dataclass(frozen=True)
class Efficiency:
    gold_s: float  # the fastest timing of each side
    predicted_s: float
    repeats: int  # timings of each side its time is the fastest of (1: the first, not timed again)
    steady: bool = True  # each side's fastest timing came back (else the two count as equally fast)
    floor_s: float = FLOOR_S  # both sides under it count as equally fast (`floor_for`)
    # the prediction is the gold's own query token for token (`on_neighbours.same_query`): the same
    # statement, the same plan, equally fast by definition, so not timed again (the first timings kept)
    same_query: bool = False

    @property
    def slowdown(self) -> float:
        """How many times slower than the gold the prediction ran (below 1: faster); 1 when the
        timings cannot tell the two apart, or the two are one query."""
        if self.same_query or not self.steady:
            return 1.0
        return _slowdown(self.gold_s, self.predicted_s, self.floor_s)

    @property
    def reward(self) -> float:
        return slowdown_reward(self.slowdown)

    def to_json(self) -> dict[str, Any]:
        return {"gold_s": round(self.gold_s, 6), "predicted_s": round(self.predicted_s, 6),
                "slowdown": round(self.slowdown, 3), "reward": self.reward, "repeats": self.repeats}


def floor_for(empty_query_s: float) -> float:
    """The floor of an engine where an empty query (`SELECT 1`) takes `empty_query_s` (`inf`: it
    failed there, as on a dialect that wants `FROM DUAL`: `FLOOR_S`): `FLOOR_S` of a query's own
    work on top of the engine's fixed cost per query, which every query pays (on DuckDB ~0.3 ms,
    so that its many ~1 ms queries, mostly that cost and planning, are not timed again for a
    difference no timing there can tell), or `OVERHEAD_FACTOR` times that cost where more."""
    if not math.isfinite(empty_query_s):
        return FLOOR_S
    return min(FLOOR_CAP_S, max(FLOOR_S + empty_query_s, OVERHEAD_FACTOR * empty_query_s))


def _slowdown(gold_s: float, predicted_s: float, floor_s: float = FLOOR_S) -> float:
    if max(gold_s, predicted_s) < floor_s or gold_s <= 0:
        return 1.0  # too short to tell
    return predicted_s / gold_s


def _settled(gold_s: float, predicted_s: float, floor_s: float) -> bool:
    """The reward would be the same were the slowdown `MARGIN` off either way."""
    slowdown = _slowdown(gold_s, predicted_s, floor_s)
    return slowdown_reward(slowdown * (1 + MARGIN)) == slowdown_reward(slowdown / (1 + MARGIN))


def _steady(timings: list[float]) -> bool:
    """The fastest timing came back: the second-fastest is within `STEADY` of it, or within half
    of `FLOOR_S` (a single timing, of queries too slow to time twice, is taken as it is). On a busy
    machine a wake-up waits for the scheduler's next tick (4 ms): a 1 ms query timed five times may
    read 1 ms once and 4 ms four times, and then neither figure is its time."""
    return _spread(timings) <= max(STEADY * min(timings), FLOOR_S / 2)


def measure(gold_s: float, predicted_s: float, time_gold: Callable[[], float], time_predicted: Callable[[], float],
            *, budget_s: float = BUDGET_S, floor_s: float = FLOOR_S) -> Efficiency:
    """The efficiency of a right prediction: each side's fastest re-timing (each call times one
    more run, in seconds; a failed run is `inf`), both timed in the same stretch of time, since a
    machine's speed drifts (the first timings, seconds apart, only decide whether to time again:
    queries both under the floor then are under it, as noise only adds time). `floor_s`: the
    engine's (`floor_for`)."""
    if max(gold_s, predicted_s) < floor_s:
        return Efficiency(gold_s, predicted_s, 1, floor_s=floor_s)
    golds: list[float] = []
    preds: list[float] = []
    spent = 0.0
    for rounds in range(1, MAX_ROUNDS + 1):
        if rounds % 2:  # alternate who goes first: whatever one run leaves warm helps both alike
            golds.append(time_gold())
            preds.append(time_predicted())
        else:
            preds.append(time_predicted())
            golds.append(time_gold())
        spent += golds[-1] + preds[-1]
        if not math.isfinite(spent) or spent >= budget_s:
            break
        if rounds >= UNDER_FLOOR_ROUNDS and max(min(golds), min(preds)) < floor_s:
            break  # equally fast: more rounds only lower the times, which stay under the floor
        if rounds >= MIN_ROUNDS and (not (_steady(golds) and _steady(preds)) or _settled(min(golds), min(preds), floor_s)):
            break
    gold, predicted = min(golds), min(preds)
    if not math.isfinite(gold) or not math.isfinite(predicted):  # a re-run failed throughout: the first timings
        return Efficiency(min(gold, gold_s), min(predicted, predicted_s), len(golds), floor_s=floor_s)
    steady = (_steady(golds) and _steady(preds)) or abs(predicted - gold) > max(_spread(golds), _spread(preds))
    return Efficiency(gold, predicted, len(golds), steady, floor_s)


def _spread(timings: list[float]) -> float:
    """How far a side's fastest timing is from its second-fastest (0 for a single timing): what
    its noise can explain."""
    ordered = sorted(timings)[:2]
    return ordered[-1] - ordered[0]


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
