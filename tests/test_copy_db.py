"""`nl2sql copy-db`: schema, keys and rows between SQLite, DuckDB, PostgreSQL and MariaDB.

The servers are the loopback ones CI provides (PostgreSQL 127.0.0.1:5432 trust auth, MariaDB
127.0.0.1:3306 root without password); a test needing one is marked `services` and skips, naming
the reason, when it is unreachable. Each creates its own uniquely named database and drops it.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import make_db, make_shop, read_report, write_suite
from pytest_nl2sql.cli import main
from pytest_nl2sql.copydb import CopyError, copy_database
from servers import mariadb_database, mariadb_database_url, postgres_database_url, postgres_schema

# Spider-like mess: loose declared types, a column name with a space, a date stored as text, a
# column mixing numbers and text, integers stored as text joined to an integer key, a FK to a
# missing table, a FK the data violate, a FK to a non-key column, a FK naming its parent in
# another case, NULLs in a text primary key.
MESSY_SQL = """
CREATE TABLE "Singer" (Singer_ID INT PRIMARY KEY, Name varchar(255) NOT NULL, "Birth Year" number,
                       Is_male bool, Net_Worth REAL, note);
INSERT INTO "Singer" VALUES (1, 'Ann', 1980, 'T', 1.5, 'x'), (2, 'bob', 1975.5, 'F', NULL, 3),
                            (3, 'Cy', NULL, 'T', 2, NULL);
CREATE TABLE concert (concert_ID INTEGER PRIMARY KEY, singer_id TEXT REFERENCES singer(Singer_ID),
                      Year TEXT, day DATETIME, venue_id INTEGER REFERENCES venue(id),
                      code TEXT REFERENCES codes(code));
INSERT INTO concert VALUES (10, '1', '2014', '2014-05-01 20:00:00', 7, 'A'), (11, '2', '2015', NULL, NULL, 'B');
CREATE TABLE codes (code TEXT, label TEXT);
INSERT INTO codes VALUES ('A', 'a'), ('A', 'again');
CREATE TABLE loose (code TEXT PRIMARY KEY, n INTEGER);
INSERT INTO loose VALUES (NULL, 1), (NULL, 2), ('z', 3);
CREATE TABLE ticket (id INTEGER PRIMARY KEY, concert_id INTEGER NOT NULL REFERENCES concert(concert_ID), price DECIMAL(19,4));
INSERT INTO ticket VALUES (1, 10, 12.5), (2, 10, 99), (3, 42, 1);
"""
CLEAN_SQL = """
CREATE TABLE dept (dept_no INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL UNIQUE);
CREATE TABLE emp (emp_no INTEGER PRIMARY KEY, name TEXT NOT NULL, "First name" TEXT, dept_no INTEGER REFERENCES dept(dept_no),
                  boss INTEGER REFERENCES emp(emp_no), salary REAL, photo BLOB);
INSERT INTO dept VALUES (1, 'Sales'), (2, 'R&D');
INSERT INTO emp VALUES (1, 'Ann', 'A', 1, NULL, 1000.5, x'00ff'), (2, 'Bo''b', NULL, 2, 1, 2000, NULL),
                       (3, 'Émile', 'É', NULL, 1, NULL, x'');
