"""Term-selection cases (spec `002`) end to end through pytest: YAML in the spec's exact form,
predictions from the case, from a JSONL `selection` file and from the predictor hook, thresholds
per suite and per case, and the scores in the failure text, the terminal summary and the JSON.

xdist equivalence is checked once, with the other reports, in
`test_plugin_reports.py::test_reports_do_not_depend_on_xdist` (its suite holds spec 002's Mexico
case and the worked example beside SQL cases): the JSON report identical with and without `-n 2`.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
import yaml

from helpers import MEXICO_YAML, make_shop, read_report, write_jsonl, write_suite

MEXICO_ID = "c48d7624-d376-48ca-b2d8-386999befb45"
LP = {"id": "LP", "name": "Population, Persons for countries / Index for country groups"}
MEX = {"id": "MEX", "name": "Mexico"}
GDP = {"id": "GDP", "name": "gross domestic product"}
GDPPC = {"id": "GDPPC", "name": "GDP per capita"}
GDP_CONST = {"id": "GDP_CONST", "name": "gross domestic product constant prices"}


def selection(**dimensions: list[dict[str, str]]) -> list[dict[str, Any]]:
    """A selection in the shape of `target.indicator_selection`, one WEO data set."""
    return [{"dataset_id": "IMF.RES:WEO",
             "dimensions": [{"dimension_name": name, "values": values} for name, values in dimensions.items()]}]


def user(content: str, target: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "user", "content": content}
    if target is not None:
        turn["target"] = {"indicator_selection": target}
    return turn


def gdp_case(**extra: Any) -> dict[str, Any]:
    """The worked example of spec 002: target GDP, GDPPC."""
    return {"id": "gdp", "name": "show_gdp_and_gdp_per_capita", "tags": ["imf"],
            "conversation": [user("Show GDP and GDP per capita", selection(INDICATOR=[GDP, GDPPC]))], **extra}


def dump(path: Any, data: Any) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_worked_example_from_the_case(pytester: pytest.Pytester) -> None:
    """Spec 002's sample case (verbatim YAML) and its worked example: P 0.67, R 1.0 everywhere."""
    mexico = MEXICO_YAML + yaml.safe_dump({"predicted": selection(INDICATOR=[LP], COUNTRY=[MEX])}, sort_keys=False)
    (pytester.path / "mexico.nl2sql.yaml").write_text(mexico)
    dump(pytester.path / "gdp.nl2sql.yaml", gdp_case(predicted=selection(INDICATOR=[GDP, GDPPC, GDP_CONST])))
    result = pytester.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, failed=1)
    # the failure is the per-dimension breakdown in the document's format
    result.stdout.fnmatch_lines([
        "nl2sql case gdp [[]gdp.nl2sql.yaml:1]: mismatch (term selection below threshold:"
        " macro precision 0.67 (min 1.00), macro recall 1.00 (min 1.00))",
        "question: Show GDP and GDP per capita",
        "INDICATOR",
        "[[]recall: 1.00, precision: 0.67]",
        "True Positives [[]2]",
        "  * GDP: gross domestic product",
        "  * GDPPC: GDP per capita",
        "False Negatives [[]0]",
        "False Positives [[]1]",
        "  * GDP_CONST: gross domestic product constant prices",
    ])
    # the data set's macro scores: mean of the cases' (1.0 and 0.67)
    result.stdout.fnmatch_lines([
        "*= nl2sql =*",
        "term selection: macro precision 0.83, macro recall 1.00 (1/2 term-selection cases pass)",
        "  INDICATOR: precision 0.83, recall 1.00",
        "  COUNTRY: precision 1.00, recall 1.00",
    ])
    assert "execution accuracy" not in result.stdout.str()  # no SQL case: no execution accuracy line
    report = read_report(pytester.path / "r.json")
    items = {i["id"]: i for i in report["items"]}
    gdp = items["gdp"]
    assert (gdp["verdict"], gdp["passed"], gdp["kind"]) == ("mismatch", False, "term_selection")
    assert gdp["hardness"] is None and gdp["gold"] is None
    ts = gdp["term_selection"]
    assert ts["macro_precision"] == pytest.approx(2 / 3) and ts["macro_recall"] == 1.0
    assert ts["by_dimension"] == {"INDICATOR": {
        "precision": pytest.approx(2 / 3), "recall": 1.0, "true_positives": [GDP, GDPPC],
        "false_positives": [GDP_CONST], "false_negatives": []}}
    assert ts["not_in_target"] == []
    mex = items[MEXICO_ID]
    assert (mex["verdict"], mex["passed"], mex["tags"]) == ("pass", True, ["imf", "weo"])
    assert mex["question"] == "Could you give me the population numbers for Mexico?"
    assert mex["nodeid"] == f"mexico.nl2sql.yaml::{MEXICO_ID}"
    assert set(mex["term_selection"]["by_dimension"]) == {"INDICATOR", "COUNTRY"}
    summary = report["summary"]
    assert summary["total"] == 0 and summary["accuracy"] is None  # not in execution accuracy
    s = summary["term_selection"]
    assert s["macro_precision"] == pytest.approx((1 + 2 / 3) / 2) and s["macro_recall"] == 1.0
    assert s["by_dimension"]["INDICATOR"]["precision"] == pytest.approx((1 + 2 / 3) / 2)
    assert s["by_dimension"]["COUNTRY"] == {"precision": 1.0, "recall": 1.0, "cases": 1}
    assert (s["total"], s["passed"]) == (2, 1)


