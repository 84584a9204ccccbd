"""`nl2sql init`: the scaffold passes on its first `python -m pytest`, from the example database or
the user's own; it never overwrites a file; the CI workflow's shell steps run as written."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_nl2sql.cli import main
from pytest_nl2sql.engines.url import parse_database
from pytest_nl2sql.scaffold import WORKFLOW_PATH, cases_from_database, ci_notes

SHOP = Path(__file__).parent.parent / "example_suites" / "shop.sqlite"


def _env(tmp_path: Path) -> dict[str, str]:
    """The venv's python and nl2sql first on PATH (as in a job that pip-installed the package),
    the neighbour cache in the test's folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NL2SQL_CACHE_DIR"] = str(tmp_path / "cache")
    return env


def _pytest(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)


def _steps(folder: Path) -> dict[str, str]:
    workflow = yaml.safe_load((folder / WORKFLOW_PATH).read_text())
    return {step["name"]: step["run"] for step in workflow["jobs"]["nl2sql"]["steps"] if "run" in step and "name" in step}


def test_init_from_the_example_database_passes_and_its_workflow_steps_run(tmp_path: Path, capsys) -> None:
    repo = tmp_path / "repo"
    assert main(["init", str(repo)]) == 0
    printed = capsys.readouterr().out
    for name in ("suites/example.sqlite", "suites/example.nl2sql.yaml", "conftest.py", "pytest.ini", str(WORKFLOW_PATH)):
        assert f"wrote  {name}" in printed
        assert (repo / name).is_file()
    env = _env(tmp_path)
    steps = _steps(repo)
    summary = tmp_path / "step-summary.md"
    run = subprocess.run(["bash", "-eo", "pipefail", "-c", steps["Run the suites"]], cwd=repo,
                         env={**env, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_SHA": "abc123"},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "5 passed" in run.stdout
    for report in ("nl2sql.json", "nl2sql.md", "nl2sql.html"):
        assert (repo / "nl2sql-reports" / report).stat().st_size > 0
    assert "abc123" in summary.read_text()  # the md report, labelled by the commit, is the job summary
    # A pull request: the base branch's report (here the same run) is compared with this one.
    shutil.copytree(repo / "nl2sql-reports", repo / "nl2sql-base")
    compare = subprocess.run(["bash", "-eo", "pipefail", "-c", steps["Compare with the base branch"]], cwd=repo,
                             env={**env, "GITHUB_STEP_SUMMARY": str(summary)}, capture_output=True, text=True, timeout=600)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    assert (repo / "nl2sql-compare.md").stat().st_size > 0
    assert summary.read_text().count("abc123") >= 2


def test_init_from_an_existing_database_writes_its_cases_and_passes(tmp_path: Path) -> None:
    database = tmp_path / "data" / "shop.sqlite"
    database.parent.mkdir()
    shutil.copy(SHOP, database)
    repo = tmp_path / "repo"
    assert main(["init", str(repo), "--database", str(database)]) == 0
    suite = yaml.safe_load((repo / "suites" / "shop.nl2sql.yaml").read_text())
    assert suite["database"] == "../../data/shop.sqlite"  # relative to the suite: the repo moves as a whole
    golds = [case["gold"] for case in suite["cases"]]
    assert "SELECT count(*) FROM customer" in golds
    assert any(" JOIN customer AS p ON c.customer_id = p.id GROUP BY p.id, p.name" in g for g in golds)  # a foreign key
    assert "SELECT count(*) FROM customer WHERE city = 'London'" in golds  # a value the data holds
    result = _pytest(repo, _env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(golds)} passed" in result.stdout


def test_init_says_when_the_database_file_is_outside_the_repo(tmp_path: Path, capsys) -> None:
    """A CI job checks out the repo alone: a suite naming ../../data/shop.sqlite passes here and
    breaks there (every case a gold_error), so init says so, and how to keep the file in the repo."""
    (tmp_path / "data").mkdir()
    shutil.copy(SHOP, tmp_path / "data" / "shop.sqlite")
    assert main(["init", str(tmp_path / "repo"), "--database", str(tmp_path / "data" / "shop.sqlite")]) == 0
    printed = capsys.readouterr().out
    assert "note: suites/shop.nl2sql.yaml names the database ../../data/shop.sqlite, which lies outside the repo" in printed
    assert "copy it into the repo" in printed and "database: shop.sqlite" in printed
    # The tutorial's way: the file in the repo first, then init from it: named beside the suite, no note.
    inside = tmp_path / "inside"
    (inside / "suites").mkdir(parents=True)
    shutil.copy(SHOP, inside / "suites" / "shop.sqlite")
    assert main(["init", str(inside), "--database", str(inside / "suites" / "shop.sqlite")]) == 0
    assert "note:" not in capsys.readouterr().out
    assert yaml.safe_load((inside / "suites" / "shop.nl2sql.yaml").read_text())["database"] == "shop.sqlite"


def test_init_says_a_server_on_this_machine_is_not_there_in_ci(tmp_path: Path) -> None:
    notes = ci_notes(tmp_path, parse_database("postgresql://reader@127.0.0.1:5432/shop"), "postgresql://reader@127.0.0.1:5432/shop")
    assert len(notes) == 1 and "a server on this machine" in notes[0] and "--nl2sql-dsn" in notes[0]
    assert ci_notes(tmp_path, parse_database("postgresql://reader@db.internal:5432/shop"), "postgresql://reader@db.internal:5432/shop") == ()


def test_init_never_overwrites_a_file(tmp_path: Path, capsys) -> None:
    (tmp_path / "conftest.py").write_text("# mine\n")
    (tmp_path / "suites").mkdir()
    shutil.copy(SHOP, tmp_path / "suites" / "example.sqlite")  # a database of the user's own under that name
    assert main(["init", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "kept (exists)  conftest.py" in printed and "kept (exists)  suites/example.sqlite" in printed
    assert (tmp_path / "conftest.py").read_text() == "# mine\n"
    assert (tmp_path / "suites" / "example.sqlite").read_bytes() == SHOP.read_bytes()
    assert (tmp_path / "pytest.ini").is_file()  # what was missing is written
    assert main(["init", str(tmp_path)]) == 0  # a second run keeps everything
    assert "wrote" not in capsys.readouterr().out


def test_init_refuses_a_database_it_cannot_read(tmp_path: Path, capsys) -> None:
    assert main(["init", str(tmp_path / "repo"), "--database", str(tmp_path / "missing.sqlite")]) == 2
    assert "nl2sql init:" in capsys.readouterr().err
    assert not (tmp_path / "repo" / "conftest.py").exists()


def test_cases_from_a_duckdb_database(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "warehouse.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE region (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("CREATE TABLE sale (id INTEGER PRIMARY KEY, region_id INTEGER REFERENCES region (id), channel TEXT, amount DOUBLE)")
    conn.execute("INSERT INTO region VALUES (1, 'north'), (2, 'south')")
    conn.execute("INSERT INTO sale VALUES (1, 1, 'web', 10), (2, 1, 'shop', 20), (3, 2, 'web', 5)")
    conn.execute("CREATE TABLE stock (id INTEGER PRIMARY KEY, amount DOUBLE)")
    conn.execute("INSERT INTO stock VALUES (1, 1.5), (2, 4.0)")
    conn.close()
    cases = cases_from_database(parse_database(f"duckdb:///{path}"))
    golds = {case.id: case.gold for case in cases}
    assert golds["count-sale"] == "SELECT count(*) FROM sale"
    assert golds["sale-per-region"].startswith("SELECT p.id, p.name, count(*) FROM sale AS c JOIN region AS p")
    assert golds["sale-by-channel"] == "SELECT count(*) FROM sale WHERE channel = 'web'"
    assert golds["stock-amount-above"] == "SELECT count(*) FROM stock WHERE amount > 2.75"
    # Questions that read as English whatever the table's name (plural or not) and value (several words).
    questions = {case.id: case.question for case in cases}
    assert questions["sale-per-region"] == "For each row of region, how many rows of sale refer to it?"
    assert questions["sale-by-channel"] == "How many rows of sale have channel 'web'?"
    assert questions["stock-amount-above"] == "How many rows of stock have amount above 2.75?"


def test_names_that_need_quoting_are_quoted(tmp_path: Path) -> None:
    path = tmp_path / "odd.sqlite"
    conn = sqlite3.connect(path)
    conn.execute('CREATE TABLE "order lines" ("line id" INTEGER PRIMARY KEY, "kind" TEXT)')
    conn.executemany('INSERT INTO "order lines" VALUES (?, ?)', [(1, "a'b"), (2, "a'b"), (3, "c")])
    conn.commit()
    conn.close()
    golds = [case.gold for case in cases_from_database(parse_database(str(path)))]
    assert golds == ['SELECT count(*) FROM "order lines"', """SELECT count(*) FROM "order lines" WHERE kind = 'a''b'"""]
