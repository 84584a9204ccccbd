"""The model's figures over a run: `--nl2sql-repeat=K` (pass@k, consistency, what is kept of the
answers) and the hook's retries.

pass@k is the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on
Code"): for a case with n answers of which c are right, the chance that at least one of k answers
drawn without replacement is right, `1 - C(n-c, k) / C(n, k)`, averaged over cases. Drawing from
the n answers, not taking the first k, is what makes it unbiased: pass@1 is the mean share of right
answers, not the first answer's accuracy.

A report keeps the verdict's answer whole (`predicted`) and of the K answers (`repeats.predicted`)
only a bounded part: up to SHOWN_ANSWER_CHARS of each and SHOWN_ANSWERS_CHARS of all, then their
length and a hash (100 answers of 4 MB on 3 cases made a 2.5 GB report). Every answer whole is the
recording's (`--nl2sql-record`), each within the answer cap.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SHOWN_ANSWER_CHARS = 2_000  # of each answer in an item's `repeats.predicted`
SHOWN_ANSWERS_CHARS = 20_000  # of all of a case's answers there; past it, an answer is its length and hash


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


def shown_answers(answers: Sequence[Any]) -> list[Any]:
    """A case's answers as its item's `repeats.predicted` keeps them: each cut at SHOWN_ANSWER_CHARS,
    none past SHOWN_ANSWERS_CHARS in all; what is cut says how long it was and its SHA-256 (equal
    answers, equal hashes). None (no answer) stays None; a term selection is measured as JSON."""
    shown: list[Any] = []
    left = SHOWN_ANSWERS_CHARS
    for answer in answers:
        if answer is None:
            shown.append(None)
            continue
        text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, sort_keys=True, default=str)
        if len(text) <= min(SHOWN_ANSWER_CHARS, left):
            shown.append(answer)
            left -= len(text)
        elif left >= SHOWN_ANSWER_CHARS:
            shown.append(f"{text[:SHOWN_ANSWER_CHARS]}… [cut: {len(text):,} characters in all, sha256 {_digest(text)}]")
            left -= SHOWN_ANSWER_CHARS
        else:
            shown.append(f"[not kept: {len(text):,} characters, sha256 {_digest(text)}]")
    return shown


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def without_recorded_answers(item: dict[str, Any]) -> dict[str, Any]:
    """A report's item without `extra.samples` (every answer of a repeated case, whole, which the
    recording writes): the report keeps `repeats` instead."""
    extra = item.get("extra")
    if not isinstance(extra, Mapping) or "samples" not in extra:
        return item
    rest = {key: value for key, value in extra.items() if key != "samples"}
    out = {key: value for key, value in item.items() if key != "extra"}
    return {**out, "extra": rest} if rest else out


# --- retries -------------------------------------------------------------------------------------


def summarize_retries(extras: Iterable[Mapping[str, Any]]) -> dict[str, int] | None:
    """`{"retries", "cases", "failing", "failing_attempts"}` over the items' `extra`: the hook's
    calls after a transient failure, the cases that had any, the cases whose prediction still failed
    after them (`predictor_error`) and the most attempts one of those had; None when nothing was retried."""
    extras = [e for e in extras if isinstance(e, Mapping)]
    retried = [_count(e.get("retries")) for e in extras]
    failing = [_count(e.get("failed_after")) for e in extras]
    if not any(retried):
        return None
    return {"retries": sum(retried), "cases": sum(1 for n in retried if n), "failing": sum(1 for n in failing if n),
            "failing_attempts": max(failing)}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def retries_text(retries: Mapping[str, Any]) -> str:
    """One line on the hook's retries, for the terminal and the md report."""
    cases = retries["cases"]
    text = (f"predictor: {retries['retries']:,} retr{'ies' if retries['retries'] != 1 else 'y'} on {cases:,} "
            f"case{'s' if cases != 1 else ''} (429/5xx/timeouts)")
    failing = retries.get("failing") or 0
    if failing:
        text += (f"; {failing:,} case{'s' if failing != 1 else ''} still failing after "
                 f"{'up to ' if failing > 1 else ''}{retries['failing_attempts']} attempts")
    else:
        text += "; every case answered in the end"
    return text
