"""Hooks that users implement in their `conftest.py`."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_nl2sql_predict(case: Any) -> Any:
    """Return the model's prediction for `case`, or None to fall back to the predictions file.

    This is the model under test. `case` is a `pytest_nl2sql.judge.predict.PredictionRequest`:
    `id`, `file`, `question`, `hint` (BIRD's evidence, or None), `dialect` (the one to write),
    `database` (as the case names it), `schema` (the database's DDL text: types with their
    precision, keys, UNIQUE constraints), `tables`, `sample_rows(table, n=3)` (the first rows, for
    a "schema plus three rows" prompt), `engine` (the open, read-only database), `tags`, `sample`
    (which of the `--nl2sql-repeat` answers is asked, from 0) and, for term-selection cases,
    `conversation` (up to and including the turn to answer). It carries no gold.
    Return SQL text for SQL cases (Markdown is fine: the fenced query is judged), or
    `{"sql": TEXT, "usage": {"prompt_tokens", "completion_tokens", "cost"}}`; for term-selection
    cases the selected terms, shaped like `target.indicator_selection`. An exception is reported
    as verdict `predictor_error`, after `--nl2sql-retries` more tries when it is transient (a
    timeout, a dropped connection, HTTP 429 or 5xx).
    """


@pytest.hookspec(firstresult=True)
def pytest_nl2sql_review(case: Any, evidence: Any) -> Any:
    """Suggest a decision about a disputed case (an LLM judge, say), or return None.

    Called for each case whose verdict is open to argument (a failure on a neighbour database
    only, a fragile pass, a suspect gold) and that no person has decided yet. `case` is a
    `pytest_nl2sql.gate.reviews.DisputedCase`: `id`, `file`, `question`, `database`, `gold`,
    `predicted`, `verdict`, `reason`, `disputes`. `evidence` is a dict of the item's JSON:
    `counterexample` (the neighbour rows that tell gold and prediction apart, with both results),
    `neighbours`, `diff`, `findings` (the gold audit's), `near_miss`.
    Return `"prediction-wrong"`, `"gold-wrong"` or `"both-right"`, or `{"decision": ..., "note": ...}`.
    The answer is recorded as a suggestion (the item's `review.suggested`, `by: "hook"`) and
    never changes a verdict: `nl2sql review REPORT.json --reviews PATH --accept-suggestions`
    turns suggestions into decisions.
    """
