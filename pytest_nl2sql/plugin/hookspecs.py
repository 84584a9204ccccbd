"""Hooks that users implement in their `conftest.py`."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_nl2sql_predict(case: Any) -> Any:
    """Return the model's prediction for `case`, or None to fall back to the predictions file.

    This is the model under test. `case` is a `pytest_nl2sql.judge.predict.PredictionRequest`:
    `id`, `file`, `question`, `hint` (BIRD's evidence, or None), `dialect` (the one to write),
    `database` (as the case names it), `schema` (the database's DDL text), `engine` (the open,
    read-only database), `tags` and, for term-selection cases, `conversation` (up to and including
    the turn to answer). It carries no gold.
    Return SQL text for SQL cases; for term-selection cases the selected terms, shaped like
    `target.indicator_selection`. An exception is reported as verdict `predictor_error`.
    """
