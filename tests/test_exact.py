"""Spider exact set match and partial scores: the official rules on small pairs, then the official dev labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_nl2sql.metrics.exact import COMPONENTS, ExactMatch, aggregate_partial, exact_match
from pytest_nl2sql.metrics.spider_schema import SpiderSchema

SCHEMA = SpiderSchema.from_columns(
    {
        "singer": ["singer_id", "name", "country", "age"],
        "concert": ["concert_id", "concert_name", "year"],
        "singer_in_concert": ["concert_id", "singer_id"],
    },
    foreign_keys=[
        (("singer_in_concert", "singer_id"), ("singer", "singer_id")),
        (("singer_in_concert", "concert_id"), ("concert", "concert_id")),
    ],
)
MODELS = ("c3sql_gpt35", "dail_sql_gpt4", "din_sql_gpt4", "graphix_t5", "spider_example_baseline")


def match(gold: str, predicted: str) -> ExactMatch:
    return exact_match(gold, predicted, SCHEMA)


@pytest.mark.parametrize(
    ("gold", "predicted"),
    [
        ("SELECT name, age FROM singer", "SELECT age, name FROM singer"),  # select is a set
        ("SELECT name FROM singer WHERE age > 20", "select NAME from SINGER where AGE > 45"),  # values ignored
        ("SELECT name FROM singer WHERE country = 'France'", 'SELECT name FROM singer WHERE country = "Spain"'),
        ("SELECT DISTINCT country FROM singer", "SELECT country FROM singer"),  # DISTINCT ignored
        ("SELECT count(DISTINCT country) FROM singer", "SELECT count(country) FROM singer;"),
        ("SELECT name FROM singer ORDER BY age LIMIT 1", "SELECT name FROM singer ORDER BY age LIMIT 3"),
        ("SELECT name FROM singer WHERE age > 1 AND country = 'a'", "SELECT name FROM singer WHERE country = 'b' AND age > 2"),
        # foreign-key columns are one column when their tables are in FROM
        (
            "SELECT T1.singer_id FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id",
            "SELECT T2.singer_id FROM singer AS T1 JOIN singer_in_concert AS T2 ON T2.singer_id = T1.singer_id",
        ),
        ("SELECT name FROM singer", "SELECT name FROM singer\tignored after the TAB"),
    ],
)
def test_matches(gold: str, predicted: str) -> None:
    result = match(gold, predicted)
    assert result.match is True
    assert all(scores["f1"] == 1 for scores in result.partial.values())


@pytest.mark.parametrize(
    ("gold", "predicted", "failing"),
    [
        ("SELECT max(age) FROM singer", "SELECT min(age) FROM singer", {"select"}),
        ("SELECT name FROM singer WHERE age > 1", "SELECT name FROM singer WHERE age < 1", {"where"}),
        ("SELECT name FROM singer WHERE age > 1", "SELECT name FROM singer WHERE country > 1", {"where", "where(no OP)"}),
        ("SELECT name FROM singer ORDER BY age DESC", "SELECT name FROM singer ORDER BY age ASC", {"order", "keywords"}),
        ("SELECT name FROM singer ORDER BY age", "SELECT name FROM singer ORDER BY age LIMIT 1", {"order", "keywords"}),
        ("SELECT name FROM singer WHERE age > 1 OR age < 0", "SELECT name FROM singer WHERE age > 1 AND age < 0", {"and/or", "keywords"}),
        ("SELECT name FROM singer GROUP BY name HAVING count(*) > 1", "SELECT name FROM singer GROUP BY name", {"group", "keywords"}),
        ("SELECT name FROM singer UNION SELECT concert_name FROM concert", "SELECT name FROM singer", {"IUEN", "keywords"}),
        # a nested query in WHERE keeps its DISTINCT flag (the official rebuild does not reach it)
        (
            "SELECT name FROM singer WHERE singer_id IN (SELECT DISTINCT singer_id FROM singer_in_concert)",
            "SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer_in_concert)",
            {"where"},
        ),
    ],
)
def test_mismatches_name_the_failing_components(gold: str, predicted: str, failing: set[str]) -> None:
    result = match(gold, predicted)
    assert result.match is False
    assert {name for name, scores in result.partial.items() if scores["f1"] != 1} == failing


@pytest.mark.parametrize(
    ("gold", "predicted"),
    [
        ("SELECT name FROM singer WHERE age > 1 AND country = 'a'", "SELECT name FROM singer WHERE age > 7 AND country = 'b'"),
        ("SELECT count(*) FROM singer GROUP BY country HAVING count(*) > 1 ORDER BY count(*) DESC LIMIT 3",
         "select COUNT(*) from singer group by country having count(*) > 2 order by count(*) desc limit 3"),
        ("SELECT name FROM singer UNION SELECT concert_name FROM concert", "SELECT name FROM singer UNION SELECT concert_name FROM concert"),
    ],
)
def test_a_prediction_that_normalises_to_the_gold_gets_the_gold_s_own_scores(gold: str, predicted: str) -> None:
    """The shortcut for equal normalised queries gives what comparing them component by component gives."""
    from pytest_nl2sql.metrics.exact import _exact, _normalized

    expected = _exact(_normalized(predicted, SCHEMA), _normalized(gold, SCHEMA))
    result = match(gold, predicted)
    assert (result.match, result.partial) == expected and result.match
    result.partial["select"]["acc"] = 0  # a caller's copy: the next answer is unchanged
    assert match(gold, predicted).partial == expected[1]


def test_select_without_aggregates_is_scored_separately() -> None:
    result = match("SELECT max(age) FROM singer", "SELECT min(age) FROM singer")
    assert result.partial["select"]["f1"] == 0
    assert result.partial["select(no AGG)"]["f1"] == 1


def test_from_tables_must_be_the_same_multiset() -> None:
    gold = "SELECT name FROM singer"
    predicted = "SELECT name FROM singer JOIN concert"
    result = match(gold, predicted)
    assert all(scores["f1"] == 1 for scores in result.partial.values())
    assert result.match is False


def test_group_by_compares_column_names_only_official_quirk() -> None:
    result = match(
        "SELECT count(*) FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id GROUP BY T1.name",
        "SELECT count(*) FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.concert_id GROUP BY T2.concert_name",
    )
    assert result.partial["group(no Having)"]["f1"] == 0
    two_tables = SpiderSchema.from_columns({"a": ["x"], "b": ["x"]})
    result = exact_match("SELECT count(*) FROM a GROUP BY x", "SELECT count(*) FROM b GROUP BY x", two_tables)
    assert result.partial["group(no Having)"]["f1"] == 1  # same column name, other table
    assert result.partial["group"]["f1"] == 0
    assert result.match is False


def test_unparseable_prediction_scores_as_an_empty_query() -> None:
    result = match("SELECT name FROM singer WHERE age > 1", "SELECT name AS n FROM singer")
    assert result.match is False
    assert result.partial["select"] == {"acc": 0, "rec": 0, "f1": 0, "label_total": 1, "pred_total": 0}
    assert result.partial["keywords"]["pred_total"] == 0


def test_unparseable_gold_raises_value_error() -> None:
    with pytest.raises(ValueError, match="gold"):
        match("SELECT name FROM singer LEFT JOIN concert", "SELECT name FROM singer")


def test_value_in_predictions_becomes_one_official_preprocessing() -> None:
    # the official tool replaces " value " by " 1 " in predictions: here that breaks the column name
    schema = SpiderSchema.from_columns({"t": ["value", "id"]})
    assert exact_match("SELECT id FROM t WHERE value > 3", "SELECT id FROM t WHERE value > 3", schema).match is False
    assert exact_match("SELECT id FROM t WHERE id > 3", "SELECT id FROM t WHERE id > value ", schema).match is True


def test_partial_has_the_official_components_and_serialises() -> None:
    result = match("SELECT name FROM singer", "SELECT name FROM singer")
    assert tuple(result.partial) == COMPONENTS
    payload = json.loads(json.dumps(result.to_json()))
    assert payload["match"] is True
    assert payload["partial"]["where"] == {"acc": 1, "rec": 1, "f1": 1, "label_total": 0, "pred_total": 0}


def test_aggregate_partial_averages_like_the_official_evaluator() -> None:
    items = [
        match("SELECT name FROM singer WHERE age > 1", "SELECT name FROM singer WHERE age > 1").partial,
        match("SELECT name FROM singer WHERE age > 1", "SELECT name FROM singer WHERE country = 1").partial,
        match("SELECT name FROM singer", "SELECT name FROM singer WHERE age > 1").partial,
        match("SELECT name FROM singer", "SELECT age FROM singer").partial,
    ]
    totals = aggregate_partial(items)
    assert set(totals) == set(COMPONENTS)
    # where: predicted in items 1-3 (1 hit); in the gold of items 1-2 (1 hit)
    assert totals["where"]["acc"] == pytest.approx(1 / 3)
    assert totals["where"]["rec"] == pytest.approx(1 / 2)
    assert totals["where"]["f1"] == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    # select: every item predicts and has one column; 3 of 4 agree
    assert totals["select"] == {"acc": 0.75, "rec": 0.75, "f1": pytest.approx(0.75)}
    # no item has GROUP BY anywhere: the official value is f1 = 1 with acc = rec = 0
    assert totals["group"] == {"acc": 0.0, "rec": 0.0, "f1": 1.0}


@pytest.mark.spider
@pytest.mark.parametrize("model", MODELS)
def test_agrees_with_official_dev_labels(spider_dir: Path, model: str) -> None:
    golds = [line.split("\t") for line in (spider_dir / "dev_gold.sql").read_text().splitlines()]
    predictions = (spider_dir / "predictions" / f"{model}.sql").read_text().splitlines()
    labels = [line.split("\t") for line in (spider_dir / "reference" / f"dev_exact_{model}.tsv").read_text().splitlines()]
    assert len(golds) == len(predictions) == len(labels) == 1034
    tables = spider_dir / "tables.json"
    disagreements = [
        int(index)
        for (gold, db_id), predicted, (index, label) in zip(golds, predictions, labels)
        if exact_match(gold, predicted, SpiderSchema.from_tables_json(tables, db_id)).match != (label == "1")
    ]
    assert disagreements == []
