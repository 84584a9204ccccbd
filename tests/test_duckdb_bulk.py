"""DuckDB candidates written fast and the same: each table's rows in one multi-row INSERT (row by
row only when it is refused) into a database attached to one DuckDB instance per process, keep
exactly the rows, values and types that one `INSERT` per row into a database of its own kept."""

from __future__ import annotations

import datetime
import decimal
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

duckdb = pytest.importorskip("duckdb")

from pytest_nl2sql.neighbours.generate import Rows, _as_columns, _insert_rows, create_duckdb
from pytest_nl2sql.neighbours.schema import DUCKDB_HOST, DuckdbSource, Schema, quote, sample_in_rowid_runs

TABLES = """
CREATE TABLE parent(id BIGINT PRIMARY KEY, code VARCHAR UNIQUE);
CREATE TABLE item(id INTEGER PRIMARY KEY, parent_id BIGINT REFERENCES parent(id), name VARCHAR NOT NULL,
                  big HUGEINT, ubig UBIGINT, small SMALLINT, price DECIMAL(10, 2), wide DECIMAL(38, 10), ratio DOUBLE,
                  day DATE, moment TIMESTAMP, clock TIME, flag BOOLEAN, data BLOB, note VARCHAR, CHECK (small >= 0));
CREATE TABLE person(id INTEGER PRIMARY KEY, boss INTEGER REFERENCES person(id), name VARCHAR);
"""

VALUES: list[Any] = [
    None, 0, 1, -7, 2**31, 2**63 - 1, 2**63, 2**64, -2**63, 2**100, 1.5, -0.25, 1e20, float("nan"), float("inf"),
    decimal.Decimal("1.005"), decimal.Decimal("123456789.123456789"), decimal.Decimal("1E+30"), decimal.Decimal(12),
    "12", "12.7", "abc", "it's", 'say "hi"', "", " 3 ", "2020-01-02", "2020-01-02 03:04:05", "true", "🙂 ünï", "a\x00b",
    datetime.date(2020, 1, 2), datetime.datetime(2020, 1, 2, 3, 4, 5, 6), datetime.time(1, 2, 3), b"\x00\xff", b"12",
    True, False,
]


def _schema(tmp_path: Path) -> Schema:
    source = tmp_path / "source.duckdb"
    connection = duckdb.connect(str(source))
    connection.execute(TABLES)
    connection.close()
    reader = DuckdbSource(source)
    try:
        return reader.schema()
    finally:
        reader.close()


_REFERENCE: list[Any] = []  # a DuckDB instance of the tests' own, for the databases written row by row


def _one_by_one(schema: Schema, rows: Rows, *, own_instance: bool = False) -> tuple[Rows, dict[str, list[tuple[Any, ...]]]]:
    """What the generator did before: one INSERT per row, into a DuckDB instance of its own
    (`own_instance`), or (quicker, the same rows) into a database attached to one of the tests'."""
    if own_instance:
        connection = duckdb.connect(":memory:", config={"threads": 1})
    else:
        if not _REFERENCE:
            _REFERENCE.append(duckdb.connect(":memory:", config={"threads": 1}))
        connection = _REFERENCE[0].cursor()
        connection.execute("ATTACH ':memory:' AS reference")
        connection.execute("USE reference")
    try:
        for table in schema.tables:
            connection.execute(table.create_sql)
        kept = _insert_rows(connection, schema, rows, (duckdb.Error,))
        return kept, _contents(connection, schema)
    finally:
        if not own_instance:
            connection.execute("USE memory")
            connection.execute("DETACH reference")
        connection.close()


def _contents(connection: Any, schema: Schema) -> dict[str, list[tuple[Any, ...]]]:
    found = {}
    for table in schema.tables:
        typed = ", ".join(f"{quote(c.name)}, typeof({quote(c.name)})" for c in table.columns)
        found[table.name] = [tuple(repr(v) for v in row)  # repr: NaN equals itself
                             for row in connection.execute(f"SELECT {typed} FROM {quote(table.name)} ORDER BY rowid").fetchall()]
    return found


def _bulk(schema: Schema, rows: Rows) -> tuple[Rows, dict[str, list[tuple[Any, ...]]]]:
    connection, kept = create_duckdb(schema, rows, ":memory:")
    try:
        return kept, _contents(connection, schema)
    finally:
        connection.close()


def _random_rows(rng: random.Random) -> Rows:
    parents = [(i, rng.choice([f"p{i}", f"p{i}", "dup", None])) for i in rng.sample(range(1, 9), rng.randint(0, 6))]
    items = []
    for _ in range(rng.randint(0, 12)):
        row = [rng.choice([rng.randint(1, 15), rng.randint(1, 15), None]),
               rng.choice([p[0] for p in parents] + [99, None]) if parents else rng.choice([99, None]),
               rng.choice(["x", "it's", None, 3])]
        row += [rng.choice(VALUES) if rng.random() < 0.3 else rng.choice([7, None]) for _ in range(12)]
        items.append(tuple(row))
    people = [(i, rng.choice([None, rng.randint(1, 6)]), rng.choice(["a", None])) for i in rng.sample(range(1, 7), rng.randint(0, 5))]
    return {"parent": parents, "item": items, "person": people}


