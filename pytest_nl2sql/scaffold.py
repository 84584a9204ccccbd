"""`nl2sql init [DIR] [--database URL]`: a model repo that passes on its first `python -m pytest`.

It writes a suite, a `conftest.py` with the predictor hook to fill in, a `pytest.ini` and a GitHub
Actions workflow (the CI recipe of the docs' CI page). With `--database`, the suite's cases are
written from that database's tables (a row count, a join along a foreign key, a filter on a value
the data holds), so that a team edits questions rather than starting from nothing; without it, from
a tiny example database written beside the suite. Each case stores its gold SQL as its prediction
too, so the first run passes; the hook replaces those stand-ins with the model's answers.

An existing file is never overwritten: it is kept and reported as kept. What would pass here and
break in CI (a database file outside the repo, a server on this machine) is said in a note.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from sqlglot import exp

from pytest_nl2sql.engines.url import DatabaseSpec, EngineKind, parse_database

WORKFLOW_PATH = Path(".github/workflows/nl2sql.yml")
REPORTS_DIR = "nl2sql-reports"
BASELINE = "nl2sql-baseline.json"
MAX_CASES = 12  # a first suite to edit, not a census of the schema


class InitError(Exception):
    """The scaffold cannot be written (exit code 2): an unreadable database, a bad URL."""


@dataclass(frozen=True)
class Written:
    """One file of the scaffold and whether it was written or kept (it existed)."""

    path: Path
    written: bool


@dataclass(frozen=True)
class Scaffold:
    """What `init` did: each file written or kept, and notes on what a CI job would lack."""

    files: tuple[Written, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    id: str
    question: str
    gold: str


def init_repo(folder: Path, database: str | None = None, *, version: str | None = None) -> Scaffold:
    """Write the scaffold into `folder` (created when missing); never overwrite a file."""
    folder.mkdir(parents=True, exist_ok=True)
    suites = folder / "suites"
    if database is None:
        db_file = suites / "example.sqlite"
        out: list[Written] = []
        if not db_file.exists():
            suites.mkdir(parents=True, exist_ok=True)
            _write_example_database(db_file)
            out.append(Written(db_file, True))
        else:
            out.append(Written(db_file, False))
        spec = parse_database(str(db_file))
        suite_name, database_key = "example", "example.sqlite"
    else:
        out = []
        try:
            spec = parse_database(database, Path.cwd())
        except ValueError as error:
            raise InitError(f"--database {database}: {error}") from None
        suite_name = _suite_name(spec)
        database_key = _database_key(spec, database, suites)
    cases = cases_from_database(spec)
    files = {
        suites / f"{suite_name}.nl2sql.yaml": suite_yaml(cases, database_key, from_example=database is None),
        folder / "conftest.py": CONFTEST,
        folder / "pytest.ini": PYTEST_INI,
        folder / WORKFLOW_PATH: workflow_yaml(version),
    }
    for path, text in files.items():
        out.append(_write_new(path, text))
    return Scaffold(tuple(out), ci_notes(folder, spec, database_key) if database is not None else ())


LOOPBACK_HOSTS = ("localhost", "::1", "")


def ci_notes(folder: Path, spec: DatabaseSpec, database_key: str) -> tuple[str, ...]:
    """What passes here but breaks in CI, where the job checks out the repo alone: a database file
    outside the repo, a server on this machine. Said once, with the way out."""
    suite = f"suites/{_suite_name(spec)}.nl2sql.yaml"
    if spec.path is not None:
        if spec.path.resolve().is_relative_to(folder.resolve()):
            return ()
        in_repo = f"duckdb:///{spec.path.name}" if spec.kind is EngineKind.DUCKDB else spec.path.name
        return (f"note: {suite} names the database {database_key}, which lies outside the repo ({folder}): "
                f"a CI job checks out the repo alone and will not find it. To commit it, copy it into the repo "
                f"(cp {spec.path} {folder / 'suites'}/) and set `database: {in_repo}` in the suite; a database "
                "too big to commit: see the docs' CI page (Databases in CI).",)
    host = (spec.server.host if spec.server is not None else None) or ""
    if spec.server is not None and (host in LOOPBACK_HOSTS or host.startswith("127.")):
        return (f"note: {suite} names a server on this machine ({host or 'local socket'}), which a CI job "
                "does not have: give the job a server it reaches with --nl2sql-dsn (its URL in a secret), "
                "or start one in the job; see the docs' CI page (Databases in CI).",)
    return ()


def _write_new(path: Path, text: str) -> Written:
    if path.exists() or path.is_symlink():
        return Written(path, False)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "x", encoding="utf-8") as handle:  # "x": a file that appeared meanwhile is not overwritten
            handle.write(text)
    except FileExistsError:
        return Written(path, False)
    return Written(path, True)


def _suite_name(spec: DatabaseSpec) -> str:
    if spec.path is not None:
        stem = spec.path.stem
    else:
        stem = (spec.server.database if spec.server else None) or "suite"
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in stem).strip("_")
    return name or "suite"


def _database_key(spec: DatabaseSpec, given: str, suites: Path) -> str:
    """What the suite's `database:` says: a file relative to the suite (so the repo moves as a
    whole), a server URL as given but without its password (a password is no thing to commit)."""
    if spec.path is not None:
        relative = Path(os.path.relpath(spec.path.resolve(), suites.resolve()))
        return f"duckdb:///{relative.as_posix()}" if spec.kind is EngineKind.DUCKDB else relative.as_posix()
    if spec.server is not None and spec.server.password:
        return given.replace(f":{spec.server.password}@", "@", 1)
    return given


def _write_example_database(path: Path) -> None:
    """A tiny bookshop: two tables, a foreign key, a category column."""
    conn = sqlite3.connect(path)
    try:
        conn.executescript("""
            CREATE TABLE author (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
            CREATE TABLE book (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
                               author_id INTEGER NOT NULL REFERENCES author (id), year INTEGER, price REAL);
            INSERT INTO author VALUES (1, 'Ursula K. Le Guin', 'US'), (2, 'Stanisław Lem', 'PL'),
                                      (3, 'Italo Calvino', 'IT'), (4, 'Octavia E. Butler', 'US');
            INSERT INTO book VALUES (1, 'The Dispossessed', 1, 1974, 9.5), (2, 'The Left Hand of Darkness', 1, 1969, 8.0),
                                    (3, 'Solaris', 2, 1961, 7.25), (4, 'The Cyberiad', 2, 1965, 6.0),
                                    (5, 'Invisible Cities', 3, 1972, 10.0), (6, 'Kindred', 4, 1979, 9.0),
                                    (7, 'Parable of the Sower', 4, 1993, 11.5);
        """)
        conn.commit()
    finally:
        conn.close()


def cases_from_database(spec: DatabaseSpec) -> list[Case]:
    """Cases written from the database's own tables: a row count per table, a join along each
    foreign key, a filter on a value a column holds. The gold is the question's answer as the
    schema tells it; the questions are the user's to rephrase."""
    from pytest_nl2sql.copydb.model import CopyError, UsageError
    from pytest_nl2sql.copydb.sources import open_source
    from pytest_nl2sql.engines import open_spec
    from pytest_nl2sql.engines.base import EngineError, Limits

    if spec.kind is EngineKind.SQLALCHEMY:
        raise InitError("--database: cases are written from SQLite, DuckDB, PostgreSQL and MySQL/MariaDB databases")
    try:
        source = open_source(spec)
        try:
            tables = [t for t in source.tables() if t.columns]
        finally:
            source.close()
        engine = open_spec(spec)
    except (EngineError, CopyError, UsageError, OSError) as error:
        raise InitError(f"cannot read the database: {error}") from None
    except Exception as error:  # a driver's own error (psycopg, PyMySQL, duckdb): named, not a traceback
        raise InitError(f"cannot read the database: {type(error).__name__}: {error}") from None
    if not tables:
        engine.close()
        raise InitError("the database has no tables to write cases from")
    dialect = spec.kind.value
    limits = Limits(timeout=30.0, max_rows=1000)

    def first_row(sql: str) -> tuple[Any, ...] | None:
        try:
            rows = engine.execute(sql, limits).rows
        except Exception:  # a column the engine cannot read: no case from it
            return None
        return rows[0] if rows else None

    try:
        return _write_cases(tables, dialect, first_row)
    finally:
        engine.close()


def _write_cases(tables: Sequence[Any], dialect: str, first_row: Callable[[str], Any]) -> list[Case]:
    def q(name: str) -> str:
        return exp.to_identifier(name).sql(dialect=dialect)

    by_name = {t.name: t for t in tables}
    cases: list[Case] = []
    for table in tables[:4]:
        cases.append(Case(f"count-{_slug(table.name)}", f"How many rows does the table {table.name} hold?",
                          f"SELECT count(*) FROM {q(table.name)}"))
    for child in tables:
        for key in child.foreign_keys:
            parent = by_name.get(key.ref_table) or next((t for t in tables if t.name.lower() == key.ref_table.lower()), None)
            refs = key.ref_columns or (parent.primary_key if parent is not None else ())
            if parent is None or parent is child or len(refs) != len(key.columns) or not refs:
                continue
            label = _label_column(parent)
            # grouped by the key, the label only shown: two parents sharing a name stay two
            shown = [*refs, *([label] if label and label not in refs else [])]
            columns = ", ".join(f"p.{q(c)}" for c in shown)
            on = " AND ".join(f"c.{q(a)} = p.{q(b)}" for a, b in zip(key.columns, refs))
            cases.append(Case(
                f"{_slug(child.name)}-per-{_slug(parent.name)}",
                f"For each row of {parent.name}, how many rows of {child.name} refer to it?",
                f"SELECT {columns}, count(*) FROM {q(child.name)} AS c JOIN {q(parent.name)} AS p ON {on} "
                f"GROUP BY {columns}"))
            if len(cases) >= 8:
                break
    for table in tables:
        if len(cases) >= MAX_CASES:
            break
        case = _filter_case(table, q, first_row)
        if case is not None:
            cases.append(case)
    return cases[:MAX_CASES]


def _label_column(table: Any) -> str | None:
    """A column a person would name a row by: a text column called name or title, else the first text one."""
    from pytest_nl2sql.copydb.model import Kind

    texts = [c.name for c in table.columns if c.type.kind is Kind.TEXT]
    named = [c for c in texts if c.lower() in ("name", "title") or c.lower().endswith("name")]
    return (named or texts or [None])[0]


def _filter_case(table: Any, q: Callable[[str], str], first_row: Callable[[str], Any]) -> Case | None:
    """A count of the rows whose text column holds the value most rows share (a category: held by
    two rows or more), else of those whose number exceeds the column's mean."""
    from pytest_nl2sql.copydb.model import Kind

    keys = set(table.primary_key) | {c for key in table.foreign_keys for c in key.columns}
    t = q(table.name)
    for column in table.columns:
        name = q(column.name)
        if column.name in keys or column.type.kind is not Kind.TEXT:
            continue
        row = first_row(f"SELECT {name}, count(*) FROM {t} WHERE {name} IS NOT NULL GROUP BY {name} "
                        f"ORDER BY count(*) DESC, {name} LIMIT 1")
        if row is not None and isinstance(row[0], str) and row[1] >= 2 and 0 < len(row[0]) <= 60 and row[0].isprintable():
            literal = "'" + row[0].replace("'", "''") + "'"
            return Case(f"{_slug(table.name)}-by-{_slug(column.name)}",
                        f"How many rows of {table.name} have {column.name} {literal}?",
                        f"SELECT count(*) FROM {t} WHERE {name} = {literal}")
    for column in table.columns:
        name = q(column.name)
        if column.name in keys or column.type.kind not in (Kind.INTEGER, Kind.REAL, Kind.DECIMAL):
            continue
        row = first_row(f"SELECT avg({name}) FROM {t}")
        value = row[0] if row is not None else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) < 1e15:
            bound = int(value) if column.type.kind is Kind.INTEGER else round(value, 2)
            return Case(f"{_slug(table.name)}-{_slug(column.name)}-above",
                        f"How many rows of {table.name} have {column.name} above {bound}?",
                        f"SELECT count(*) FROM {t} WHERE {name} > {bound}")
    return None


