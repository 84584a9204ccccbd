"""`nl2sql readonly-role`: the SQL of a least-privilege role, which the tests' own servers accept."""

from __future__ import annotations

import subprocess
import sys

from pytest_nl2sql.cli import main, readonly_role


def test_postgres_role_sql_names_the_database_and_revokes_signals() -> None:
    sql = readonly_role("postgresql://admin@127.0.0.1/shop", "reader")
    assert 'GRANT CONNECT ON DATABASE "shop" TO "reader";' in sql
    assert "pg_terminate_backend" in sql and "REVOKE" in sql and "SUPERUSER" in sql


def test_mysql_role_sql_grants_select_only() -> None:
    sql = readonly_role("mysql://root@127.0.0.1/shop", "reader")
    assert "GRANT SELECT ON `shop`.* TO 'reader'@'%';" in sql
    assert "GRANT ALL" not in sql


def test_a_file_database_has_no_role(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["readonly-role", "sqlite:///shop.sqlite"]) == 2
    assert "only PostgreSQL and MySQL" in capsys.readouterr().err


def test_python_dash_m_runs_the_command() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_nl2sql", "readonly-role", "postgresql://x@127.0.0.1/db"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "CREATE ROLE" in done.stdout
