"""Spider hardness: the official counting rules on small queries, then the official dev labels."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.dialects.sqlite import SQLite
from sqlglot.tokens import TokenType

from pytest_nl2sql.metrics.hardness import (
    Hardness,
    case_hardness,
    count_component1,
    count_component2,
    count_others,
    estimated_hardness,
    hardness,
    official_hardness,
)
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


@pytest.mark.parametrize("sql", ["not sql at all", "SELECT name FROM singer WHERE (", "SELECT name FROM GROUP BY name", "hello", "SELECT", ""])
def test_only_sql_sqlglot_cannot_parse_raises_value_error(sql: str) -> None:
    with pytest.raises(ValueError, match="does not parse|not a query"):
        hardness(sql, SCHEMA)
    with pytest.raises(ValueError):
        hardness(sql)
    assert case_hardness(sql, SCHEMA) is None and case_hardness(sql) is None


@pytest.mark.parametrize("sql", ["SELECT name AS n FROM singer", "SELECT nme FROM singer"])
def test_sql_the_official_parser_rejects_still_gets_a_bucket(sql: str) -> None:
    with pytest.raises(ValueError, match="does not parse"):
        official_hardness(sql, SCHEMA)
    assert hardness(sql, SCHEMA) == hardness(sql) == "easy"


def test_a_schema_the_query_does_not_fit_falls_back_to_names_as_written() -> None:
    sql = "SELECT title FROM books WHERE year > 2000 GROUP BY author"
    assert official_hardness(sql) == "medium"
    with pytest.raises(ValueError):
        official_hardness(sql, SCHEMA)
    assert hardness(sql, SCHEMA) == hardness(sql) == case_hardness(sql, SCHEMA) == "medium"


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


# --- one bucket per query, however it is spelled -------------------------------------------------

EMP = {"emp": ["id", "name", "boss", "dept", "salary"], "dept": ["id", "name", "budget"]}


@pytest.mark.parametrize(
    ("without_as", "with_as", "expected"),
    [
        ("SELECT e.name FROM emp e WHERE e.id = 1", "SELECT e.name FROM emp AS e WHERE e.id = 1", "easy"),
        # a self-join: one JOIN
        ("SELECT a.name FROM emp a JOIN emp b ON a.boss = b.id", "SELECT a.name FROM emp AS a JOIN emp AS b ON a.boss = b.id", "easy"),
        # JOIN + GROUP BY (+ two select items): medium
        (
            "SELECT d.name, count(*) FROM emp e JOIN dept d ON e.dept = d.id GROUP BY d.name",
            "SELECT d.name, count(*) FROM emp AS e JOIN dept AS d ON e.dept = d.id GROUP BY d.name",
            "medium",
        ),
        (
            "SELECT e.name FROM emp e JOIN dept d ON e.dept = d.id WHERE d.budget > 5 ORDER BY e.salary",
            "SELECT e.name FROM emp AS e JOIN dept AS d ON e.dept = d.id WHERE d.budget > 5 ORDER BY e.salary",
            "hard",
        ),
    ],
)
def test_aliases_with_or_without_as_give_one_bucket(without_as: str, with_as: str, expected: str) -> None:
    assert official_hardness(with_as, EMP) == official_hardness(with_as) == expected
    for schema in (EMP, None):
        assert hardness(without_as, schema) == hardness(with_as, schema) == expected


@pytest.mark.parametrize(
    ("sql", "official_spelling", "expected"),
    [
        ('SELECT "name" FROM "emp" WHERE "id" = 1', "SELECT name FROM emp WHERE id = 1", "easy"),
        ("SELECT name FROM emp WHERE (id = 1 OR boss = 2)", "SELECT name FROM emp WHERE id = 1 OR boss = 2", "medium"),
        ("SELECT name FROM emp WHERE id <> 1", "SELECT name FROM emp WHERE id != 1", "easy"),
        ("SELECT CAST(salary AS TEXT) FROM emp", "SELECT salary FROM emp", "easy"),
        ("SELECT 1", None, "easy"),
        # a CTE is one nested query (the official parser has none; beyond its grammar)
        ("WITH t AS (SELECT id FROM emp) SELECT id FROM t", None, "hard"),
        # a negated unit counts as an aggregate (the official NOT quirk): with count(*) two of them
        ("SELECT name FROM emp WHERE boss IS NOT NULL", None, "easy"),
        ("SELECT count(*) FROM emp WHERE boss IS NOT NULL", None, "medium"),
        ("SELECT name, rank() OVER (ORDER BY salary) FROM emp", "SELECT name, salary FROM emp", "medium"),
    ],
)
def test_public_hardness_answers_what_a_suite_run_answers(sql: str, official_spelling: str | None, expected: str) -> None:
    if official_spelling is not None:
        assert official_hardness(official_spelling, EMP) == expected
    with pytest.raises(ValueError):
        official_hardness(sql, EMP)
    for schema in (EMP, SpiderSchema.from_columns(EMP), None):
        assert hardness(sql, schema) == expected
        assert hardness(sql, schema, dialect="sqlite") == expected
        assert case_hardness(sql, schema) == case_hardness(sql, schema, "sqlite") == expected
    assert estimated_hardness(sql) == expected


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # a column value: the official parser skips up to the next AND, so the OR is not seen
        ("SELECT name FROM emp AS T1 JOIN dept AS T2 ON T1.dept = T2.id WHERE T1.salary < T2.budget OR T1.id > 3", "medium"),
        ("SELECT name FROM emp AS T1 JOIN dept AS T2 ON T1.dept = T2.id OR T1.boss = T2.id WHERE T1.id > 3", "medium"),
        ("SELECT name FROM emp WHERE salary < 5 OR id > 3", "medium"),  # values: the OR counts
        # ... and when the skipped words hold a parenthesis, the query ends there (ORDER BY unread)
        ("SELECT name FROM emp AS T1 JOIN dept AS T2 ON T1.dept = T2.id WHERE T1.salary < T2.budget "
         "OR T1.id IN (SELECT boss FROM emp) ORDER BY T1.name", "medium"),
        ("SELECT name FROM emp AS T1 JOIN dept AS T2 ON T1.dept = T2.id WHERE T1.salary < T2.budget "
         "OR T1.id IN (SELECT boss FROM emp) AND T1.id > 2 ORDER BY T1.name", "medium"),
        # only the first operand of a chain of set operations is the query, the rest one nested query
        ("SELECT name FROM emp UNION SELECT name FROM dept EXCEPT SELECT name FROM emp", "hard"),
        # HAVING's aggregates do not count, its connectors do
        ("SELECT count(*) FROM emp GROUP BY dept HAVING count(*) >= 2", "easy"),
        ("SELECT name, count(*) FROM emp AS T1 JOIN dept AS T2 ON T1.dept = T2.id GROUP BY T2.id HAVING count(*) > 1", "medium"),
        ("SELECT count(*) FROM emp GROUP BY dept HAVING count(*) >= 2 AND max(salary) > 1", "medium"),
        # a SELECT item is an aggregate only when it is one: (max(..) - min(..)) is none
        ("SELECT max(salary), min(salary) FROM emp", "medium"),
        ("SELECT (max(salary) - min(salary)), name FROM emp", "medium"),
        ("SELECT name FROM emp WHERE id NOT IN (SELECT boss FROM emp)", "hard"),
        ("SELECT name FROM emp WHERE name LIKE '%a%' OR name LIKE 'b%'", "extra"),  # WHERE, OR, 2 LIKE; 2 units
        ("SELECT T1.name FROM emp AS T1 JOIN (SELECT id FROM dept WHERE budget > 1) AS T2 ON T1.dept = T2.id", "easy"),
    ],
)
def test_the_fallback_counts_official_quirks(sql: str, expected: str) -> None:
    """Each query in its official spelling (where it has one) and with parentheses, without AS, `<>`."""
    try:
        assert official_hardness(sql, EMP) == expected
    except ValueError:  # no official spelling (a FROM subquery with an alias): the fallback only
        pass
    assert estimated_hardness(sql) == expected
    for variant in (_paren_conditions(sql), _drop_as(sql), _swap_neq(sql), _quote_identifiers(sql)):
        assert hardness(variant, EMP) == hardness(variant) == expected, variant


_FUZZ_WORDS = ("SELECT FROM WHERE GROUP BY ORDER HAVING LIMIT JOIN ON AS AND OR NOT IN LIKE IS NULL ( ) , * = "
               "!= <> > count max T1.a b emp e 1 'x' \"y\" ; UNION WITH OVER CAST DISTINCT").split()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80) | st.lists(st.sampled_from(_FUZZ_WORDS), max_size=20).map(" ".join))
def test_case_hardness_never_raises_and_hardness_raises_only_value_error(sql: str) -> None:
    answer = case_hardness(sql)
    assert answer in (None, "easy", "medium", "hard", "extra")
    try:
        assert hardness(sql) == answer
    except ValueError:
        assert answer is None


def test_case_hardness_on_sql_nested_too_deeply() -> None:
    deep = "SELECT a FROM t WHERE a IN (" * 2000 + "SELECT 1" + ")" * 2000
    assert case_hardness(deep) is None
    with pytest.raises(ValueError):
        hardness(deep)


# --- the property: official spelling vs. rewritten spellings --------------------------------------

_CONDITIONS = [
    "T1.salary > 10", "T1.name LIKE '%a%'", "T1.name NOT LIKE 'b%'", "T1.id IN (SELECT boss FROM emp)",
    "T1.id NOT IN (SELECT boss FROM emp WHERE salary > 3)", "T1.salary BETWEEN 1 AND 5", "T1.boss = T2.id",
    "T1.name != 'x'", "T1.salary > (SELECT avg(salary) FROM emp)", "T2.budget < T1.salary", 'T2.name = "Sales"',
    "T1.name LIKE T2.name", "T1.salary > -2", "T2.budget >= 1.5",
]
_ITEMS = ["T1.name", "count(*)", "max(T1.salary)", "T2.name", "avg(T2.budget)", "T1.salary"]


@st.composite
def official_queries(draw: st.DrawFn, compound: bool = True) -> str:
    items = draw(st.lists(st.sampled_from(_ITEMS), min_size=1, max_size=3, unique=True))
    join = draw(st.sampled_from(["dept AS T2 ON T1.dept = T2.id", "dept AS T2 ON T1.dept = T2.id AND T2.budget > 1",
                                 "dept AS T2 ON T1.dept = T2.id OR T1.id = T2.id"]))
    sql = f"SELECT {' , '.join(items)} FROM emp AS T1 JOIN {join}"
    units = draw(st.lists(st.sampled_from(_CONDITIONS), max_size=3))
    if units:
        connectors = draw(st.lists(st.sampled_from(["AND", "OR"]), min_size=len(units) - 1, max_size=len(units) - 1))
        sql += " WHERE " + units[0] + "".join(f" {c} {u}" for c, u in zip(connectors, units[1:]))
    if draw(st.booleans()):
        sql += " GROUP BY " + " , ".join(draw(st.lists(st.sampled_from(["T1.name", "T2.id"]), min_size=1, max_size=2, unique=True)))
        having = draw(st.sampled_from(["", " HAVING count(*) > 1", " HAVING count(*) > 1 AND max(T1.salary) < 9",
                                       " HAVING avg(T1.salary) NOT BETWEEN 1 AND 2",
                                       " HAVING count(*) > T2.id OR sum(T1.salary) > 3 AND count(*) < 9"]))
        sql += having
    operation = draw(st.sampled_from(["", "", " UNION ", " INTERSECT ", " EXCEPT "])) if compound else ""
    if operation:
        return sql + operation + draw(official_queries(compound=draw(st.booleans())))
    sql += draw(st.sampled_from(["", " ORDER BY T1.salary DESC", " ORDER BY count(*) LIMIT 1", " LIMIT 3",
                                 " ORDER BY T1.salary - T2.budget"]))
    return sql


# the functions are defined at the end of the module, hence the lambdas
REWRITES = {
    "without AS": lambda sql: _drop_as(sql),
    "quoted identifiers": lambda sql: _quote_identifiers(sql),
    "upper-case keywords": lambda sql: _keyword_case(sql, "upper"),
    "lower-case keywords": lambda sql: _keyword_case(sql, "lower"),
    "parenthesised conditions": lambda sql: _paren_conditions(sql),
    "parenthesised units": lambda sql: _paren_units(sql),
    "!= <-> <>": lambda sql: _swap_neq(sql),
    "all at once": lambda sql: _paren_conditions(_swap_neq(_keyword_case(_quote_identifiers(_drop_as(sql)), "lower"))),
}


@settings(max_examples=150, deadline=None)
@given(sql=official_queries(), rewrite=st.sampled_from(sorted(REWRITES)))
def test_every_spelling_gets_the_bucket_of_the_official_spelling(sql: str, rewrite: str) -> None:
    try:
        expected = official_hardness(sql, EMP)
    except ValueError:  # e.g. a column value, then OR ... BETWEEN: the official parser fails
        assume(False)
    spelled = REWRITES[rewrite](sql)
    assert hardness(spelled, EMP) == hardness(spelled) == case_hardness(spelled, EMP, "sqlite") == expected, spelled


@pytest.mark.spider
@pytest.mark.parametrize("rewrite", sorted(REWRITES))
def test_rewritten_dev_golds_keep_their_official_labels(spider_dir: Path, rewrite: str) -> None:
    golds = [line.split("\t") for line in (spider_dir / "dev_gold.sql").read_text().splitlines()]
    labels = [line.split("\t")[2] for line in (spider_dir / "reference" / "dev_hardness.tsv").read_text().splitlines()]
    tables = spider_dir / "tables.json"
    wrong = []
    for index, ((sql, db_id), label) in enumerate(zip(golds, labels)):
        spelled = REWRITES[rewrite](sql)
        if hardness(spelled, SpiderSchema.from_tables_json(tables, db_id)) != label or hardness(spelled) != label:
            wrong.append((index, spelled))
    assert wrong == []


@pytest.mark.spider
def test_the_fallback_alone_agrees_with_official_dev_labels_and_train_buckets(spider_dir: Path) -> None:
    """Counted on sqlglot's tree, every dev gold gets its official label and every train/test gold
    the official parser's bucket (duplicates counted once)."""
    golds = [line.split("\t")[0] for line in (spider_dir / "dev_gold.sql").read_text().splitlines()]
    labels = [line.split("\t")[2] for line in (spider_dir / "reference" / "dev_hardness.tsv").read_text().splitlines()]
    assert [i for i, (sql, label) in enumerate(zip(golds, labels)) if estimated_hardness(sql) != label] == []
    for gold_file in ("train_gold.sql", "test_gold.sql"):
        path = spider_dir / gold_file
        if path.exists():
            unique = sorted({line.split("\t")[0] for line in path.read_text().splitlines()})
            assert [sql for sql in unique if estimated_hardness(sql) != official_hardness(sql)] == []