def _slug(name: str) -> str:
    slug = "".join(c.lower() if c.isalnum() else "-" for c in name)
    return "-".join(part for part in slug.split("-") if part) or "table"


def suite_yaml(cases: Sequence[Case], database: str, *, from_example: bool) -> str:
    source = "a tiny example database (suites/example.sqlite)" if from_example else f"the database {database}"
    head = (
        f"# A suite written by `nl2sql init` from {source}.\n"
        "# Top-level keys are defaults every case inherits; each case is one pytest item.\n"
        "# Rephrase the questions as your users ask them, and check each gold query answers its question.\n"
        "# `predicted:` is a stand-in (the gold itself) until conftest.py's hook asks your model.\n"
    )
    body = {
        "database": database,
        "tags": ["starter"],
        "cases": [{"id": c.id, "question": c.question, "gold": c.gold, "predicted": c.gold} for c in cases],
    }
    return head + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=110)


CONFTEST = '''"""The model under test, plugged in with the hook `pytest_nl2sql_predict(case)`.

Until the hook below is filled in, each case is judged on the prediction it stores (`predicted:`).
`case` carries `id`, `question`, `hint`, `dialect` (the SQL dialect to write), `schema` (the
database's DDL, for a prompt), `sample_rows(table, n=3)`, `tags`; never the gold.
Return SQL text (a Markdown answer with one fenced query is fine), or
{"sql": TEXT, "usage": {"prompt_tokens": N, "completion_tokens": N, "cost": USD}}; return None to
fall back to the stored prediction. Record answers with --nl2sql-record=preds.jsonl and replay them
with --nl2sql-predictions=preds.jsonl.
"""

# def pytest_nl2sql_predict(case):
#     prompt = f"{case.schema}\\n\\n-- Answer in {case.dialect} SQL: {case.question}\\n"
#     return my_model.generate_sql(prompt)
'''

