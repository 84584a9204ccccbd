"""Hostile predictions through the plugin: contained, bounded, and invisible to later cases."""

from __future__ import annotations

import hashlib

import pytest

from helpers import make_shop, read_report, write_suite

HOSTILE = [
    "DROP TABLE item",
    "DELETE FROM item",
    "UPDATE item SET price = 0",
    "INSERT INTO item VALUES (9, 'x', 1, 'y')",
    "CREATE TEMP TABLE item AS SELECT 1 AS name",  # would shadow `item` for every later case
    "CREATE TEMP VIEW sale AS SELECT 1",
    "ATTACH DATABASE 'stolen.sqlite' AS s",
    "VACUUM INTO 'copy.sqlite'",
    "PRAGMA writable_schema = 1",
    "BEGIN IMMEDIATE",
    "SELECT load_extension('evil')",
    "SELECT 1; DROP TABLE item",
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n",
    "SELECT length(randomblob(2000000000))",
    "SELECT * FROM item a, item b, item c, item d, item e, item f",
]


def test_hostile_predictions_are_contained(pytester: pytest.Pytester) -> None:
    """Under xdist (`-n 2`); and a prediction holding a lone surrogate (legal in JSON)
    keeps its item and verdict: a report that cannot travel to the controller would make it vanish."""
    db = make_shop(pytester.path)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    files_before = sorted(p.name for p in pytester.path.iterdir())
    cases = [{"id": f"hostile-{i}", "gold": "SELECT count(*) FROM item", "predicted": sql} for i, sql in enumerate(HOSTILE)]
    # every hostile case is followed by cases that would notice any change it made
    cases += [
        {"id": "still-five-items", "gold": "SELECT 5", "predicted": "SELECT count(*) FROM item"},
        {"id": "names-intact", "gold": "SELECT name FROM item", "predicted": "SELECT name FROM item ORDER BY id"},
        {"id": "sale-is-a-table", "gold": "SELECT count(*) FROM sale", "predicted": "SELECT 4"},
    ]
    # two rounds in one file and a third in another: state left by one round would show in the next
    write_suite(pytester.path, [{**c, "id": f"{r}-{c['id']}"} for r in ("one", "two") for c in cases], database="shop.sqlite")
    write_suite(pytester.path, cases, name="again.nl2sql.yaml", database="shop.sqlite")
    # a prediction holding a lone surrogate, from a predictions file (keyed by id: the other cases keep theirs)
    write_suite(pytester.path, [{"id": i, "gold": "SELECT 1"} for i in "abc"], name="lone.nl2sql.yaml", database="shop.sqlite")
    (pytester.path / "p.jsonl").write_text('{"id": "a", "predicted": "SELECT 1"}\n{"id": "b", "predicted": "SELECT \\ud800"}\n'
                                           '{"id": "c", "predicted": "SELECT 1"}\n')
    # the sentinels compare with constants true of this database only: no neighbour databases
    result = pytester.runpytest("-n", "2", "--nl2sql-timeout=0.5", "--nl2sql-max-rows=1000", "--nl2sql-neighbours=0",
                                "--nl2sql-predictions=p.jsonl", "--nl2sql-report=json:r.json", "--nl2sql-report=md:r.md")
    items = read_report(pytester.path / "r.json")["items"]
    lone = {i["id"]: i for i in items if i["file"] == "lone.nl2sql.yaml"}
    assert sorted(lone) == ["a", "b", "c"] and lone["b"]["verdict"] == "pred_error"
    assert lone["a"]["verdict"] == lone["c"]["verdict"] == "pass"
    by_verdict: dict[str, set[str]] = {}
    for item in items:
        if item["file"] != "lone.nl2sql.yaml":
            by_verdict.setdefault(item["verdict"], set()).add(item["predicted"])
    assert by_verdict["pass"] == {"SELECT count(*) FROM item", "SELECT name FROM item ORDER BY id", "SELECT 4"}
    assert by_verdict.get("pred_timeout") == {HOSTILE[12]}
    assert by_verdict.get("too_many_rows") == {HOSTILE[14]}
    assert by_verdict.get("pred_error") == set(HOSTILE) - {HOSTILE[12], HOSTILE[14]}
    result.assert_outcomes(passed=9 + 2, failed=3 * len(HOSTILE) + 1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    created = {p.name for p in pytester.path.iterdir()} - set(files_before)
    assert created <= {"shop.nl2sql.yaml", "again.nl2sql.yaml", "lone.nl2sql.yaml", "p.jsonl", "r.json", "r.md", ".pytest_cache"}
    assert not (pytester.path / "stolen.sqlite").exists() and not (pytester.path / "copy.sqlite").exists()


def test_hostile_text_is_shown_not_obeyed(pytester: pytest.Pytester) -> None:
    """Escape sequences, bidi overrides and CI workflow commands in a prediction or a question
    reach the terminal, junit and the md report escaped and inert."""
    from helpers import make_shop, write_suite

    make_shop(pytester.path)
    hostile = "SELECT name FROM item WHERE name = '\x1b[31mred\x1b[0m'\n::error file=x.py::pwned\n##[error]pwned"
    write_suite(pytester.path, [{"id": "h", "question": "Which \u202eitems?", "gold": "SELECT 1", "predicted": hostile}],
                database="shop.sqlite")
    result = pytester.runpytest("--junitxml=j.xml", "--nl2sql-report=md:r.md")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[31mred" in out and "\\u202e" in out
    assert not [line for line in out.splitlines() if line.lstrip().startswith(("::", "##["))]
    for name in ("j.xml", "r.md"):
        text = (pytester.path / name).read_text()
        assert "\x1b" not in text and "\u202e" not in text, name
        assert not [line for line in text.splitlines() if line.lstrip().startswith(("::", "##["))], name


def test_a_password_in_a_case_s_database_url_is_shown_nowhere(pytester: pytest.Pytester) -> None:
    """`database: postgresql://user:PASSWORD@…` in a suite: masked in the terminal, every report,
    junit and the history (the connection itself fails here: nothing listens on port 1)."""
    write_suite(pytester.path, [{"id": "pw", "gold": "SELECT 1", "predicted": "SELECT 1"}],
                database="postgresql://nl2sql_user:s3cretPassw0rd@127.0.0.1:1/nowhere")
    result = pytester.runpytest("--junitxml=j.xml", "--nl2sql-report=json:r.json", "--nl2sql-report=md:r.md",
                                "--nl2sql-report=csv:r.csv", "--nl2sql-history=h.jsonl")
    result.assert_outcomes(errors=1)
    assert "s3cretPassw0rd" not in result.stdout.str() + result.stderr.str()
    for name in ("j.xml", "r.json", "r.md", "r.csv", "h.jsonl"):
        assert "s3cretPassw0rd" not in (pytester.path / name).read_text(), name
    assert read_report(pytester.path / "r.json")["items"][0]["database"] == "postgresql://nl2sql_user:***@127.0.0.1:1/nowhere"


def test_under_a_dsn_a_failure_names_the_database_the_case_ran_on(pytester: pytest.Pytester) -> None:
    """The item keeps `database` (the case's own name, the `by_database` key) and adds `ran_on`;
    the failure text names where the case ran."""
    make_shop(pytester.path, "elsewhere.sqlite")
    make_shop(pytester.path)
    write_suite(pytester.path, [{"id": "w", "gold": "SELECT count(*) FROM item", "predicted": "SELECT 0"}],
                database="shop.sqlite")
    dsn = f"sqlite:///{(pytester.path / 'elsewhere.sqlite').as_posix()}"
    result = pytester.runpytest(f"--nl2sql-dsn={dsn}", "--nl2sql-report=json:r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["ran on: sqlite:///*elsewhere.sqlite (the case names shop.sqlite)"])
    (item,) = read_report(pytester.path / "r.json")["items"]
    assert item["database"] == "shop.sqlite" and item["ran_on"].endswith("elsewhere.sqlite")
    plain = pytester.runpytest("--nl2sql-report=json:p.json")  # without a dsn: no ran_on
    plain.stdout.fnmatch_lines(["database: shop.sqlite"])
    assert "ran_on" not in read_report(pytester.path / "p.json")["items"][0]