# --- spelling rewrites (token-level, the rest of the text unchanged) -------------------------------


def _tokens(sql: str) -> list:
    return SQLite.tokenizer_class().tokenize(sql)


def _edit(sql: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[end:]
    return sql


def _drop_as(sql: str) -> str:
    return _edit(sql, [(t.start, t.end + 1, "") for t in _tokens(sql) if t.token_type == TokenType.ALIAS])


def _quote_identifiers(sql: str) -> str:
    tokens = _tokens(sql)
    return _edit(sql, [
        (t.start, t.end + 1, f'"{sql[t.start:t.end + 1]}"')
        for t, following in zip(tokens, [*tokens[1:], None])
        if t.token_type == TokenType.VAR and (following is None or following.token_type != TokenType.L_PAREN)
    ])


def _keyword_case(sql: str, how: str) -> str:
    plain = (TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER)
    return _edit(sql, [
        (t.start, t.end + 1, getattr(sql[t.start:t.end + 1], how)())
        for t in _tokens(sql)
        if t.token_type not in plain and sql[t.start:t.end + 1].replace(" ", "").isalpha()
    ])


def _swap_neq(sql: str) -> str:
    return _edit(sql, [
        (t.start, t.end + 1, "<>" if sql[t.start:t.end + 1] == "!=" else "!=")
        for t in _tokens(sql) if t.token_type == TokenType.NEQ
    ])


_OPENERS = {TokenType.WHERE, TokenType.HAVING, TokenType.ON}
_CLOSERS = _OPENERS | {TokenType.GROUP_BY, TokenType.ORDER_BY, TokenType.LIMIT, TokenType.INTERSECT, TokenType.UNION,
                       TokenType.EXCEPT, TokenType.JOIN, TokenType.SEMICOLON}


def _paren_conditions(sql: str) -> str:
    """Each WHERE / HAVING / ON condition in one pair of parentheses."""
    inserts: list[tuple[int, str]] = []
    depth, open_at, last_end = 0, [], 0
    for t in _tokens(sql):
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN or t.token_type in _CLOSERS:
            if open_at and open_at[-1] == depth:
                inserts.append((last_end, ")"))
                open_at.pop()
            depth -= t.token_type == TokenType.R_PAREN
        if t.token_type in _OPENERS:
            inserts.append((t.end + 1, " ("))
            open_at.append(depth)
        last_end = t.end + 1
    inserts += [(last_end, ")")] * len(open_at)
    for position, text in reversed(inserts):
        sql = sql[:position] + text + sql[position:]
    return sql


def _paren_units(sql: str) -> str:
    """Every predicate in its own parentheses (the query regenerated by sqlglot)."""
    tree = sqlglot.parse_one(sql, read="sqlite")
    for node in reversed(list(tree.find_all(exp.Predicate))):
        if not isinstance(node.parent, exp.Paren):
            node.replace(exp.Paren(this=node.copy()))
    return tree.sql(dialect="sqlite")