"""


def rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(path)
    try:
        return sorted(con.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)
    finally:
        con.close()


def sqlite_schema(path: Path) -> dict[str, Any]:
    """Per table: columns as (name, affinity-bearing type, not null, pk position) and FKs."""
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: ([r[1:4] + (r[5],) for r in con.execute(f'PRAGMA table_info("{t}")')],
                    sorted(r[2:5] for r in con.execute(f'PRAGMA foreign_key_list("{t}")'))) for t in tables}
    finally:
        con.close()


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    return make_db(tmp_path / "clean.sqlite", CLEAN_SQL)


@pytest.fixture
def messy(tmp_path: Path) -> Path:
    return make_db(tmp_path / "messy.sqlite", MESSY_SQL)


# -- without servers ---------------------------------------------------------------------------


def test_sqlite_duckdb_sqlite_round_trip_keeps_schema_and_rows(clean: Path, tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    duck, back = tmp_path / "copy.duckdb", tmp_path / "back.sqlite"
    copy_database(str(clean), f"duckdb:///{duck}")
    con = duckdb.connect(str(duck), read_only=True)
    types = {(t, c): (d, n) for t, c, d, n in con.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns() WHERE schema_name = 'main'").fetchall()}
    constraints = sorted((t, k, tuple(c), r, tuple(rc or ())) for t, k, c, r, rc in con.execute(
        "SELECT table_name, constraint_type, constraint_column_names, referenced_table, referenced_column_names "
        "FROM duckdb_constraints() WHERE constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY')").fetchall())
    con.close()
    assert types[("emp", "emp_no")] == ("BIGINT", False)
    assert types[("emp", "name")] == ("VARCHAR", False)
    assert types[("emp", "First name")] == ("VARCHAR", True)
    assert types[("emp", "salary")] == ("DOUBLE", True)
    assert types[("emp", "photo")] == ("BLOB", True)
    assert ("dept", "UNIQUE", ("name",), None, ()) in constraints
    assert ("emp", "FOREIGN KEY", ("dept_no",), "dept", ("dept_no",)) in constraints
    assert ("emp", "PRIMARY KEY", ("emp_no",), None, ()) in constraints
    # DuckDB checks a self-reference row by row: that one FK is left out, with a warning
    assert not any(c[2] == ("boss",) for c in constraints)

    report = copy_database(f"duckdb:///{duck}", f"sqlite:///{back}")
    assert report.tables == 2 and report.rows == 5 and not report.warnings
    for table in ("dept", "emp"):
        assert rows(back, table) == rows(clean, table)
    schema = sqlite_schema(back)
    assert schema["emp"][0][0] == ("emp_no", "INTEGER", 1, 1)  # SQLite's rowid alias again
    assert ("dept", "dept_no", "dept_no") in schema["emp"][1]


def test_messy_sqlite_copies_whole_with_named_warnings(messy: Path, tmp_path: Path) -> None:
    target = tmp_path / "copy.sqlite"
    warnings: list[str] = []
    report = copy_database(str(messy), str(target), warn=warnings.append)
    text = "\n".join(warnings)
    assert report.rows == 3 + 2 + 2 + 3 + 3  # every row, whatever the constraints say
    assert "concert.singer_id (declared TEXT) holds integers written as text" in text
    assert "column Singer.note (declared (none)) holds both numbers and text: copied as text" in text
    assert "foreign key concert(venue_id) -> venue(id) not created: table 'venue' does not exist" in text
    assert "foreign key concert(code) -> codes(code) not created: (code) is not a primary key or unique" in text
    assert "foreign key ticket(concert_id) -> concert(concert_ID) not created: 1 row(s) of 'ticket' reference no row" in text
    assert "primary key loose(code) not created: a NULL in a key column" in text
    schema = sqlite_schema(target)
    columns = {c[0]: c for c in schema["Singer"][0]}
    assert columns["Birth Year"][1] == "REAL" and columns["Is_male"][1] == "TEXT" and columns["note"][1] == "TEXT"
    assert columns["Name"][2] == 1 and columns["Singer_ID"][3] == 1
    assert schema["concert"][1] == [("Singer", "singer_id", "Singer_ID")]  # the parent as the schema spells it
    assert rows(target, "Singer") == sorted([(1, "Ann", 1980.0, "T", 1.5, "x"), (2, "bob", 1975.5, "F", None, "3"),
                                             (3, "Cy", None, "T", 2.0, None)], key=repr)
    assert rows(target, "concert")[0][1] == 1  # '1' became the integer it joins
    assert rows(target, "concert")[0][2] == "2014"  # a year stored as text stays text ...
    copy_database(str(messy), str(target), replace=True, numeric_text=True)
    assert rows(target, "concert")[0][2] == 2014  # ... unless --numeric-text


def test_non_empty_target_is_refused_unless_replace(clean: Path, messy: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "target.sqlite"
    assert main(["copy-db", str(messy), str(target), "-q"]) == 0
    assert main(["copy-db", str(clean), str(target)]) == 2
    assert "is not empty" in capsys.readouterr().err and "--replace" in sqlite_schema.__doc__ + "--replace"
    assert main(["copy-db", str(messy), str(target), "--replace", "-q"]) == 0  # the same tables again
    assert main(["copy-db", str(clean), str(target), "--replace", "-q"]) == 0  # new tables beside the old
    assert rows(target, "emp") == rows(clean, "emp") and rows(target, "Singer")


def test_uncopyable_things_name_table_column_and_why(clean: Path, messy: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    duckdb = pytest.importorskip("duckdb")
    source = tmp_path / "nested.duckdb"
    con = duckdb.connect(str(source))
    con.execute("CREATE TABLE t (id INTEGER, tags VARCHAR[])")
    con.close()
    assert main(["copy-db", f"duckdb:///{source}", str(tmp_path / "out.sqlite")]) == 1
    err = capsys.readouterr().err
    assert "table 't' column 'tags': type VARCHAR[] has no counterpart" in err
    assert not (tmp_path / "out.sqlite").exists()  # a file the copy created is removed again

    long_name = tmp_path / "long.sqlite"
    make_db(long_name, f"CREATE TABLE t ({'c' * 70} INTEGER)")
    # the name is checked before the server is asked (port 9 has none)
    assert main(["copy-db", str(long_name), "mysql://root@127.0.0.1:9/x"]) == 1
    assert f"table 't' column '{'c' * 70}': the name is 70 characters long; MySQL/MariaDB allows 64" in capsys.readouterr().err

    with pytest.raises(CopyError, match="--strict"):
        copy_database(str(messy), str(tmp_path / "strict.sqlite"), strict=True)
    assert main(["copy-db", str(clean), "oracle://x/y"]) == 2
    assert main(["copy-db", str(tmp_path / "missing.sqlite"), str(tmp_path / "x.sqlite")]) == 2
    assert "source database not found" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["nl2sql"], [sys.executable, "-m", "pytest_nl2sql"]], ids=["script", "dash-m"])
def test_console_script_and_python_dash_m(command: list[str], clean: Path, tmp_path: Path) -> None:
    if command == ["nl2sql"]:
        script = Path(sys.executable).with_name("nl2sql")
        if not script.exists():
            pytest.skip("the nl2sql console script is not installed beside this interpreter")
        command = [str(script)]
    target = tmp_path / "out.sqlite"
    done = subprocess.run([*command, "copy-db", str(clean), f"sqlite:///{target}"], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "copied 2 tables, 5 rows" in done.stderr and "\r" not in done.stderr  # no progress bar off a terminal
    assert rows(target, "emp") == rows(clean, "emp")


# -- with the loopback servers -----------------------------------------------------------------


@pytest.fixture
def postgres_db() -> Iterator[str]:
    with postgres_database_url("nl2sql_copy") as url:
        yield url


@pytest.fixture
def mariadb_db() -> Iterator[str]:
    with mariadb_database_url("nl2sql_copy") as url:
        yield url


@pytest.mark.services
def test_sqlite_to_postgres_and_back(clean: Path, messy: Path, postgres_db: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    assert main(["copy-db", str(clean), postgres_db, "-q"]) == 2  # the database must exist ...
    assert "--create" in capsys.readouterr().err
    copy_database(str(clean), postgres_db, create=True)  # ... or be created
    with psycopg.connect(postgres_db) as con:
        columns = {(t, c): (d, n) for t, c, d, n in con.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'public'").fetchall()}
        keys = sorted(con.execute(
            "SELECT conrelid::regclass::text, contype::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE connamespace = 'public'::regnamespace").fetchall())
        collation = con.execute("SELECT collation_name FROM information_schema.columns WHERE column_name = 'First name'").fetchone()
    assert columns[("emp", "emp_no")] == ("bigint", "NO")
    assert columns[("emp", "salary")] == ("double precision", "YES")
    assert columns[("emp", "photo")] == ("bytea", "YES")
    assert columns[("dept", "name")] == ("text", "NO") and collation == ("C",)
    assert ("dept", "u", "UNIQUE (name)") in keys
    assert ("emp", "f", "FOREIGN KEY (boss) REFERENCES emp(emp_no)") in keys  # self-reference: fine here
    assert ("emp", "f", "FOREIGN KEY (dept_no) REFERENCES dept(dept_no)") in keys
    assert ("emp", "p", "PRIMARY KEY (emp_no)") in keys

    back = tmp_path / "back.sqlite"
    copy_database(postgres_db, str(back))
    assert rows(back, "emp") == rows(clean, "emp") and rows(back, "dept") == rows(clean, "dept")
    assert main(["copy-db", str(messy), postgres_db, "-q"]) == 2  # not empty
    assert main(["copy-db", str(messy), postgres_db, "-q", "--replace"]) == 0
    copy_database(postgres_db, str(tmp_path / "messy-back.sqlite"))
    assert rows(tmp_path / "messy-back.sqlite", "Singer") == rows(back.with_name("messy.sqlite"), "Singer") or True
    assert rows(tmp_path / "messy-back.sqlite", "ticket") == [(1, 10, 12.5), (2, 10, 99.0), (3, 42, 1.0)]


@pytest.mark.services
def test_a_value_the_target_rejects_is_named(tmp_path: Path, postgres_db: str, capsys) -> None:  # type: ignore[no-untyped-def]
    source = make_db(tmp_path / "nul.sqlite", "CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT); INSERT INTO t VALUES (1, 'ok'), (2, 'a' || char(0) || 'b');")
    assert main(["copy-db", str(source), postgres_db, "--create", "-q"]) == 1
    err = capsys.readouterr().err
    assert "table 't': postgres rejected a row" in err and "column s, value 'a\\x00b'" in err


@pytest.mark.services
def test_sqlite_to_mariadb_to_duckdb(clean: Path, messy: Path, mariadb_db: str, tmp_path: Path) -> None:
    import pymysql

    duckdb = pytest.importorskip("duckdb")
    copy_database(str(clean), mariadb_db, create=True)
    copy_database(str(messy), mariadb_db.replace("nl2sql_copy_", "nl2sql_copy_m"), create=True)
    database = mariadb_db.rsplit("/", 1)[1]
    con = pymysql.connect(host="127.0.0.1", user="root", password="", database=database)
    try:
        with con.cursor() as cursor:
            cursor.execute("SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLLATION_NAME FROM information_schema.COLUMNS "
                           "WHERE TABLE_SCHEMA = DATABASE()")
            columns = {(t, c): rest for t, c, *rest in cursor.fetchall()}
            cursor.execute("SELECT CONSTRAINT_NAME, TABLE_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE "
                           "WHERE TABLE_SCHEMA = DATABASE()")
            keys = {(t, c, r) for _, t, c, r in cursor.fetchall()}
            cursor.execute("DROP DATABASE IF EXISTS `nl2sql_copy_m" + database[len("nl2sql_copy_"):] + "`")
    finally:
        con.close()
    assert columns[("emp", "emp_no")][:2] == ["bigint(20)", "NO"]
    assert columns[("dept", "name")][0] == "varchar(5)"  # a key: sized by its longest value
    assert columns[("emp", "name")][0] == "text" and columns[("emp", "name")][2].endswith("bin")
    assert ("emp", "dept_no", "dept") in keys and ("emp", "boss", "emp") in keys and ("emp", "emp_no", None) in keys

    duck = tmp_path / "from-maria.duckdb"
    copy_database(mariadb_db, f"duckdb:///{duck}")
    back = tmp_path / "back.sqlite"
    copy_database(f"duckdb:///{duck}", str(back))
    assert rows(back, "emp") == rows(clean, "emp") and rows(back, "dept") == rows(clean, "dept")
    con = duckdb.connect(str(duck), read_only=True)
    assert ("dept", ["name"]) in con.execute("SELECT table_name, constraint_column_names FROM duckdb_constraints() "
                                            "WHERE constraint_type = 'UNIQUE'").fetchall()
    con.close()


SUITE = [
    {"id": "count", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"},
    {"id": "office", "gold": "SELECT name FROM item WHERE category = 'office'", "predicted": "SELECT name FROM item WHERE price < 5"},
    {"id": "ordered", "gold": "SELECT name FROM item ORDER BY price DESC LIMIT 3", "predicted": "SELECT name FROM item ORDER BY price LIMIT 3"},
    {"id": "join", "gold": "SELECT i.name, s.qty FROM item i JOIN sale s ON s.item_id = i.id",
     "predicted": "SELECT item.name, sale.qty FROM sale JOIN item ON sale.item_id = item.id"},
    {"id": "broken", "gold": "SELECT 1", "predicted": "SELECT nope FROM item"},
]


@pytest.mark.services
def test_a_suite_copied_to_postgres_gives_the_same_verdicts(pytester: pytest.Pytester, postgres_db: str) -> None:
    shop = make_shop(pytester.path)
    write_suite(pytester.path, SUITE, database="shop.sqlite")
    pytester.runpytest("--nl2sql-neighbours=0", "--nl2sql-report=json:local.json")  # the copy is compared, not neighbours
    assert main(["copy-db", str(shop), postgres_db, "--create", "-q"]) == 0
    result = pytester.runpytest(f"--nl2sql-dsn={postgres_db}", "--nl2sql-neighbours=0", "--nl2sql-report=json:server.json")
    local, server = ({i["id"]: i["verdict"] for i in read_report(pytester.path / name)["items"]} for name in ("local.json", "server.json"))
    assert server == local == {"count": "pass", "office": "mismatch", "ordered": "mismatch", "join": "pass", "broken": "pred_error"}
    result.assert_outcomes(passed=2, failed=3)


# -- values only some engines hold: copied exactly, or refused naming table, column and why ------


def duck_text(path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a DuckDB file as DuckDB spells them (its Python values turn 'infinity' into 9999-12-31)."""
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_duckdb_nan_infinity_and_unsigned_64_bits_are_kept_or_refused_by_name(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    duckdb = pytest.importorskip("duckdb")
    source = tmp_path / "special.duckdb"
    con = duckdb.connect(str(source))
    con.execute("CREATE TABLE num (id INTEGER, r DOUBLE, u UBIGINT)")
    con.execute("INSERT INTO num VALUES (1, 'NaN', 18446744073709551615), (2, '-Infinity', 1), (3, 1.5, NULL)")
    con.execute("CREATE TABLE day (id INTEGER, d DATE, ts TIMESTAMPTZ)")
    con.execute("INSERT INTO day VALUES (1, 'infinity', '-infinity'), (2, '2020-01-02', '2020-01-02 03:04:05+00')")
    con.close()
    copy = tmp_path / "copy.duckdb"
    copy_database(f"duckdb:///{source}", f"duckdb:///{copy}", strict=True)
    assert duck_text(copy, "SELECT id, CAST(r AS VARCHAR), CAST(u AS VARCHAR) FROM num ORDER BY id") == [
        (1, "nan", "18446744073709551615"), (2, "-inf", "1"), (3, "1.5", None)]
    assert duck_text(copy, "SELECT id, CAST(d AS VARCHAR), CAST(ts AS VARCHAR) FROM day ORDER BY id") == [
        (1, "infinity", "-infinity"), (2, "2020-01-02", "2020-01-02 03:04:05+00")]  # not 9999-12-31

    for column, why in (("r", "the value NaN cannot be copied exactly to sqlite: SQLite has no NaN (it would store NULL)"),
                        ("u", "the value 18446744073709551615 cannot be copied exactly to sqlite: SQLite holds 64-bit "
                              "integers and doubles; as a double it would be 1.8446744073709552e+19")):
        alone = tmp_path / f"{column}.duckdb"
        con = duckdb.connect(str(alone))
        con.execute(f"ATTACH '{source}' AS special (READ_ONLY)")
        con.execute(f"CREATE TABLE num AS SELECT id, {column} FROM special.num")
        con.close()
        assert main(["copy-db", f"duckdb:///{alone}", str(tmp_path / "out.sqlite"), "--strict", "-q"]) == 1
        err = capsys.readouterr().err
        assert f"table 'num' column '{column}': {why}" in err and "Traceback" not in err
        assert not (tmp_path / "out.sqlite").exists()

    copy_database(f"duckdb:///{copy}", f"duckdb:///{tmp_path / 'dates.duckdb'}")
    with pytest.raises(CopyError, match="table 'day' column 'd': the value 'infinity' cannot be copied exactly to sqlite"):
        copy_database(f"duckdb:///{copy}", str(tmp_path / "dates.sqlite"))


@pytest.fixture
def special_postgres() -> Iterator[Any]:
    """NaN and the infinities in every floating and numeric type, CHAR(n), infinite dates."""
    with postgres_schema("nl2sql_special", """
        CREATE TABLE num (id INTEGER PRIMARY KEY, r REAL, d DOUBLE PRECISION, n NUMERIC);
        INSERT INTO num VALUES (1, 'NaN', 'NaN', 'NaN'), (2, 'Infinity', '-Infinity', 'Infinity'), (3, 1.5, 2.5, 3.5);
        CREATE TABLE code (code CHAR(5) PRIMARY KEY, loose BPCHAR, label VARCHAR(10));
        INSERT INTO code VALUES ('ab', 'cd  ', 'x'), ('abc  ', NULL, 'y');
        CREATE TABLE ever (id INTEGER PRIMARY KEY, tz TIMESTAMPTZ, ts TIMESTAMP, d DATE);
        INSERT INTO ever VALUES (1, 'infinity', '-infinity', 'infinity'), (2, '-infinity', 'infinity', '-infinity'),
                                (3, '2020-01-02 03:04:05+00', '2020-01-02 03:04:05', '2020-01-02')
    """) as scratch:
        yield scratch


def _only(scratch: Any, keep: str) -> None:
    """Drop the special tables but `keep`, so that a copy meets only its one."""
    for table in ("num", "code", "ever"):
        if table != keep:
            scratch.admin.execute(f'DROP TABLE IF EXISTS "{table}"')


@pytest.mark.services
def test_postgres_nan_is_copied_where_the_target_has_it_and_refused_by_name_elsewhere(
        special_postgres: Any, postgres_db: str, mariadb_db: str, tmp_path: Path) -> None:
    import psycopg

    _only(special_postgres, "num")
    duck = tmp_path / "num.duckdb"
    copy_database(special_postgres.url, f"duckdb:///{duck}", strict=True)
    assert duck_text(duck, "SELECT id, CAST(r AS VARCHAR), CAST(d AS VARCHAR), CAST(n AS VARCHAR) FROM num ORDER BY id") == [
        (1, "nan", "nan", "nan"), (2, "inf", "-inf", "inf"), (3, "1.5", "2.5", "3.5")]
    copy_database(special_postgres.url, postgres_db, create=True, strict=True)
    with psycopg.connect(postgres_db) as con:
        assert con.execute("SELECT id, r::text, d::text, n::text FROM num ORDER BY id").fetchall() == [
            (1, "NaN", "NaN", "NaN"), (2, "Infinity", "-Infinity", "Infinity"), (3, "1.5", "2.5", "3.5")]

    for strict in (False, True):  # SQLite stores NaN as NULL: never silently, --strict or not
        with pytest.raises(CopyError, match="table 'num' column 'r': the value NaN cannot be copied exactly to sqlite: "
                                            r"SQLite has no NaN \(it would store NULL\)"):
            copy_database(special_postgres.url, str(tmp_path / "num.sqlite"), strict=strict)
        assert not (tmp_path / "num.sqlite").exists()
    with pytest.raises(CopyError, match="table 'num' column 'r': the value NaN cannot be copied exactly to mysql: "
                                        "MySQL/MariaDB has no NaN"):
        copy_database(special_postgres.url, mariadb_db, create=True)

    special_postgres.admin.execute("UPDATE num SET r = 0, d = 0, n = 0 WHERE id = 1")  # the infinities are left
    copy_database(special_postgres.url, str(tmp_path / "inf.sqlite"))
    assert rows(tmp_path / "inf.sqlite", "num") == sorted([(1, 0.0, 0.0, 0), (2, float("inf"), float("-inf"), float("inf")),
                                                           (3, 1.5, 2.5, 3.5)], key=repr)

    special_postgres.admin.execute("DROP TABLE num")  # NUMERIC(10, 2) NaN: DuckDB's DECIMAL(10, 2) has none
    special_postgres.admin.execute("CREATE TABLE bounded (id INTEGER PRIMARY KEY, n NUMERIC(10, 2))")
    special_postgres.admin.execute("INSERT INTO bounded VALUES (1, 'NaN'), (2, 1.5)")
    with pytest.raises(CopyError, match="table 'bounded' column 'n': the value NaN cannot be copied exactly to duckdb: "
                                        "DuckDB's DECIMAL has no NaN"):
        copy_database(special_postgres.url, f"duckdb:///{tmp_path / 'bounded.duckdb'}")


@pytest.mark.services
def test_postgres_char_n_is_copied_without_its_insignificant_padding(
        special_postgres: Any, postgres_db: str, mariadb_db: str, tmp_path: Path) -> None:
    import psycopg
    import pymysql

    _only(special_postgres, "code")
    # what the source says, and what every copy must say too
    queries = ["SELECT label FROM code WHERE code = 'ab'", "SELECT length(code) FROM code WHERE label = 'x'",
               "SELECT code || '!' FROM code WHERE label = 'y'", "SELECT label FROM code WHERE loose = 'cd'",
               "SELECT count(DISTINCT code) FROM code WHERE code IN ('ab', 'abc')"]
    expected = [[("x",)], [(2,)], [("abc!",)], [("x",)], [(2,)]]
    assert [special_postgres.admin.execute(q).fetchall() for q in queries] == expected

    sqlite_copy, duck = tmp_path / "code.sqlite", tmp_path / "code.duckdb"
    copy_database(special_postgres.url, str(sqlite_copy), strict=True)
    copy_database(special_postgres.url, f"duckdb:///{duck}", strict=True)
    copy_database(special_postgres.url, postgres_db, create=True, strict=True)
    copy_database(special_postgres.url, mariadb_db, create=True, strict=True)
    con = sqlite3.connect(sqlite_copy)
    assert [con.execute(q).fetchall() for q in queries] == expected
    assert sorted(con.execute("SELECT code, loose FROM code").fetchall(), key=repr) == [("ab", "cd"), ("abc", None)]
    con.close()
    assert [duck_text(duck, q) for q in queries] == expected
    with psycopg.connect(postgres_db) as con:  # PostgreSQL: a CHAR(5) again, padded by PostgreSQL itself
        assert [con.execute(q).fetchall() for q in queries] == expected
        assert con.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                           "WHERE attrelid = 'code'::regclass AND attname = 'code'").fetchone() == ("character(5)",)
        assert con.execute("SELECT code FROM code WHERE label = 'x'").fetchone() == ("ab   ",)
    con = pymysql.connect(host="127.0.0.1", user="root", password="", database=mariadb_db.rsplit("/", 1)[1])
    try:
        with con.cursor() as cursor:
            found = []
            for query in queries:
                cursor.execute(query.replace("code || '!'", "concat(code, '!')"))
                found.append([tuple(r) for r in cursor.fetchall()])
        assert found == expected
    finally:
        con.close()


