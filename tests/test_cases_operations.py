"""Case files and databases in operation (issue 29): a file that cannot be parsed is a collection
error naming where its problem starts, relative file URLs, DuckDB files by plain path, symlinks in
a folder of databases under --nl2sql-confine, and `ran_on` in failure texts under --nl2sql-dsn."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import make_shop, read_report, write_suite
from pytest_nl2sql.cases.read import CaseFileError, load_case_file, read_case_file

# --- a file that cannot be parsed ------------------------------------------------------------

RUNAWAY = (
    "database: shop.sqlite\n"
    "cases:\n"
    "  - id: a\n"
    "    gold: SELECT 1\n"
    "    predicted: SELECT 1\n"
    "  - id: b\n"
    '    gold: "SELECT 2\n'  # line 7: the quote opens and is never closed on its line ...
    "    predicted: SELECT 2\n"
    "  - id: c\n"
    '    gold: "SELECT 3"\n'  # line 10: ... it closes here, at the next case's opening quote
    "    predicted: SELECT 3\n"
)


def test_a_runaway_quote_points_at_the_line_where_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "bad.nl2sql.yaml"
    path.write_text(RUNAWAY)
    contents = read_case_file(path)
    assert contents.entries == []  # no entry pretends to be case 0
    error = contents.error
    assert error is not None and error.path == path and error.line == 7, error
    assert "opens on line 7" in error.message and "line 10" in error.message and "closing quote" in error.message
    assert str(error).startswith(f"{path}:7: invalid YAML")
    with pytest.raises(CaseFileError, match="bad.nl2sql.yaml:7: invalid YAML"):
        load_case_file(path)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        # never closed at all: the end of the file is where PyYAML notices
        ('database: d\ncases:\n  - id: a\n    gold: "SELECT 1\n  - id: b\n', 4, "opens on line 4 and is never closed"),
        # in a flow mapping, closed by the next line's quote
        ('database: d\ncases:\n  - {id: a, gold: "SELECT 1}\n  - {id: b, gold: "SELECT 2"}\n', 3, "opens on line 3"),
        # single quotes, across a document separator of a multi-document file
        ("database: d\ngold: 'SELECT 1\n---\ndatabase: d\ngold: SELECT 2\n", 2, "opens on line 2"),
        # an ordinary syntax error still points at the offending token
        ("cases:\n  - id: a\n    gold: SELECT 1\n   question: q\n", 4, "invalid YAML: expected <block end>"),
        # a valid multi-line quoted value followed by a bad line is not mistaken for a runaway quote
        ('database: d\ngold: "SELECT 1\n  FROM t"\n question: q\n', 4, "invalid YAML"),
    ],
)
def test_where_a_file_that_cannot_be_parsed_points(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    contents = read_case_file(path)
    assert contents.entries == [] and contents.error is not None
    assert (contents.error.line, fragment in contents.error.message) == (line, True), contents.error


def test_evaluate_suite_raises_for_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    from pytest_nl2sql import evaluate_suite

    (tmp_path / "bad.nl2sql.yaml").write_text(RUNAWAY)
    with pytest.raises(CaseFileError, match="bad.nl2sql.yaml:7: invalid YAML: a quoted value opens on line 7"):
        evaluate_suite(tmp_path / "bad.nl2sql.yaml", rootdir=tmp_path)


def test_an_unparseable_file_is_a_collection_error_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    (pytester.path / "bad.nl2sql.yaml").write_text(RUNAWAY)
    write_suite(pytester.path, [{"id": "ok", "gold": "SELECT 1", "predicted": "SELECT 1"},
                                {"id": "wrong", "gold": "SELECT 1", "predicted": "SELECT 2"}], database="shop.sqlite")
    result = pytester.runpytest("-p", "no:cacheprovider", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*ERROR collecting bad.nl2sql.yaml*",
        "bad.nl2sql.yaml:7: invalid YAML: a quoted value opens on line 7*",
    ])
    result.stdout.fnmatch_lines(["*1 case file could not be read*bad.nl2sql.yaml*"])
    assert "case-0000" not in result.stdout.str()
    items = read_report(pytester.path / "r.json")["items"]
    assert sorted(i["nodeid"] for i in items) == ["shop.nl2sql.yaml::ok", "shop.nl2sql.yaml::wrong"]


def test_a_python_collection_error_still_stops_the_run(pytester: pytest.Pytester) -> None:
    """Only unreadable case files let the run go on; pytest's own rule holds for the rest."""
    make_shop(pytester.path)
    (pytester.path / "bad.nl2sql.yaml").write_text(RUNAWAY)
    pytester.makepyfile(test_broken="import no_such_module_here\n")
    write_suite(pytester.path, [{"id": "ok", "gold": "SELECT 1", "predicted": "SELECT 1"}], database="shop.sqlite")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*Interrupted: 2 errors during collection*"])