def test_every_value_goes_in_or_is_refused_as_one_insert_per_row_would(tmp_path: Path) -> None:
    """Each tricky value alone in each column (casts, overflows, NULL in NOT NULL), then mixed in one
    batch with values that go in: the batch keeps what row by row keeps, with the same types."""
    schema = _schema(tmp_path)
    item = schema.table("item")
    assert item is not None
    base = (1, None, "x", 1, 1, 1, decimal.Decimal("1.5"), decimal.Decimal("2.25"), 0.5, datetime.date(2000, 1, 1),
            datetime.datetime(2000, 1, 1), datetime.time(0, 0), True, b"", "n")
    for position in range(len(item.columns)):
        rows: list[tuple[Any, ...]] = []
        for number, value in enumerate(VALUES):
            row = list(base)
            row[0] = number + 1
            row[position] = value if position else number + 1
            rows.append(tuple(row))
        for batch in (rows, *(rows[i:i + 8] for i in range(0, len(rows), 8))):
            given: Rows = {"parent": [], "item": batch, "person": []}
            assert _bulk(schema, given) == _one_by_one(schema, given), item.columns[position].name


def test_random_candidates_keep_the_same_rows(tmp_path: Path) -> None:
    """Duplicate keys, children of missing parents, CHECK and NOT NULL failures, a table pointing at
    itself (a row may point at a later one, which row by row refuses): the rows kept are the same."""
    schema = _schema(tmp_path)
    rng = random.Random(20)
    refused = 0
    for _ in range(40):
        rows = _random_rows(rng)
        bulk, expected = _bulk(schema, rows), _one_by_one(schema, rows, own_instance=True)
        assert bulk == expected, rows
        refused += bulk[0] != rows
    assert refused > 5  # the fallback was exercised


def test_a_file_is_complete_and_detached_once_closed(tmp_path: Path) -> None:
    schema = _schema(tmp_path)
    target = tmp_path / "neighbour.duckdb"
    rows: Rows = {"parent": [(1, "a"), (2, None)], "item": [], "person": [(1, None, "boss"), (2, 1, "it's me")]}
    connection, kept = create_duckdb(schema, rows, target)
    assert kept == rows
    connection.close()
    connection.close()  # twice is harmless
    assert sorted(os.listdir(tmp_path)) == ["neighbour.duckdb", "source.duckdb"]  # no write-ahead log left
    attached = DUCKDB_HOST._instance().execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal").fetchall()
    assert [name for (name,) in attached if not name.startswith(DUCKDB_HOST.TEMPLATE_PREFIX)] == ["memory"]  # tables are copied from those
    read = "import duckdb, sys; print(duckdb.connect(sys.argv[1], read_only=True).execute('SELECT * FROM person ORDER BY id').fetchall())"
    done = subprocess.run([sys.executable, "-c", read, str(target)], check=False, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[(1, None, 'boss'), (2, 1, \"it's me\")]", done.stderr


def test_a_source_is_attached_once_for_its_readers_and_answers_as_a_connection_of_its_own(tmp_path: Path) -> None:
    source = tmp_path / "source.duckdb"
    connection = duckdb.connect(str(source))
    connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name VARCHAR)")
    connection.execute("INSERT INTO t SELECT i, 'n' || i FROM range(1, 500) r(i)")
    connection.close()
    first, second = DuckdbSource(source), DuckdbSource(source)
    table = first.schema().tables[0]
    assert second.schema() is first.schema()  # read once per file
    first.close()
    for count in (3, 40, 400):  # runs from seeded starting points, and a table read whole
        for seed in range(5):
            expected = duckdb.connect(str(source), read_only=True)
            try:
                want = sample_in_rowid_runs(expected, '"id", "name"', '"t"', count, random.Random(seed), bounded_runs=True)
            finally:
                expected.close()
            assert second.sample(table, count, random.Random(seed)) == want
            assert second.sample(table, count, random.Random(seed)) == want  # remembered: the same
    assert second.rows_matching(table, ["id"], [(7,), (7.0,), (1000,)], 5) == [(7, "n7"), (7, "n7")]
    second.close()
    attached = DUCKDB_HOST._instance().execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal").fetchall()
    assert [name for (name,) in attached if not name.startswith(DUCKDB_HOST.TEMPLATE_PREFIX)] == ["memory"]  # tables are copied from those


ONE_TYPE: dict[type, list[Any]] = {  # the values of a column that goes in as a list (`_as_columns`)
    int: [0, 1, -5, 2**31, 2**31 - 1, -2**31 - 1, 2**63 - 1, -2**63, 127, 128, 255, 32767, 40000],
    float: [1.5, 2.5, -0.5, 1e20, float("nan"), float("inf"), 0.1, 3.0, -0.0],
    str: ["12", "12.7", "abc", "it's", "", " 3 ", "2020-01-02", "2020-01-02 03:04:05", "true", "1e3", "01:02:03", "T"],
    bool: [True, False],
    bytes: [b"\x00\xff", b"12", b""],
    datetime.date: [datetime.date(2020, 1, 2), datetime.date(1, 1, 1), datetime.date(9999, 12, 31)],
    datetime.datetime: [datetime.datetime(2020, 1, 2, 3, 4, 5, 6), datetime.datetime(1970, 1, 1)],
    datetime.time: [datetime.time(1, 2, 3), datetime.time(23, 59, 59, 999999)],
}


def test_columns_of_one_type_go_in_as_lists_with_the_values_and_types_of_one_insert_per_row(tmp_path: Path) -> None:
    """Each column type against columns of each Python type (NULLs among them): a list widens its
    values to their widest type (INTEGER to BIGINT), which changes none of them; the rows kept, the
    values and their types are those of one INSERT per row, and a value its column refuses refuses
    the list as it refuses its row."""
    types = ["BIGINT", "INTEGER", "SMALLINT", "UTINYINT", "HUGEINT", "UBIGINT", "DOUBLE", "FLOAT", "DECIMAL(10, 2)",
             "VARCHAR", "DATE", "TIMESTAMP", "TIME", "BLOB", "BOOLEAN", "INTERVAL"]
    source = tmp_path / "source.duckdb"
    connection = duckdb.connect(str(source))
    connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, " + ", ".join(f"c{i} {t}" for i, t in enumerate(types)) + ")")
    connection.close()
    reader = DuckdbSource(source)
    schema = reader.schema()
    reader.close()
    rng = random.Random(7)
    as_lists = 0
    for pool in ONE_TYPE.values():
        size = rng.randint(3, 8)
        batch = [(number, *(rng.choice(pool) if rng.random() < 0.85 else None for _ in types)) for number in range(size)]
        for position in range(1, len(types) + 1):  # each column alone holding the values, the others NULL
            rows: Rows = {"t": [tuple(v if i in (0, position) else None for i, v in enumerate(row)) for row in batch]}
            as_lists += _as_columns(rows["t"]) is not None
            assert _bulk(schema, rows) == _one_by_one(schema, rows), (types[position - 1], rows)
    assert as_lists > 75


def test_only_columns_of_one_exact_type_go_in_as_lists() -> None:
    assert _as_columns([(1, "a", None), (2, None, None), (3, "c", None)]) == [[1, 2, 3], ["a", None, "c"], [None, None, None]]
    assert _as_columns([(1,), (True,)]) is None  # bool is an int to Python, not to DuckDB
    assert _as_columns([(1,), (1.5,)]) is None
    assert _as_columns([(1,), (2**63,)]) is None  # past 64 bits a list would not be BIGINT
    assert _as_columns([(decimal.Decimal("1.5"),), (decimal.Decimal("2.25"),)]) is None
    assert _as_columns([(datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC),), (None,)]) is None
    assert _as_columns([(datetime.date(2020, 1, 1),), (datetime.datetime(2020, 1, 1),)]) is None