PYTEST_INI = """# Settings of the nl2sql suites (run: python -m pytest). Every --nl2sql-* option can be set here.
[pytest]
testpaths = suites
nl2sql_timeout = 30
# The CI gate: accept today's failures once, commit the file, and fail only on regressions:
#   python -m pytest --nl2sql-baseline=nl2sql-baseline.json --nl2sql-update-baseline
# then uncomment:
# nl2sql_baseline = nl2sql-baseline.json
# Thresholds on accuracy (repeatable, one per line): overall, a hardness level, a tag.
# nl2sql_fail_under =
#     0.8
#     tag:starter=0.9
"""


def workflow_yaml(version: str | None) -> str:
    """The CI recipe (docs/how-to/ci.md explains each step): the package pinned to this version."""
    pin = f"=={version}" if version else ""
    return WORKFLOW.replace("@PIN@", pin).replace("@VERSION@", version or "any")


WORKFLOW = """# Written by `nl2sql init`: the nl2sql suites as a merge gate (see the docs' CI page).
name: nl2sql
on:
  push:
    branches: [main]
  pull_request:
permissions:
  contents: read
  actions: read  # to download the base branch's last report on a pull request
jobs:
  nl2sql:
    runs-on: ubuntu-latest
    env:
      NL2SQL_CACHE_DIR: ~/.cache/pytest-nl2sql  # neighbour databases here, not in .pytest_cache: cached below
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - uses: actions/setup-node@v4  # only Malloy predictions need Node
        with:
          node-version: "20"
      - name: Install pytest-nl2sql
        run: python -m pip install "pytest-nl2sql[all]@PIN@"
      # Neighbour databases (NL2SQL_CACHE_DIR, set above) and the Malloy compiler live in
      # ~/.cache/pytest-nl2sql. Keyed by the package version and the suites; restore-keys lets a
      # new branch or a changed suite start from the last cache of the same version.
      - name: Restore the nl2sql cache
        uses: actions/cache@v4
        with:
          path: ~/.cache/pytest-nl2sql
          key: nl2sql-${{ runner.os }}-@VERSION@-${{ hashFiles('suites/**') }}
          restore-keys: |
            nl2sql-${{ runner.os }}-@VERSION@-
      - name: Set up the Malloy compiler (a no-op when cached)
        run: nl2sql malloy-setup
      - name: Run the suites
        run: |
          mkdir -p nl2sql-reports
          baseline=""
          if [ -f nl2sql-baseline.json ]; then baseline="--nl2sql-baseline=nl2sql-baseline.json"; fi
          status=0
          python -m pytest $baseline --nl2sql-label="${GITHUB_SHA:-local}" \\
            --nl2sql-report=json:nl2sql-reports/nl2sql.json \\
            --nl2sql-report=md:nl2sql-reports/nl2sql.md \\
            --nl2sql-report=html:nl2sql-reports/nl2sql.html || status=$?
          exit $status  # the md report appends itself to $GITHUB_STEP_SUMMARY
      - name: Upload the reports
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: nl2sql-reports
          path: nl2sql-reports/
      - name: Fetch the base branch's last report
        if: always() && github.event_name == 'pull_request'
        continue-on-error: true
        env:
          GH_TOKEN: ${{ github.token }}
        run: |
          run_id=$(gh run list --repo "$GITHUB_REPOSITORY" --workflow nl2sql.yml --branch "$GITHUB_BASE_REF" \\
            --event push --status success --limit 1 --json databaseId --jq '.[0].databaseId')
          if [ -n "$run_id" ]; then
            gh run download "$run_id" --repo "$GITHUB_REPOSITORY" --name nl2sql-reports --dir nl2sql-base
          fi
      - name: Compare with the base branch
        if: always() && github.event_name == 'pull_request'
        run: |
          if [ -f nl2sql-base/nl2sql.json ] && [ -f nl2sql-reports/nl2sql.json ]; then
            nl2sql compare nl2sql-base/nl2sql.json nl2sql-reports/nl2sql.json --nl2sql-report=md:nl2sql-compare.md
            if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat nl2sql-compare.md >> "$GITHUB_STEP_SUMMARY"; fi
          else
            echo "no report of the base branch to compare with (its workflow has not run on a push yet)"
          fi
"""
