"""Aggregation of per-case results into the metrics of the summary and the JSON report.

Execution accuracy counts SQL cases only: `passed / (total - errors)`, where `errors` are the
`gold_error` cases (broken cases, counted and listed apart). Term-selection cases have their own
macro precision / recall. Soft scores (`soft_scores`) are means over the SQL cases that could be
judged, a prediction that did not run counting 0; `near_miss` counts the failures of each kind.

A `predictor_error` (the model could not be asked: it raised, transient failures retried) is a
failure in the accuracy, as the contract says, but it is counted apart (`predictor_errors`, per
bucket too) and `answered_accuracy` leaves it out, so that an outage never reads as a model that
answers worse. `usage` sums what the hook reported; `pass_at_k` and `consistency` read the
answers of `--nl2sql-repeat` (metrics/repeats.py). Every figure counts the verdicts after the
decisions of `--nl2sql-reviews`; `accuracy_before_reviews` is the one before them (gate/reviews.py).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_nl2sql.gate.reviews import summarize_reviews
from pytest_nl2sql.gate.stats import percentile, wilson_interval
from pytest_nl2sql.judge.answer import USAGE_KEYS
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.efficiency import summarize_efficiency
from pytest_nl2sql.metrics.repeats import summarize_repeats, summarize_retries, without_recorded_answers
from pytest_nl2sql.metrics.soft import mean_scores
from pytest_nl2sql.metrics.termselection import aggregate_term_selection
from pytest_nl2sql.vocab import HARDNESS_ORDER, NEAR_MISSES, NEIGHBOUR_REASONS, FragileSide, Kind, Verdict


def _bucket(results: list[CaseResult]) -> dict[str, Any]:
    judged = [r for r in results if not r.verdict.is_error]
    passed = sum(r.passed for r in judged)
    unpredicted = sum(1 for r in judged if r.verdict is Verdict.PREDICTOR_ERROR)
    return {
        "total": len(results),
        "passed": passed,
        "errors": len(results) - len(judged),
        "accuracy": passed / len(judged) if judged else None,
        "accuracy_ci": _interval(passed, len(judged)),
        **({"predictor_errors": unpredicted} if unpredicted else {}),  # failures that are no answer (thresholds say so)
    }


def accuracy_interval(bucket: Mapping[str, Any]) -> tuple[float, float] | None:
    """A bucket's (or the summary's) 95% interval as the summary holds it, for every renderer;
    None when there is none (nothing judged, or a report from elsewhere that lacks it)."""
    bounds = bucket.get("accuracy_ci")
    if isinstance(bounds, (list, tuple)) and len(bounds) == 2 and all(isinstance(b, (int, float)) for b in bounds):
        return float(bounds[0]), float(bounds[1])
    return None


def _interval(passed: int, judged: int) -> list[float] | None:
    """The accuracy's 95% Wilson score interval, `[low, high]`."""
    bounds = wilson_interval(passed, judged)
    return [round(bounds[0], 6), round(bounds[1], 6)] if bounds else None


def _grouped(results: list[CaseResult], keys_of: Any, order: Iterable[str] | None = None) -> dict[str, Any]:
    groups: dict[str, list[CaseResult]] = {}
    for r in results:
        for key in keys_of(r):
            if key is not None:
                groups.setdefault(str(key), []).append(r)
    names = sorted(groups)
    if order is not None:
        rank = {name: i for i, name in enumerate(order)}
        names.sort(key=lambda n: (rank.get(n, len(rank)), n))
    return {name: _bucket(groups[name]) for name in names}


def ordered(results: Iterable[CaseResult]) -> list[CaseResult]:
    """Collection order (the same with and without xdist)."""
    return sorted(results, key=lambda r: (r.position, r.nodeid))


