"""`nl2sql readonly-role`: the SQL of a least-privilege role, which the tests' own servers accept."""

from __future__ import annotations

import subprocess
import sys

from pytest_nl2sql.cli import main, readonly_role


def test_postgres_role_sql_names_the_database_and_revokes_signals() -> None:
    sql = readonly_role("postgresql://admin@127.0.0.1/shop", "reader")
    assert 'GRANT CONNECT ON DATABASE "shop" TO "reader";' in sql
    assert "pg_terminate_backend" in sql and "REVOKE" in sql and "SUPERUSER" in sql
    statements = [line for line in sql.splitlines() if not line.startswith("--")]
    # nothing that takes from every other user of a shared database what they hold through PUBLIC
    assert not [s for s in statements if "FROM PUBLIC" in s and ("ON DATABASE" in s or "ON SCHEMA" in s)]


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


def test_merged_shards_are_one_run(pytester) -> None:  # type: ignore[no-untyped-def]
    """A suite split across a CI matrix, merged: the report and the gate of a single run."""
    import json

    from helpers import make_shop, without_timings, write_suite

    make_shop(pytester.path)
    cases = [{"id": f"c{n}", "gold": "SELECT count(*) FROM item",
              "predicted": "SELECT 1" if n in (2, 5) else "SELECT count(id) FROM item", "tags": [f"t{n % 3}"]} for n in range(8)]
    write_suite(pytester.path, cases, database="shop.sqlite")
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-update-baseline", "-k", "not c5")
    single = pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-report=json:one.json", "--nl2sql-report=csv:one.csv")
    single.assert_outcomes(passed=6, failed=1, xfailed=1)  # c5 is new and fails
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-report=json:a.json", "-k", "c0 or c1 or c2 or c7")
    pytester.runpytest("--nl2sql-baseline=base.json", "--nl2sql-report=json:b.json", "-k", "c3 or c4 or c5 or c6")
    code = main(["merge-reports", "b.json", "a.json", "--nl2sql-baseline=base.json", "--nl2sql-report=json:merged.json",
                 "--nl2sql-report=csv:merged.csv", f"--rootdir={pytester.path}"])
    assert code == 1 == single.ret  # the new failing case fails the gate in both
    one, merged = (json.loads((pytester.path / name).read_text()) for name in ("one.json", "merged.json"))
    assert without_timings(merged) == without_timings(one)
    assert _without_run_columns(pytester.path / "merged.csv") == _without_run_columns(pytester.path / "one.csv")
    assert merged["run"]["options"]["shards"] == 2


def test_merge_reports_refuses_a_malformed_shard_and_warns_on_shards_of_other_runs(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    item = {"id": "a", "nodeid": "s.yaml::a", "file": "s.yaml", "verdict": "pass", "passed": True, "tags": ["x"]}
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"run": {"label": "m1", "options": {"timeout": 30}}, "items": [item]}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"run": {"label": "m2", "options": {"timeout": 5}}, "items": [{**item, "id": "b", "nodeid": "s.yaml::b"}]}))
    for name, content, problem in [
        ("broken.json", "{not json", "broken.json: not JSON"),
        ("list.json", "[1, 2]", "list.json: not a JSON report"),
        ("tags.json", json.dumps({"items": [{**item, "tags": "joins"}]}), "tags.json: item 1: `tags` must be a list"),
        ("noid.json", json.dumps({"items": [{"verdict": "pass"}]}), "noid.json: item 1: no 'id'"),
    ]:
        (tmp_path / name).write_text(content)
        assert main(["merge-reports", str(good), str(tmp_path / name), f"--rootdir={tmp_path}"]) == 2, name
        assert problem in capsys.readouterr().err
    assert main(["merge-reports", str(good), str(other), f"--rootdir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "the shards differ in their labels" in out and "the shards differ in their options" in out


def _without_run_columns(path):  # type: ignore[no-untyped-def]
    """A CSV report's rows without the run's columns (its start differs from the shards' start)."""
    import csv

    with open(path, newline="", encoding="utf-8") as handle:
        return [{k: v for k, v in row.items() if not k.startswith("run_")} for row in csv.DictReader(handle)]
