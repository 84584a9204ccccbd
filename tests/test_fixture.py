"""The `nl2sql` fixture, end to end: plain Python tests run SQL, compare and assert like cases do."""

from __future__ import annotations

import pytest

from helpers import make_shop, write_suite

FIXTURE_TESTS = '''
import pytest
from pytest_nl2sql.engines.base import QueryError

def test_run_and_schema(nl2sql):
    result = nl2sql.run("shop.sqlite", "SELECT name FROM item WHERE price > 2 ORDER BY name")
    assert result.columns == ("name",)
    assert result.rows == [("ink",), ("mug",)]
    assert "CREATE TABLE item" in nl2sql.schema("shop.sqlite")
    # a query written in another dialect is translated to the database's
    assert nl2sql.run("shop.sqlite", "SELECT TOP 1 name FROM item ORDER BY price", dialect="tsql").rows == [("cap",)]

def test_compare(nl2sql):
    same = nl2sql.compare("shop.sqlite", "SELECT price, name FROM item", "SELECT name, price FROM item")
    assert same and same.match and same.reason is None
    differ = nl2sql.compare("shop.sqlite", "SELECT name FROM item WHERE price <= 2", "SELECT name FROM item WHERE price < 2")
    assert not differ and differ.reason == "row count"
    assert differ.extra == (("pad",),) and differ.missing == ()
    # order: the gold's top-level ORDER BY decides, unless told
    assert not nl2sql.compare("shop.sqlite", "SELECT name FROM item ORDER BY name DESC", "SELECT name FROM item ORDER BY name")
    assert nl2sql.compare("shop.sqlite", "SELECT name FROM item ORDER BY name DESC", "SELECT name FROM item ORDER BY name", order="unordered")
    # several golds: any may match; compare options as in a case's `compare:`
    assert nl2sql.compare("shop.sqlite", "SELECT 'PEN'", ["SELECT 'ink'", "SELECT 'pen'"], compare={"case_sensitive": False})
    with pytest.raises(QueryError, match="no such column: nam"):
        nl2sql.compare("shop.sqlite", "SELECT nam FROM item", "SELECT name FROM item")

def test_assert_same_passes(nl2sql):
    result = nl2sql.assert_same("shop.sqlite", "SELECT count(id) FROM item", "SELECT count(*) FROM item")
    assert result.rows == [(5,)]

def test_assert_same_mismatch(nl2sql):
    nl2sql.assert_same("shop.sqlite", "SELECT price, name FROM item WHERE price < 3",
                       "SELECT name, price FROM item WHERE category = 'office'")

def test_assert_same_pred_error(nl2sql):
    nl2sql.assert_same("shop.sqlite", "SELECT nam FROM item", "SELECT name FROM item")

def test_case_from_a_file(nl2sql):
    case = nl2sql.case("shop.nl2sql.yaml", "cheap")
    assert case.question == "Cheap items"
    assert nl2sql.run(case, "SELECT count(*) FROM sale").rows == [(4,)]
    nl2sql.assert_same(case, "SELECT name FROM item WHERE price < 2")   # the case's own gold
    nl2sql.assert_same(case, case.predicted)                            # fails: row count

def test_broken_gold_is_not_an_assertion(nl2sql):
    from pytest_nl2sql.judge.execute import GoldError
    with pytest.raises(GoldError, match="no such column: nope"):
        nl2sql.assert_same("shop.sqlite", "SELECT 1", "SELECT nope FROM item")
    with pytest.raises(Exception, match="no case with id 'missing'"):
        nl2sql.case("shop.nl2sql.yaml", "missing")
'''

CASES = [{"id": "cheap", "question": "Cheap items", "gold": "SELECT name FROM item WHERE price < 2",
          "predicted": "SELECT name FROM item WHERE price <= 2"}]


def test_fixture_runs_compares_and_asserts_like_a_case(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    pytester.makepyfile(test_queries=FIXTURE_TESTS)
    # only the Python tests: the suite is read through the fixture
    result = pytester.runpytest("test_queries.py")
    result.assert_outcomes(passed=4, failed=3)
    result.stdout.fnmatch_lines([
        "*_ test_assert_same_mismatch _*",
        "E * nl2sql case test_assert_same_mismatch [[]test_queries.py[]]: mismatch (values)",
        "E * database: shop.sqlite",
        "E * gold: SELECT name, price FROM item WHERE category = 'office'",
        "E * predicted: SELECT price, name FROM item WHERE price < 3",
        "E * columns paired (gold <-> predicted): name <-> name, price <-> price",
        "E * missing from the prediction (1 row):",
        "E *   - ('ink', 3.0)",
        "E * unexpected in the prediction (1 row):",
        "E *   + ('cap', 0.5)",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_assert_same_pred_error _*",
        "E * nl2sql case test_assert_same_pred_error [[]test_queries.py[]]: pred_error (no such column: nam)",
        "E * pred_error: no such column: nam",
    ])
    result.stdout.fnmatch_lines([
        "*_ test_case_from_a_file _*",
        "E * nl2sql case cheap [[]shop.nl2sql.yaml:*[]]: mismatch (row count)",
        "E * question: Cheap items",
        "E * unexpected in the prediction (1 row):",
        "E *   + ('pad')",
    ])
    # the tracebacks point at the test's own call, not at the fixture's internals
    assert "fixtures.py" not in result.stdout.str()


def test_fixture_follows_the_run_settings(pytester: pytest.Pytester) -> None:
    """The timeout, row cap and compat mode of the run apply to the fixture's queries too."""
    make_shop(pytester.path)
    pytester.makepyfile(test_settings='''
import pytest
from pytest_nl2sql.engines.base import QueryTimeout, TooManyRows

RUNAWAY = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"

def test_timeout(nl2sql):
    with pytest.raises(QueryTimeout):
        nl2sql.run("shop.sqlite", RUNAWAY)

def test_row_cap(nl2sql):
    with pytest.raises(TooManyRows):
        nl2sql.run("shop.sqlite", "SELECT * FROM item")
    assert len(nl2sql.run("shop.sqlite", "SELECT * FROM item LIMIT 4").rows) == 4

def test_compat(nl2sql):
    # Spider's evaluator removes every DISTINCT: the official verdict is a pass
    assert nl2sql.compare("shop.sqlite", "SELECT category FROM item WHERE price < 3",
                          "SELECT DISTINCT category FROM item WHERE price < 3")
''')
    result = pytester.runpytest("--nl2sql-timeout=0.5", "--nl2sql-max-rows=4", "--nl2sql-compat=spider")
    result.assert_outcomes(passed=3)
    plain = pytester.runpytest("-k", "row_cap or compat")  # default cap 100000, no compat: both fail
    plain.assert_outcomes(failed=2)
