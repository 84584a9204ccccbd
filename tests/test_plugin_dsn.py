"""`--nl2sql-dsn`: a SQLite-dialect suite run on a PostgreSQL or MariaDB copy of its database,
the SQL translated with sqlglot. Skips when the local servers or drivers are absent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from helpers import SHOP_SQL, make_shop, read_report, write_suite

pytestmark = pytest.mark.services

CASES = [
    {"id": "count", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"},
    {"id": "ifnull", "gold": "SELECT name, IFNULL(NULL, price) FROM item WHERE category = 'office'",
     "predicted": "SELECT name, price FROM item WHERE category = 'office'"},
    {"id": "ordered", "gold": "SELECT name FROM item ORDER BY price DESC LIMIT 3",
     "predicted": "SELECT name FROM item ORDER BY price LIMIT 3"},
    {"id": "join", "gold": "SELECT i.name, sum(s.qty) FROM item i JOIN sale s ON s.item_id = i.id GROUP BY i.name",
     "predicted": "SELECT name, (SELECT sum(qty) FROM sale WHERE item_id = item.id) FROM item WHERE id IN (SELECT item_id FROM sale)"},
    {"id": "write", "gold": "SELECT 1", "predicted": "DELETE FROM item"},
]
EXPECTED = {"count": "pass", "ifnull": "pass", "ordered": "mismatch", "join": "pass", "write": "pred_error"}


@pytest.fixture
def postgres_url() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")
    try:
        admin = psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", autocommit=True, connect_timeout=3)
    except psycopg.Error as error:
        pytest.skip(f"no PostgreSQL at 127.0.0.1:5432 database test: {error}")
    schema = f"nl2sql_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE SCHEMA "{schema}"')
    admin.execute(f'SET search_path = "{schema}"')
    for statement in SHOP_SQL.split(";"):
        if statement.strip():
            admin.execute(statement)
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    finally:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        admin.close()


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    pymysql = pytest.importorskip("pymysql", reason="PyMySQL is not installed")
    try:
        admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", autocommit=True, connect_timeout=3)
    except pymysql.Error as error:
        pytest.skip(f"no MariaDB at 127.0.0.1:3306: {error}")
    name = f"nl2sql_{uuid.uuid4().hex[:10]}"
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
        cursor.execute(f"USE `{name}`")
        for statement in SHOP_SQL.split(";"):
            if statement.strip():
                cursor.execute(statement)
    try:
        yield f"mysql://root@127.0.0.1:3306/{name}"
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE `{name}`")
        admin.close()


@pytest.mark.parametrize("server", ["postgres_url", "mariadb_url"])
def test_suite_runs_on_a_server_copy(pytester: pytest.Pytester, request: pytest.FixtureRequest, server: str) -> None:
    url = request.getfixturevalue(server)
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    # the same suite on its own SQLite file first: the verdicts must be the same on the server
    pytester.runpytest("--nl2sql-neighbours=0", "--nl2sql-report=json:local.json")  # servers have no neighbours
    result = pytester.runpytest(f"--nl2sql-dsn={url}", "--nl2sql-report=json:server.json")
    result.assert_outcomes(passed=3, failed=2)
    local = {i["id"]: i["verdict"] for i in read_report(pytester.path / "local.json")["items"]}
    server_verdicts = {i["id"]: i["verdict"] for i in read_report(pytester.path / "server.json")["items"]}
    assert local == server_verdicts == EXPECTED


def test_db_id_suite_runs_on_the_dsn_without_local_files(pytester: pytest.Pytester, postgres_url: str) -> None:
    """A Spider-style suite (only `db_id`s, no database files here) pointed at a server copy."""
    write_suite(pytester.path, [{"id": "a", "db_id": "shop", "gold": "SELECT count(*) FROM item", "predicted": "SELECT 5"}])
    result = pytester.runpytest(f"--nl2sql-dsn={postgres_url}", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1)
    assert read_report(pytester.path / "r.json")["items"][0]["database"] == "shop"


def test_the_model_writes_for_the_dsn_s_engine_and_sees_its_keys(pytester: pytest.Pytester, postgres_url: str) -> None:
    """Under --nl2sql-dsn the hook is asked for PostgreSQL (its SQL runs as written: `::` casts,
    `ILIKE`), with the server's DDL and its keys; the suite's SQLite gold is still translated."""
    write_suite(pytester.path, [{"id": "a", "db_id": "shop", "gold": "SELECT name FROM item WHERE name LIKE 'p%'"}])
    pytester.makeconftest(
        "seen = []\n"
        "def pytest_nl2sql_predict(case):\n"
        "    seen.append((case.dialect, 'PRIMARY KEY' in case.schema))\n"
        "    assert seen[-1] == ('postgres', True), seen\n"
        "    return \"SELECT name::text FROM item WHERE name ILIKE 'p%'\"\n"
    )
    result = pytester.runpytest(f"--nl2sql-dsn={postgres_url}")
    result.assert_outcomes(passed=1)
