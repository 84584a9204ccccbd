"""The Python API without pytest: the "SQL Execution" category of the validation suite (spec 000),
and the 50 correct / 50 broken check on real Spider queries through `evaluate_predictions`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from helpers import make_shop
from pytest_nl2sql import eval_exec_match, evaluate_predictions
from pytest_nl2sql.vocab import Verdict


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return make_shop(tmp_path)


def test_identical_queries(db: Path) -> None:
    r = eval_exec_match(db, "SELECT name FROM item", "SELECT name FROM item")
    assert r.match and r.error is None and r
    assert sorted(r.pred_results) == sorted(r.gold_results) == [("cap",), ("ink",), ("mug",), ("pad",), ("pen",)]


def test_column_order_swap(db: Path) -> None:
    assert eval_exec_match(db, "SELECT price, name FROM item", "SELECT name, price FROM item").match


def test_row_order_differs_without_order_by_in_gold(db: Path) -> None:
    assert eval_exec_match(db, "SELECT name FROM item ORDER BY name DESC", "SELECT name FROM item").match


def test_different_order_by_does_not_match(db: Path) -> None:
    r = eval_exec_match(db, "SELECT name FROM item ORDER BY price DESC", "SELECT name FROM item ORDER BY price")
    assert not r.match and r.verdict is Verdict.MISMATCH and r.error == "order"


def test_aggregate_count(db: Path) -> None:
    assert eval_exec_match(db, "SELECT count(id) FROM item", "SELECT count(*) FROM item").match


def test_wrong_where_clause(db: Path) -> None:
    r = eval_exec_match(db, "SELECT name FROM item WHERE price > 2", "SELECT name FROM item WHERE price >= 2")
    assert not r.match and r.error == "row count"


def test_syntax_error_returns_false_with_message(db: Path) -> None:
    r = eval_exec_match(db, "SELEC name FROM item", "SELECT name FROM item")
    assert not r.match and r.verdict is Verdict.PRED_ERROR
    assert "syntax error" in r.error and r.pred_results is None


def test_broken_gold_and_missing_database_are_gold_errors(db: Path, tmp_path: Path) -> None:
    assert eval_exec_match(db, "SELECT 1", "SELECT nope FROM item").verdict is Verdict.GOLD_ERROR
    missing = eval_exec_match(tmp_path / "absent.sqlite", "SELECT 1", "SELECT 1")
    assert missing.verdict is Verdict.GOLD_ERROR and "absent.sqlite" in missing.error
    assert not (tmp_path / "absent.sqlite").exists()


def test_several_golds_any_may_match(db: Path) -> None:
    assert eval_exec_match(db, "SELECT name, price FROM item WHERE id = 5", ["SELECT 'mug'", "SELECT 'mug', 7.0"]).match


def test_batch_counts_errors_apart(db: Path, tmp_path: Path) -> None:
    metrics = evaluate_predictions([
        (db, "SELECT count(*) FROM item", "SELECT count(id) FROM item"),
        (db, "SELECT 2", "SELECT 1"),
        (tmp_path / "absent.sqlite", "SELECT 1", "SELECT 1"),
    ])
    assert (metrics["correct"], metrics["total"], metrics["errors"]) == (1, 2, 1)
    assert metrics["accuracy"] == 0.5
    assert metrics["verdicts"] == {"pass": 1, "mismatch": 1, "gold_error": 1}


def _break(sql: str) -> str:
    """A deliberately wrong variant: the same query with every row filtered out."""
    return f"SELECT * FROM ({sql}) WHERE 1 = 0"


@pytest.mark.spider
def test_fifty_correct_fifty_broken_on_real_spider_queries(spider_dir: Path) -> None:
    lines = [line.split("\t") for line in (spider_dir / "dev_gold.sql").read_text().splitlines() if line.strip()]
    usable = []
    for sql, db_id in lines:
        path = spider_dir / "database" / db_id / f"{db_id}.sqlite"
        if path.exists():
            itself = eval_exec_match(path, sql, sql)  # once a gold: it is run on its database for the rows
            if itself.match and itself.gold_results:  # a broken variant of a query with an empty result would still "match"
                usable.append((path, sql))
    chosen = random.Random(2024).sample(usable, 100)
    correct = evaluate_predictions([(p, sql, sql) for p, sql in chosen[:50]])
    broken = evaluate_predictions([(p, _break(sql), sql) for p, sql in chosen[50:]])
    assert (correct["correct"], correct["total"]) == (50, 50)
    assert (broken["correct"], broken["total"]) == (0, 50)
    evaluator_accuracy = (correct["correct"] + (broken["total"] - broken["correct"])) / 100
    assert evaluator_accuracy == 1.0
    simulated_model = evaluate_predictions([(p, sql, sql) for p, sql in chosen[:50]] + [(p, _break(sql), sql) for p, sql in chosen[50:]])
    assert simulated_model["accuracy"] == 0.5
