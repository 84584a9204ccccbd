"""The Malloy compiler as a plain module (pytest_nl2sql/malloy): the generated model, compiling
for every engine, compile errors with their lines, the one Node child (reused, restarted), and
the compiled SQL's answers on the data. Needs Node and the compiler (`nl2sql malloy-setup`; CI
runs it): those tests skip, saying so, without; the model and the messages are tested anyway."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlglot

from helpers import make_db, process_gone
from pytest_nl2sql.cli import main
from pytest_nl2sql.copydb import copy_database
from pytest_nl2sql.copydb.model import Table
from pytest_nl2sql.copydb.sources import open_source
from pytest_nl2sql.engines.url import parse_database
from pytest_nl2sql.malloy import (
    MalloyCompileError,
    MalloyCompiler,
    MalloyUnavailable,
    generated_model,
    pinned_version,
)
from pytest_nl2sql.malloy.home import require_compiler
from pytest_nl2sql.malloy.names import FUNCTIONS, RESERVED, malloy_name, table_path

# A cycle (Artist <-> album), a chain (track -> album -> Artist), a table referencing itself, a
# table named as a Malloy function (round), one with a capital letter, and reserved column names
# (`year`, `date`, `seconds`).
MUSIC = """
CREATE TABLE "Artist" (artist_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, best_album_id INTEGER REFERENCES album (album_id));
CREATE TABLE album (album_id INTEGER PRIMARY KEY, artist_id INTEGER REFERENCES "Artist" (artist_id), title TEXT, year INTEGER, price REAL);
CREATE TABLE track (track_id INTEGER PRIMARY KEY, album_id INTEGER REFERENCES album (album_id), name TEXT, "date" TEXT, seconds INTEGER);
CREATE TABLE employee (employee_id INTEGER PRIMARY KEY, name TEXT, manager_id INTEGER REFERENCES employee (employee_id));
CREATE TABLE round (round_id INTEGER PRIMARY KEY, artist_id INTEGER REFERENCES "Artist" (artist_id), score INTEGER);
INSERT INTO "Artist" VALUES (1, 'Ann', 'France', 2), (2, 'Bob', 'Peru', NULL), (3, 'Cid', 'France', NULL);
INSERT INTO album VALUES (1, 1, 'First', 1999, 9.5), (2, 1, 'Second', 2004, 12.0), (3, 2, 'Solo', 2004, NULL);
INSERT INTO track VALUES (1, 1, 'a', '2001-01-01', 200), (2, 1, 'b', '2001-01-02', 100), (3, 2, 'c', '2004-05-05', 300),
                         (4, 3, 'd', NULL, 150);
