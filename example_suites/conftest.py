"""The model under test, plugged in with the hook `pytest_nl2sql_predict(case)`.

A real project calls its model here, e.g. `my_model.generate_sql(question=case.question,
hint=case.hint, schema=case.schema, dialect=case.dialect)`: `case.schema` is the database's DDL,
ready for a prompt, and `case.engine` the open (read-only) database. This stand-in is a lookup
table, so that the example runs offline and gives the same verdicts every time.

Returning None means "no answer from the model": the next source applies (a
`--nl2sql-predictions` file, then the case's own `predicted`), which is why the cases that store
their prediction are unaffected. An exception is the verdict `predictor_error`, traceback shown.
Record the answers with `--nl2sql-record=preds.jsonl`; `--nl2sql-predictions=preds.jsonl` replays them.
"""

from __future__ import annotations

from typing import Any

ANSWERS = {
    "model-top-spender": (
        "SELECT name FROM customer WHERE id = ("
        " SELECT o.customer_id FROM orders o JOIN order_item i ON i.order_id = o.id"
        " JOIN product p ON p.id = i.product_id"
        " GROUP BY o.customer_id ORDER BY sum(i.quantity * p.price) DESC LIMIT 1)"
    ),
    "model-cheapest-kitchen": "SELECT name FROM product ORDER BY price LIMIT 1",  # forgets the category
}


def pytest_nl2sql_predict(case: Any) -> str | None:
    if case.id == "model-refuses":
        raise RuntimeError(f"the model cannot answer {case.question!r}: no forecasting in SQL")
    if case.id in ANSWERS:
        assert "CREATE TABLE customer" in case.schema  # what a prompt would be built from
        return ANSWERS[case.id]
    return None
