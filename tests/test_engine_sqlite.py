"""The SQLite engine's ordinary behaviour, database spec parsing, and the engine cache."""

from __future__ import annotations

import sqlite3
import string
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_nl2sql.engines as engines
from pytest_nl2sql.engines import (
    DatabaseMissing,
    EngineCache,
    EngineKind,
    Limits,
    QueryError,
    TooManyRows,
    open_engine,
    parse_database,
)
from pytest_nl2sql.engines.sqlite import SqliteEngine

LIMITS = Limits(timeout=5.0, max_rows=100, max_bytes=100_000, max_value_bytes=10_000)


def _make(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, age INTEGER, net REAL);
        CREATE TABLE concert (concert_id INTEGER, singer_id INTEGER REFERENCES singer);
        CREATE VIEW old AS SELECT name FROM singer WHERE age > 40;
        INSERT INTO singer VALUES (1, 'Joe', 52, 1.5), (2, 'Ann', 31, NULL), (3, 'Bo', 45, 2.0);
        INSERT INTO concert VALUES (10, 1), (11, 3);
        """
    )
    conn.execute("CREATE TABLE raw (t TEXT)")
    conn.execute("INSERT INTO raw VALUES (CAST(X'61FF62' AS TEXT))")  # 'a', invalid byte, 'b'
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return _make(tmp_path / "concert.sqlite")


def test_execute_returns_columns_and_plain_rows(db: Path) -> None:
    engine = open_engine("concert.sqlite", base_dir=db.parent)
    try:
        result = engine.execute("SELECT name, age, net FROM singer ORDER BY singer_id", LIMITS)
    finally:
        engine.close()
    assert engine.dialect == "sqlite"
    assert result.columns == ("name", "age", "net")
    assert result.rows == [("Joe", 52, 1.5), ("Ann", 31, None), ("Bo", 45, 2.0)]


def test_errors_carry_the_database_message_and_the_connection_survives(db: Path) -> None:
    engine = open_engine(str(db))
    with pytest.raises(QueryError, match="no such column: x"):
        engine.execute("SELECT x FROM singer", LIMITS)
    with pytest.raises(QueryError, match="syntax error"):
        engine.execute("SELEC name FROM singer", LIMITS)
    assert engine.execute("SELECT count(*) FROM concert;", LIMITS).rows == [(2,)]
    engine.close()


def test_row_cap_is_exact(db: Path) -> None:
    engine = open_engine(str(db))
    three = Limits(timeout=5.0, max_rows=3)
    assert len(engine.execute("SELECT * FROM singer", three).rows) == 3
    with pytest.raises(TooManyRows, match="more than 2 rows"):
        engine.execute("SELECT * FROM singer", Limits(timeout=5.0, max_rows=2))
    engine.close()


def test_size_cap_counts_text(db: Path) -> None:
    engine = open_engine(str(db))
    small = Limits(timeout=5.0, max_bytes=1_000, max_value_bytes=5_000)
    assert engine.execute("SELECT hex(randomblob(100))", small).rows[0][0].isalnum()
    with pytest.raises(TooManyRows, match="1000 bytes"):
        engine.execute("SELECT hex(randomblob(2000))", small)
    engine.close()


def test_undecodable_text_never_crashes(db: Path) -> None:
    default = open_engine(str(db))
    compat = open_engine(str(db), text_errors="ignore")
    assert default.execute("SELECT t FROM raw", LIMITS).rows == [("a\\xffb",)]
    assert compat.execute("SELECT t FROM raw", LIMITS).rows == [("ab",)]
    default.close()
    compat.close()


def test_unknown_text_error_handler_is_refused(db: Path) -> None:
    with pytest.raises(LookupError):
        open_engine(str(db), text_errors="no-such-handler")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=40), st.sampled_from(["ignore", "replace", "backslashreplace"]))
def test_text_is_decoded_like_python_would(tmp_path_factory, data: bytes, handler: str) -> None:
    path = tmp_path_factory.getbasetemp() / "decode.sqlite"
    if not path.exists():
        sqlite3.connect(path).close()
    engine = open_engine(str(path), text_errors=handler)
    try:
        rows = engine.execute(f"SELECT CAST(X'{data.hex()}' AS TEXT)", LIMITS).rows
    finally:
        engine.close()
    assert rows == [(data.decode("utf-8", errors=handler),)]


def test_schema_ddl_and_columns(db: Path) -> None:
    engine = open_engine(str(db))
    assert engine.schema_columns() == {
        "singer": ["singer_id", "name", "age", "net"],
        "concert": ["concert_id", "singer_id"],
        "raw": ["t"],
    }
    ddl = engine.schema_ddl()
    assert ddl.index("CREATE TABLE singer") < ddl.index("CREATE TABLE concert")
    assert "CREATE VIEW old" in ddl
    engine.close()


def test_the_schema_is_read_in_this_process_from_any_thread(db: Path) -> None:
    """Our own schema queries cost no round trip to the worker (nor its opening the database),
    and a prediction asked ahead of its turn may read the schema from another thread meanwhile."""
    engine = open_engine(str(db))
    assert isinstance(engine, SqliteEngine)
    try:
        found: list[object] = []
        readers = [threading.Thread(target=lambda: found.append((engine.schema_columns(), engine.schema_ddl())))
                   for _ in range(4)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        assert len(found) == 4 and all(f == found[0] for f in found)
        assert found[0][0]["raw"] == ["t"] and "CREATE VIEW old" in found[0][1]
        assert engine._handle is None  # the worker never opened the database
    finally:
        engine.close()
    with pytest.raises(DatabaseMissing, match="closed"):
        engine.schema_ddl()


def test_not_a_database_is_database_missing(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database file, just text" * 100)
    with pytest.raises(DatabaseMissing, match="junk.sqlite"):
        open_engine(str(junk))
    with pytest.raises(DatabaseMissing, match="not a file"):
        open_engine(str(tmp_path))


_NAME_CHARS = string.ascii_letters + string.digits + " #?%&=;'[]()-_,+@~!$é中"


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(alphabet=_NAME_CHARS, min_size=1, max_size=30))
def test_any_file_name_opens_read_only(tmp_path: Path, name: str) -> None:
    """The `file:` URI must quote `?`, `#`, `%` and spaces, or SQLite opens another file."""
    path = tmp_path / f"{name}.db"
    if not path.exists():
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (42)")
        conn.commit()
        conn.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    engine = open_engine(path.name, base_dir=tmp_path)
    try:
        assert engine.execute("SELECT x FROM t", LIMITS).rows == [(42,)]
    finally:
        engine.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# -- database specs -------------------------------------------------------------------------


def test_plain_path_is_relative_to_base_dir(tmp_path: Path) -> None:
    spec = parse_database("dbs/a.sqlite", tmp_path)
    assert spec.kind is EngineKind.SQLITE
    assert spec.path == tmp_path / "dbs" / "a.sqlite"


def test_sqlite_url_is_read_as_sqlalchemy_reads_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    relative = parse_database("sqlite:///rel/a.sqlite", Path("/elsewhere"))
    assert relative.path == tmp_path / "rel" / "a.sqlite"
    absolute = parse_database("sqlite:////data/x%20y.sqlite")
    assert absolute.path == Path("/data/x y.sqlite")
    assert parse_database("sqlite+pysqlite:////data/a.db").kind is EngineKind.SQLITE
    assert parse_database("duckdb:////data/a.duckdb").kind is EngineKind.DUCKDB


def test_server_urls_parse_with_driver_suffix_removed() -> None:
    pg = parse_database("postgresql+psycopg://u:p%40ss@127.0.0.1:5432/test?sslmode=disable")
    assert pg.kind is EngineKind.POSTGRES
    assert pg.url == "postgresql://u:p%40ss@127.0.0.1:5432/test?sslmode=disable"
    assert pg.server is not None
    assert (pg.server.user, pg.server.password, pg.server.port) == ("u", "p@ss", 5432)
    assert "p%40ss" not in pg.describe() and "***" in pg.describe()
    my = parse_database("mariadb+pymysql://root@localhost/test")
    assert my.kind is EngineKind.MYSQL
    assert my.server is not None and my.server.database == "test" and my.server.password is None


@pytest.mark.parametrize(
    "database",
    ["", "sqlite://", "sqlite:///:memory:", "duckdb:///:memory:", "mssql+pyodbc://h/db",
     "oracle://u@h/db"],
)  # fmt: skip
def test_unusable_specs_are_database_missing(database: str) -> None:
    with pytest.raises(DatabaseMissing):
        parse_database(database)


def test_windows_drive_path_is_not_a_url() -> None:
    assert parse_database(r"C:\dbs\a.sqlite").kind is EngineKind.SQLITE


# -- cache ----------------------------------------------------------------------------------


def test_cache_opens_once_per_database(db: Path, monkeypatch) -> None:
    opened: list[str] = []
    real_open = engines.open_spec

    def counting_open(spec, **kwargs):
        opened.append(spec.key)
        return real_open(spec, **kwargs)

    monkeypatch.setattr(engines, "open_spec", counting_open)
    cache = EngineCache()
    first = cache.get("concert.sqlite", db.parent)
    again = cache.get(str(db), None)  # another spelling of the same file
    compat = cache.get(str(db), None, text_errors="ignore")
    assert first is again
    assert compat is not first  # another text mode is another connection
    assert len(opened) == 2
    cache.close_all()
    assert len(cache) == 0
    assert cache.get(str(db), None) is not first
    cache.close_all()


def test_cache_remembers_a_missing_database(tmp_path: Path, monkeypatch) -> None:
    opened: list[str] = []
    real_open = engines.open_spec

    def counting_open(spec, **kwargs):
        opened.append(spec.key)
        return real_open(spec, **kwargs)

    monkeypatch.setattr(engines, "open_spec", counting_open)
    cache = EngineCache()
    for _ in range(62):
        with pytest.raises(DatabaseMissing, match="wta_1.sqlite"):
            cache.get("wta_1/wta_1.sqlite", tmp_path)
    assert len(opened) == 1


def test_engine_is_an_sqlite_engine(db: Path) -> None:
    engine = EngineCache().get(str(db))
    assert isinstance(engine, SqliteEngine)
    engine.close()


@pytest.mark.spider
def test_spider_golds_run_and_leave_the_files_untouched(spider_dir: Path) -> None:
    """Every dev gold runs on the real databases; no journal or lock file appears."""
    database_dir = spider_dir / "database"
    listing = sorted(str(p.relative_to(database_dir)) for p in database_dir.rglob("*"))
    cache = EngineCache()
    failures = []
    lines = (spider_dir / "dev_gold.sql").read_text(encoding="utf-8").splitlines()
    for line in filter(None, lines):
        sql, _, db_id = line.rpartition("\t")
        try:
            cache.get(f"{db_id}/{db_id}.sqlite", database_dir).execute(sql, Limits(timeout=30))
        except DatabaseMissing:
            assert db_id == "wta_1"
        except Exception as error:  # noqa: BLE001 - collect them all for one message
            failures.append(f"{db_id}: {sql}: {error}")
    cache.close_all()
    assert failures == []
    assert sorted(str(p.relative_to(database_dir)) for p in database_dir.rglob("*")) == listing


# -- reuse of results -----------------------------------------------------------------------


def _served(engine: SqliteEngine) -> int:
    """Queries the worker has run since it started (a reused result does not reach it)."""
    return engine._worker._served


def test_a_deterministic_result_is_reused_while_the_file_is_unchanged(db: Path) -> None:
    engine = open_engine(str(db))
    assert isinstance(engine, SqliteEngine)
    try:
        sql = "SELECT name, upper(name) FROM singer ORDER BY singer_id"
        first = engine.execute(sql, LIMITS)
        served = _served(engine)
        again = engine.execute(sql, LIMITS)
        assert _served(engine) == served
        assert again == first and again.rows is not first.rows
        again.rows.clear()  # each caller has its own list
        assert engine.execute(sql, LIMITS).rows == first.rows
        # other limits, another entry: a cap is never hidden by a kept result
        with pytest.raises(TooManyRows):
            engine.execute(sql, Limits(timeout=5.0, max_rows=2))
        # a function whose result may differ between runs: always run again
        engine.execute("SELECT random()", LIMITS)
        served = _served(engine)
        engine.execute("SELECT random()", LIMITS)
        assert _served(engine) == served + 1
        engine.execute("SELECT date('now'), soundex('x')", LIMITS)  # soundex: not linear, so the worker serves it
        served = _served(engine)
        engine.execute("SELECT date('now'), soundex('x')", LIMITS)
        assert _served(engine) == served + 1
    finally:
        engine.close()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_a_change_to_the_file_is_seen_at_once(db: Path, journal: str) -> None:
    writer = sqlite3.connect(db)
    writer.execute(f"PRAGMA journal_mode = {journal}")
    writer.execute("UPDATE singer SET name = 'Joe' WHERE singer_id = 1")
    writer.commit()  # a WAL file without its -wal beside it would be opened as immutable
    engine = open_engine(str(db))
    sql = "SELECT name FROM singer WHERE singer_id = 1"
    try:
        assert engine.execute(sql, LIMITS).rows == [("Joe",)]
        for name in ("Jon", "Jim"):  # same size, same page, within the file's mtime tick
            writer.execute("UPDATE singer SET name = ? WHERE singer_id = 1", (name,))
            writer.commit()
            assert engine.execute(sql, LIMITS).rows == [(name,)]
    finally:
        engine.close()
        writer.close()


def test_trusted_gold_runs_in_process_under_the_same_guards(tmp_path: Path) -> None:
    """Gold SQL (the suite author's) skips the worker round trip, not the guards."""
    from pytest_nl2sql.engines.base import QueryError, QueryTimeout, TooManyRows
    from pytest_nl2sql.engines.sqlite import SqliteEngine

    db = tmp_path / "g.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t(x)")
    con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(50)])
    con.commit()
    con.close()
    engine = SqliteEngine(db)
    try:
        assert engine.execute_trusted("SELECT count(*) FROM t", Limits()).rows == [(50,)]
        with pytest.raises(QueryError):
            engine.execute_trusted("DELETE FROM t", Limits())
        with pytest.raises(TooManyRows):
            engine.execute_trusted("SELECT x FROM t", Limits(max_rows=10))
        with pytest.raises(QueryTimeout):
            engine.execute_trusted("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
                                   Limits(timeout=0.2))
        assert engine.execute("SELECT count(*) FROM t", Limits()).rows == [(50,)]  # the database is unchanged
    finally:
        engine.close()


