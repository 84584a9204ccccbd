"""Malloy predictions in a suite: the case key, a predictions file and the hook all give the same
verdicts; the compiled SQL is judged like any prediction (on a SQLite case, on that database's
data), a compile error is `pred_error` naming Malloy's line, and the reports keep both texts.
Needs Node and the compiler (`nl2sql malloy-setup`; CI runs it): skipped, saying so, without."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import make_db, read_report, without_timings, write_jsonl, write_suite

SINGERS = """
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, age INTEGER);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, singer_id INTEGER REFERENCES singer (singer_id), year TEXT);
INSERT INTO singer VALUES (1, 'Joe', 'France', 52), (2, 'Ann', 'Netherlands', 29), (3, 'Tim', 'France', 41);
INSERT INTO concert VALUES (1, 1, '2014'), (2, 1, '2015'), (3, 3, '2014');
"""

COUNT = "SELECT count(*) FROM singer"
BY_COUNTRY = "SELECT country, count(*) FROM singer GROUP BY country"
ANSWERS = {
    "right": (COUNT, "run: singer -> { aggregate: n is count() }"),
    "fenced": (COUNT, "Here it is:\n```malloy\nrun: singer -> { aggregate: n is count() }\n```\n"),
    "grouped": (BY_COUNTRY, "run: singer -> { group_by: country; aggregate: singers is count() }"),
    "wrong": (COUNT, "run: singer -> { where: age > 30; aggregate: n is count() }"),
    "syntax": (COUNT, "run: singer -> {\n  aggregate: n is count(\n}"),
    "unknown-field": (COUNT, "run: singer -> {\n  group_by: nme\n}"),
}
EXPECTED = {"right": "pass", "fenced": "pass", "grouped": "pass", "wrong": "mismatch", "syntax": "pred_error", "unknown-field": "pred_error"}


@pytest.fixture(scope="module")
def compiler_home() -> Path:
    """Where the compiler is set up, found before pytester moves HOME to its own folder."""
    malloy = pytest.importorskip("pytest_nl2sql.malloy", reason="the Malloy package is not importable")
    from pytest_nl2sql.malloy.home import require_compiler

    try:
        return require_compiler()[1]
    except malloy.MalloyUnavailable as error:
        pytest.skip(f"no Malloy compiler here ({error})")


@pytest.fixture
def suite_dir(pytester: pytest.Pytester, compiler_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NL2SQL_MALLOY_HOME", str(compiler_home))
    make_db(pytester.path / "singers.sqlite", SINGERS)
    return pytester.path


def _items(pytester: pytest.Pytester, *args: str) -> dict[str, dict]:
    pytester.runpytest("--nl2sql-report=json:r.json", "-p", "no:randomly", *args)
    return {item["id"]: item for item in read_report(pytester.path / "r.json")["items"]}


def test_malloy_answers_are_compiled_and_judged_on_the_case_s_data(pytester: pytest.Pytester, suite_dir: Path) -> None:
    write_suite(suite_dir, [{"id": k, "gold": gold, "predicted_malloy": malloy} for k, (gold, malloy) in ANSWERS.items()],
                database="singers.sqlite")
    items = _items(pytester)
    alone = without_timings(read_report(pytester.path / "r.json"))
    # under xdist each worker compiles with its own Node child and copies the SQLite file itself:
    # the same items, neighbours included (they follow the copy's content, not its bytes)
    _items(pytester, "-n", "2")
    assert without_timings(read_report(pytester.path / "r.json")) == alone
    assert {k: i["verdict"] for k, i in items.items()} == EXPECTED
    right = items["right"]
    assert right["predicted_malloy"] == ANSWERS["right"][1] and "SELECT" in right["predicted"].upper()
    assert items["syntax"]["reason"].startswith("malloy: line 3") and items["syntax"]["predicted"] is None  # at the "}"
    assert items["unknown-field"]["reason"].startswith("malloy: line 2") and "nme" in items["unknown-field"]["reason"]
    assert right["neighbours"]["checked"] >= 1  # judged on neighbour databases, as SQL is
    assert right["exact_match"] is None  # compiled SQL has no Spider exact match


def test_a_process_s_runs_share_one_compiler_child(pytester: pytest.Pytester, suite_dir: Path) -> None:
    """Starting Node and loading Malloy costs 1.5-2 s: each run of a process (an in-process session
    after another, `api.evaluate_suite` in a loop) started a child of its own."""
    from pytest_nl2sql.malloy.compiler import shared_compiler

    write_suite(suite_dir, [{"id": "right", "gold": COUNT, "predicted_malloy": ANSWERS["right"][1]}], database="singers.sqlite")
    assert _items(pytester)["right"]["verdict"] == "pass"
    compiler = shared_compiler()
    pid, starts = compiler.pid, compiler.starts
    assert pid is not None  # still running after its run ended
    assert _items(pytester)["right"]["verdict"] == "pass"
    assert (compiler.pid, compiler.starts) == (pid, starts)


def test_a_predictions_file_and_the_hook_give_the_same_verdicts(pytester: pytest.Pytester, suite_dir: Path) -> None:
    write_suite(suite_dir, [{"id": k, "gold": gold} for k, (gold, _) in ANSWERS.items()], database="singers.sqlite")
    write_jsonl(suite_dir / "preds.jsonl", [{"id": k, "predicted_malloy": malloy} for k, (_, malloy) in ANSWERS.items()])
    from_file = _items(pytester, "--nl2sql-predictions=preds.jsonl")
    pytester.makeconftest(f"""
        ANSWERS = {json.dumps({k: m for k, (_, m) in ANSWERS.items()})}

        def pytest_nl2sql_predict(case):
            assert "source: singer is" in case.malloy_model  # the model the answer is compiled against
            return {{"malloy": ANSWERS[case.id]}}
    """)
    from_hook = _items(pytester, "--nl2sql-record=recorded.jsonl")
    verdicts = {k: (i["verdict"], i["reason"], i["predicted"], i["predicted_malloy"]) for k, i in from_file.items()}
    assert verdicts == {k: (i["verdict"], i["reason"], i["predicted"], i["predicted_malloy"]) for k, i in from_hook.items()}
    assert {k: v[0] for k, v in verdicts.items()} == EXPECTED
    recorded = [json.loads(line) for line in (suite_dir / "recorded.jsonl").read_text().splitlines()]
    # each answer as the model gave it (a Markdown one as raw_prediction, the Malloy in its fence as predicted_malloy)
    assert {r["id"]: r.get("raw_prediction", r["predicted_malloy"]) for r in recorded} == {k: m for k, (_, m) in ANSWERS.items()}
    assert {r["id"]: r["predicted_malloy"] for r in recorded}["fenced"] == ANSWERS["right"][1]


def test_a_model_of_the_user_s_own_is_used_whatever_its_connection_is_called(pytester: pytest.Pytester, suite_dir: Path) -> None:
    (suite_dir / "singers.malloy").write_text(
        "source: artists is warehouse.table('singer') extend {\n"
        "  primary_key: singer_id\n"
        "  measure: singers is count()\n"
        "}\n")
    write_suite(suite_dir, [
        {"id": "measure", "gold": COUNT, "predicted_malloy": "run: artists -> { aggregate: singers }"},
        {"id": "no-such-source", "gold": COUNT, "predicted_malloy": "run: singer -> { aggregate: n is count() }"},
    ], database="singers.sqlite", malloy_model="singers.malloy")
    items = _items(pytester)
    assert items["measure"]["verdict"] == "pass", items["measure"]
    assert items["no-such-source"]["verdict"] == "pred_error" and items["no-such-source"]["reason"].startswith("malloy:")


def test_without_the_compiler_the_case_is_not_judged_and_says_how_to_set_it_up(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pytest_nl2sql.malloy", reason="the Malloy package is not built yet")
    make_db(pytester.path / "singers.sqlite", SINGERS)
    write_suite(pytester.path, [{"id": "right", "gold": COUNT, "predicted_malloy": ANSWERS["right"][1]},
                                {"id": "sql", "gold": COUNT, "predicted": COUNT}], database="singers.sqlite")
    (tmp_path / "no-compiler").mkdir()
    monkeypatch.setenv("NL2SQL_MALLOY_HOME", str(tmp_path / "no-compiler"))
    result = pytester.runpytest("--nl2sql-report=json:r.json", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)  # judged at call time, like a lost connection: not in the accuracy
    result.stdout.fnmatch_lines(["*nl2sql case right is broken (gold_error)*", "*run `nl2sql malloy-setup`*"])
    items = {i["id"]: i for i in read_report(pytester.path / "r.json")["items"]}
    assert items["right"]["verdict"] == "gold_error" and "nl2sql malloy-setup" in items["right"]["reason"]


@pytest.mark.parametrize(("entry", "message"), [
    ({"predicted_malloy": 3}, "`predicted_malloy` must be Malloy text"),
    ({"predicted_malloy": "run: t -> {}", "predicted": COUNT}, "one of `predicted` (SQL), `predicted_malloy` (Malloy)"),
    ({"malloy_model": ["a.malloy"]}, "`malloy_model` must be the path of a .malloy file"),
])
def test_malformed_malloy_keys_are_invalid_cases_naming_the_line(pytester: pytest.Pytester, entry: dict, message: str) -> None:
    make_db(pytester.path / "singers.sqlite", SINGERS)
    write_suite(pytester.path, [{"id": "ok", "gold": COUNT, "predicted": COUNT}, {"id": "bad", "gold": COUNT, **entry}],
                database="singers.sqlite")
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"*shop.nl2sql.yaml:*{message}*"])