def summarize(results: Iterable[CaseResult]) -> dict[str, Any]:
    results = ordered(results)
    sql = [r for r in results if r.kind is Kind.SQL]
    errors = [r for r in sql if r.verdict.is_error]
    passed = sum(r.passed for r in sql)
    judged = len(sql) - len(errors)
    exact = [r.exact_match for r in sql if r.exact_match is not None and not r.verdict.is_error]
    partials = [r.partial for r in sql if r.partial and not r.verdict.is_error]
    latencies = [r.latency for r in results if r.latency is not None]
    term = [r for r in results if r.kind is Kind.TERM_SELECTION]
    caught = [r for r in sql if caught_by_neighbours(r)]
    fragile_passes = [r for r in sql if is_fragile_pass(r)]
    fragile, by_side = len(fragile_passes), fragile_by_side(fragile_passes)
    unpredicted = sum(1 for r in sql if r.verdict is Verdict.PREDICTOR_ERROR)
    pass_at, consistency = summarize_repeats(r.repeats for r in sql if r.repeats and not r.verdict.is_error)
    summary: dict[str, Any] = {
        "total": len(sql),
        "passed": passed,
        "errors": len(errors),
        "failed": judged - passed,
        "accuracy": passed / judged if judged else None,
        "accuracy_ci": _interval(passed, judged),
        "predictor_errors": unpredicted,
        "answered_accuracy": passed / (judged - unpredicted) if judged - unpredicted > 0 else None,
        "single_db_accuracy": (passed + len(caught)) / judged if judged else None,
        "single_db_passed": passed + len(caught),
        "fragile": fragile,
        "fragile_by_side": by_side,
        # strict: a fragile pass counts as a failure unless only the gold is fragile (judge/fragile_side.py)
        "strict_accuracy": (passed - by_side["prediction"] - by_side["both"]) / judged if judged else None,
        "neighbours": _neighbours(sql, caught),
        "neighbours_off": dict(Counter(r.extra["neighbours_off"] for r in sql if r.extra.get("neighbours_off"))) or None,
        "gold_warnings": sum(1 for r in sql if r.gold_warnings),
        "gold_suspects": sum(1 for r in sql if (r.gold_audit or {}).get("suspect")),  # findings to read, never a verdict
        "by_hardness": _grouped(sql, lambda r: [r.hardness], HARDNESS_ORDER),
        "by_tag": _grouped(sql, lambda r: r.tags),
        "by_database": _grouped(sql, lambda r: [r.database]),
        "exact_match": sum(exact) / len(exact) if exact else None,
        "exact_match_passed": sum(exact),
        "exact_match_total": len(exact),
        "term_selection": _term_selection(term),
        "by_verdict": dict(sorted(Counter(r.verdict.value for r in results).items(), key=lambda kv: _verdict_rank(kv[0]))),
        "errors_by_database": dict(Counter(str(r.database) for r in errors if r.database)),
        "partial": _partial(partials),
        "latency": (
            {"count": len(latencies), "total": sum(latencies), "p50": percentile(latencies, 50), "p95": percentile(latencies, 95)}
            if latencies else None
        ),
        "soft_scores": mean_scores(r.soft_scores for r in sql if not r.verdict.is_error),
        "execution_time": summarize_efficiency((r.passed, r.execution_time) for r in sql if not r.verdict.is_error),
        "near_miss": _near_misses(sql),
        "usage": summarize_usage(r.usage for r in results),
        "retries": summarize_retries(r.extra for r in results),
        "pass_at_k": pass_at,
        "consistency": consistency,
        "quarantined": sum(1 for r in results if r.quarantine is not None),  # run and reported; a failure fails nothing
        **summarize_reviews(sql),  # decisions applied and stale, and the accuracy before them (gate/reviews.py)
        "baseline": None,
    }
    return summary


