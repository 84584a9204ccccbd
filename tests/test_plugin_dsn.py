"""`--nl2sql-dsn`: a SQLite-dialect suite run on a PostgreSQL or MariaDB copy of its database,
the SQL translated with sqlglot. Skips when the local servers or drivers are absent."""

from __future__ import annotations

import pytest

from helpers import make_shop, read_report, write_suite
from servers import Scratch

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


@pytest.mark.parametrize("server", ["postgres_shop", "mariadb_shop"])
def test_suite_runs_on_a_server_copy(pytester: pytest.Pytester, request: pytest.FixtureRequest, server: str) -> None:
    url = request.getfixturevalue(server).url
    make_shop(pytester.path)
    write_suite(pytester.path, CASES, database="shop.sqlite")
    # the same suite on its own SQLite file first: the verdicts must be the same on the server, each
    # judged on its one database (neighbours are tested in test_neighbours_servers.py)
    pytester.runpytest("--nl2sql-neighbours=0", "--nl2sql-report=json:local.json")
    result = pytester.runpytest(f"--nl2sql-dsn={url}", "--nl2sql-neighbours=0", "--nl2sql-report=json:server.json")
    result.assert_outcomes(passed=3, failed=2)
    local = {i["id"]: i["verdict"] for i in read_report(pytester.path / "local.json")["items"]}
    server_verdicts = {i["id"]: i["verdict"] for i in read_report(pytester.path / "server.json")["items"]}
    assert local == server_verdicts == EXPECTED


def test_db_id_suite_runs_on_the_dsn_without_local_files(pytester: pytest.Pytester, postgres_shop: Scratch) -> None:
    """A Spider-style suite (only `db_id`s, no database files here) pointed at a server copy."""
    write_suite(pytester.path, [{"id": "a", "db_id": "shop", "gold": "SELECT count(*) FROM item", "predicted": "SELECT 5"}])
    # `SELECT 5` is right on this data only: neighbours (now made for servers too) would catch it
    result = pytester.runpytest(f"--nl2sql-dsn={postgres_shop.url}", "--nl2sql-neighbours=0", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1)
    assert read_report(pytester.path / "r.json")["items"][0]["database"] == "shop"


def test_the_model_writes_for_the_dsn_s_engine_and_sees_its_keys(pytester: pytest.Pytester, postgres_shop: Scratch) -> None:
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
    result = pytester.runpytest(f"--nl2sql-dsn={postgres_shop.url}")
    result.assert_outcomes(passed=1)
