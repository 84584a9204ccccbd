"""`nl2sql` (also `python -m pytest_nl2sql`): commands around a run that need no pytest.

    nl2sql readonly-role postgresql://admin@host/db [--role nl2sql_reader]
    nl2sql readonly-role mysql://root@host/db [--role nl2sql_reader]

prints the SQL that creates the least-privilege role predictions should run as (the engines
contain a query by what its session is; what needs privilege, only the role can forbid).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_nl2sql.engines.url import EngineKind, parse_database


def _quoted(name: str, quote: str) -> str:
    return quote + name.replace(quote, quote * 2) + quote


def postgres_role_sql(database: str, role: str) -> str:
    """A role that may log in and read, and nothing else (see engines/postgres.py)."""
    r, d = _quoted(role, '"'), _quoted(database, '"')
    return "\n".join([
        f"-- run as a superuser, connected to the database {database}",
        f"CREATE ROLE {r} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;  -- add PASSWORD '...' unless trust/peer auth",
        f"REVOKE ALL ON DATABASE {d} FROM PUBLIC;",
        f"GRANT CONNECT ON DATABASE {d} TO {r};",
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC;",
        f"GRANT USAGE ON SCHEMA public TO {r};",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {r};",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {r};",
        "-- any role may signal its own sessions: with -n 2 a prediction could end the other worker's connection",
        "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint), pg_catalog.pg_cancel_backend(integer) FROM PUBLIC;",
        f"ALTER ROLE {r} SET default_transaction_read_only = on;",
        f"ALTER ROLE {r} SET statement_timeout = '60s';",
        f"-- then: --nl2sql-dsn=postgresql://{role}@HOST/{database} (log in as the role itself, never SET ROLE)",
    ])


def mysql_role_sql(database: str, role: str) -> str:
    """A user that may read one database: no FILE, PROCESS, SUPER or any write privilege."""
    user, d = f"'{role}'@'%'", _quoted(database, "`")
    return "\n".join([
        "-- run as an administrator",
        f"CREATE USER {user} IDENTIFIED BY 'choose-a-password';",
        f"GRANT SELECT ON {d}.* TO {user};  -- and nothing else: no FILE (INTO OUTFILE, LOAD_FILE), no PROCESS, no SUPER",
        f"ALTER USER {user} WITH MAX_USER_CONNECTIONS 8;",
        f"-- then: --nl2sql-dsn=mysql://{role}:PASSWORD@HOST/{database}",
    ])


def readonly_role(url: str, role: str) -> str:
    spec = parse_database(url)
    database = (spec.server.database if spec.server else None) or "DATABASE"
    if spec.kind is EngineKind.POSTGRES:
        return postgres_role_sql(database, role)
    if spec.kind is EngineKind.MYSQL:
        return mysql_role_sql(database, role)
    raise ValueError(f"{url}: only PostgreSQL and MySQL/MariaDB have roles (SQLite and DuckDB files are opened read-only)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nl2sql", description="pytest-nl2sql commands that need no pytest run")
    commands = parser.add_subparsers(dest="command", required=True)
    role = commands.add_parser("readonly-role", help="print the SQL that creates a least-privilege role for predictions")
    role.add_argument("url", help="the server database the suite will run on (postgresql://… or mysql://…)")
    role.add_argument("--role", default="nl2sql_reader", help="the role (user) to create (default nl2sql_reader)")
    args = parser.parse_args(argv)
    try:
        print(readonly_role(args.url, args.role))
    except ValueError as e:
        print(f"nl2sql: {e}", file=sys.stderr)
        return 2
    return 0