def summarize_usage(usages: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """`{"cases", "total": {key: sum}, "mean": {key: per-case mean}}` over the cases whose hook
    reported usage (a key's mean is over the cases that reported that key); None when none did.
    A cost whose sum is beyond floating point (two of 1.7e308) has no total: it is left out of
    `total` and named in `not_finite`, so that the JSON stays JSON (no bare Infinity)."""
    reported = [u for u in usages if u]
    if not reported:
        return None
    total: dict[str, Any] = {}
    mean: dict[str, float] = {}
    not_finite: list[str] = []
    for key in USAGE_KEYS:
        numbers = [u[key] for u in reported if isinstance(u.get(key), (int, float))]
        values = [v for v in numbers if math.isfinite(v)]  # a case's own sum may already be beyond floats
        if values:
            summed = _finite_sum(values) if len(values) == len(numbers) else None
            if key != "cost":
                total[key] = int(sum(values))  # whole numbers of tokens: an int never overflows
            elif summed is None:
                not_finite.append(key)
            else:
                total[key] = round(summed, 10)
            mean[key] = round(_mean(values, summed), 10)
    return {"cases": len(reported), "total": total, "mean": mean, **({"not_finite": not_finite} if not_finite else {})}


def _finite_sum(values: list[float]) -> float | None:
    """The exact sum of finite floats, or None when it is beyond the largest float."""
    try:
        summed = math.fsum(values)
    except OverflowError:  # "intermediate overflow in fsum"
        return None
    return summed if math.isfinite(summed) else None


def _mean(values: list[float], summed: float | None) -> float:
    """The mean, finite even when the sum is not (each value divided first)."""
    return summed / len(values) if summed is not None else math.fsum(v / len(values) for v in values)


def caught_by_neighbours(result: CaseResult) -> bool:
    """Right on the case's own database, wrong on one of its neighbour databases (or only on
    stress neighbours, under `--nl2sql-fragile=fail`)."""
    return result.verdict is Verdict.MISMATCH and result.reason in NEIGHBOUR_REASONS


def is_fragile_pass(result: CaseResult) -> bool:
    """Passed, but differs from the gold where the data shows what the case's database never does."""
    neighbours = result.neighbours or {}
    return result.verdict is Verdict.PASS and neighbours.get("fragile", 0) > 0 and not neighbours.get("failed", 0)


def fragile_side(result: CaseResult) -> FragileSide:
    """The side a fragile pass is fragile by (`neighbours.fragile_side`); a result that does not
    say (a report written before sides were told) is `both`, which strict accuracy counts."""
    try:
        return FragileSide((result.neighbours or {}).get("fragile_side"))
    except ValueError:
        return FragileSide.BOTH


def fragile_by_side(fragile_passes: Iterable[CaseResult]) -> dict[str, int]:
    """`{"prediction": n, "gold": n, "both": n}` over fragile passes."""
    counts = Counter(fragile_side(r) for r in fragile_passes)
    return {side.value: counts[side] for side in FragileSide}


def _neighbours(results: list[CaseResult], caught: list[CaseResult]) -> dict[str, int] | None:
    """How many cases were judged on other databases too, and how many of those failed only there."""
    checked = [r for r in results if r.neighbours is not None]
    if not checked:
        return None
    return {"cases": len(checked), "databases": sum(r.neighbours.get("checked", 0) for r in checked), "caught": len(caught)}


def _near_misses(results: list[CaseResult]) -> dict[str, int]:
    """How many failures were each kind of near miss, in the contract's order (zeros included)."""
    counts = Counter(r.near_miss for r in results if r.near_miss)
    return {name: counts.get(name, 0) for name in NEAR_MISSES}


def _verdict_rank(name: str) -> int:
    return [v.value for v in Verdict].index(name)


def _term_selection(results: list[CaseResult]) -> dict[str, Any] | None:
    if not results:
        return None
    return aggregate_term_selection([r.to_json() for r in results])


def _partial(partials: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not partials:
        return None
    from pytest_nl2sql.metrics.exact import aggregate_partial

    scores = aggregate_partial(partials)
    for name, entry in scores.items():  # how many items had the component: 0 and 0 is "not applicable"
        entry["pred_count"] = sum(1 for p in partials if p[name]["pred_total"] > 0)
        entry["gold_count"] = sum(1 for p in partials if p[name]["label_total"] > 0)
    return scores


def build_report(results: Iterable[CaseResult], summary: dict[str, Any]) -> dict[str, Any]:
    """The JSON report: the summary and every item in collection order. Every writer reads this."""
    return {"summary": summary, "items": [without_recorded_answers(r.to_json()) for r in ordered(results)]}


def accuracy_name(summary: Mapping[str, Any]) -> str:
    """The headline figure's name: with neighbour databases it is not the official metric (a
    prediction must also agree with the gold there), so it never borrows that metric's name."""
    return "execution accuracy with neighbour databases" if summary.get("neighbours") else "execution accuracy"
