"""The loopback database servers CI provides, in one place for every test that needs them:
PostgreSQL 127.0.0.1:5432 (trust auth, user postgres or root, database `test`) and MariaDB
127.0.0.1:3306 (root, empty password). Each helper skips the test, naming the reason, when the
driver or the server is absent, so that a laptop without them still runs the rest."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

PG_HOST = "127.0.0.1:5432"
MY_HOST = "127.0.0.1:3306"


def postgres_admin() -> tuple[Any, str]:
    """(autocommit superuser connection to database `test`, its user name)."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")
    last_error: Exception | None = None
    for user in ("postgres", "root"):
        try:
            return psycopg.connect(f"postgresql://{user}@{PG_HOST}/test", autocommit=True, connect_timeout=3), user
        except psycopg.Error as error:
            last_error = error
    pytest.skip(f"no PostgreSQL server at {PG_HOST} database test: {last_error}")


def mariadb_admin(database: str | None = None) -> Any:
    """An autocommit root connection, in `database` when one is named."""
    pymysql = pytest.importorskip("pymysql", reason="PyMySQL is not installed")
    try:
        return pymysql.connect(
            host="127.0.0.1", port=3306, user="root", password="", database=database,
            autocommit=True, connect_timeout=3,
        )  # fmt: skip
    except pymysql.Error as error:
        pytest.skip(f"no MariaDB/MySQL server at {MY_HOST}: {error}")


def _statements(sql: str) -> list[str]:
    return [statement for statement in sql.split(";") if statement.strip()]


@dataclass
class Scratch:
    """A throwaway schema (PostgreSQL) or database (MariaDB) and how to reach it."""

    admin: Any  # the superuser connection that made it; on PostgreSQL its search_path is the schema
    user: str
    name: str
    url: str


@contextmanager
def postgres_schema(prefix: str, sql: str) -> Iterator[Scratch]:
    """A schema of database `test` holding the tables `sql` makes, dropped afterwards."""
    admin, user = postgres_admin()
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        admin.execute(f'SET search_path = "{schema}"')
        for statement in _statements(sql):
            admin.execute(statement)
        yield Scratch(admin, user, schema, f"postgresql://{user}@{PG_HOST}/test?options=-csearch_path%3D{schema}")
    finally:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        admin.close()


@contextmanager
def mariadb_database(prefix: str, sql: str) -> Iterator[Scratch]:
    """A database holding the tables `sql` makes, dropped afterwards."""
    admin = mariadb_admin()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE `{name}`")
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"USE `{name}`")
            for statement in _statements(sql):
                cursor.execute(statement)
        yield Scratch(admin, "root", name, f"mysql://root@{MY_HOST}/{name}")
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


@contextmanager
def postgres_database_url(prefix: str) -> Iterator[str]:
    """The URL of a database that does not exist yet; whatever the test makes there is dropped."""
    admin, user = postgres_admin()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        yield f"postgresql://{user}@{PG_HOST}/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@contextmanager
def mariadb_database_url(prefix: str) -> Iterator[str]:
    """As `postgres_database_url`, on MariaDB."""
    admin = mariadb_admin()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        yield f"mysql://root@{MY_HOST}/{name}"
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()