def test_an_unparseable_file_under_xdist(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    (pytester.path / "bad.nl2sql.yaml").write_text(RUNAWAY)
    write_suite(pytester.path, [{"id": "ok", "gold": "SELECT 1", "predicted": "SELECT 1"}], database="shop.sqlite")
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 case file could not be read*bad.nl2sql.yaml*"])


# --- where file URLs point, and which engine opens a plain path ----------------------------


def make_duckdb(path: Path) -> Path:
    """A DuckDB file holding the shop's item table (five rows)."""
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price DOUBLE)")
    con.execute("INSERT INTO item VALUES (1, 'pen', 1.5), (2, 'ink', 3.0), (3, 'pad', 2.0), (4, 'cap', 0.5), (5, 'mug', 7.0)")
    con.close()
    return path


@pytest.mark.parametrize("scheme", ["duckdb", "sqlite", "sqlite+pysqlite"])
def test_a_relative_file_url_is_relative_to_the_case_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str) -> None:
    from pytest_nl2sql.engines.url import parse_database

    suites = tmp_path / "suites"
    suites.mkdir()
    monkeypatch.chdir(tmp_path)  # the working directory is not the case file's folder
    (suites / "s.yaml").write_text(f"database: {scheme}:///data/w.db?mode=ro\ngold: SELECT 1\n")
    (case,) = load_case_file(suites / "s.yaml")
    assert case.database == f"{scheme}:///data/w.db?mode=ro"  # as written: the by_database key
    assert parse_database(case.database_target).path == suites / "data" / "w.db"
    assert case.database_target.endswith("?mode=ro")
    # an absolute URL stays as it is; so does a URL given without a case file (--nl2sql-dsn)
    (suites / "a.yaml").write_text(f"database: {scheme}:///{tmp_path}/w.db\ngold: SELECT 1\n")
    assert parse_database(load_case_file(suites / "a.yaml")[0].database_target).path == tmp_path / "w.db"
    assert parse_database(f"{scheme}:///w.db").path == tmp_path / "w.db"


def test_a_relative_file_url_with_odd_characters_round_trips(tmp_path: Path) -> None:
    from pytest_nl2sql.engines.url import parse_database

    (tmp_path / "s.yaml").write_text("database: 'duckdb:///my%20data/w%23x.duckdb'\ngold: SELECT 1\n")
    (case,) = load_case_file(tmp_path / "s.yaml")
    assert parse_database(case.database_target).path == tmp_path / "my data" / "w#x.duckdb"


