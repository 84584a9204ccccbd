"""The model in the loop, unit by unit: SQL taken out of Markdown answers, reported usage, which
failures are asked again, and the pass@k estimator."""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_nl2sql.judge.answer import add_usage, extract_sql, is_transient, unpack_answer, usage_of
from pytest_nl2sql.judge.predict import PredictionRequest, Predictor, RetryPolicy
from pytest_nl2sql.metrics.repeats import pass_at_k, summarize_repeats

# --- fences ------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer, sql", [
    ("SELECT 1", "SELECT 1"),  # no fence: the answer as it is
    ("  SELECT 1  ", "  SELECT 1  "),
    ("```sql\nSELECT count(*) FROM item\n```", "SELECT count(*) FROM item"),
    ("```SQL\nSELECT 1\n```", "SELECT 1"),
    ("```\nSELECT 1\n```", "SELECT 1"),  # a bare fence
    ("~~~sql\nSELECT 1\n~~~", "SELECT 1"),
    ("````sql\nSELECT '```'\n````", "SELECT '```'"),  # a longer fence holds a shorter one
    ("Here is the query:\n\n```sql\nSELECT name\nFROM item\nWHERE price < 2\n```\n\nIt lists the cheap items.",
     "SELECT name\nFROM item\nWHERE price < 2"),
    ("```sqlite\nSELECT 1\n```", "SELECT 1"),
    ("```postgresql\nSELECT 1\n```", "SELECT 1"),
    ("``` sql title=q.sql\nSELECT 1\n```", "SELECT 1"),
    ("   ```sql\n   SELECT 1\n     FROM t\n   ```", "SELECT 1\n  FROM t"),  # the fence's indentation is removed
    ("```sql\nSELECT 1 FROM t WHERE", "SELECT 1 FROM t WHERE"),  # cut at the token limit: runs to the end
    ("Draft:\n```sql\nSELECT 1\n```\nFixed:\n```sql\nSELECT 2\n```", "SELECT 2"),  # the last sql block
    ("```python\nprint(1)\n```\n```sql\nSELECT 1\n```\n```text\nout\n```", "SELECT 1"),  # the one marked sql
    ("```text\nSELECT 1\n```", "SELECT 1"),  # one block, whatever its language
    ("```sql SELECT 1```", "```sql SELECT 1```"),  # one line: a code span, not a fence (runs, and fails, as written)
])
def test_the_sql_of_an_answer(answer: str, sql: str) -> None:
    extracted = extract_sql(answer)
    assert (extracted.sql, extracted.problem) == (sql, None)


def test_several_blocks_none_marked_sql_are_ambiguous() -> None:
    extracted = extract_sql("Either\n```\nSELECT 1\n```\nor\n```\nSELECT 2\n```")
    assert extracted.sql is None
    assert "2 fenced code blocks" in extracted.problem and "ambiguous" in extracted.problem


def test_an_empty_block_is_no_query() -> None:
    extracted = extract_sql("```sql\n\n```")
    assert extracted.sql == "" and "empty" in extracted.problem


# --- what a hook returns ------------------------------------------------------------------------


def test_an_answer_with_usage() -> None:
    unpacked = unpack_answer({"sql": "SELECT 1", "usage": {"prompt_tokens": 120, "completion_tokens": 9, "cost": 0.0012}})
    assert unpacked.value == "SELECT 1"
    assert unpacked.usage == {"prompt_tokens": 120, "completion_tokens": 9, "cost": 0.0012}
    assert unpack_answer("SELECT 1").usage is None and unpack_answer({"sql": "SELECT 1"}).usage is None
    assert unpack_answer({"selection": [], "usage": {"cost": 1}}).usage == {"cost": 1.0}


@pytest.mark.parametrize("answer, complaint", [
    ({"query": "SELECT 1"}, "keys ['query']"),
    ({"sql": "SELECT 1", "tokens": 3}, "keys ['sql', 'tokens']"),
    ({"sql": "SELECT 1", "usage": {"prompt_tokens": -1}}, "'prompt_tokens' must be a whole number >= 0"),
    ({"sql": "SELECT 1", "usage": {"prompt_tokens": 1.5}}, "whole number of tokens"),
    ({"sql": "SELECT 1", "usage": {"cost": "cheap"}}, "'cost' must be a number"),
    ({"sql": "SELECT 1", "usage": {"cost": True}}, "'cost' must be a number"),
    ({"sql": "SELECT 1", "usage": {"prompt_token": 3}}, "none of prompt_tokens, completion_tokens, cost"),
])
def test_a_malformed_answer_says_what_is_wrong(answer: dict, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint.replace("[", r"\[").replace("]", r"\]")):
        unpack_answer(answer)


