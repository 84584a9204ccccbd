"""The MySQL/MariaDB engine's TLS context: PyMySQL's "preferred" mode (no TLS option given) made
one for every connection, loading the system's CA certificates each time (~20-30 ms of CPU a
connection) for a context that verifies nothing; the engine makes it once per process."""

from __future__ import annotations

import ssl

import pytest

from pytest_nl2sql.engines import Limits, open_engine
from servers import mariadb_database


def test_the_preferred_tls_context_is_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[ssl.SSLContext] = []
    create = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(create(*args, **kwargs))
        return made[-1]

    with mariadb_database("tls", "CREATE TABLE t (a INT); INSERT INTO t VALUES (1)") as scratch:
        open_engine(scratch.url).close()  # the process's context, if no earlier test made it
        monkeypatch.setattr(ssl, "create_default_context", counted)
        for _ in range(3):
            engine = open_engine(scratch.url)
            try:
                assert engine.execute("SELECT a FROM t", Limits(timeout=30)).rows == [(1,)]
            finally:
                engine.close()
    assert made == []
