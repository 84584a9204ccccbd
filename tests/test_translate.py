"""`judge.translate.translate`: sqlglot's translation plus SQLite's leniencies fixed from the schema,
checked as text and, on the local PostgreSQL and MariaDB servers, by running the translations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from helpers import make_db
from pytest_nl2sql.engines import Limits, QueryError, open_engine
from pytest_nl2sql.judge.translate import translate
from servers import mariadb_database, postgres_schema

SCHEMA = {
    "country": ["Code", "Name", "GovernmentForm", "Population"],
    "countrylanguage": ["CountryCode", "Language", "IsOfficial"],
    "Highschooler": ["ID", "name", "grade"],
    "concert": ["concert_ID", "Stadium_ID", "Year"],
    "stadium": ["Stadium_ID", "Name", "Capacity"],
}


class Fake:
    """An engine that only names its dialect and schema (and counts schema reads)."""

    def __init__(self, dialect: str, schema: dict[str, list[str]] | None = None) -> None:
        self.dialect, self.schema, self.reads = dialect, schema or SCHEMA, 0

    def schema_columns(self) -> dict[str, list[str]]:
        self.reads += 1
        return self.schema


PG, MY = Fake("postgres"), Fake("mysql")


def test_same_dialect_is_identity_without_parsing() -> None:
    engine = Fake("sqlite")
    text = "SELECT garbage ((( not sql"
    assert translate(text, "sqlite", engine) is text
    assert translate(text, None, Fake("postgres")) is text
    assert engine.reads == 0


def test_untranslatable_sql_is_a_query_error() -> None:
    with pytest.raises(QueryError, match="cannot translate the query from sqlite to postgres"):
        translate("SELECT (((", "sqlite", PG)


def test_other_sources_are_plain_sqlglot() -> None:
    engine = Fake("postgres")
    assert translate("SELECT `a` FROM t", "mysql", engine) == 'SELECT "a" FROM t'
    assert engine.reads == 0  # only SQLite's leniencies need the schema


def test_double_quoted_strings_become_literals() -> None:
    sql = 'SELECT Name FROM country WHERE GovernmentForm = "Republic" AND "Population" > 0'
    assert translate(sql, "sqlite", PG) == (
        'SELECT "Name" FROM country WHERE "GovernmentForm" = \'Republic\' AND "Population" > 0'
    )
    assert translate(sql, "sqlite", MY) == (
        "SELECT Name FROM country WHERE GovernmentForm = 'Republic' AND `Population` > 0"
    )
    # in a subquery; and with no table in scope at all
    assert "'English'" in translate(
        'SELECT name FROM country WHERE code IN (SELECT countrycode FROM countrylanguage WHERE language = "English")',
        "sqlite", PG,
    )
    assert translate('SELECT "abc"', "sqlite", PG) == "SELECT 'abc'"


def test_names_that_resolve_stay_names() -> None:
    # a select alias, a column of an outer query, and a table that is not in the schema
    assert translate('SELECT count(*) AS "total" FROM country ORDER BY "total"', "sqlite", MY).endswith("ORDER BY `total`")
    correlated = 'SELECT name FROM country AS c WHERE EXISTS (SELECT 1 FROM countrylanguage WHERE countrycode = "Code")'
    assert "'Code'" not in translate(correlated, "sqlite", PG)
    assert translate('SELECT a FROM elsewhere WHERE b = "x"', "sqlite", PG) == 'SELECT a FROM elsewhere WHERE b = "x"'


def test_names_are_spelled_as_the_schema_spells_them() -> None:
    sql = "SELECT T1.name FROM HIGHSCHOOLER AS T1 WHERE t1.Grade > 10"
    assert translate(sql, "sqlite", MY) == "SELECT T1.name FROM Highschooler AS T1 WHERE T1.grade > 10"
    # PostgreSQL folds unquoted names: a mixed-case name is quoted
    assert translate(sql, "sqlite", PG) == 'SELECT T1.name FROM "Highschooler" AS T1 WHERE T1.grade > 10'


def test_columns_equated_with_a_grouped_column_join_the_group_by() -> None:
    sql = (
        "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id"
        " GROUP BY T1.stadium_id"
    )
    assert translate(sql, "sqlite", PG) == (
        'SELECT T2."Name", COUNT(*) FROM concert AS T1 JOIN stadium AS T2 ON T1."Stadium_ID" = T2."Stadium_ID"'
        ' GROUP BY T1."Stadium_ID", T2."Stadium_ID"'
    )
    assert "GROUP BY T1.Stadium_ID" in translate(sql, "sqlite", MY)  # MySQL needs no help
    same = "SELECT T1.stadium_id, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id GROUP BY 1"
    assert translate(same, "sqlite", PG).endswith('GROUP BY 1')


def test_what_cannot_be_proved_is_left() -> None:
    # a bare column beside MAX: SQLite returns the row of the maximum, ties make a rewrite a guess
    assert translate("SELECT name, max(capacity) FROM stadium", "sqlite", PG) == 'SELECT "Name", MAX("Capacity") FROM stadium'
    # a column outside GROUP BY that nothing equates with a grouped one
    assert translate("SELECT name FROM stadium GROUP BY capacity", "sqlite", PG) == 'SELECT "Name" FROM stadium GROUP BY "Capacity"'
    # a LEFT JOIN's equality does not hold on null-extended rows
    left = "SELECT T2.name, count(*) FROM concert AS T1 LEFT JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id GROUP BY T1.stadium_id"
    assert translate(left, "sqlite", PG).endswith('GROUP BY T1."Stadium_ID"')


def test_a_given_schema_is_used_instead_of_asking_the_engine() -> None:
    engine = Fake("postgres")
    assert translate('SELECT a FROM t WHERE a = "x"', "sqlite", engine, schema={"t": ["a"]}) == "SELECT a FROM t WHERE a = 'x'"
    assert engine.reads == 0


# -- on the servers -----------------------------------------------------------------------------

SQLITE_DDL = """
CREATE TABLE Country (Code TEXT PRIMARY KEY, Name TEXT NOT NULL, GovernmentForm TEXT);
CREATE TABLE stadium (Stadium_ID INTEGER PRIMARY KEY, Name TEXT NOT NULL);
CREATE TABLE concert (concert_ID INTEGER PRIMARY KEY, Stadium_ID INTEGER REFERENCES stadium (Stadium_ID));
INSERT INTO Country VALUES ('FR', 'France', 'Republic'), ('BE', 'Belgium', 'Constitutional Monarchy'), ('DE', 'Germany', 'Federal Republic');
INSERT INTO stadium VALUES (1, 'Hampden'), (2, 'Balmoor');
INSERT INTO concert VALUES (1, 1), (2, 1), (3, 2);
"""
# Spider-style SQLite queries that other engines refuse or misread as written
SPIDER_STYLE = [
    'SELECT name FROM country WHERE governmentform = "Republic"',
    "SELECT T1.name FROM COUNTRY AS T1 WHERE t1.code = 'FR'",
    "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id"
    " GROUP BY T1.stadium_id ORDER BY T2.name",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The queries' results on SQLite, where they were written."""
    engine = open_engine(str(make_db(tmp_path_factory.mktemp("translate") / "ref.sqlite", SQLITE_DDL)))
    yield engine
    engine.close()


