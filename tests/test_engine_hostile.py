"""Hostile predicted SQL against the SQLite engine: refused quickly, nothing changed, nothing left.

Every query runs on one engine (connections are reused in real runs too), and after each one the
database file must be byte-identical, its directory must hold no new file, and a normal query
must still return the original data: a TEMP table or view named like a real table would
otherwise shadow it for every later case.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import pytest_nl2sql.engines.sqlite as sqlite_engine_module
from helpers import generous
from pytest_nl2sql.engines import (
    DatabaseMissing,
    EngineCache,
    EngineError,
    Limits,
    QueryError,
    QueryTimeout,
    TooManyRows,
    open_engine,
)
from pytest_nl2sql.engines.sqlite import HEAP_LIMIT_BYTES, SqliteEngine

# A query that never ends is stopped after 0.25 s (each burns a core until then); any other must end (in a result, a cap or a
# refusal) within a limit that follows the machine's load: under load, a cap reached in 0.2 s
# took more than 0.5 s and ended as a timeout instead.
FOREVER = Limits(timeout=0.25, max_rows=1_000, max_bytes=1_000_000, max_value_bytes=100_000)
LIMITS = replace(FOREVER, timeout=generous(2))

ORIGINAL_T = [(1, "one"), (2, "two"), (3, "three")]
BIG_ROWS = 2_000

COUNT_FOREVER = (
    "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 1e12) "
    "SELECT count(*) FROM c"
)

HOSTILE: list[tuple[str, str, type[EngineError]]] = [
    # writes of every kind
    ("insert", "INSERT INTO t VALUES (4, 'four')", QueryError),
    ("insert-select", "INSERT INTO t SELECT * FROM t", QueryError),
    ("replace", "REPLACE INTO t VALUES (1, 'uno')", QueryError),
    ("upsert", "INSERT INTO t VALUES (1, 'x') ON CONFLICT DO NOTHING", QueryError),
    ("update", "UPDATE t SET s = 'changed'", QueryError),
    ("delete", "DELETE FROM t", QueryError),
    ("cte-delete", "WITH d AS (SELECT 1) DELETE FROM t", QueryError),
    ("drop-table", "DROP TABLE t", QueryError),
    ("alter-rename", "ALTER TABLE t RENAME TO u", QueryError),
    ("alter-add", "ALTER TABLE t ADD COLUMN y INTEGER", QueryError),
    ("create-table", "CREATE TABLE u (x)", QueryError),
    ("create-table-as", "CREATE TABLE u AS SELECT * FROM t", QueryError),
    ("create-index", "CREATE INDEX i ON t (x)", QueryError),
    ("create-view", "CREATE VIEW v AS SELECT 1", QueryError),
    ("create-trigger", "CREATE TRIGGER g AFTER INSERT ON t BEGIN DELETE FROM t; END", QueryError),
    ("create-virtual", "CREATE VIRTUAL TABLE j USING json_each", QueryError),
    ("update-schema", "UPDATE sqlite_master SET name = 'u' WHERE name = 't'", QueryError),
    ("reindex", "REINDEX t", QueryError),
    ("analyze", "ANALYZE", QueryError),
    # TEMP objects that would shadow `t` for every later query on this connection
    ("temp-table", "CREATE TEMP TABLE t (x, s)", QueryError),
    ("temp-table-as", "CREATE TEMP TABLE t AS SELECT 99 AS x, 'evil' AS s", QueryError),
    ("temp-view", "CREATE TEMP VIEW t AS SELECT 99 AS x, 'evil' AS s", QueryError),
    ("temp-virtual", "CREATE VIRTUAL TABLE temp.t USING json_each", QueryError),
    ("temp-trigger", "CREATE TEMP TRIGGER g AFTER INSERT ON t BEGIN SELECT 1; END", QueryError),
    # files: new databases, copies, extensions, file functions
    ("attach-new-file", "ATTACH DATABASE 'new.sqlite' AS n", QueryError),
    ("attach-memory", "ATTACH DATABASE ':memory:' AS m", QueryError),
    ("detach-main", "DETACH DATABASE main", QueryError),
    ("vacuum-into", "VACUUM INTO 'copy.sqlite'", QueryError),
    ("vacuum", "VACUUM", QueryError),
    ("load-extension", "SELECT load_extension('/tmp/evil.so')", QueryError),
    ("fts3-tokenizer", "SELECT fts3_tokenizer('simple')", QueryError),
    ("writefile", "SELECT writefile('written.txt', 'data')", QueryError),
    ("readfile", "SELECT readfile('/etc/passwd')", QueryError),
    # pragmas
    ("pragma-query-only", "PRAGMA query_only = 0", QueryError),
    ("pragma-writable-schema", "PRAGMA writable_schema = 1", QueryError),
    ("pragma-journal-wal", "PRAGMA journal_mode = WAL", QueryError),
    ("pragma-user-version", "PRAGMA user_version = 7", QueryError),
    ("pragma-heap", "PRAGMA hard_heap_limit = 0", QueryError),
    ("pragma-temp-dir", "PRAGMA temp_store_directory = '.'", QueryError),
    ("pragma-statement", "PRAGMA table_info(t)", QueryError),
    ("pragma-function-setting", "SELECT * FROM pragma_query_only", QueryError),
    # transaction control
    ("begin", "BEGIN", QueryError),
    ("begin-immediate", "BEGIN IMMEDIATE", QueryError),
    ("commit", "COMMIT", QueryError),
    ("rollback", "ROLLBACK", QueryError),
    ("savepoint", "SAVEPOINT s", QueryError),
    ("release", "RELEASE s", QueryError),
    # more than one statement
    ("select-then-drop", "SELECT 1; DROP TABLE t", QueryError),
    ("two-selects", "SELECT 1; SELECT 2", QueryError),
    ("select-then-attach", "SELECT * FROM t; ATTACH 'x.sqlite' AS x", QueryError),
    ("nul-smuggled", "SELECT 1\x00; DROP TABLE t", QueryError),
    # not a query at all
    ("empty", "", QueryError),
    ("comment-only", "-- nothing here\n/* at all */", QueryError),
    ("lone-surrogate", "SELECT '\ud800'", QueryError),
    # resource exhaustion
    ("recursive-forever", COUNT_FOREVER, QueryTimeout),
    ("cross-join", "SELECT count(*) FROM big a, big b, big c, big d", QueryTimeout),
    (
        "first-row-then-forever",
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) "
        "SELECT n FROM c WHERE n = 1 OR n < 0",
        QueryTimeout,
    ),
    ("cross-join-rows", "SELECT a.n, b.n FROM big a, big b", TooManyRows),
    ("recursive-rows", "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) "
     "SELECT n FROM c", TooManyRows),
    ("wide-result", "SELECT hex(randomblob(40000)) FROM big", TooManyRows),
    ("randomblob", "SELECT randomblob(2000000000)", QueryError),
    ("zeroblob", "SELECT zeroblob(1000000000)", QueryError),
    (
        "replace-blowup",
        "SELECT replace(replace(replace(hex(zeroblob(1000)), '0', '0000000000'),"
        " '0', '0000000000'), '0', '0000000000')",
        QueryError,
    ),
    ("group-concat-blowup", "SELECT group_concat(hex(randomblob(100))) FROM big",
     QueryError),
    ("deep-expression", "SELECT " + "(" * 3000 + "1" + ")" * 3000, QueryError),
    ("huge-compound", " UNION ALL ".join(["SELECT 1"] * 1000), QueryError),
]  # fmt: skip


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _make_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x INTEGER PRIMARY KEY, s TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ORIGINAL_T)
    conn.execute("CREATE TABLE big (n INTEGER)")
    conn.executemany("INSERT INTO big VALUES (?)", ((i,) for i in range(BIG_ROWS)))
    conn.commit()
    conn.close()


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "hostile.sqlite"
    _make_database(path)
    return path


@pytest.fixture(scope="module", autouse=True)
def _no_result_reuse() -> Iterator[None]:
    """Every check below must reach the worker's connection, not a kept result."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite_engine_module, "RESULT_CACHE_BYTES", 0)
        yield


