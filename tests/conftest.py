"""Shared fixtures of the project's own test suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import SHOP_SQL

# Loaded once for the session: pytester's in-process runs restore sys.modules, and a second import
# of duckdb aborts the interpreter (server cases now make DuckDB neighbours), while a second import
# of psycopg leaves its C part raising the first import's exception classes (not caught as errors).
for _module in ("duckdb", "psycopg"):
    try:
        __import__(_module)
    except ImportError:
        pass
from servers import Scratch, mariadb_database, postgres_schema

SPIDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "spider"


@pytest.fixture(scope="session")
def spider_dir() -> Path:
    """The real Spider dev set beside the repo (CI has it; a fresh clone does not)."""
    if not (SPIDER / "dev.json").exists():
        pytest.skip(f"the Spider data is not at {SPIDER} (it ships beside the repo in CI only)")
    return SPIDER


@pytest.fixture(scope="session", autouse=True)
def shared_neighbour_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One neighbour cache for every run of this session (in-process pytester runs included), so
    that a database generated once is not generated again by the next test's run; never the
    developer's own cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NL2SQL_CACHE_DIR", str(tmp_path_factory.mktemp("nl2sql-cache")))
        yield


@pytest.fixture
def postgres_shop() -> Iterator[Scratch]:
    """The shop tables of `helpers.SHOP_SQL` in a throwaway PostgreSQL schema."""
    with postgres_schema("nl2sql", SHOP_SQL) as scratch:
        yield scratch


@pytest.fixture
def mariadb_shop() -> Iterator[Scratch]:
    """The shop tables of `helpers.SHOP_SQL` in a throwaway MariaDB database."""
    with mariadb_database("nl2sql", SHOP_SQL) as scratch:
        yield scratch