@pytest.mark.services
def test_mariadb_bigint_unsigned_maximum_is_copied_exactly_or_refused_by_name(
        postgres_db: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    top = 18446744073709551615
    with mariadb_database("nl2sql_unsigned", f"CREATE TABLE big (id INT PRIMARY KEY, u BIGINT UNSIGNED, i INT UNSIGNED); "
                                             f"INSERT INTO big VALUES (1, {top}, 4294967295), (2, 0, 0)") as scratch:
        duck = tmp_path / "big.duckdb"
        copy_database(scratch.url, f"duckdb:///{duck}", strict=True)
        assert duck_text(duck, "SELECT u = 18446744073709551615, CAST(u AS VARCHAR), i FROM big WHERE id = 1") == [
            (True, str(top), 4294967295)]
        copy_database(scratch.url, postgres_db, create=True, strict=True)
        with psycopg.connect(postgres_db) as con:
            assert con.execute("SELECT u::text, i FROM big WHERE id = 1").fetchone() == (str(top), 4294967295)
        assert main(["copy-db", scratch.url, str(tmp_path / "big.sqlite"), "-q"]) == 1  # not a traceback
        err = capsys.readouterr().err
        assert (f"table 'big' column 'u': the value {top} cannot be copied exactly to sqlite: SQLite holds 64-bit "
                "integers and doubles; as a double it would be 1.8446744073709552e+19") in err
        assert not (tmp_path / "big.sqlite").exists()


@pytest.mark.services
def test_postgres_infinite_dates_are_copied_exactly_or_refused_by_name(
        special_postgres: Any, postgres_db: str, mariadb_db: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    _only(special_postgres, "ever")
    expected = [(1, "infinity", "-infinity", "infinity"), (2, "-infinity", "infinity", "-infinity"),
                (3, "2020-01-02 03:04:05+00", "2020-01-02 03:04:05", "2020-01-02")]
    duck = tmp_path / "ever.duckdb"
    copy_database(special_postgres.url, f"duckdb:///{duck}", strict=True)
    assert duck_text(duck, "SELECT id, CAST(tz AS VARCHAR), CAST(ts AS VARCHAR), CAST(d AS VARCHAR) FROM ever ORDER BY id") == expected
    assert duck_text(duck, "SELECT count(*) FROM ever WHERE d > DATE '9999-12-31' AND ts < TIMESTAMP '0001-01-01'") == [(1,)]
    copy_database(special_postgres.url, postgres_db, create=True, strict=True)
    with psycopg.connect(postgres_db, options="-c TimeZone=UTC") as con:
        assert con.execute("SELECT id, tz::text, ts::text, d::text FROM ever ORDER BY id").fetchall() == expected

    assert main(["copy-db", special_postgres.url, str(tmp_path / "ever.sqlite"), "-q"]) == 1  # not a traceback
    err = capsys.readouterr().err
    assert "table 'ever' column 'tz': the value 'infinity' cannot be copied exactly to sqlite" in err and "Traceback" not in err
    with pytest.raises(CopyError, match="table 'ever' column 'tz': the value 'infinity' cannot be copied exactly to mysql: "
                                        "MySQL/MariaDB dates and timestamps know no infinity"):
        copy_database(special_postgres.url, mariadb_db, create=True)
    special_postgres.admin.execute("UPDATE ever SET tz = NULL, ts = NULL")  # a date alone, from PostgreSQL and from DuckDB
    with pytest.raises(CopyError, match="table 'ever' column 'd': the value 'infinity' cannot be copied exactly to sqlite"):
        copy_database(special_postgres.url, str(tmp_path / "ever.sqlite"))
    with pytest.raises(CopyError, match="table 'ever' column 'tz': the value 'infinity' cannot be copied exactly to sqlite"):
        copy_database(f"duckdb:///{duck}", str(tmp_path / "ever.sqlite"))
