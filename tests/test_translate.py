"""`judge.translate.translate`: sqlglot's translation plus SQLite's leniencies fixed from the schema,
checked as text and, on the local PostgreSQL and MariaDB servers, by running the translations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from helpers import make_db
from pytest_nl2sql.engines import Limits, QueryError, open_engine
from pytest_nl2sql.judge.execute import GoldError, run_gold
from pytest_nl2sql.judge.translate import _translated, translate
from servers import mariadb_database, postgres_schema

SCHEMA = {
    "country": ["Code", "Name", "GovernmentForm", "Population"],
    "countrylanguage": ["CountryCode", "Language", "IsOfficial", "Percentage"],
    "Highschooler": ["ID", "name", "grade"],
    "concert": ["concert_ID", "Stadium_ID", "Year"],
    "stadium": ["Stadium_ID", "Name", "Capacity", "Average"],
    "cars_data": ["Id", "MPG", "Horsepower"],
}
# as copy-db makes them from Spider's SQLite files: numbers stored as text stay text
TYPES = {
    "country": {"Code": "text", "Name": "text", "GovernmentForm": "text", "Population": "bigint"},
    "countrylanguage": {"CountryCode": "text", "Language": "text", "IsOfficial": "text", "Percentage": "double precision"},
    "Highschooler": {"ID": "bigint", "name": "text", "grade": "bigint"},
    "concert": {"concert_ID": "bigint", "Stadium_ID": "bigint", "Year": "text"},
    "stadium": {"Stadium_ID": "bigint", "Name": "text", "Capacity": "bigint", "Average": "bigint"},
    "cars_data": {"Id": "bigint", "MPG": "character varying", "Horsepower": "text"},
}


class Fake:
    """An engine that only names its dialect, schema, column types and server version (and
    counts schema reads)."""

    def __init__(self, dialect: str, schema: dict[str, list[str]] | None = None,
                 types: dict[str, dict[str, str]] | None = None, version: int | None = None) -> None:
        self.dialect, self.schema, self.reads = dialect, schema or SCHEMA, 0
        self.types = TYPES if types is None else types
        self.version = version

    def schema_columns(self) -> dict[str, list[str]]:
        self.reads += 1
        return self.schema

    def schema_types(self) -> dict[str, dict[str, str]]:
        return self.types

    def server_version(self) -> int | None:
        return self.version


PG, MY, DUCK = Fake("postgres", version=150020), Fake("mysql"), Fake("duckdb")


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
        "SELECT T2.stadium_id, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id"
        " GROUP BY T1.stadium_id"
    )
    assert translate(sql, "sqlite", PG) == (
        'SELECT T2."Stadium_ID", COUNT(*) FROM concert AS T1 JOIN stadium AS T2 ON T1."Stadium_ID" = T2."Stadium_ID"'
        ' GROUP BY T1."Stadium_ID", T2."Stadium_ID"'
    )
    assert "GROUP BY T1.Stadium_ID" in translate(sql, "sqlite", MY)  # MySQL needs no help
    same = "SELECT T1.stadium_id, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id GROUP BY 1"
    assert translate(same, "sqlite", PG).endswith('GROUP BY 1')


def test_a_bare_column_beside_group_by_takes_a_value_of_its_group() -> None:
    """SQLite takes the group's first row; ANY_VALUE where the engine has it (DuckDB, PostgreSQL
    16+), the first element of the group's ARRAY_AGG before PostgreSQL 16. A select item keeps its
    name; a column in ORDER BY or HAVING is wrapped alike; MySQL accepts bare columns."""
    sql = (
        "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id"
        " GROUP BY T1.stadium_id ORDER BY T2.name"
    )
    assert translate(sql, "sqlite", DUCK) == (
        "SELECT ANY_VALUE(T2.Name) AS Name, COUNT(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.Stadium_ID = T2.Stadium_ID"
        " GROUP BY T1.Stadium_ID ORDER BY ANY_VALUE(T2.Name) NULLS FIRST"
    )
    assert translate(sql, "sqlite", PG) == (
        'SELECT (ARRAY_AGG(T2."Name"))[1] AS "Name", COUNT(*) FROM concert AS T1 JOIN stadium AS T2'
        ' ON T1."Stadium_ID" = T2."Stadium_ID" GROUP BY T1."Stadium_ID" ORDER BY (ARRAY_AGG(T2."Name"))[1] NULLS FIRST'
    )
    assert translate(sql, "sqlite", Fake("postgres", version=160004)).startswith('SELECT ANY_VALUE(T2."Name") AS "Name"')
    assert translate(sql, "sqlite", MY).startswith("SELECT T2.Name, COUNT(*)")
    having = "SELECT grade FROM highschooler GROUP BY grade HAVING name <> 'x'"
    assert translate(having, "sqlite", DUCK).endswith("HAVING ANY_VALUE(name) <> 'x'")
    # a column inside an expression that is itself grouped stays as it is
    grouped = "SELECT substr(name, 1, 1), count(*) FROM highschooler GROUP BY substr(name, 1, 1)"
    assert "ANY_VALUE" not in translate(grouped, "sqlite", DUCK)
    # a LEFT JOIN's equality does not hold on null-extended rows: the column is wrapped, not grouped
    left = "SELECT T2.stadium_id, count(*) FROM concert AS T1 LEFT JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id GROUP BY T1.stadium_id"
    assert translate(left, "sqlite", DUCK) == (
        "SELECT ANY_VALUE(T2.Stadium_ID) AS Stadium_ID, COUNT(*) FROM concert AS T1 LEFT JOIN stadium AS T2"
        " ON T1.Stadium_ID = T2.Stadium_ID GROUP BY T1.Stadium_ID"
    )


def test_a_bare_column_beside_one_min_or_max_comes_from_that_row() -> None:
    """SQLite: with exactly one min() or max() in the query, bare columns take the values of the
    row holding it (`SELECT name, max(age)`: the oldest's name)."""
    sql = "SELECT name, max(capacity) FROM stadium"
    assert translate(sql, "sqlite", DUCK) == "SELECT ARG_MAX_NULL(Name, Capacity) AS Name, MAX(Capacity) FROM stadium"
    assert translate(sql, "sqlite", PG) == (
        'SELECT (ARRAY_AGG("Name" ORDER BY "Capacity" DESC NULLS LAST))[1] AS "Name", MAX("Capacity") FROM stadium'
    )
    grouped = "SELECT language, countrycode, min(percentage) FROM countrylanguage GROUP BY countrycode"
    assert translate(grouped, "sqlite", DUCK) == (
        "SELECT ARG_MIN_NULL(Language, Percentage) AS Language, CountryCode, MIN(Percentage) FROM countrylanguage"
        " GROUP BY CountryCode"
    )
    # two different extremes: SQLite's choice is no longer the row of either; one value of the group
    two = "SELECT name, max(capacity), min(capacity) FROM stadium"
    assert translate(two, "sqlite", DUCK).startswith("SELECT ANY_VALUE(Name) AS Name")
    # MySQL/MariaDB take the group's first row: the first of the values in the max's order instead
    # (as text, a number again where the column is numeric; NULL kept as 'n')
    assert translate("SELECT average, max(capacity) FROM stadium", "sqlite", MY) == (
        "SELECT SUBSTRING(NULLIF(SUBSTRING_INDEX(GROUP_CONCAT(COALESCE(CONCAT('v', Average), 'n')"
        " ORDER BY Capacity IS NULL, Capacity DESC SEPARATOR '\x1f'), '\x1f', 1), 'n'), 2) + 0 AS Average,"
        " MAX(Capacity) FROM stadium"
    )
    assert translate("SELECT name, count(*) FROM stadium GROUP BY capacity", "sqlite", MY) == (
        "SELECT Name, COUNT(*) FROM stadium GROUP BY Capacity"  # no min/max: as SQLite, the first row
    )


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


# -- SQLite's comparison affinity ----------------------------------------------------------------


def test_a_text_column_compared_with_a_number_compares_as_text() -> None:
    """SQLite gives the number the column's TEXT affinity: `Year = 2014` on a text column holding
    '2014' is true, and `Year > 2000` compares strings. On every engine, the literal becomes text."""
    sql = "SELECT count(*) FROM concert WHERE year = 2014 OR year > 2013.5 OR year IN (2015, -1) OR year BETWEEN 1 AND 1e3"
    expected = ("WHERE {y} = '2014' OR {y} > '2013.5' OR {y} IN ('2015', '-1') OR {y} BETWEEN '1' AND '1000.0'")
    assert translate(sql, "sqlite", PG).endswith(expected.format(y='"Year"'))
    assert translate(sql, "sqlite", DUCK).endswith(expected.format(y="Year"))
    assert translate(sql, "sqlite", MY).endswith(expected.format(y="Year"))  # MySQL would compare numbers
    assert translate("SELECT * FROM concert WHERE 2014 = year", "sqlite", PG).endswith("""WHERE '2014' = "Year\"""")


def test_a_numeric_column_compared_with_a_numeric_string_compares_as_numbers() -> None:
    sql = "SELECT name FROM stadium WHERE capacity = '5000' AND average IN ('1', ' 2 ', 'many') AND capacity > '-3.5'"
    assert translate(sql, "sqlite", PG) == (
        'SELECT "Name" FROM stadium WHERE "Capacity" = 5000 AND "Average" IN (1, 2, \'many\') AND "Capacity" > -3.5'
    )


def test_text_compared_with_a_numeric_column_compares_its_numeric_value() -> None:
    """SQLite applies NUMERIC affinity to the text side: '12' = 12. PostgreSQL and DuckDB refuse
    text = bigint; the text's value is a number where the whole text is one, else NULL (SQLite:
    unequal to every number). MySQL converts by itself."""
    sql = "SELECT T1.id FROM cars_data AS T1 JOIN stadium AS T2 ON T1.horsepower = T2.capacity"
    assert translate(sql, "sqlite", PG).endswith(
        "ON CASE WHEN T1.\"Horsepower\" ~ '^[[:space:]]*[-+]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]+)?[[:space:]]*$'"
        " THEN CAST(T1.\"Horsepower\" AS DOUBLE PRECISION) END = T2.\"Capacity\""
    )
    assert "ON REGEXP_FULL_MATCH" not in translate(sql, "sqlite", DUCK)
    assert "TRY_CAST(TRIM(T1.Horsepower) AS DOUBLE)" in translate(sql, "sqlite", DUCK)
    assert translate(sql, "sqlite", MY).endswith("ON T1.Horsepower = T2.Capacity")
    # a numeric column IN a subquery of text: the subquery's output is converted inside it
    sub = "SELECT id FROM cars_data WHERE id IN (SELECT mpg FROM cars_data)"
    assert translate(sub, "sqlite", DUCK).startswith("SELECT Id FROM cars_data WHERE Id IN (SELECT CASE WHEN REGEXP_FULL_MATCH(MPG")


def test_a_text_column_compared_with_an_expression_compares_as_text() -> None:
    """`age < (SELECT avg(age) ...)`: the subquery has no affinity, so SQLite compares the text
    column with its value as text; and AVG of text reads each value's numeric prefix."""
    sql = "SELECT count(*) FROM cars_data WHERE horsepower < (SELECT avg(horsepower) FROM cars_data)"
    translated = translate(sql, "sqlite", DUCK)
    assert translated.startswith('SELECT COUNT(*) FROM cars_data WHERE Horsepower < CAST((SELECT AVG(COALESCE(TRY_CAST(')
    assert translated.endswith("AS TEXT)")


def test_text_under_avg_sum_and_arithmetic_is_read_as_sqlite_reads_it() -> None:
    """SQLite reads '12' as 12, '1975-10-28' as 1975 and 'abc' as 0 under AVG, SUM and arithmetic;
    PostgreSQL and DuckDB have no avg(text)."""
    sql = "SELECT avg(mpg), sum(horsepower + 1) FROM cars_data"
    pg = translate(sql, "sqlite", PG)
    assert pg.startswith("SELECT AVG(COALESCE(CAST(SUBSTRING(\"MPG\" FROM '^[[:space:]]*([-+]?")
    assert "AS DOUBLE PRECISION), CASE WHEN NOT \"Horsepower\" IS NULL THEN 0 END) + 1)" in pg
    assert "REGEXP_EXTRACT(MPG, '^[[:space:]]*" in translate(sql, "sqlite", DUCK)
    # MySQL reads text so itself; its AVG is a decimal of 4 more digits, SQLite's a double
    assert translate(sql, "sqlite", MY) == "SELECT AVG(CAST(MPG AS DOUBLE)), SUM(Horsepower + 1) FROM cars_data"


def test_without_column_types_affinity_is_left_to_the_engine() -> None:
    untyped = Fake("postgres", types={})
    assert translate("SELECT * FROM concert WHERE year = 2014", "sqlite", untyped) == 'SELECT * FROM concert WHERE "Year" = 2014'
    # an engine without schema_types at all (SQLAlchemy's)
    bare = type("Bare", (), {"dialect": "postgres", "schema_columns": lambda self: SCHEMA})()
    assert translate("SELECT * FROM concert WHERE year = 2014", "sqlite", bare).endswith('"Year" = 2014')


def test_a_translation_is_remembered_per_schema_and_engine() -> None:
    """Translations are remembered (a case's two queries are translated again for each neighbour),
    by the schema and types they were made with: another schema gets its own."""
    sql = "SELECT * FROM concert WHERE year = 2015"
    typed, untyped, mysql = Fake("postgres"), Fake("postgres", types={}), Fake("mysql", types={})
    hits = _translated.cache_info().hits
    for _ in range(2):
        assert translate(sql, "sqlite", typed).endswith(""""Year" = '2015'""")
        assert translate(sql, "sqlite", untyped).endswith('"Year" = 2015')
        assert translate(sql, "sqlite", mysql).endswith("Year = 2015")
    assert (typed.reads, untyped.reads) == (1, 1)  # each engine's schema read once
    assert _translated.cache_info().hits >= hits + 3  # the second round translated nothing
    another = Fake("postgres")  # another engine of the same schema: the same translation, remembered
    assert translate(sql, "sqlite", another) == translate(sql, "sqlite", typed)
    assert _translated.cache_info().hits >= hits + 5


# -- LIKE, subqueries, aliases -------------------------------------------------------------------


def test_like_ignores_ascii_case_as_in_sqlite() -> None:
    sql = "SELECT name FROM country WHERE name LIKE '%al%' AND code NOT LIKE 'x%' AND population LIKE '1%'"
    assert translate(sql, "sqlite", PG) == (
        """SELECT "Name" FROM country WHERE "Name" ILIKE '%al%' AND "Code" NOT ILIKE 'x%'"""
        """ AND CAST("Population" AS TEXT) ILIKE '1%'"""
    )
    assert "Name ILIKE '%al%'" in translate(sql, "sqlite", DUCK)
    # copy-db gives MariaDB's text a binary collation: LIKE there is case-sensitive too
    assert "LOWER(Name) LIKE LOWER('%al%')" in translate(sql, "sqlite", MY)


def test_a_scalar_subquery_gets_limit_1() -> None:
    """SQLite takes a scalar subquery's first row; the others refuse several rows."""
    sql = "SELECT name FROM country WHERE code = (SELECT countrycode FROM countrylanguage WHERE language = 'Dutch')"
    assert translate(sql, "sqlite", MY).endswith("WHERE Language = 'Dutch' LIMIT 1)")
    assert translate("SELECT (SELECT name FROM stadium LIMIT 3) FROM concert", "sqlite", DUCK) == (
        "SELECT (SELECT Name FROM stadium LIMIT 1) FROM concert"
    )
    # one row already: an aggregate; and sets (IN, EXISTS) and derived tables are no scalars
    for untouched in ("SELECT name FROM stadium WHERE capacity > (SELECT avg(capacity) FROM stadium)",
                      "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert)",
                      "SELECT name FROM stadium WHERE EXISTS (SELECT 1 FROM concert)",
                      "SELECT count(*) FROM (SELECT name FROM stadium) AS t"):
        assert "LIMIT" not in translate(untouched, "sqlite", DUCK), untouched


def test_a_derived_table_without_alias_gets_one() -> None:
    sql = "SELECT count(*) FROM (SELECT name FROM stadium WHERE derived_1 > 0)"
    assert translate(sql, "sqlite", PG).endswith(") AS derived_2")  # a name the query does not use
    assert translate("SELECT count(*) FROM (SELECT 1) JOIN (SELECT 2)", "sqlite", MY) == (
        "SELECT COUNT(*) FROM (SELECT 1) AS derived_1 JOIN (SELECT 2) AS derived_2 ON TRUE"
    )


def test_limit_inside_in_moves_into_a_derived_table_on_mysql() -> None:
    sql = "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert GROUP BY stadium_id ORDER BY count(*) DESC LIMIT 1)"
    assert translate(sql, "sqlite", MY) == (
        "SELECT Name FROM stadium WHERE Stadium_ID IN (SELECT * FROM (SELECT Stadium_ID FROM concert GROUP BY Stadium_ID"
        " ORDER BY COUNT(*) DESC LIMIT 1) AS derived_1)"
    )
    assert "IN (SELECT \"Stadium_ID\" FROM concert" in translate(sql, "sqlite", PG)  # PostgreSQL accepts it


def test_having_columns_and_derived_outputs_are_spelled_as_declared() -> None:
    """sqlglot's scopes leave HAVING's unqualified columns out; a derived table's output is
    referred to as it is declared (an unquoted alias stays unquoted: PostgreSQL folds both)."""
    assert translate("SELECT countrycode FROM countrylanguage GROUP BY countrycode HAVING count(language) > 2", "sqlite", PG) == (
        'SELECT "CountryCode" FROM countrylanguage GROUP BY "CountryCode" HAVING COUNT("Language") > 2'
    )
    sql = ("SELECT T1.language FROM countrylanguage AS T1 JOIN (SELECT countrycode, max(percentage) AS MaxPercentage"
           " FROM countrylanguage GROUP BY countrycode) AS T2 ON T1.countrycode = T2.countrycode AND T1.percentage = T2.maxpercentage")
    assert translate(sql, "sqlite", PG).endswith('ON T1."CountryCode" = T2."CountryCode" AND T1."Percentage" = T2.MaxPercentage')


# -- a gold that fails after translation ----------------------------------------------------------


class Refusing(Fake):
    """An engine that refuses every query, naming it."""

    def execute(self, sql: str, limits: Limits) -> Any:
        raise QueryError(f"refused: {sql[:20]}")


def test_a_failing_gold_shows_the_sql_the_engine_ran() -> None:
    with pytest.raises(GoldError) as failed:
        run_gold(["SELECT count(*) FROM concert WHERE year = 2014"], Refusing("postgres", version=150020), Limits(), dialect="sqlite")
    assert str(failed.value) == (
        "gold query failed: refused: SELECT COUNT(*) FROM\n"
        "gold query as translated for postgres: SELECT COUNT(*) FROM concert WHERE \"Year\" = '2014'"
    )
    with pytest.raises(GoldError) as same:  # nothing translated: nothing more to show
        run_gold(["SELECT 1"], Refusing("postgres"), Limits(), dialect="postgres")
    assert str(same.value) == "gold query failed: refused: SELECT 1"