# names as a copy of the SQLite file keeps them: quoted, mixed case
POSTGRES_DDL = """
CREATE TABLE "Country" ("Code" TEXT PRIMARY KEY, "Name" TEXT NOT NULL, "GovernmentForm" TEXT);
CREATE TABLE stadium ("Stadium_ID" INTEGER PRIMARY KEY, "Name" TEXT NOT NULL);
CREATE TABLE concert ("concert_ID" INTEGER PRIMARY KEY, "Stadium_ID" INTEGER REFERENCES stadium);
""" + ";".join(SQLITE_DDL.split(";")[3:]).replace("INTO Country", 'INTO "Country"')
MARIADB_DDL = SQLITE_DDL.replace(" TEXT PRIMARY KEY", " VARCHAR(8) PRIMARY KEY")


@pytest.fixture(scope="module", params=["postgres", "mariadb"])
def server(request: pytest.FixtureRequest) -> Iterator[Any]:
    made = postgres_schema("nl2sql_tr", POSTGRES_DDL) if request.param == "postgres" else mariadb_database("nl2sql_tr", MARIADB_DDL)
    with made as scratch:
        engine = open_engine(scratch.url)
        try:
            yield engine
        finally:
            engine.close()


@pytest.mark.services
@pytest.mark.parametrize("sql", SPIDER_STYLE)
def test_sqlite_queries_give_sqlite_results_on_the_servers(server: Any, reference: Any, sql: str) -> None:
    limits = Limits(timeout=5)
    expected = reference.execute(sql, limits).rows
    assert expected  # the query means something on SQLite
    translated = translate(sql, "sqlite", server)
    assert server.execute(translated, limits).rows == expected, translated


@pytest.mark.services
def test_without_the_fixes_the_servers_refuse_or_misread(server: Any) -> None:
    """What the translation fixes is real: plain sqlglot output fails on at least one server."""
    import sqlglot

    failures = 0
    for sql in SPIDER_STYLE:
        plain = sqlglot.transpile(sql, read="sqlite", write=server.dialect)[0]
        try:
            server.execute(plain, Limits(timeout=5))
        except QueryError:
            failures += 1
    assert failures >= 1


def test_order_by_an_output_column_is_spelled_as_the_output() -> None:
    """sqlglot reads `ORDER BY population` after `SELECT population` as the output column; it must
    follow the output's new spelling, or PostgreSQL looks for a column `population`."""
    sql = "SELECT name, population FROM country ORDER BY population DESC, name"
    assert translate(sql, "sqlite", PG) == (
        'SELECT "Name", "Population" FROM country ORDER BY "Population" DESC NULLS LAST, "Name" NULLS FIRST'
    )
    assert translate("SELECT name AS n FROM country ORDER BY n", "sqlite", PG) == 'SELECT "Name" AS n FROM country ORDER BY n NULLS FIRST'
