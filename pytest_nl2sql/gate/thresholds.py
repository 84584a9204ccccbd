"""`--nl2sql-fail-under`: accuracy floors that fail the session, overall or per bucket.

A threshold is written `[BUCKET=]RATE`. RATE is a fraction (`0.8`) or a percentage (`80%`);
BUCKET is a hardness label (`hard`, or BIRD's `challenging`: any label the cases carry),
`tag:NAME` or `database:NAME`. Rates are compared exactly (as fractions), so 4/5 is not below
`0.8`. Known failures are not passes, so they count as failures here; so do cases the predictor
could not answer (`predictor_error`), and the message says how many of those there were.

Budgets (`--nl2sql-max-cost`, `--nl2sql-max-latency-p95`) fail the session the same way when the
summary's total usage cost or predictor latency p95 is above them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pytest_nl2sql.vocab import HARDNESS_ORDER, hardness_sort_key

OPTION = "--nl2sql-fail-under"

# bucket prefix -> (summary section, words for messages)
_PREFIXES = {"tag": ("by_tag", "tag"), "database": ("by_database", "database")}


@dataclass(frozen=True)
class Threshold:
    bucket: str | None  # None: overall; "hard"; "tag:joins"; "database:concert_singer"
    rate: float  # a fraction in [0, 1]
    spec: str  # as the user wrote it, for messages

    @property
    def exact_rate(self) -> Fraction:
        return Fraction(str(self.rate))


def parse_fail_under(text: str) -> Threshold:
    """Parse one `[BUCKET=]RATE`; a ValueError's message says what is wrong and how to write it."""
    spec = text.strip()
    bucket_text, equals, rate_text = spec.rpartition("=")
    bucket = bucket_text.strip() if equals else None
    if bucket is not None:
        _check_bucket(bucket, spec)
    return Threshold(bucket=bucket, rate=_parse_rate(rate_text.strip(), spec), spec=spec)


def parse_fail_unders(values: Iterable[str]) -> tuple[Threshold, ...]:
    """Parse option values and ini lines; an ini value may hold several, separated by spaces."""
    return tuple(parse_fail_under(word) for value in values for word in value.split())


def _check_bucket(bucket: str, spec: str) -> None:
    if not bucket:
        raise ValueError(f"{OPTION}={spec}: the bucket before '=' is empty")
    if ":" in bucket:
        prefix, _, name = bucket.partition(":")
        if prefix not in _PREFIXES:
            kinds = ", ".join(f"{p}:NAME" for p in _PREFIXES)
            raise ValueError(
                f"{OPTION}={spec}: unknown bucket {bucket!r}; use a hardness level "
                f"({', '.join(HARDNESS_ORDER)}: hard=0.6) or {kinds}"
            )
        if not name:
            raise ValueError(f"{OPTION}={spec}: {prefix}: needs a name, as in {prefix}:NAME=0.9")