INSERT INTO employee VALUES (1, 'Boss', NULL), (2, 'Mid', 1), (3, 'Low', 2), (4, 'Low2', 2);
INSERT INTO round VALUES (1, 1, 10), (2, 1, 20), (3, 3, 5);
"""

# Malloy query -> the rows it must give (any order), with the SQL that means the same.
ANSWERS: dict[str, tuple[str, set[tuple[Any, ...]]]] = {
    "run: Artist -> { group_by: country; aggregate: n is count() }": ("count per country", {("France", 2), ("Peru", 1)}),
    "run: album -> { where: `year` = 2004; aggregate: n is count() }": ("a reserved column", {(2,)}),
    "run: Artist -> { group_by: name; aggregate: albums is count(album_by_artist_id.album_id) }":
        ("join_many back, zero counted as zero", {("Ann", 2), ("Bob", 1), ("Cid", 0)}),
    "run: track -> { group_by: album.Artist.name; aggregate: total is `seconds`.sum() }":
        ("join_one chain through the cycle", {("Ann", 600), ("Bob", 150)}),
    "run: employee -> { group_by: name; aggregate: reports is count(employee_by_manager_id.employee_id) }":
        ("a table referencing itself", {("Boss", 1), ("Mid", 2), ("Low", 0), ("Low2", 0)}),
    "run: round_table -> { aggregate: s is score.sum() }": ("a table named as a function", {(35,)}),
    "run: Artist -> { group_by: name; aggregate: s is round.score.sum() }": ("join named round", {("Ann", 30), ("Bob", 0), ("Cid", 5)}),
    "run: track -> { select: name, `date`; where: `date` != null }":
        ("`date` and != null", {("a", "2001-01-01"), ("b", "2001-01-02"), ("c", "2004-05-05")}),
    "run: album -> { where: price != 12; select: title }": ("!= keeps NULL rows", {("First",), ("Solo",)}),
    "run: album -> { aggregate: r is count() / 2 }": ("/ is real division", {(1.5,)}),
}


def _compiler_or_skip() -> None:
    try:
        require_compiler()
    except MalloyUnavailable as error:
        pytest.skip(f"no Malloy compiler here: {error}")


@pytest.fixture(scope="module")
def compiler() -> Iterator[MalloyCompiler]:
    _compiler_or_skip()
    with MalloyCompiler() as compiler:
        yield compiler


@pytest.fixture(scope="module")
def music(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_db(tmp_path_factory.mktemp("malloy") / "music.sqlite", MUSIC)


def tables_of(url: str | Path) -> list[Table]:
    source = open_source(parse_database(str(url)))
    try:
        return source.tables()
    finally:
        source.close()


# -- the generated model (no Node) ----------------------------------------------------------------


def test_the_model_has_a_source_per_table_named_as_the_table_in_layers(music: Path) -> None:
    model = generated_model(tables_of(music), "sqlite")
    lines = model.splitlines()
    assert "source: _base_Artist is duckdb.table('\"Artist\"') extend { primary_key: artist_id }" in lines
    assert "source: _base_round is duckdb.table('\"round\"') extend { primary_key: round_id }" in lines
    assert "source: track is _one_track" in lines  # no table references track
    assert "source: round_table is _one_round" in lines  # `round` is Malloy's function
    assert "source: Artist is _one_Artist extend {" in lines
    assert "  join_many: album_by_artist_id is _one_album on artist_id = album_by_artist_id.artist_id" in lines
    assert "  join_one: employee_via_manager_id is _base_employee on manager_id = employee_via_manager_id.employee_id" in lines
    assert "  join_many: employee_by_manager_id is _one_employee on employee_id = employee_by_manager_id.manager_id" in lines
    # parents first: album's join_one to Artist reaches Artist's own join_one (the cycle's closing key)
    assert lines.index("source: _one_Artist is _base_Artist extend {") < lines.index("source: _one_album is _base_album extend {")
    assert "  join_one: Artist is _one_Artist on artist_id = Artist.artist_id" in lines
    assert "  join_one: album is _base_album on best_album_id = album.album_id" in lines


def test_names_and_table_paths_are_quoted_per_dialect() -> None:
    assert [malloy_name(n) for n in ("singer", "year", "Date", "days", "my name", "a`b")] == \
           ["singer", "`year`", "`Date`", "`days`", "`my name`", "`a\\`b`"]
    assert table_path("Singer", "postgres") == '"Singer"'
    assert table_path("Singer", "sqlite") == '"Singer"'
    assert table_path("my`table", "mysql") == "`my``table`"
    model = generated_model([Table("O'Brien", ())], "mysql")
    assert "source: _base_O'Brien" not in model and "mysql.table('`O\\'Brien`')" in model


def test_malloy_model_prints_the_generated_model(music: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["malloy-model", str(music)]) == 0
    out = capsys.readouterr().out
    assert out == generated_model(tables_of(music), "sqlite", database="music.sqlite")
    assert main(["malloy-model", str(music.parent / "missing.sqlite")]) == 2
    assert "cannot read the database" in capsys.readouterr().err


def test_a_compile_error_says_its_line_and_survives_pickling() -> None:
    error = MalloyCompileError("'nme' is not defined", 2)
    assert str(error) == "line 2: 'nme' is not defined"
    assert str(MalloyCompileError("Cannot redefine 'x'", 5, in_model=True)) == "model line 5: Cannot redefine 'x'"
    assert str(MalloyCompileError("the Malloy compiler stopped")) == "the Malloy compiler stopped"
    assert pickle.loads(pickle.dumps(error)) == error
    with pytest.raises(MalloyCompileError, match="line 2"):
        raise error


def test_an_empty_home_says_to_run_malloy_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, music: Path) -> None:
    monkeypatch.setenv("NL2SQL_MALLOY_HOME", str(tmp_path))
    compiler = MalloyCompiler()
    with pytest.raises(MalloyUnavailable, match="run `nl2sql malloy-setup`"):
        compiler.compile("run: album -> { aggregate: n is count() }", tables=tables_of(music), dialect="sqlite")
    assert compiler.starts == 0 and compiler.pid is None


def test_without_node_the_message_says_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, music: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MalloyUnavailable, match="install Node 20.*nl2sql malloy-setup"):
        MalloyCompiler().compile("run: album -> { aggregate: n is count() }", tables=tables_of(music), dialect="sqlite")


def test_malloy_setup_without_npm_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no Node here")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "node").symlink_to(node)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert main(["malloy-setup", "--home", str(tmp_path / "home")]) == 1
    assert "`npm` is not on PATH" in capsys.readouterr().err


# -- compiling (Node and the compiler) ------------------------------------------------------------


def test_malloy_setup_again_changes_nothing_and_prints_the_home(capsys: pytest.CaptureFixture[str]) -> None:
    _compiler_or_skip()
    _, home = require_compiler()
    before = (home / "node_modules").stat().st_mtime_ns
    assert main(["malloy-setup"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(home) and "already set up" in captured.err
    assert (home / "node_modules").stat().st_mtime_ns == before



@pytest.mark.parametrize("query", list(ANSWERS), ids=[why for why, _ in ANSWERS.values()])
def test_compiled_sql_gives_the_right_answer_on_sqlite_and_on_a_duckdb_copy(
        compiler: MalloyCompiler, music: Path, query: str) -> None:
    compiled = compiler.compile(query, tables=tables_of(music), dialect="sqlite")
    assert compiled.dialect == "duckdb"
    expected = ANSWERS[query][1]
    lite = sqlglot.transpile(compiled.sql, read="duckdb", write="sqlite")[0]
    with sqlite3.connect(music) as conn:
        assert set(conn.execute(lite).fetchall()) == expected
    duckdb = pytest.importorskip("duckdb")
    copy = music.parent / "music.duckdb"
    if not copy.exists():
        copy_database(str(music), f"duckdb:///{copy}")
    conn = duckdb.connect(str(copy), read_only=True)
    try:
        assert {tuple(row) for row in conn.execute(compiled.sql).fetchall()} == expected
    finally:
        conn.close()


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "mysql"])
def test_the_generated_model_compiles_for_every_dialect(compiler: MalloyCompiler, music: Path, dialect: str) -> None:
    tables = tables_of(music)
    for query in ANSWERS:
        compiled = compiler.compile(query, tables=tables, dialect=dialect)
        assert compiled.dialect == dialect
        assert "row_to_json" not in compiled.sql  # plain rows, not Malloy's JSON last stage
    sql = compiler.compile("run: Artist -> { group_by: name }", tables=tables, dialect=dialect).sql
    assert {"duckdb": 'FROM "Artist"', "postgres": 'FROM "Artist"', "mysql": "FROM `Artist`"}[dialect] in sql


def test_syntax_errors_and_unknown_names_give_malloy_s_line(compiler: MalloyCompiler, music: Path) -> None:
    tables = tables_of(music)
    with pytest.raises(MalloyCompileError) as syntax:
        compiler.compile("run: album -> {\n  group_by: title\n  aggregate: n is count(\n}", tables=tables, dialect="sqlite")
    assert syntax.value.line == 4 and not syntax.value.in_model
    with pytest.raises(MalloyCompileError) as unknown:
        compiler.compile("run: album -> {\n  group_by: titel\n}", tables=tables, dialect="postgres")
    assert (unknown.value.line, unknown.value.message) == (2, "'titel' is not defined")
    assert str(unknown.value) == "line 2: 'titel' is not defined"
    with pytest.raises(MalloyCompileError, match="line 1: 'year' is a reserved word"):
        compiler.compile("run: album -> { group_by: year }", tables=tables, dialect="sqlite")
    with pytest.raises(MalloyCompileError, match="line 1: Reference to undefined object 'singer'"):
        compiler.compile("run: singer -> { aggregate: n is count() }", tables=tables, dialect="mysql")


def test_a_model_of_one_s_own_may_name_any_connection(compiler: MalloyCompiler, music: Path) -> None:
    model = "source: records is warehouse.table('album') extend {\n  primary_key: album_id\n  measure: albums is count()\n}\n"
    compiled = compiler.compile("run: records -> { aggregate: albums }", tables=tables_of(music), dialect="sqlite", model=model)
    with sqlite3.connect(music) as conn:
        assert conn.execute(sqlglot.transpile(compiled.sql, read="duckdb", write="sqlite")[0]).fetchall() == [(3,)]
    with pytest.raises(MalloyCompileError) as broken:
        compiler.compile("run: records -> { aggregate: albums }", tables=tables_of(music), dialect="sqlite",
                         model="source: records is warehouse.table('album')\n\nsource: other is warehouse.table('no_such_table')\n")
    assert broken.value.in_model and broken.value.line == 3 and "no_such_table" in broken.value.message


def test_one_child_serves_every_compile_and_a_killed_one_is_restarted(compiler: MalloyCompiler, music: Path) -> None:
    tables = tables_of(music)
    compiler.compile("run: album -> { aggregate: n is count() }", tables=tables, dialect="sqlite")
    starts = compiler.starts
    for _ in range(20):
        compiler.compile("run: album -> { aggregate: n is count() }", tables=tables, dialect="sqlite")
    assert compiler.starts == starts
    pid = compiler.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    compiled = compiler.compile("run: album -> { group_by: title }", tables=tables, dialect="postgres")
    assert "SELECT" in compiled.sql and compiler.starts == starts + 1 and compiler.pid not in (None, pid)


def test_a_compiler_closed_ends_its_child(music: Path) -> None:
    _compiler_or_skip()
    with MalloyCompiler() as compiler:
        compiler.compile("run: album -> { aggregate: n is count() }", tables=tables_of(music), dialect="sqlite")
        pid = compiler.pid
        assert pid is not None
    assert compiler.pid is None and process_gone(pid)


def test_a_compile_past_the_timeout_is_an_error_and_the_next_starts_afresh(compiler: MalloyCompiler, music: Path) -> None:
    tables = tables_of(music)
    compiler.compile("run: album -> { aggregate: n is count() }", tables=tables, dialect="sqlite")
    starts = compiler.starts
    try:
        compiler.timeout = 0.0001
        with pytest.raises(MalloyCompileError, match="took more than"):
            compiler.compile("run: track -> { group_by: album.Artist.name; nest: t is { group_by: name } }",
                             tables=tables, dialect="postgres")
        assert compiler.pid is None
    finally:
        compiler.timeout = 60
    assert "SELECT" in compiler.compile("run: album -> { group_by: title }", tables=tables, dialect="sqlite").sql
    assert compiler.starts == starts + 1


def test_compiles_from_several_threads_share_the_child(compiler: MalloyCompiler, music: Path) -> None:
    tables, results, errors = tables_of(music), [], []
    compiler.compile("run: album -> { aggregate: n is count() }", tables=tables, dialect="sqlite")
    starts = compiler.starts

    def work(n: int) -> None:
        try:
            for dialect in ("sqlite", "postgres", "mysql"):
                sql = compiler.compile(f"run: album -> {{ where: album_id > {n}; aggregate: n is count() }}",
                                       tables=tables, dialect=dialect).sql
                results.append((n, sql))
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(results) == 12 and compiler.starts == starts
    assert all(f">{n}" in sql for n, sql in results)


def _node(script: str) -> Any:
    node, home = require_compiler()
    done = subprocess.run([node, "-e", script, str(home)], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_reserved_words_match_the_lexer() -> None:
    _compiler_or_skip()
    words = _node("""
        const path = require('path'), home = process.argv[1];
        const dist = path.join(home, 'node_modules/@malloydata/malloy/dist');
        const {MalloyLexer} = require(path.join(dist, 'lang/lib/Malloy/MalloyLexer.js'));
        const {CharStreams} = require(path.join(home, 'node_modules/antlr4ts'));
        const lexes = w => new MalloyLexer(CharStreams.fromString(w)).getAllTokens().map(t => t.type);
        const candidates = new Set(JSON.parse(process.env.EXTRA));
        for (const n of MalloyLexer._SYMBOLIC_NAMES.filter(Boolean)) {
          const w = n.toLowerCase().replace(/_kw$/, '');
          candidates.add(w); candidates.add(w + 's');
        }
        const reserved = [...candidates].filter(w => /^[a-z_][a-z0-9_]*$/.test(w)).filter(w => {
          const t = lexes(w); return !(t.length === 1 && t[0] === MalloyLexer.IDENTIFIER);
        });
        console.log(JSON.stringify(reserved.filter(w => lexes(w).length === 1)));
    """.replace("process.env.EXTRA", json.dumps(json.dumps(sorted(RESERVED)))))
    assert set(words) == RESERVED


def test_function_names_match_the_compiler() -> None:
    _compiler_or_skip()
    names = _node("""
        const path = require('path'), home = process.argv[1];
        const space = require(path.join(home, 'node_modules/@malloydata/malloy/dist/lang/ast/types/global-name-space.js'));
        console.log(JSON.stringify([...space.getDialectFunctions().keys()]));
    """)
    assert set(names) == FUNCTIONS


def test_the_compiler_is_the_pinned_version() -> None:
    _compiler_or_skip()
    _, home = require_compiler()
    installed = json.loads((home / "node_modules/@malloydata/malloy/package.json").read_text())["version"]
    antlr = json.loads((home / "node_modules/antlr4ts/package.json").read_text())["version"]
    assert (installed, antlr) == (pinned_version(), "0.5.0-alpha.4")


# -- the compiled SQL on the servers --------------------------------------------------------------


@pytest.mark.services
@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_compiled_sql_runs_plain_on_postgres_and_mariadb(compiler: MalloyCompiler, music: Path, engine: str) -> None:
    from servers import mariadb_database_url, postgres_database_url

    make_url = postgres_database_url if engine == "postgres" else mariadb_database_url
    with make_url("nl2sql_malloy") as url:
        copy_database(str(music), url, create=True)
        tables = tables_of(url)
        spec = parse_database(url)
        if engine == "postgres":
            import psycopg

            conn: Any = psycopg.connect(spec.url)
        else:
            import pymysql

            server = spec.server
            assert server is not None
            conn = pymysql.connect(host=server.host, port=server.port, user=server.user, password=server.password or "",
                                   database=server.database)
        try:
            for query, (why, expected) in ANSWERS.items():
                sql = compiler.compile(query, tables=tables, dialect=engine).sql
                cursor = conn.cursor()
                cursor.execute(sql)
                got = {tuple(float(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, int) else v for v in row)
                       for row in cursor.fetchall()}
                assert got == {tuple(float(v) if isinstance(v, float) else v for v in row) for row in expected}, (why, sql)
                cursor.close()
        finally:
            conn.close()


def test_node_s_version_is_asked_once_per_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each compiler start looked Node's version up again (a process each time); an executable
    replaced by another is asked again."""
    from pytest_nl2sql.malloy.home import MalloyUnavailable, find_node

    asked = tmp_path / "asked"
    node = tmp_path / "node"

    def stand_in(version: str) -> None:
        node.unlink(missing_ok=True)  # a new file, as an upgrade writes it
        node.write_text(f'#!/bin/sh\necho asked >> "{asked}"\necho {version}\n')
        node.chmod(0o755)

    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    stand_in("v20.1.0")
    assert find_node() == find_node() == str(node)
    assert asked.read_text().count("asked") == 1
    stand_in("v18.19.1")
    with pytest.raises(MalloyUnavailable, match="is v18.19.1"):
        find_node()
    assert asked.read_text().count("asked") == 2