def test_jsonl_selection_file_and_multi_turn_conversations(pytester: pytest.Pytester) -> None:
    """`--nl2sql-predictions` JSONL with `selection`: one selection for a single targeted turn, a
    list of selections (one per targeted turn) for a conversation; counts sum over the turns."""
    cases = [
        gdp_case(),
        {"id": "chat", "conversation": [
            user("Population of Mexico?", selection(INDICATOR=[LP], COUNTRY=[MEX])),
            {"role": "assistant", "content": "Here is the population of Mexico."},
            user("Thanks!"),  # no target: not scored
            user("And its GDP?", selection(INDICATOR=[GDP], COUNTRY=[MEX])),
        ]},
        {"id": "extra-dimension", "conversation": [user("GDP", selection(INDICATOR=[GDP]))]},
        {"id": "unanswered", "conversation": [user("GDP", selection(INDICATOR=[GDP]))]},
        {"id": "malformed", "conversation": [user("GDP", selection(INDICATOR=[GDP]))]},
    ]
    write_suite(pytester.path, cases, name="imf.nl2sql.yaml", tags=["imf"])
    write_jsonl(pytester.path / "preds.jsonl", [
        {"id": "gdp", "selection": selection(INDICATOR=[GDP, GDPPC])},
        {"id": "chat", "selection": [selection(INDICATOR=[LP], COUNTRY=[MEX]), selection(INDICATOR=[GDP_CONST], COUNTRY=[MEX])]},
        {"id": "extra-dimension", "selection": selection(INDICATOR=[GDP], COUNTRY=[MEX])},
        {"id": "malformed", "selection": [{"dataset_id": "IMF.RES:WEO", "dimensions": [{"dimension_name": "INDICATOR", "values": [{"id": "GDP"}]}]}]},
    ])
    result = pytester.runpytest("--nl2sql-predictions=preds.jsonl", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, failed=4)
    items = {i["id"]: i for i in read_report(pytester.path / "r.json")["items"]}
    assert items["gdp"]["verdict"] == "pass" and items["gdp"]["tags"] == ["imf"]
    chat = items["chat"]["term_selection"]
    # INDICATOR: LP right in turn 1, GDP missed and GDP_CONST spurious in turn 2; COUNTRY right twice
    assert chat["by_dimension"]["INDICATOR"] == {
        "precision": 0.5, "recall": 0.5, "true_positives": [LP], "false_positives": [GDP_CONST], "false_negatives": [GDP]}
    assert chat["by_dimension"]["COUNTRY"]["true_positives"] == [MEX, MEX]
    assert (chat["macro_precision"], chat["macro_recall"]) == (0.75, 0.75)
    assert items["chat"]["question"] == "And its GDP?"  # the last user turn
    extra = items["extra-dimension"]
    # a dimension the target does not name: its terms are false positives, its recall undefined
    assert extra["term_selection"]["not_in_target"] == ["COUNTRY"]
    assert extra["term_selection"]["by_dimension"]["COUNTRY"]["recall"] is None
    assert (extra["term_selection"]["macro_precision"], extra["term_selection"]["macro_recall"]) == (0.5, 1.0)
    assert items["unanswered"]["verdict"] == "no_prediction" and items["unanswered"]["term_selection"] is None
    assert items["malformed"]["verdict"] == "predictor_error"
    assert "'name' is missing" in items["malformed"]["reason"]
    result.stdout.fnmatch_lines([
        "*nl2sql case extra-dimension*mismatch*",
        "dimensions not in target",
        "COUNTRY [[]precision: 0.00]",
        "False Positives [[]1]",
        "  * MEX: Mexico",
    ])
    # unscored cases count 0.0 in the data set's means: (1 + .75 + .5 + 0 + 0) / 5 and (1 + .75 + 1 + 0 + 0) / 5
    s = read_report(pytester.path / "r.json")["summary"]["term_selection"]
    assert s["macro_precision"] == pytest.approx(0.45) and s["macro_recall"] == pytest.approx(0.55)
    result.stdout.fnmatch_lines(["term selection: macro precision 0.45, macro recall 0.55 (1/5 term-selection cases pass)"])


