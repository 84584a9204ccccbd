"""`nl2sql malloy-setup` and `nl2sql malloy-model DATABASE` (registered by pytest_nl2sql/cli.py).

    nl2sql malloy-setup [--home DIR]

installs the pinned Malloy compiler (`npm ci`; Node 20 and npm must be on PATH) where Malloy
predictions look for it (`home.py`), and prints where. Exit code 0, or 1 when it cannot.

    nl2sql malloy-model DATABASE

prints the Malloy model generated from the database's schema (`model.py`): what a suite without
`malloy_model:` compiles its Malloy predictions against. Needs no Node. Exit code 0; 2 when the
database cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

COMMANDS = ("malloy-setup", "malloy-model")


def add_malloy_commands(commands: Any) -> None:
    """Add the two commands to the `nl2sql` parser's subparsers."""
    setup = commands.add_parser(
        "malloy-setup", help="install the Malloy compiler that Malloy predictions need (Node 20 and npm)",
        description="Install the pinned Malloy compiler (npm ci) into $NL2SQL_MALLOY_HOME, else "
                    "~/.cache/pytest-nl2sql/malloy/VERSION, where Malloy predictions look for it.")
    setup.add_argument("--home", help="install here instead (then set NL2SQL_MALLOY_HOME to it for the runs)")
    model = commands.add_parser(
        "malloy-model", help="print the Malloy model generated from a database's schema",
        description="Print the Malloy model that Malloy predictions on DATABASE compile against when the suite "
                    "names no malloy_model: a source per table, named as the table, with its primary key, "
                    "join_one along each foreign key and join_many back.")
    model.add_argument("database", metavar="DATABASE",
                       help="a SQLite file, or duckdb:///path, postgresql://user@host/db, mysql://user@host/db")


def run_malloy_command(args: argparse.Namespace) -> int:
    if args.command == "malloy-setup":
        return _setup(args)
    return _model(args)


def _setup(args: argparse.Namespace) -> int:
    from pytest_nl2sql.malloy.home import MalloyUnavailable, setup_compiler

    try:
        home = setup_compiler(Path(args.home) if args.home else None,
                              say=lambda line: print(f"nl2sql malloy-setup: {line}", file=sys.stderr))
    except (MalloyUnavailable, OSError) as error:
        print(f"nl2sql malloy-setup: {error}", file=sys.stderr)
        return 1
    print(home)
    return 0


def _model(args: argparse.Namespace) -> int:
    from pytest_nl2sql.copydb.model import CopyError, UsageError
    from pytest_nl2sql.copydb.sources import open_source
    from pytest_nl2sql.engines.base import EngineError
    from pytest_nl2sql.engines.url import EngineKind, parse_database
    from pytest_nl2sql.malloy.model import generated_model

    try:
        spec = parse_database(args.database)
        if spec.kind is EngineKind.SQLALCHEMY:
            raise UsageError("Malloy predictions run on SQLite, DuckDB, PostgreSQL and MySQL/MariaDB databases")
        source = open_source(spec)
        try:
            tables = source.tables()
        finally:
            source.close()
    except (EngineError, CopyError, UsageError, OSError) as error:
        print(f"nl2sql malloy-model: cannot read the database: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # a driver's own error (psycopg, PyMySQL, duckdb): named, not a traceback
        print(f"nl2sql malloy-model: cannot read the database: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    name = spec.path.name if spec.path is not None else (spec.server.database if spec.server else None)
    sys.stdout.write(generated_model(tables, spec.kind.value, database=name))
    return 0
