"""The Spider-style parser and schema: the official grammar's rules and quirks on small queries."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_nl2sql.metrics.spider_schema import SpiderSchema
from pytest_nl2sql.metrics.spider_sql import (
    AggOp,
    ColUnit,
    SpiderParseError,
    SpiderSQL,
    TableUnit,
    ValUnit,
    WhereOp,
    parse_spider_sql,
    spider_words,
)

SCHEMA = SpiderSchema.from_columns(
    {
        "Singer": ["Singer_ID", "Name", "Country", "Age"],
        "concert": ["concert_id", "concert_name", "stadium_id", "year"],
        "singer_in_concert": ["concert_id", "singer_id"],
        "stadium": ["stadium_id", "name", "capacity"],
    },
    foreign_keys=[
        (("singer_in_concert", "singer_id"), ("singer", "singer_id")),
        (("singer_in_concert", "concert_id"), ("concert", "concert_id")),
        (("concert", "stadium_id"), ("stadium", "stadium_id")),
    ],
)


def col(name: str, agg: AggOp = AggOp.NONE, distinct: bool = False) -> ColUnit:
    return ColUnit(agg, f"__{name}__", distinct)


# ------------------------------------------------------------------------------------ words


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT T1.Name FROM singer AS T1", ("select", "t1.name", "from", "singer", "as", "t1")),
        ("SELECT count(*) FROM t", ("select", "count", "(", "*", ")", "from", "t")),
        ("WHERE a >= 1 AND b > = 2 AND c != 3", ("where", "a", ">=", "1", "and", "b", ">=", "2", "and", "c", "!=", "3")),
        ("WHERE name = 'Bob' OR name = \"Al\"", ("where", "name", "=", '"Bob"', "or", "name", "=", '"Al"')),
        ("WHERE a=1", ("where", "a=1")),  # NLTK does not split '=': one unusable word
        ("WHERE a <> 1", ("where", "a", "<", ">", "1")),
        ("ORDER  BY x DESC;", ("order", "by", "x", "desc", ";")),
        ("LIMIT 1 -- best", ("limit", "1", "--", "best")),
        ("WHERE x > -1", ("where", "x", ">", "-1")),
    ],
)
def test_words_follow_the_official_tokenizer(sql: str, words: tuple[str, ...]) -> None:
    assert spider_words(sql) == words


def test_odd_number_of_quote_characters_is_rejected() -> None:
    with pytest.raises(SpiderParseError, match="quote"):
        spider_words("SELECT name FROM singer WHERE name = \"O'Hara\"")


# ------------------------------------------------------------------------------------ parser


def test_aliases_and_bare_columns_resolve_through_the_schema() -> None:
    parsed = parse_spider_sql(
        "SELECT T1.name, count(*) FROM singer AS T1 JOIN singer_in_concert AS T2 "
        "ON T1.singer_id = T2.singer_id GROUP BY T2.singer_id",
        SCHEMA,
    )
    assert parsed.select.items == (
        (AggOp.NONE, ValUnit(0, col("singer.name"), None)),
        (AggOp.COUNT, ValUnit(0, ColUnit(AggOp.NONE, "__all__", False), None)),
    )
    assert parsed.from_tables == (TableUnit(table="__singer__"), TableUnit(table="__singer_in_concert__"))
    (join,) = parsed.from_conds
    assert join.op == WhereOp.EQ
    assert join.val_unit.left == col("singer.singer_id")
    assert join.val1 == col("singer_in_concert.singer_id")
    assert parsed.group_by == (col("singer_in_concert.singer_id"),)


def test_bare_column_is_taken_from_the_first_from_table_that_has_it() -> None:
    parsed = parse_spider_sql("SELECT name FROM stadium JOIN singer", SCHEMA)
    assert parsed.select.items[0][1].left == col("stadium.name")


def test_values_nested_queries_and_set_operations() -> None:
    parsed = parse_spider_sql(
        "SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer) AND country = 'France' "
        "UNION SELECT name FROM stadium",
        SCHEMA,
    )
    first, connector, second = parsed.where
    assert connector == "and"
    assert isinstance(first.val1, SpiderSQL)
    assert first.val1.select.items[0][0] == AggOp.AVG
    assert second.val1 == '"France"'
    assert parsed.union is not None and parsed.union.from_tables == (TableUnit(table="__stadium__"),)
    assert parsed.intersect is None and parsed.except_ is None


def test_limit_keeps_only_its_presence_and_order_keeps_the_last_direction() -> None:
    parsed = parse_spider_sql("SELECT name FROM singer ORDER BY age DESC, name ASC LIMIT 5", SCHEMA)
    assert parsed.limit is True
    assert parsed.order_by is not None
    assert parsed.order_by.direction == "asc"
    assert [unit.left for unit in parsed.order_by.items] == [col("singer.age"), col("singer.name")]


def test_between_and_not_in() -> None:
    parsed = parse_spider_sql(
        "SELECT name FROM singer WHERE age BETWEEN 20 AND 30 AND singer_id NOT IN (SELECT singer_id FROM singer_in_concert)",
        SCHEMA,
    )
    between, _, not_in = parsed.where
    assert (between.op, between.val1, between.val2) == (WhereOp.BETWEEN, 20.0, 30.0)
    assert not_in.negated and not_in.op == WhereOp.IN and isinstance(not_in.val1, SpiderSQL)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name FROM singer AS s LEFT JOIN concert AS c ON s.singer_id = c.concert_id",  # no LEFT JOIN
        "SELECT name AS n FROM singer",  # no column aliases
        "SELECT name FROM singer WHERE age IN (20, 30)",  # no value lists
        "SELECT nme FROM singer",  # unknown column
        "SELECT x.name FROM singer AS s",  # unknown alias
        "SELECT name FROM singer WHERE age=20",  # glued operator
        "SELECT name FROM singer -- all of them",  # a comment where a table may follow
        "SELECT name FROM singer AS singer",  # an alias that is also a table name
        "SELECT name",
        "",
    ],
)
def test_outside_the_official_subset_fails(sql: str) -> None:
    with pytest.raises(SpiderParseError):
        parse_spider_sql(sql, SCHEMA)


def test_words_after_a_complete_query_are_ignored_as_officially() -> None:
    plain = parse_spider_sql("SELECT name FROM singer ORDER BY age", SCHEMA)
    assert parse_spider_sql("SELECT name FROM singer ORDER BY age -- youngest first", SCHEMA) == plain
    assert parse_spider_sql("SELECT name FROM singer ORDER BY age; SELECT 1", SCHEMA) == plain


def test_without_schema_names_are_taken_as_written() -> None:
    parsed = parse_spider_sql("SELECT T2.title, year FROM movies AS T1 JOIN ratings AS T2 ON T1.id = T2.mid")
    assert parsed.select.items[0][1].left == col("ratings.title")
    assert parsed.select.items[1][1].left == col("movies.year")
    with pytest.raises(SpiderParseError):
        parse_spider_sql("SELECT name FROM singer AS s LEFT JOIN concert AS c ON s.id = c.id")


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        # the official parser reads `e` as a second FROM table: only a schema with a table `e` accepts that
        ("SELECT e.name FROM emp e WHERE e.id = 1", "alias without AS"),
        ("SELECT a.name FROM emp a JOIN emp b ON a.boss = b.id", "alias without AS"),
        ("SELECT t.x FROM (SELECT x FROM emp) t", "alias without AS"),
        # ... and `n` as a second column
        ("SELECT name n FROM emp", "column alias"),
        ("SELECT count(*) total FROM emp", "column alias"),
        # literals are not columns
        ("SELECT name FROM emp WHERE boss IS NULL", "not a column"),
        ("SELECT name FROM emp WHERE flag = true", "not a column"),
    ],
)
def test_without_schema_what_no_plausible_schema_accepts_fails(sql: str, message: str) -> None:
    with pytest.raises(SpiderParseError, match=message):
        parse_spider_sql(sql)


def test_with_a_schema_a_table_after_a_table_is_one_more_table_as_officially() -> None:
    parsed = parse_spider_sql("SELECT name FROM singer concert", SCHEMA)
    assert parsed.from_tables == (TableUnit(table="__singer__"), TableUnit(table="__concert__"))
    assert len(parse_spider_sql("SELECT name age FROM singer", SCHEMA).select.items) == 2
    with pytest.raises(SpiderParseError):
        parse_spider_sql("SELECT s.name FROM singer s", SCHEMA)


NAMES = st.sampled_from(["name", "age", "country", "singer_id"])


@settings(max_examples=60, deadline=None)
@given(
    columns=st.lists(NAMES, min_size=1, max_size=3),
    condition=st.sampled_from(["", " WHERE age > 20", " WHERE country = 'x' OR age < 3"]),
    order=st.sampled_from(["", " ORDER BY age DESC", " ORDER BY count(*) LIMIT 2"]),
    spaces=st.integers(min_value=1, max_value=3),
)
def test_case_and_spacing_do_not_change_the_parse(columns, condition, order, spaces) -> None:
    sql = f"SELECT {', '.join(columns)} FROM singer{condition}{order}"
    respaced = sql.replace(" ", " " * spaces).replace("'x'", "'x'")
    assert parse_spider_sql(respaced, SCHEMA) == parse_spider_sql(sql, SCHEMA)
    upper = sql.replace("'x'", "'X'").upper().replace("'X'", "'x'")
    assert parse_spider_sql(upper, SCHEMA) == parse_spider_sql(sql, SCHEMA)
    assert len(parse_spider_sql(sql, SCHEMA).select.items) == len(columns)


# ------------------------------------------------------------------------------------ schema


def test_schema_from_columns_lower_cases_and_merges_foreign_keys_to_the_first_declared() -> None:
    assert SCHEMA.columns["singer"] == frozenset({"singer_id", "name", "country", "age"})
    assert SCHEMA.kmap["__singer_in_concert.singer_id__"] == "__singer.singer_id__"
    assert SCHEMA.kmap["__singer.singer_id__"] == "__singer.singer_id__"
    assert SCHEMA.kmap["__stadium.stadium_id__"] == "__concert.stadium_id__"


TABLES_JSON = [
    {
        "db_id": "pets",
        "table_names_original": ["Owner", "Pet"],
        "column_names_original": [[-1, "*"], [0, "OwnerId"], [0, "Name"], [1, "PetId"], [1, "OwnerId"]],
        "foreign_keys": [[4, 1]],
    }
]


def test_schema_from_tables_json_list_and_path(tmp_path: Path) -> None:
    schema = SpiderSchema.from_tables_json(TABLES_JSON, "pets")
    assert schema.tables == (("owner", ("ownerid", "name")), ("pet", ("petid", "ownerid")))
    assert schema.kmap == {"__pet.ownerid__": "__owner.ownerid__", "__owner.ownerid__": "__owner.ownerid__"}
    path = tmp_path / "tables.json"
    path.write_text(json.dumps(TABLES_JSON))
    assert SpiderSchema.from_tables_json(path, "pets") == schema
    with pytest.raises(KeyError):
        SpiderSchema.from_tables_json(path, "zoo")


def test_schema_from_sqlite_reads_columns_and_foreign_keys_read_only(tmp_path: Path) -> None:
    db = tmp_path / "pets.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE Owner (OwnerId INTEGER PRIMARY KEY, Name TEXT);"
        "CREATE TABLE Pet (PetId INTEGER PRIMARY KEY, OwnerId INTEGER REFERENCES Owner);"
    )
    conn.close()
    before = db.read_bytes()
    schema = SpiderSchema.from_sqlite(db)
    assert schema == SpiderSchema.from_tables_json(TABLES_JSON, "pets")
    assert db.read_bytes() == before