def test_usage_as_sdks_give_it() -> None:
    openai_like = SimpleNamespace(prompt_tokens=10, completion_tokens=2, total_tokens=12)
    assert usage_of(openai_like) == {"prompt_tokens": 10, "completion_tokens": 2}
    assert usage_of({"input_tokens": 7, "output_tokens": 3}) == {"prompt_tokens": 7, "completion_tokens": 3}  # Anthropic's names
    assert usage_of({"prompt_tokens": 4.0, "total_tokens": 9, "cost": None}) == {"prompt_tokens": 4}
    assert add_usage({"prompt_tokens": 1, "cost": 0.5}, {"completion_tokens": 2, "cost": 0.25}) == \
        {"prompt_tokens": 1, "completion_tokens": 2, "cost": 0.75}
    assert add_usage(None, None) is None


# --- what is asked again ----------------------------------------------------------------------------


class StatusError(Exception):
    def __init__(self, **attributes: object) -> None:
        super().__init__("http")
        self.__dict__.update(attributes)


@pytest.mark.parametrize("error, transient", [
    (TimeoutError("slow"), True),
    (ConnectionResetError("reset"), True),  # a ConnectionError
    (StatusError(status_code=429), True),
    (StatusError(status=503), True),
    (StatusError(status="502"), True),
    (StatusError(response=SimpleNamespace(status_code=500)), True),  # requests' HTTPError
    (StatusError(status_code=400), False),
    (StatusError(status_code=404), False),
    (StatusError(status_code=True), False),
    (RuntimeError("model down"), False),
    (ValueError("bad prompt"), False),
    (SystemExit(1), False),
])
def test_which_failures_are_transient(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_the_backoff_doubles() -> None:
    policy = RetryPolicy(retries=3, wait=0.5)
    assert [policy.delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]


# --- pass@k -------------------------------------------------------------------------------------------


def _by_enumeration(n: int, c: int, k: int) -> float:
    """pass@k by brute force: the share of k-subsets of the n answers that hold a right one."""
    answers = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    return sum(any(answers[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_pass_at_k_is_the_chance_that_k_of_the_answers_hold_a_right_one(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert math.isclose(pass_at_k(n, c, k), _by_enumeration(n, c, k), abs_tol=1e-12), (n, c, k)


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    assert pass_at_k(3, 1, 3) == 1.0
    assert pass_at_k(10, 0, 5) == 0.0 and pass_at_k(10, 10, 1) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_summary_of_repeats() -> None:
    repeats = [
        {"k": 3, "passed": 3, "verdicts": ["pass"] * 3},
        {"k": 3, "passed": 1, "verdicts": ["pass", "mismatch", "mismatch"]},
        {"k": 3, "passed": 0, "verdicts": ["mismatch", "pred_error", "mismatch"]},
        {"k": 3, "passed": 0, "verdicts": ["predictor_error"] * 3},
    ]
    pass_at, consistency = summarize_repeats(repeats)
    assert pass_at == pytest.approx({"1": (1 + 1 / 3) / 4, "2": (1 + 2 / 3) / 4, "3": 2 / 4})
    assert consistency == 0.5  # all three the same verdict: the first case and the last
    assert summarize_repeats([]) == (None, None)


def _request() -> PredictionRequest:
    return PredictionRequest(id="q", file=Path("s.nl2sql.yaml"), question="?", hint=None, dialect="sqlite", database=None,
                             tags=(), conversation=None, engine=None, position=0, schema_of=lambda: "", key_of=("?", None))


def test_the_predictor_waits_with_backoff_between_tries_and_gives_up() -> None:
    waits: list[float] = []
    calls: list[int] = []

    def hook(request: PredictionRequest) -> str:
        calls.append(1)
        if len(calls) < 3:
            raise StatusError(status_code=503)
        return "```sql\nSELECT 1\n```"

    predictor = Predictor(hook, retry=RetryPolicy(retries=2, wait=1.5, sleep=waits.append))
    answered = predictor.ask(_request())
    assert (answered.value, answered.attempts, answered.error, waits) == ("```sql\nSELECT 1\n```", 3, None, [1.5, 3.0])

    waits.clear()
    down = Predictor(lambda request: (_ for _ in ()).throw(TimeoutError("slow")), retry=RetryPolicy(3, 0.1, sleep=waits.append))
    failed = down.ask(_request())
    assert (failed.attempts, failed.error, waits) == (4, "TimeoutError: slow (after 4 attempts)", [0.1, 0.2, 0.4])
    assert "TimeoutError: slow" in (failed.traceback or "")

    never = Predictor(lambda request: (_ for _ in ()).throw(TimeoutError("slow")), retry=RetryPolicy(0, 1.0, sleep=waits.append))
    assert never.ask(_request()).attempts == 1
