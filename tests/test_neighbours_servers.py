"""Neighbour databases for cases on PostgreSQL and MariaDB: made from a local DuckDB copy of the
server database (`neighbours/servers.py`), so a read-only login works and the server is never
written. A strict range written as BETWEEN passes on the server's data alone (no price sits on 10
or 20) and fails on a neighbour; the right SQL still passes. Skips when a server is absent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from helpers import read_report, write_suite
from pytest_nl2sql.engines import Limits, open_engine
from pytest_nl2sql.engines.url import parse_database
from servers import MY_HOST, PG_HOST, Scratch, mariadb_database, postgres_schema

pytestmark = pytest.mark.services

SHOP = """
CREATE TABLE item(id INTEGER PRIMARY KEY, name VARCHAR(20) NOT NULL, price INTEGER NOT NULL);
INSERT INTO item VALUES (1, 'pen', 5), (2, 'ink', 12), (3, 'pad', 15), (4, 'cap', 25), (5, 'mug', 18);
"""
GOLD = "SELECT name FROM item WHERE price > 10 AND price < 20"
CASES = [
    {"id": "wrong", "gold": GOLD, "predicted": "SELECT name FROM item WHERE price BETWEEN 10 AND 20"},
    {"id": "right", "gold": GOLD, "predicted": "SELECT name FROM item WHERE price < 20 AND 10 < price"},
]


@contextmanager
def _server(kind: str) -> Iterator[Scratch]:
    with (postgres_schema if kind == "postgres" else mariadb_database)("nl2sql_nb", SHOP) as scratch:
        yield scratch


def _rows(scratch: Scratch) -> list[tuple[Any, ...]]:
    """Every table and row of the scratch database, to check that nothing was written."""
    if scratch.url.startswith("postgresql"):
        tables = scratch.admin.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (scratch.name,)).fetchall()
        rows = scratch.admin.execute("SELECT * FROM item ORDER BY id").fetchall()
        return [*tables, *rows]
    with scratch.admin.cursor() as cursor:
        cursor.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s ORDER BY 1", (scratch.name,))
        tables = list(cursor.fetchall())
        cursor.execute("SELECT * FROM item ORDER BY id")
        return [*tables, *cursor.fetchall()]


@contextmanager
def _read_only_url(scratch: Scratch) -> Iterator[str]:
    """A login that may only SELECT (as the hostile-server tests deploy one)."""
    role = f"nl2sql_ro_{uuid.uuid4().hex[:10]}"
    if scratch.url.startswith("postgresql"):
        admin = scratch.admin
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT USAGE ON SCHEMA "{scratch.name}" TO "{role}"')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{scratch.name}" TO "{role}"')
        try:
            yield f"postgresql://{role}@{PG_HOST}/test?options=-csearch_path%3D{scratch.name}"
        finally:
            admin.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA "{scratch.name}" FROM "{role}"')
            admin.execute(f'REVOKE ALL ON SCHEMA "{scratch.name}" FROM "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
        return
    with scratch.admin.cursor() as cursor:
        cursor.execute(f"CREATE USER '{role}'@'%' IDENTIFIED BY ''")
        cursor.execute(f"GRANT SELECT ON `{scratch.name}`.* TO '{role}'@'%'")
    try:
        yield f"mysql://{role}@{MY_HOST}/{scratch.name}"
    finally:
        with scratch.admin.cursor() as cursor:
            cursor.execute(f"DROP USER IF EXISTS '{role}'@'%'")


def _verdicts(pytester: pytest.Pytester, *args: str) -> dict[str, tuple[str, str | None, Any]]:
    # in a subprocess: an in-process run that loads the drivers' lazily imported modules leaves
    # them half restored for the next test's run (pytester restores sys.modules)
    pytester.runpytest_subprocess("--nl2sql-report=json:r.json", *args)
    items = read_report(pytester.path / "r.json")["items"]
    return {i["id"]: (i["verdict"], i.get("reason"), i.get("neighbours")) for i in items}


def _server_alone(scratch: Scratch, sql: str) -> list[tuple[Any, ...]]:
    """`sql`'s rows on the server itself (what the case's own database shows)."""
    engine = open_engine(scratch.url)
    try:
        return sorted(engine.execute(sql, Limits(timeout=30)).rows)
    finally:
        engine.close()


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
def test_server_cases_are_judged_on_neighbours_of_a_local_copy(pytester: pytest.Pytester, kind: str) -> None:
    with _server(kind) as scratch:
        before = _rows(scratch)
        wrong, right = (case["predicted"] for case in CASES)
        assert _server_alone(scratch, wrong) == _server_alone(scratch, GOLD) == _server_alone(scratch, right)  # the data hides it
        write_suite(pytester.path, CASES, database=scratch.url)
        judged = _verdicts(pytester)
        assert judged["wrong"][:2] == ("mismatch", "neighbour database"), judged
        assert judged["wrong"][2]["failed"] >= 1 and judged["wrong"][2]["counterexample"] is not None
        assert judged["right"][0] == "pass" and judged["right"][2]["checked"] >= 1, judged
        if kind == "postgres":
            # a login that may only read, through --nl2sql-dsn, on two xdist workers (each copies the
            # database itself; neighbours follow the copy's content): the very same items
            with _read_only_url(scratch) as read_only:
                write_suite(pytester.path, CASES, database="shop")
                on_dsn = _verdicts(pytester, f"--nl2sql-dsn={read_only}", "-n", "2", "-p", "no:randomly")
            assert on_dsn == judged
        assert _rows(scratch) == before  # the server database is unchanged


def test_a_copy_that_means_something_else_gives_no_neighbours(pytester: pytest.Pytester) -> None:
    """MariaDB compares text without case; DuckDB does not: the gold's result on the copy differs,
    so the case is judged on the server alone (neighbours null) and says why."""
    with _server("mariadb") as scratch:
        write_suite(pytester.path, [{"id": "folded", "gold": "SELECT count(*) FROM item WHERE name = 'PEN' AND price > 1",
                                     "predicted": "SELECT count(*) FROM item WHERE name = 'PEN' AND price >= 1"}],
                    database=scratch.url)
        result = pytester.runpytest_subprocess("--nl2sql-report=json:r.json", "-W", "always")
        (item,) = read_report(pytester.path / "r.json")["items"]
    assert item["verdict"] == "pass" and item["neighbours"] is None
    assert "no neighbour databases" in result.stdout.str() and "not its result on the server" in result.stdout.str()


def test_a_database_over_the_row_budget_is_not_copied(tmp_path: Any) -> None:
    from pytest_nl2sql.neighbours.servers import NoNeighbours, ServerCopies

    with _server("postgres") as scratch:
        copies = ServerCopies(tmp_path, row_budget=3)
        with pytest.warns(NoNeighbours, match="over the 3 rows|over 3 rows"):
            copy = copies.copy_of(parse_database(scratch.url))
        assert copy.path is None and not list(tmp_path.iterdir())
        assert ServerCopies(tmp_path).copy_of(parse_database(scratch.url)).path is not None



def test_dates_and_decimals_in_reported_rows_read_as_written() -> None:
    """A server's (or DuckDB copy's) DATE and DECIMAL values in a counterexample or diff of the JSON
    report: '2024-01-01' and '12.50', not Python's `datetime.date(2024, 1, 1)`."""
    import datetime
    import decimal

    from pytest_nl2sql.judge.explain import _jsonable

    assert _jsonable(datetime.date(2024, 1, 1)) == "2024-01-01"
    assert _jsonable(datetime.datetime(2024, 1, 1, 9, 30)) == "2024-01-01T09:30:00"
    assert _jsonable(datetime.time(9, 30)) == "09:30:00"
    assert _jsonable(decimal.Decimal("12.50")) == "12.50"
    assert _jsonable(b"\x00\x01") == repr(b"\x00\x01") and _jsonable(7) == 7 and _jsonable(None) is None
