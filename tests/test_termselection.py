"""Term-selection scoring (spec 002 and the contract's "Term-selection scoring")."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from helpers import MEXICO_YAML
from pytest_nl2sql.metrics.termselection import (
    Term,
    aggregate_term_selection,
    details_text,
    passes,
    predictions_per_turn,
    reason_text,
    score_term_selection,
    targeted_turns,
    targets,
    thresholds,
    validate_conversation,
)

GDP = ("GDP", "gross domestic product")
GDPPC = ("GDPPC", "GDP per capita")
GDP_CONST = ("GDP_CONST", "gross domestic product constant prices")
MEX = ("MEX", "Mexico")


def sel(dataset: str = "IMF.RES:WEO", **dimensions: list[tuple[str, str]]) -> list[dict]:
    """A one-data-set selection: sel(INDICATOR=[GDP], COUNTRY=[MEX])."""
    return [
        {
            "dataset_id": dataset,
            "dimensions": [
                {"dimension_name": name, "values": [{"id": i, "name": n} for i, n in values]}
                for name, values in dimensions.items()
            ],
        }
    ]


def test_worked_example_of_the_spec() -> None:
    score = score_term_selection([sel(INDICATOR=[GDP, GDPPC])], [sel(INDICATOR=[GDP, GDPPC, GDP_CONST])])
    data = score.to_json()
    indicator = data["by_dimension"]["INDICATOR"]
    assert indicator["precision"] == pytest.approx(2 / 3)
    assert indicator["recall"] == 1.0
    assert indicator["true_positives"] == [{"id": "GDP", "name": GDP[1]}, {"id": "GDPPC", "name": GDPPC[1]}]
    assert indicator["false_positives"] == [{"id": "GDP_CONST", "name": GDP_CONST[1]}]
    assert indicator["false_negatives"] == []
    assert data["not_in_target"] == []
    assert data["macro_precision"] == pytest.approx(2 / 3)
    assert data["macro_recall"] == 1.0
    assert not passes(score)
    assert passes(score, min_precision=0.6)
    assert details_text(data) == (
        "INDICATOR\n"
        "[recall: 1.00, precision: 0.67]\n"
        "True Positives [2]\n"
        "  * GDP: gross domestic product\n"
        "  * GDPPC: GDP per capita\n"
        "False Negatives [0]\n"
        "False Positives [1]\n"
        "  * GDP_CONST: gross domestic product constant prices"
    )
    json.dumps(data)  # plain JSON, no dataclasses or tuples of Terms left inside


def test_mexico_case_in_the_spec_yaml_form_passes_with_a_perfect_selection() -> None:
    case = yaml.safe_load(MEXICO_YAML)
    validate_conversation(case["conversation"])
    assert targeted_turns(case["conversation"]) == [0]
    wanted = targets(case["conversation"])
    score = score_term_selection(wanted, wanted)
    assert (score.macro_precision, score.macro_recall) == (1.0, 1.0)
    assert list(score.by_dimension) == ["INDICATOR", "COUNTRY"]
    assert passes(score)


def test_dimension_not_in_target_counts_false_positives_and_is_listed() -> None:
    score = score_term_selection([sel(INDICATOR=[GDP, GDPPC])], [sel(INDICATOR=[GDP, GDPPC], COUNTRY=[MEX])])
    data = score.to_json()
    assert data["not_in_target"] == ["COUNTRY"]
    assert data["by_dimension"]["COUNTRY"]["precision"] == 0.0
    assert data["by_dimension"]["COUNTRY"]["recall"] is None
    assert data["by_dimension"]["COUNTRY"]["false_positives"] == [{"id": "MEX", "name": "Mexico"}]
    assert score.macro_precision == pytest.approx(0.5)  # mean of INDICATOR 1.0 and COUNTRY 0.0
    assert score.macro_recall == 1.0  # COUNTRY's undefined recall is left out
    text = details_text(data)
    assert text.index("INDICATOR") < text.index("dimensions not in target") < text.index("COUNTRY")
    assert "  * MEX: Mexico" in text.split("dimensions not in target")[1]


def test_empty_target_values_are_the_same_as_an_absent_dimension() -> None:
    empty = score_term_selection([sel(INDICATOR=[GDP], COUNTRY=[])], [sel(INDICATOR=[GDP], COUNTRY=[MEX])])
    absent = score_term_selection([sel(INDICATOR=[GDP])], [sel(INDICATOR=[GDP], COUNTRY=[MEX])])
    assert empty.to_json() == absent.to_json()


def test_nothing_selected_in_a_dimension_leaves_its_precision_undefined() -> None:
    score = score_term_selection([sel(INDICATOR=[GDP], COUNTRY=[MEX])], [sel(INDICATOR=[GDP])])
    country = score.to_json()["by_dimension"]["COUNTRY"]
    assert country["precision"] is None and country["recall"] == 0.0
    assert score.macro_precision == 1.0  # only INDICATOR's precision is defined
    assert score.macro_recall == 0.5
    assert "[recall: 0.00, precision: n/a]" in details_text(score.to_json())


@pytest.mark.parametrize(
    ("target", "prediction", "macro"),
    [
        (sel(), sel(), 1.0),  # expected nothing, selected nothing
        ([], [], 1.0),
        (sel(INDICATOR=[GDP]), sel(), 0.0),  # expected something, selected nothing
        (sel(), sel(INDICATOR=[GDP]), 0.0),  # expected nothing, selected something
    ],
)
def test_macro_over_no_defined_dimension(target: list, prediction: list, macro: float) -> None:
    score = score_term_selection([target], [prediction])
    # when one score is undefined everywhere, it falls back to the contract's 1.0 / 0.0
    if not any(d.precision is not None for d in score.dimensions):
        assert score.macro_precision == macro
    if not any(d.recall is not None for d in score.dimensions):
        assert score.macro_recall == macro


def test_terms_match_on_id_and_name() -> None:
    score = score_term_selection([sel(INDICATOR=[GDP])], [sel(INDICATOR=[("GDP", "Gross Domestic Product")])])
    dim = score.by_dimension["INDICATOR"]
    assert dim.true_positives == ()
    assert dim.false_positives == (Term("GDP", "Gross Domestic Product"),)
    assert dim.false_negatives == (Term("GDP", "gross domestic product"),)


def test_dimensions_are_grouped_across_data_sets() -> None:
    target = sel("WEO", INDICATOR=[GDP]) + sel("IFS", INDICATOR=[GDPPC])
    prediction = sel("IFS", INDICATOR=[GDP, GDPPC])  # right terms, found in another data set
    score = score_term_selection([target], [prediction])
    assert (score.macro_precision, score.macro_recall) == (1.0, 1.0)


def test_counts_are_summed_over_targeted_turns() -> None:
    score = score_term_selection(
        [sel(INDICATOR=[GDP]), sel(INDICATOR=[GDPPC], COUNTRY=[MEX])],
        [sel(INDICATOR=[GDP]), sel(INDICATOR=[GDP_CONST], COUNTRY=[MEX])],
    )
    indicator = score.by_dimension["INDICATOR"]
    assert (len(indicator.true_positives), len(indicator.false_positives), len(indicator.false_negatives)) == (1, 1, 1)
    assert indicator.precision == 0.5 and indicator.recall == 0.5
    assert score.macro_recall == pytest.approx((0.5 + 1.0) / 2)


def test_prediction_count_must_match_the_targeted_turns() -> None:
    with pytest.raises(ValueError, match="2 targeted turns but 1 predictions"):
        score_term_selection([sel(), sel()], [sel()])


def test_malformed_prediction_is_reported_with_its_location() -> None:
    bad = [{"dataset_id": "W", "dimensions": [{"dimension_name": "INDICATOR", "values": [{"id": "GDP"}]}]}]
    with pytest.raises(ValueError, match=r"prediction\[0\]\[0\]\.dimensions\[0\]\.values\[0\]: 'name' is missing"):
        score_term_selection([sel(INDICATOR=[GDP])], [bad])


@pytest.mark.parametrize(
    ("conversation", "message"),
    [
        ([], "non-empty list"),
        ("hello", "non-empty list"),
        ([{"content": "x"}], r"conversation\[0\]: 'role' is missing"),
        ([{"role": "user", "content": "x"}], "no user turn carries target.indicator_selection"),
        ([{"role": "user", "content": "x", "target": {"other": 1}}], "expected a mapping with 'indicator_selection'"),
        (
            [{"role": "assistant", "content": "x", "target": {"indicator_selection": []}}],
            "only user turns may carry a target",
        ),
        ([{"role": "user", "target": {"indicator_selection": []}}], "needs 'content'"),
        (
            [{"role": "user", "content": "x", "target": {"indicator_selection": [{"dimensions": []}]}}],
            r"indicator_selection\[0\]: 'dataset_id' is missing",
        ),
        (
            [{"role": "user", "content": "x", "target": {"indicator_selection": [{"dataset_id": "W", "dimensions": {}}]}}],
            r"indicator_selection\[0\]\.dimensions: expected a list",
        ),
        (
            [{"role": "user", "content": "x", "target": {"indicator_selection": sel(INDICATOR=[(None, "x")])}}],
            r"values\[0\]\.id: expected a string",
        ),
    ],
)
def test_validate_conversation_names_the_problem(conversation: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_conversation(conversation)


def test_targeted_turns_skips_untargeted_and_non_user_turns() -> None:
    conversation = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "GDP?", "target": {"indicator_selection": sel(INDICATOR=[GDP])}},
    ]
    validate_conversation(conversation)
    assert targeted_turns(conversation) == [2]
    assert targets(conversation) == [sel(INDICATOR=[GDP])]


def test_numeric_yaml_ids_are_compared_as_text() -> None:
    case = yaml.safe_load(
        "conversation:\n- role: user\n  content: q\n  target:\n    indicator_selection:\n"
        "    - dataset_id: D\n      dimensions:\n      - dimension_name: YEAR\n"
        "        values:\n        - {id: 2020, name: 2020}\n"
    )
    validate_conversation(case["conversation"])
    score = score_term_selection(targets(case["conversation"]), [sel("D", YEAR=[("2020", "2020")])])
    assert score.macro_precision == 1.0


def test_predictions_per_turn() -> None:
    one = sel(INDICATOR=[GDP])
    assert predictions_per_turn(one, 1) == [one]
    assert predictions_per_turn([one], 1) == [one]
    assert predictions_per_turn([one, sel()], 2) == [one, sel()]
    with pytest.raises(ValueError, match="expected a list of 2 selections"):
        predictions_per_turn(one, 2)
    with pytest.raises(ValueError, match="3 targeted turns, but 2"):
        predictions_per_turn([one, one], 3)


def test_thresholds_from_compare() -> None:
    assert thresholds(None) == (1.0, 1.0)
    assert thresholds({"min_precision": 0.5}) == (0.5, 1.0)
    with pytest.raises(ValueError, match="compare.min_recall"):
        thresholds({"min_recall": 2})
    with pytest.raises(ValueError, match="compare.min_precision"):
        thresholds({"min_precision": "high"})


def test_reason_names_both_scores() -> None:
    score = score_term_selection([sel(INDICATOR=[GDP, GDPPC])], [sel(INDICATOR=[GDP, GDPPC, GDP_CONST])])
    assert "macro precision 0.67 (min 1.00)" in reason_text(score)
    assert "macro recall 1.00" in reason_text(score)


def _item(score_json: dict | None, passed: bool, verdict: str = "mismatch") -> dict:
    return {"kind": "term_selection", "term_selection": score_json, "passed": passed, "verdict": verdict}


def test_aggregate_is_the_mean_of_case_macros() -> None:
    perfect = score_term_selection([sel(INDICATOR=[GDP], COUNTRY=[MEX])], [sel(INDICATOR=[GDP], COUNTRY=[MEX])])
    gdp = score_term_selection([sel(INDICATOR=[GDP, GDPPC])], [sel(INDICATOR=[GDP, GDPPC, GDP_CONST])])
    items = [
        _item(perfect.to_json(), True, "pass"),
        _item(gdp.to_json(), False),
        {"kind": "sql", "term_selection": None, "passed": True, "verdict": "pass"},  # not counted
    ]
    summary = aggregate_term_selection(items)
    assert summary is not None
    assert summary["macro_precision"] == pytest.approx((1 + 2 / 3) / 2)
    assert summary["macro_recall"] == 1.0
    assert (summary["total"], summary["passed"]) == (2, 1)
    assert summary["by_dimension"]["INDICATOR"] == {"precision": pytest.approx((1 + 2 / 3) / 2), "recall": 1.0, "cases": 2}
    assert summary["by_dimension"]["COUNTRY"] == {"precision": 1.0, "recall": 1.0, "cases": 1}


def test_aggregate_counts_unscored_cases_as_zero_and_skips_broken_ones() -> None:
    perfect = score_term_selection([sel(INDICATOR=[GDP])], [sel(INDICATOR=[GDP])]).to_json()
    items = [
        _item(perfect, True, "pass"),
        _item(None, False, "no_prediction"),
        _item(None, False, "gold_error"),
    ]
    summary = aggregate_term_selection(items)
    assert summary is not None
    assert (summary["macro_precision"], summary["macro_recall"], summary["total"]) == (0.5, 0.5, 2)
    assert aggregate_term_selection([{"kind": "sql", "passed": True, "verdict": "pass"}]) is None


# ----------------------------------------------------------------------------- properties

terms = st.lists(st.sampled_from([GDP, GDPPC, GDP_CONST, ("LP", "Population")]), unique=True)
countries = st.lists(st.sampled_from([MEX, ("FRA", "France"), ("MEX", "Mexico City")]), unique=True)


@given(terms, countries, terms, countries)
def test_counts_partition_the_target_and_the_selection(ti: list, tc: list, pi: list, pc: list) -> None:
    score = score_term_selection([sel(INDICATOR=ti, COUNTRY=tc)], [sel(INDICATOR=pi, COUNTRY=pc)])
    for name, (target, predicted) in {"INDICATOR": (ti, pi), "COUNTRY": (tc, pc)}.items():
        dim = score.by_dimension.get(name)
        if dim is None:
            assert not target and not predicted
            continue
        assert len(dim.true_positives) + len(dim.false_negatives) == len(target)
        assert len(dim.true_positives) + len(dim.false_positives) == len(predicted)
        assert (name in score.not_in_target) == (not target)
    for value in (score.macro_precision, score.macro_recall):
        assert 0.0 <= value <= 1.0 and not math.isnan(value)


@given(terms, countries, st.randoms(use_true_random=False))
def test_a_perfect_selection_passes_in_any_order(ti: list, tc: list, rnd) -> None:
    shuffled_i, shuffled_c = ti[:], tc[:]
    rnd.shuffle(shuffled_i)
    rnd.shuffle(shuffled_c)
    score = score_term_selection([sel(INDICATOR=ti, COUNTRY=tc)], [sel(COUNTRY=shuffled_c, INDICATOR=shuffled_i)])
    assert (score.macro_precision, score.macro_recall) == (1.0, 1.0)
    assert passes(score)
    assert score.not_in_target == ()


@given(terms, terms)
def test_adding_a_wrong_term_never_raises_precision(target: list, predicted: list) -> None:
    wrong = ("WRONG", "not a real indicator")
    before = score_term_selection([sel(INDICATOR=target)], [sel(INDICATOR=predicted)])
    after = score_term_selection([sel(INDICATOR=target)], [sel(INDICATOR=[*predicted, wrong])])
    assert after.macro_precision <= before.macro_precision or not (target or predicted)
    assert after.macro_recall == before.macro_recall or not (target or predicted)
