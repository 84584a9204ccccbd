"""Spider hardness: the official counting rules on small queries, then the official dev labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_nl2sql.metrics.hardness import Hardness, count_component1, count_component2, count_others, hardness
from pytest_nl2sql.metrics.spider_schema import SpiderSchema
from pytest_nl2sql.metrics.spider_sql import parse_spider_sql

COLUMNS = {
    "singer": ["singer_id", "name", "country", "age", "song_name"],
    "concert": ["concert_id", "concert_name", "year", "stadium_id"],
    "singer_in_concert": ["concert_id", "singer_id"],
}
SCHEMA = SpiderSchema.from_columns(COLUMNS)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT count(*) FROM singer", "easy"),
        ("SELECT name FROM singer WHERE age > 20", "easy"),  # one component-1 keyword
        ("SELECT name, age FROM singer", "medium"),  # two select items: one "other"
        ("SELECT name FROM singer WHERE age > 20 ORDER BY age", "medium"),  # two component-1 keywords
        ("SELECT name, country, age FROM singer ORDER BY age DESC", "medium"),
        ("SELECT max(age), min(age), avg(age) FROM singer WHERE country = 'x' AND age > 1 GROUP BY name, country", "hard"),
        ("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)", "hard"),  # one nested query
        ("SELECT name FROM singer INTERSECT SELECT name FROM singer", "hard"),
        ("SELECT name FROM singer WHERE age > 1 INTERSECT SELECT name FROM singer WHERE age < 9", "hard"),
        ("SELECT name, age FROM singer INTERSECT SELECT name, age FROM singer", "extra"),  # nested + an "other"
        (
            "SELECT T2.concert_name FROM singer AS T1 JOIN singer_in_concert AS T3 ON T1.singer_id = T3.singer_id "
            "JOIN concert AS T2 ON T2.concert_id = T3.concert_id WHERE T1.age > 3 ORDER BY T1.age LIMIT 1",
            "extra",
        ),
    ],
)
def test_official_buckets(sql: str, expected: str) -> None:
    assert hardness(sql, SCHEMA) == expected
    assert hardness(sql, COLUMNS) == expected
    assert hardness(sql) == expected


def test_components_are_counted_as_officially() -> None:
    parsed = parse_spider_sql(
        "SELECT name FROM singer AS T1 JOIN concert AS T2 WHERE name LIKE '%a%' OR age > 3 ORDER BY age LIMIT 2",
        SCHEMA,
    )
    # WHERE, ORDER BY, LIMIT, one JOIN, one OR, one LIKE
    assert count_component1(parsed) == 6
    assert count_component2(parsed) == 0


def test_not_in_where_counts_as_an_aggregate_official_quirk() -> None:
    plain = parse_spider_sql("SELECT count(*) FROM singer WHERE name LIKE 'a'", SCHEMA)
    negated = parse_spider_sql("SELECT count(*) FROM singer WHERE name NOT LIKE 'a'", SCHEMA)
    assert count_others(plain) == 0
    assert count_others(negated) == 1  # count(*) + the NOT flag = two "aggregates"
    assert hardness("SELECT count(*) FROM singer WHERE name NOT LIKE 'a'", SCHEMA) == "medium"


def test_having_connectors_count_as_aggregates_official_quirk() -> None:
    parsed = parse_spider_sql(
        "SELECT name FROM singer GROUP BY name HAVING count(*) > 1 AND avg(age) > 2", SCHEMA
    )
    # the HAVING condition units' aggregates are *not* seen (the official check looks at the NOT
    # flag); the AND connector is
    assert count_others(parsed) == 0
    parsed = parse_spider_sql(
        "SELECT count(*) FROM singer GROUP BY name HAVING count(*) > 1 AND avg(age) > 2", SCHEMA
    )
    assert count_others(parsed) == 1


def test_result_is_a_plain_string_enum() -> None:
    result = hardness("SELECT name FROM singer")
    assert result is Hardness.EASY
    assert result == "easy" and isinstance(result, str)


@pytest.mark.parametrize("sql", ["SELECT name AS n FROM singer", "not sql at all", "SELECT nme FROM singer"])
def test_unparseable_sql_raises_value_error(sql: str) -> None:
    with pytest.raises(ValueError, match="does not parse"):
        hardness(sql, SCHEMA)


def test_a_schema_only_makes_resolution_stricter() -> None:
    sql = "SELECT title FROM books WHERE year > 2000 GROUP BY author"
    assert hardness(sql) == "medium"
    with pytest.raises(ValueError):
        hardness(sql, SCHEMA)


@pytest.mark.spider
def test_agrees_with_official_dev_labels(spider_dir: Path) -> None:
    golds = [line.split("\t") for line in (spider_dir / "dev_gold.sql").read_text().splitlines()]
    labels = [line.split("\t") for line in (spider_dir / "reference" / "dev_hardness.tsv").read_text().splitlines()]
    assert len(golds) == len(labels) == 1034
    tables = spider_dir / "tables.json"
    with_schema = [hardness(sql, SpiderSchema.from_tables_json(tables, db_id)) for sql, db_id in golds]
    without_schema = [hardness(sql) for sql, _ in golds]
    expected = [label for _, _, label in labels]
    assert [i for i, (a, b) in enumerate(zip(with_schema, expected)) if a != b] == []
    assert [i for i, (a, b) in enumerate(zip(without_schema, expected)) if a != b] == []


@pytest.mark.spider
def test_train_and_test_golds_all_parse(spider_dir: Path) -> None:
    """Every Spider train/test gold is bucketed (one train gold names a table tables.json lacks)."""
    for gold_file in ("train_gold.sql", "test_gold.sql"):
        path = spider_dir / gold_file
        if not path.exists():
            continue
        buckets = [hardness(line.split("\t")[0]) for line in path.read_text().splitlines()]
        assert set(buckets) == {"easy", "medium", "hard", "extra"}