def test_a_suite_run_from_the_parent_folder_finds_its_duckdb_url(pytester: pytest.Pytester) -> None:
    suites = pytester.path / "modelrepo" / "suites"
    suites.mkdir(parents=True)
    make_duckdb(suites / "warehouse.duckdb")
    write_suite(suites, [{"id": "n", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"}],
                database="duckdb:///warehouse.duckdb")
    result = pytester.runpytest("modelrepo/suites", "-p", "no:cacheprovider", "--nl2sql-neighbours=0",
                                "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1)
    (item,) = read_report(pytester.path / "r.json")["items"]
    assert (item["verdict"], item["database"]) == ("pass", "duckdb:///warehouse.duckdb")


@pytest.mark.parametrize(("name", "kind"), [
    ("warehouse.duckdb", "duckdb"), ("warehouse.ddb", "duckdb"), ("warehouse.db", "duckdb"), ("warehouse.sqlite", "duckdb"),
])
def test_a_plain_path_to_a_duckdb_file_opens_with_duckdb(tmp_path: Path, name: str, kind: str) -> None:
    """By the file's magic bytes ("DUCK" at offset 8), whatever its name."""
    from pytest_nl2sql.engines import Limits, open_engine
    from pytest_nl2sql.engines.url import dialect_of, parse_database

    path = make_duckdb(tmp_path / name)
    assert path.read_bytes()[8:12] == b"DUCK"
    assert parse_database(name, tmp_path).kind.value == kind
    assert dialect_of(str(path)) == kind
    engine = open_engine(name, base_dir=tmp_path)
    try:
        assert list(engine.execute("SELECT count(*) FROM item", Limits()).rows) == [(5,)]
    finally:
        engine.close()


def test_which_engine_opens_a_plain_path(tmp_path: Path) -> None:
    """SQLite's header wins over the name; a file not there yet (or empty) goes by its extension."""
    from pytest_nl2sql.engines.url import EngineKind, parse_database

    make_shop(tmp_path, "looks.duckdb")  # a SQLite file named like a DuckDB one
    assert parse_database("looks.duckdb", tmp_path).kind is EngineKind.SQLITE
    (tmp_path / "empty.duckdb").write_bytes(b"")
    assert parse_database("empty.duckdb", tmp_path).kind is EngineKind.DUCKDB
    assert parse_database("absent.DDB", tmp_path).kind is EngineKind.DUCKDB
    assert parse_database("absent.sqlite", tmp_path).kind is EngineKind.SQLITE
    assert parse_database("absent", tmp_path).kind is EngineKind.SQLITE
    (tmp_path / "text.db").write_text("not a database at all")
    assert parse_database("text.db", tmp_path).kind is EngineKind.SQLITE  # SQLite says what is wrong with it


def test_a_file_s_header_is_read_once_per_version_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case asks its database's kind at collection (1034 Spider cases, 166 files): the file is
    read again only when it changed."""
    from pytest_nl2sql.engines import url

    opened: list[str] = []
    monkeypatch.setattr(url, "open", lambda path, mode: opened.append(path) or open(path, mode), raising=False)
    path = make_shop(tmp_path, "shop.sqlite")
    assert {url.dialect_of(str(path)) for _ in range(50)} == {"sqlite"} and len(opened) == 1
    path.unlink()
    make_duckdb(path)  # another file under the same name: read again
    assert url.dialect_of(str(path)) == "duckdb" and len(opened) == 2


def test_a_case_naming_a_duckdb_file_by_plain_path_runs(pytester: pytest.Pytester) -> None:
    make_duckdb(pytester.path / "warehouse.duckdb")
    write_suite(pytester.path, [
        {"id": "ok", "gold": "SELECT name FROM item WHERE price > 2", "predicted": "SELECT name FROM item WHERE price > 2.0"},
        {"id": "wrong", "gold": "SELECT count(*) FROM item", "predicted": "SELECT 4"},
    ], database="warehouse.duckdb")
    result = pytester.runpytest("-p", "no:cacheprovider", "--nl2sql-neighbours=0", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, failed=1)
    verdicts = {i["id"]: i["verdict"] for i in read_report(pytester.path / "r.json")["items"]}
    assert verdicts == {"ok": "pass", "wrong": "mismatch"}


# --- a symlink out of the tree inside a folder of databases, under --nl2sql-confine ---------


@pytest.fixture
def linked_folder(tmp_path: Path) -> tuple[Path, Path]:
    """(root, outside): `root/db/shop/` holds shop.sqlite and other.sqlite, a symlink to a file
    outside the root."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    folder = root / "db" / "shop"
    folder.mkdir(parents=True)
    outside.mkdir()
    make_shop(folder)
    make_shop(outside, "secret.sqlite")
    (folder / "other.sqlite").symlink_to(outside / "secret.sqlite")
    return root, outside


def test_a_symlink_out_of_the_tree_in_a_folder_of_databases_is_refused_naming_it(linked_folder: tuple[Path, Path]) -> None:
    from pytest_nl2sql.cases.read import InvalidCase

    root, outside = linked_folder
    path = root / "s.nl2sql.yaml"
    path.write_text("database: db/shop\ngold: SELECT 1\n")
    (entry,) = load_case_file(path, confine=root)
    assert isinstance(entry, InvalidCase) and entry.line == 1, entry
    assert f"db/shop/other.sqlite is a symlink to {outside / 'secret.sqlite'}" in entry.message
    assert "(--nl2sql-confine)" in entry.message
    (fine,) = load_case_file(path)  # without the option nothing is refused
    assert not isinstance(fine, InvalidCase)


def test_a_symlink_inside_the_tree_in_a_folder_of_databases_is_allowed(linked_folder: tuple[Path, Path]) -> None:
    from pytest_nl2sql.cases.read import Case

    root, _ = linked_folder
    (root / "db" / "shop" / "other.sqlite").unlink()
    make_shop(root, "kept.sqlite")
    (root / "db" / "shop" / "other.sqlite").symlink_to(root / "kept.sqlite")
    path = root / "s.nl2sql.yaml"
    path.write_text("database: db/shop\ngold: SELECT 1\n")
    (entry,) = load_case_file(path, confine=root)
    assert isinstance(entry, Case), entry


def test_a_symlinked_database_file_is_named_when_refused(linked_folder: tuple[Path, Path]) -> None:
    """The message names the link the case file named, and where it leads."""
    root, outside = linked_folder
    (root / "suites").mkdir()
    (root / "linked" / "shop").mkdir(parents=True)
    (root / "linked" / "shop" / "shop.sqlite").symlink_to(outside / "secret.sqlite")
    secret = outside / "secret.sqlite"
    for case, link in (("database: ../db/shop/other.sqlite\n", root / "db" / "shop" / "other.sqlite"),
                       ("db_id: shop\ndb_dir: ../linked\n", root / "linked" / "shop" / "shop.sqlite")):
        path = root / "suites" / "s.nl2sql.yaml"
        path.write_text(case + "gold: SELECT 1\n")
        (entry,) = load_case_file(path, confine=root)
        assert f"{link} is a symlink to {secret}" in entry.message, entry


def test_under_confine_the_case_with_the_symlinked_database_is_a_gold_error(pytester: pytest.Pytester) -> None:
    root = pytester.path
    folder = root / "db" / "shop"
    folder.mkdir(parents=True)
    make_shop(folder)
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir()
    try:
        make_shop(outside, "secret.sqlite")
        (folder / "other.sqlite").symlink_to(outside / "secret.sqlite")
        write_suite(root, [{"id": "f", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"}],
                    database="db/shop")
        result = pytester.runpytest("-p", "no:cacheprovider", "--nl2sql-confine", "--nl2sql-report=json:r.json")
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(["*db/shop/other.sqlite is a symlink to *secret.sqlite*"])
        (item,) = read_report(root / "r.json")["items"]
        assert item["verdict"] == "gold_error" and "other.sqlite" in item["reason"]
    finally:
        import shutil

        shutil.rmtree(outside, ignore_errors=True)


# --- under --nl2sql-dsn, every failure text names where the case ran ----------------------


@pytest.fixture
def on_dsn(pytester: pytest.Pytester) -> tuple[pytest.Pytester, str]:
    """A suite naming shop.sqlite, and a DSN: a copy of it elsewhere (password-free file URL)."""
    make_shop(pytester.path)
    (pytester.path / "server").mkdir()
    make_shop(pytester.path / "server", "elsewhere.sqlite")
    return pytester, f"sqlite:///{(pytester.path / 'server' / 'elsewhere.sqlite').as_posix()}"


def test_a_failure_on_neighbours_under_a_dsn_names_ran_on(on_dsn: tuple[pytest.Pytester, str]) -> None:
    pytester, dsn = on_dsn
    write_suite(pytester.path, [{"id": "n", "gold": "SELECT count(*) FROM item", "predicted": "SELECT 5"}],
                database="shop.sqlite")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--nl2sql-dsn={dsn}", "--nl2sql-report=json:r.json")
    result.assert_outcomes(failed=1)
    (item,) = read_report(pytester.path / "r.json")["items"]
    assert item["reason"].startswith("neighbour") or item["neighbours"]["failed"], item
    out = result.stdout.str()
    assert "ran on: sqlite:///" in out and "elsewhere.sqlite (the case names shop.sqlite)" in out
    assert "matches the gold on shop.sqlite" not in out  # it ran on the DSN's database, not the case's own
    result.stdout.fnmatch_lines(["*the prediction matches the gold on sqlite:///*elsewhere.sqlite, but not on*"])


def test_a_gold_error_under_a_dsn_names_ran_on(on_dsn: tuple[pytest.Pytester, str]) -> None:
    pytester, dsn = on_dsn
    write_suite(pytester.path, [{"id": "g", "gold": "SELECT nope FROM item", "predicted": "SELECT 1"}],
                database="shop.sqlite")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--nl2sql-dsn={dsn}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*nl2sql case g is broken (gold_error)*", "ran on: sqlite:///*elsewhere.sqlite (the case names shop.sqlite)"])
    plain = pytester.runpytest("-p", "no:cacheprovider")  # without a DSN: no `ran on`
    assert "ran on:" not in plain.stdout.str()


# --- neighbour generation within --nl2sql-timeout ------------------------------------------

CHAIN_TABLES = 2000


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database of 2,000 tables, each referencing the one before it (created children
    first, so that an order of parents before children must be worked out), five rows each."""
    import sqlite3

    path = tmp_path_factory.mktemp("chain") / "chain.sqlite"
    con = sqlite3.connect(path)
    for n in reversed(range(CHAIN_TABLES)):
        parent = f", parent INTEGER REFERENCES t{n - 1}(id)" if n else ""
        con.execute(f"CREATE TABLE t{n} (id INTEGER PRIMARY KEY, name TEXT, v INTEGER{parent})")
        rows = [(i, f"n{i}", i % 7, *([(i % 5) + 1] if n else [])) for i in range(1, 6)]
        con.executemany(f"INSERT INTO t{n} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.commit()
    con.close()
    return path


def test_neighbour_generation_stops_at_its_time_limit_and_says_why(chain: Path, tmp_path: Path) -> None:
    import time

    from pytest_nl2sql.neighbours import NeighbourCache

    cache = NeighbourCache(tmp_path / "cache", time_limit=1.0)
    gold = [f"SELECT name FROM t{CHAIN_TABLES - 1} WHERE v > 3"]
    started = time.monotonic()
    assert cache.neighbours_for(chain, gold, 3) == ()
    assert time.monotonic() - started < 30  # 1 s of budget (it took minutes unbounded)
    why = cache.cut_short(chain, gold, 3)
    assert why is not None and "cut short" in why and "(1 s," in why
    assert not any((tmp_path / "cache").rglob("manifest.json"))  # nothing half-made is cached
    started = time.monotonic()  # the same case again: its cut is remembered, not paid again
    assert cache.neighbours_for(chain, gold, 3) == ()
    assert time.monotonic() - started < 1.0  # paid again, it would take the whole second


def test_a_case_on_a_huge_schema_gets_its_verdict_and_a_note_within_the_timeout(chain: Path, pytester: pytest.Pytester,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import time

    monkeypatch.setattr("pytest_nl2sql.judge.pipeline.GENERATION_FLOOR_S", 0.0)  # the 1.5 s limit itself, not the floor
    shutil.copy(chain, pytester.path / "chain.sqlite")
    write_suite(pytester.path, [{"id": "big", "gold": f"SELECT name FROM t{CHAIN_TABLES - 1} WHERE v > 3",
                                 "predicted": f"SELECT name FROM t{CHAIN_TABLES - 1} WHERE v >= 4"}], database="chain.sqlite")
    started = time.monotonic()
    result = pytester.runpytest("-p", "no:cacheprovider", "--nl2sql-timeout=1.5", "--nl2sql-report=json:r.json")
    elapsed = time.monotonic() - started
    result.assert_outcomes(passed=1)
    (item,) = read_report(pytester.path / "r.json")["items"]
    assert item["verdict"] == "pass" and "cut short" in item["extra"]["neighbours_off"], item
    result.stdout.fnmatch_lines(["*cut short*"])
    assert elapsed < 20 * 1.5, elapsed


def test_a_generation_may_take_at_least_the_floor_whatever_the_query_limit(tmp_path: Path) -> None:
    """A half-second query limit does not make neighbours depend on the machine's load."""
    from pytest_nl2sql.engines.base import Limits
    from pytest_nl2sql.judge.pipeline import GENERATION_FLOOR_S, Pipeline, RunOptions

    short = Pipeline(RunOptions(limits=Limits(timeout=0.5), cache_dir=tmp_path))
    long = Pipeline(RunOptions(limits=Limits(timeout=60.0), cache_dir=tmp_path))
    try:
        assert short.neighbour_cache().time_limit == GENERATION_FLOOR_S == 10.0
        assert long.neighbour_cache().time_limit == 60.0
    finally:
        short.close()
        long.close()