HOOK_CONFTEST = """
import json, pathlib

ANSWERS = {
    "Population of Mexico?": [{"dataset_id": "IMF.RES:WEO", "dimensions": [
        {"dimension_name": "INDICATOR", "values": [{"id": "LP", "name": "Population, Persons for countries / Index for country groups"}]},
        {"dimension_name": "COUNTRY", "values": [{"id": "MEX", "name": "Mexico"}]}]}],
    "And its GDP?": [{"dataset_id": "IMF.RES:WEO", "dimensions": [
        {"dimension_name": "INDICATOR", "values": [{"id": "GDP", "name": "gross domestic product"}]},
        {"dimension_name": "COUNTRY", "values": [{"id": "MEX", "name": "Mexico"}]}]}],
}

def pytest_nl2sql_predict(case):
    assert case.conversation, "a term-selection case carries its conversation"
    calls = pathlib.Path(__file__).parent / "calls.jsonl"
    with calls.open("a") as f:
        f.write(json.dumps({"id": case.id, "question": case.question,
                            "turns": [t["content"] for t in case.conversation]}) + "\\n")
    last = case.conversation[-1]
    if last["content"] == "boom":
        raise RuntimeError("the model is down")
    return ANSWERS.get(last["content"])
"""


def test_predictor_hook_is_called_once_per_targeted_turn(pytester: pytest.Pytester) -> None:
    """The hook sees the conversation truncated to the turn it answers, and wins over the case's
    and the file's predictions."""
    pytester.makeconftest(HOOK_CONFTEST)
    cases = [
        {"id": "chat", "predicted": selection(INDICATOR=[GDP_CONST]), "conversation": [
            user("Population of Mexico?", selection(INDICATOR=[LP], COUNTRY=[MEX])),
            {"role": "assistant", "content": "Here you are."},
            user("Thanks!"),
            user("And its GDP?", selection(INDICATOR=[GDP], COUNTRY=[MEX])),
            {"role": "assistant", "content": "Done."},
        ]},
        {"id": "broken-model", "conversation": [user("boom", selection(INDICATOR=[GDP]))]},
    ]
    write_suite(pytester.path, cases, name="imf.nl2sql.yaml")
    write_jsonl(pytester.path / "preds.jsonl", [{"id": "chat", "selection": selection(INDICATOR=[GDPPC])}])
    result = pytester.runpytest("--nl2sql-predictions=preds.jsonl", "--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, failed=1)
    calls = [json.loads(line) for line in (pytester.path / "calls.jsonl").read_text().splitlines()]
    chat_calls = [c for c in calls if c["id"] == "chat"]
    assert chat_calls == [
        {"id": "chat", "question": "Population of Mexico?", "turns": ["Population of Mexico?"]},
        {"id": "chat", "question": "And its GDP?",
         "turns": ["Population of Mexico?", "Here you are.", "Thanks!", "And its GDP?"]},
    ]
    items = {i["id"]: i for i in read_report(pytester.path / "r.json")["items"]}
    assert items["chat"]["verdict"] == "pass"
    assert items["chat"]["predicted"] == [ANSWER_1, ANSWER_2]  # one selection per targeted turn
    assert items["chat"]["extra"]["prediction_source"] == "hook"
    assert items["broken-model"]["verdict"] == "predictor_error"
    assert "the model is down" in items["broken-model"]["reason"]
    result.stdout.fnmatch_lines(["*RuntimeError: the model is down*"])


ANSWER_1 = selection(INDICATOR=[LP], COUNTRY=[MEX])
ANSWER_2 = selection(INDICATOR=[GDP], COUNTRY=[MEX])


def test_thresholds_per_suite_and_per_case(pytester: pytest.Pytester) -> None:
    """`compare: {min_precision, min_recall}` at suite level, overridden per case; default 1.0."""
    over = selection(INDICATOR=[GDP, GDPPC, GDP_CONST])  # P 0.67, R 1.0
    under = selection(INDICATOR=[GDP])  # P 1.0, R 0.5
    cases = [
        gdp_case(id="suite-threshold", predicted=over),  # 0.67 >= 0.6: passes
        gdp_case(id="suite-recall", predicted=under),  # recall 0.5 < 1.0 (suite keeps the default)
        gdp_case(id="case-stricter", predicted=over, compare={"min_precision": 0.7}),
        gdp_case(id="case-looser", predicted=under, compare={"min_precision": 1.0, "min_recall": 0.5}),
        gdp_case(id="exactly-two-thirds", predicted=over, compare={"min_precision": 0.6666666666666666}),
    ]
    write_suite(pytester.path, cases, name="suite.nl2sql.yaml", compare={"min_precision": 0.6})
    dump(pytester.path / "default.nl2sql.yaml", gdp_case(id="default", predicted=over))
    result = pytester.runpytest("--nl2sql-report=json:r.json")
    items = {i["id"]: i for i in read_report(pytester.path / "r.json")["items"]}
    verdicts = {k: v["verdict"] for k, v in items.items()}
    assert verdicts == {
        "suite-threshold": "pass", "suite-recall": "mismatch", "case-stricter": "mismatch",
        "case-looser": "pass", "exactly-two-thirds": "pass", "default": "mismatch",
    }
    assert items["case-stricter"]["reason"] == (
        "term selection below threshold: macro precision 0.67 (min 0.70), macro recall 1.00 (min 1.00)")
    assert items["suite-recall"]["reason"].endswith("macro recall 0.50 (min 1.00)")
    result.assert_outcomes(passed=3, failed=3)


def test_invalid_threshold_is_a_case_error(pytester: pytest.Pytester) -> None:
    dump(pytester.path / "bad.nl2sql.yaml", gdp_case(id="bad", predicted=selection(INDICATOR=[GDP]), compare={"min_recall": 2}))
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*bad.nl2sql.yaml:1*compare.min_recall: expected a number between 0 and 1, got 2*"])


def test_mixed_sql_and_term_selection_run(pytester: pytest.Pytester) -> None:
    """SQL cases make the execution accuracy, term-selection cases the macro scores, side by side."""
    make_shop(pytester.path)
    write_suite(pytester.path, [
        {"id": "count", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(id) FROM item"},
        {"id": "cheap", "gold": "SELECT name FROM item WHERE price < 2", "predicted": "SELECT name FROM item WHERE price <= 2"},
    ], database="shop.sqlite", tags=["shop"])
    dump(pytester.path / "gdp.nl2sql.yaml", gdp_case(predicted=selection(INDICATOR=[GDP, GDPPC, GDP_CONST])))
    (pytester.path / "mexico.nl2sql.yaml").write_text(
        MEXICO_YAML + yaml.safe_dump({"predicted": selection(INDICATOR=[LP], COUNTRY=[MEX])}, sort_keys=False))
    result = pytester.runpytest("--nl2sql-report=json:r.json", "-k", "not cheap")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*= nl2sql =*",
        "execution accuracy with neighbour databases 1/1 = 100.0%",
        "term selection: macro precision 0.83, macro recall 1.00 (1/2 term-selection cases pass)",
    ])
    report = read_report(pytester.path / "r.json")
    s = report["summary"]
    assert (s["total"], s["passed"], s["accuracy"]) == (1, 1, 1.0)
    assert "imf" not in s["by_tag"] and s["by_tag"]["shop"]["total"] == 1  # buckets are SQL only
    assert s["term_selection"]["macro_precision"] == pytest.approx(5 / 6)
    assert [i["kind"] for i in report["items"]] == ["term_selection", "term_selection", "sql"]
    # -k selects term-selection cases by tag too
    tagged = pytester.runpytest("-k", "weo")
    tagged.assert_outcomes(passed=1)
    tagged.stdout.fnmatch_lines(["term selection: macro precision 1.00, macro recall 1.00 (1/1 term-selection cases pass)"])


def test_malformed_term_selection_cases_are_errors(pytester: pytest.Pytester) -> None:
    """A target in the wrong shape is an ERROR naming file, line and place; the others still run."""
    (pytester.path / "bad.nl2sql.yaml").write_text(textwrap.dedent("""\
        cases:
          - id: good
            predicted: [{dataset_id: D, dimensions: [{dimension_name: INDICATOR, values: [{id: A, name: a}]}]}]
            conversation:
              - role: user
                content: A?
                target: {indicator_selection: [{dataset_id: D, dimensions: [{dimension_name: INDICATOR, values: [{id: A, name: a}]}]}]}
          - id: no-name
            conversation:
              - role: user
                content: A?
                target: {indicator_selection: [{dataset_id: D, dimensions: [{dimension_name: INDICATOR, values: [{id: A}]}]}]}
          - id: no-target
            conversation:
              - role: user
                content: A?
        """))
    result = pytester.runpytest("--nl2sql-report=json:r.json")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*bad.nl2sql.yaml:8*conversation[[]0].target.indicator_selection[[]0].dimensions[[]0].values[[]0]: 'name' is missing*",
        "*bad.nl2sql.yaml:13*no user turn carries target.indicator_selection*",
    ])