def test_only_queries_whose_functions_are_bounded_per_step_run_in_process(db: Path) -> None:
    """An allow-list decides: what it does not know goes to the killable worker."""
    engine = open_engine(str(db))
    assert isinstance(engine, SqliteEngine)
    try:
        served = _served(engine)
        engine.execute("SELECT count(*), max(name), upper(name) FROM singer GROUP BY name", LIMITS)
        assert _served(engine) == served  # in this process
        assert engine._handle is None  # the worker has not even opened the database
        assert engine._worker.pid is not None  # but it was started, to boot while this process works
        rows = engine.execute("SELECT name, instr(name, 'o') FROM singer ORDER BY singer_id", LIMITS).rows
        assert rows == [("Joe", 2), ("Ann", 0), ("Bo", 2)]  # refused here while prepared, answered there
        engine.execute("SELECT name FROM singer WHERE name LIKE '%a%'", LIMITS)
        assert _served(engine) == served + 2  # instr and LIKE: in the worker
        for sql in ("SELECT instr(name, 'a'), load_extension('x') FROM singer",
                    "SELECT load_extension('x'), instr(name, 'a') FROM singer"):
            with pytest.raises(QueryError, match=r"not allowed: function load_extension\(\)"):
                engine.execute(sql, LIMITS)  # a refused function is refused, wherever it is asked
    finally:
        engine.close()


def test_a_reused_result_keeps_the_time_it_took(db: Path) -> None:
    """Efficiency timings compare computations, not cache look-ups."""
    engine = open_engine(str(db))
    try:
        sql = "SELECT name, upper(name) FROM singer ORDER BY singer_id"
        first = engine.execute(sql, LIMITS)
        again = engine.execute(sql, LIMITS)
        assert first.seconds is not None and again.seconds == first.seconds
    finally:
        engine.close()