def test_a_candidates_tables_are_copied_in_one_statement_into_the_catalog_their_statements_make(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each candidate ran one CREATE TABLE per table (~0.5 ms each in DuckDB); now one `COPY FROM
    DATABASE ... (SCHEMA)` from the tables made once, whose copy was checked to give the catalog
    the statements give (keys, UNIQUE, CHECK, a table pointing at itself, DECIMAL, defaults)."""
    from pytest_nl2sql.neighbours.schema import AttachedDuckdb, _catalog

    schema = _schema(tmp_path)
    statements: list[str] = []
    execute = AttachedDuckdb.execute

    def counted(self: AttachedDuckdb, sql: Any, parameters: Any = None) -> Any:
        statements.append(str(sql).split(None, 1)[0].upper())
        return execute(self, sql, parameters)

    monkeypatch.setattr(AttachedDuckdb, "execute", counted)
    rows: Rows = {"parent": [(1, "a")], "item": [], "person": [(1, None, "boss")]}
    for _ in range(2):
        statements.clear()
        connection, kept = create_duckdb(schema, rows, ":memory:")
        assert kept == rows
        assert statements.count("CREATE") == 0 and statements.count("COPY") == 1
        copied = _catalog(connection, connection._alias)
        connection.close()
    reference = DUCKDB_HOST._instance().cursor()
    try:
        reference.execute("ATTACH ':memory:' AS reference")
        reference.execute("USE reference")
        for table in schema.tables:
            reference.execute(table.create_sql)
        assert copied == _catalog(reference, "reference")
    finally:
        reference.execute("USE memory")
        reference.execute("DETACH reference")
        reference.close()


def test_tables_that_cannot_be_made_fail_as_their_statements_do() -> None:
    """No template for statements that fail: each runs, and the first failure is the candidate's."""
    connection = DUCKDB_HOST.attach(":memory:")
    try:
        with pytest.raises(duckdb.CatalogException):
            DUCKDB_HOST.create_tables(connection, ("CREATE TABLE a(id INTEGER PRIMARY KEY)", "CREATE TABLE b(x INTEGER REFERENCES nowhere(id))"))
        assert connection.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall() == [("a",)]
    finally:
        connection.close()