def _parse_rate(text: str, spec: str) -> float:
    percent = text.endswith("%")
    number_text = text[:-1].strip() if percent else text
    try:
        number = Fraction(number_text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(
            f"{OPTION}={spec}: {text!r} is not a rate; write a fraction (0.8) or a percentage (80%)"
        ) from None
    if percent:
        if not 0 <= number <= 100:
            raise ValueError(f"{OPTION}={spec}: a percentage must be between 0% and 100%")
        number /= 100
    elif not 0 <= number <= 1:
        hint = f" (write {text}% for a percentage)" if 1 < number <= 100 else ""
        raise ValueError(f"{OPTION}={spec}: a fraction must be between 0 and 1{hint}")
    return float(number)


def check_thresholds(thresholds: Iterable[Threshold], summary: Mapping[str, Any], *, partial: bool = False) -> list[str]:
    """One failure message per violated threshold, naming the bucket, the rate and the threshold.

    A bucket that no case belongs to, or whose cases all are errors, fails too: a threshold on
    a tag that does not exist is most likely a typo, and a gate that cannot be checked is not met.
    In a `partial` run (`-k`, `-m`, node ids) a bucket without cases is not checked: the cases it
    holds were not selected.
    """
    failures: list[str] = []
    for threshold in thresholds:
        if partial and _bucket(threshold.bucket, summary).counts is None:
            continue
        message = _check_one(threshold, summary)
        if message:
            failures.append(message)
    return failures


def _check_one(threshold: Threshold, summary: Mapping[str, Any]) -> str | None:
    bucket = _bucket(threshold.bucket, summary)
    wanted = f"{OPTION}={threshold.spec}"
    if bucket.counts is None:
        order = hardness_sort_key if threshold.bucket is not None and ":" not in threshold.bucket else str
        hint = f" (there are: {', '.join(sorted(bucket.known, key=order))})" if bucket.known else ""
        return f"nl2sql: {wanted}: no case has {bucket.member}{hint}"
    passed = int(bucket.counts.get("passed", 0))
    judged = int(bucket.counts.get("total", 0)) - int(bucket.counts.get("errors", 0) or 0)
    if judged <= 0:
        return f"nl2sql: {wanted}: no case with {bucket.member} could be judged"
    actual = Fraction(passed, judged)
    if actual >= threshold.exact_rate:
        return None
    shown = _format_rate(actual, threshold.exact_rate)
    return f"nl2sql: {bucket.accuracy} {shown} ({passed}/{judged}) is below {wanted}" + _unpredicted_note(bucket.counts, passed, judged)


def _unpredicted_note(counts: Mapping[str, Any], passed: int, judged: int) -> str:
    """A gate failed partly by an outage says so: the cases that could not be predicted are
    failures here, but not wrong answers."""
    unpredicted = counts.get("predictor_errors")
    if not isinstance(unpredicted, int) or unpredicted <= 0:
        return ""
    answered = judged - unpredicted
    figure = f" (over the {answered} answered: {passed}/{answered})" if answered > 0 else ""
    return (f"; {unpredicted} of the {judged - passed} failing cases could not be predicted (predictor_error), "
            f"not wrong answers{figure}")


@dataclass(frozen=True)
class _Bucket:
    accuracy: str  # "execution accuracy", "hard accuracy", "tag 'joins' accuracy"
    member: str  # "hardness 'hard'", "tag 'joins'": what a case in the bucket has
    counts: Mapping[str, Any] | None  # the summary's {"total", "passed", ...}; None: no such bucket
    known: tuple[str, ...]  # the buckets of this kind that do exist, to spot typos


def _bucket(bucket: str | None, summary: Mapping[str, Any]) -> _Bucket:
    if bucket is None:
        return _Bucket("execution accuracy", "a verdict", summary, ())
    prefix, colon, name = bucket.partition(":")
    if colon:
        section, words = _PREFIXES[prefix]
        member = f"{words} {name!r}"
        accuracy = f"{member} accuracy"
    else:
        section, name = "by_hardness", bucket
        member, accuracy = f"hardness {bucket!r}", f"{bucket} accuracy"
    buckets = summary.get(section) or {}
    return _Bucket(accuracy, member, buckets.get(name), tuple(buckets))


def _format_rate(actual: Fraction, threshold: Fraction) -> str:
    """Three decimals, or more when three would print the rate equal to the threshold."""
    for decimals in range(3, 10):
        if round(actual, decimals) != round(threshold, decimals):
            break
    return f"{float(actual):.{decimals}f}"


# --- budgets: what the model may cost and how long it may take ------------------------------------------

MAX_COST = "--nl2sql-max-cost"
MAX_LATENCY_P95 = "--nl2sql-max-latency-p95"


def parse_budget(text: str, option: str) -> float:
    """A budget's value: a number >= 0 (the cost in whatever unit the hook reports, USD say; or
    seconds). A ValueError names the option and says how to write it."""
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"{option}={text}: not a number; write a plain number such as 0.5") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{option}={text}: must be a finite number >= 0")
    return value


def check_budgets(summary: Mapping[str, Any], *, max_cost: float | None,
                  max_latency_p95: float | None) -> tuple[list[str], list[str]]:
    """(failures, notes): a run whose total usage cost is above `max_cost`, or whose predictor
    latency p95 is above `max_latency_p95`, fails, named like a threshold. A budget that cannot be
    checked (no case reported a cost, none was answered by the hook: predictions replayed from a
    file) is a note, not a failure: a replay in CI is not a run over its budget."""
    failures: list[str] = []
    notes: list[str] = []
    if max_cost is not None:
        usage = summary.get("usage") or {}
        total = (usage.get("total") or {}).get("cost")
        overflow = "cost" in (usage.get("not_finite") or ())
        reported = f"(the usage {usage.get('cases')} cases reported)"
        if overflow:
            failures.append(f"nl2sql: model cost too large to add up {reported} is above {MAX_COST}={max_cost:g}")
        elif not isinstance(total, (int, float)):
            notes.append(f"{MAX_COST} not checked: no case reported its cost (the hook's usage)")
        elif total > max_cost:
            failures.append(f"nl2sql: model cost {total:.4f} {reported} is above {MAX_COST}={max_cost:g}")
    if max_latency_p95 is not None:
        latency = summary.get("latency") or {}
        p95 = latency.get("p95")
        if not isinstance(p95, (int, float)):
            notes.append(f"{MAX_LATENCY_P95} not checked: no case was answered by the predictor hook (nothing was timed)")
        elif p95 > max_latency_p95:
            failures.append(f"nl2sql: predictor latency p95 {p95:.3f}s (over {latency.get('count')} cases) is above "
                            f"{MAX_LATENCY_P95}={max_latency_p95:g}")
    return failures, notes