@pytest.fixture(scope="module")
def engine(database: Path) -> Iterator[SqliteEngine]:
    """One engine for the whole module: state left by one query would show in the next."""
    engine = open_engine(str(database))
    assert isinstance(engine, SqliteEngine)
    yield engine
    engine.close()


@pytest.mark.parametrize(
    ("sql", "expected"), [pytest.param(sql, exc, id=name) for name, sql, exc in HOSTILE]
)
def test_hostile_query_is_refused_and_leaves_nothing(
    engine: SqliteEngine,
    database: Path,
    sql: str,
    expected: type[EngineError],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(database.parent)  # relative file names (ATTACH 'new.sqlite') land here
    digest = _sha256(database)
    listing = sorted(p.name for p in database.parent.iterdir())

    with pytest.raises(expected) as caught:
        engine.execute(sql, FOREVER if expected is QueryTimeout else LIMITS)

    assert str(caught.value)  # the user sees a message, not an empty string
    assert _sha256(database) == digest
    assert sorted(p.name for p in database.parent.iterdir()) == listing
    assert engine.execute("SELECT x, s FROM t ORDER BY x", LIMITS).rows == ORIGINAL_T
    assert engine.execute("SELECT count(*) FROM big", LIMITS).rows == [(BIG_ROWS,)]
    assert engine.execute("SELECT name FROM temp.sqlite_master", LIMITS).rows == []


def test_denial_message_names_the_refused_operation(engine: SqliteEngine) -> None:
    with pytest.raises(QueryError, match="ATTACH"):
        engine.execute("ATTACH DATABASE 'new.sqlite' AS n", LIMITS)
    with pytest.raises(QueryError, match="load_extension"):
        engine.execute("SELECT load_extension('x')", LIMITS)
    with pytest.raises(QueryError, match="one SQL statement"):
        engine.execute("SELECT 1; SELECT 2", LIMITS)


def test_timeout_message_names_the_limit(engine: SqliteEngine) -> None:
    with pytest.raises(QueryTimeout, match="0.25 s"):
        engine.execute(COUNT_FOREVER, FOREVER)


def test_too_many_rows_message_says_which_cap(engine: SqliteEngine) -> None:
    with pytest.raises(TooManyRows, match="1000 rows"):
        engine.execute("SELECT a.n FROM big a, big b", LIMITS)
    with pytest.raises(TooManyRows, match="1000000 bytes"):
        engine.execute("SELECT hex(randomblob(40000)) FROM big", LIMITS)


def test_select_like_reads_still_work(engine: SqliteEngine) -> None:
    """The authorizer must not refuse what ordinary queries need."""
    queries = {
        "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5) "
        "SELECT sum(n) FROM c": [(15,)],
        "SELECT name FROM pragma_table_info('t') ORDER BY cid": [("x",), ("s",)],
        "SELECT value FROM json_each('[7, 8]')": [(7,), (8,)],
        "SELECT count(*) FROM sqlite_master WHERE type = 'table'": [(2,)],
        "SELECT upper(s) FROM t WHERE x = 1;  -- trailing comment": [("ONE",)],
    }
    for _ in range(2):  # twice: the second run must not be judged differently
        for sql, rows in queries.items():
            assert engine.execute(sql, LIMITS).rows == rows, sql


def test_every_hostile_query_in_a_row_leaves_no_state(database: Path) -> None:
    """A fresh engine fed the whole list, then the reads: nothing leaked between queries."""
    engine = open_engine(str(database))
    try:
        for _, sql, expected in HOSTILE:
            with pytest.raises(expected):
                engine.execute(sql, FOREVER if expected is QueryTimeout else LIMITS)
        assert engine.execute("SELECT * FROM t ORDER BY x", LIMITS).rows == ORIGINAL_T
        assert engine.execute("SELECT 1", LIMITS).rows == [(1,)]
    finally:
        engine.close()


def test_missing_file_raises_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "sub" / "nope.sqlite"
    with pytest.raises(DatabaseMissing, match="nope.sqlite"):
        open_engine("sub/nope.sqlite", base_dir=tmp_path)
    assert not missing.exists()
    assert list(tmp_path.iterdir()) == []


def test_missing_file_through_cache_creates_nothing(tmp_path: Path) -> None:
    cache = EngineCache()
    for _ in range(3):
        with pytest.raises(DatabaseMissing, match=str(tmp_path / "gone.sqlite")):
            cache.get("gone.sqlite", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_worker_heap_gets_a_ceiling(engine: SqliteEngine) -> None:
    """The worker process that holds the connections has SQLite's heap ceiling set."""
    assert engine._worker.info()["heap_limit"] == HEAP_LIMIT_BYTES


def test_wal_database_leaves_no_side_files(tmp_path: Path) -> None:
    """A WAL-mode file opened read-only must not grow `-wal` / `-shm` files beside it."""
    path = tmp_path / "wal.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()  # the last connection checkpoints and removes -wal and -shm
    listing = sorted(p.name for p in tmp_path.iterdir())
    digest = _sha256(path)
    engine = open_engine(str(path))
    try:
        assert engine.execute("SELECT x FROM t", LIMITS).rows == [(1,)]
        assert sorted(p.name for p in tmp_path.iterdir()) == listing
    finally:
        engine.close()
    assert _sha256(path) == digest
