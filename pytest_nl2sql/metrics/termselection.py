"""Scoring of term-selection cases (indicator selection for SDMX data queries, spec `002`).

A term-selection case is a conversation whose user turns carry `target.indicator_selection`: the
terms (indicators, countries, ...) a system should select, grouped by data set and dimension. A
*selection* (target or prediction) has the shape of that key::

    [{"dataset_id": str, "dimensions": [{"dimension_name": str, "values": [{"id", "name"}]}]}]

Scoring follows the contract (`interface.md`, "Term-selection scoring"):

- a term is the pair (id, name): both must match; ids and names are compared as text, exactly;
- dimensions are grouped by `dimension_name` across data sets; counts are summed over the turns;
- precision = TP/(TP+FP), recall = TP/(TP+FN); a zero denominator makes the score undefined
  (`None`) and it is left out of the macro average;
- a dimension the target does not name (or names with no values: the spec does not distinguish
  them) has its selected terms counted as false positives and is listed in `not_in_target`;
- a case's macro score over no defined dimension is 1.0 when it expected nothing and selected
  nothing, else 0.0; the data set's macro scores are the means of the cases' macro scores.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_nl2sql.vocab import Verdict

Selection = list[dict[str, Any]]

TARGET_KEY = "indicator_selection"
# Comparisons of macro scores with a threshold tolerate float noise (mean of [1/3, 2/3] etc.).
_EPSILON = 1e-9


@dataclass(frozen=True, order=True)
class Term:
    """One selectable term; identity is the pair (id, name), as the spec requires."""

    id: str
    name: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name}


@dataclass(frozen=True)
class DimensionScore:
    """The matched, spurious and missed terms of one dimension, summed over a case's turns."""

    name: str
    true_positives: tuple[Term, ...] = ()
    false_positives: tuple[Term, ...] = ()
    false_negatives: tuple[Term, ...] = ()

    @property
    def in_target(self) -> bool:
        return bool(self.true_positives or self.false_negatives)

    @property
    def precision(self) -> float | None:
        selected = len(self.true_positives) + len(self.false_positives)
        return len(self.true_positives) / selected if selected else None

    @property
    def recall(self) -> float | None:
        expected = len(self.true_positives) + len(self.false_negatives)
        return len(self.true_positives) / expected if expected else None

    def to_json(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "true_positives": [t.to_json() for t in self.true_positives],
            "false_positives": [t.to_json() for t in self.false_positives],
            "false_negatives": [t.to_json() for t in self.false_negatives],
        }


@dataclass(frozen=True)
class TermSelectionScore:
    """A case's score: per-dimension counts, from which every other figure is derived."""

    dimensions: tuple[DimensionScore, ...]

    @property
    def expected_anything(self) -> bool:
        return any(d.in_target for d in self.dimensions)

    @property
    def selected_anything(self) -> bool:
        return any(d.true_positives or d.false_positives for d in self.dimensions)

    def _macro(self, values: Iterable[float | None]) -> float:
        defined = [v for v in values if v is not None]
        if defined:
            return math.fsum(defined) / len(defined)
        return 1.0 if not (self.expected_anything or self.selected_anything) else 0.0

    @property
    def macro_precision(self) -> float:
        return self._macro(d.precision for d in self.dimensions)

    @property
    def macro_recall(self) -> float:
        return self._macro(d.recall for d in self.dimensions)

    @property
    def by_dimension(self) -> dict[str, DimensionScore]:
        return {d.name: d for d in self.dimensions}

    @property
    def not_in_target(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions if not d.in_target)

    def to_json(self) -> dict[str, Any]:
        """The JSON report item's `term_selection` (contract shape)."""
        return {
            "macro_precision": self.macro_precision,
            "macro_recall": self.macro_recall,
            "by_dimension": {d.name: d.to_json() for d in self.dimensions},
            "not_in_target": list(self.not_in_target),
        }


# --------------------------------------------------------------------------- validation


def _scalar_text(value: Any, where: str) -> str:
    """Ids and names as text: YAML reads `id: 001` as an int, which must still match "1"."""
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
        raise ValueError(f"{where}: expected a string, got {value!r}")
    return str(value)


def validate_selection(selection: Any, where: str = "selection") -> None:
    """Raise ValueError naming the first place where `selection` departs from the shape above."""
    if not isinstance(selection, list):
        raise ValueError(f"{where}: expected a list of data sets, got {type(selection).__name__}")
    for i, dataset in enumerate(selection):
        at = f"{where}[{i}]"
        if not isinstance(dataset, Mapping):
            raise ValueError(f"{at}: expected a mapping with dataset_id and dimensions")
        if "dataset_id" not in dataset:
            raise ValueError(f"{at}: 'dataset_id' is missing")
        _scalar_text(dataset["dataset_id"], f"{at}.dataset_id")
        dimensions = dataset.get("dimensions")
        if not isinstance(dimensions, list):
            raise ValueError(f"{at}.dimensions: expected a list, got {dimensions!r}")
        for j, dimension in enumerate(dimensions):
            dat = f"{at}.dimensions[{j}]"
            if not isinstance(dimension, Mapping):
                raise ValueError(f"{dat}: expected a mapping with dimension_name and values")
            if "dimension_name" not in dimension:
                raise ValueError(f"{dat}: 'dimension_name' is missing")
            _scalar_text(dimension["dimension_name"], f"{dat}.dimension_name")
            values = dimension.get("values")
            if values is None:
                values = []
            if not isinstance(values, list):
                raise ValueError(f"{dat}.values: expected a list of {{id, name}}, got {values!r}")
            for k, value in enumerate(values):
                vat = f"{dat}.values[{k}]"
                if not isinstance(value, Mapping):
                    raise ValueError(f"{vat}: expected a mapping with id and name, got {value!r}")
                for key in ("id", "name"):
                    if key not in value:
                        raise ValueError(f"{vat}: {key!r} is missing")
                    _scalar_text(value[key], f"{vat}.{key}")


def targeted_turns(conversation: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the user turns that carry `target.indicator_selection` (the scored turns)."""
    return [
        i
        for i, turn in enumerate(conversation)
        if isinstance(turn, Mapping)
        and turn.get("role") == "user"
        and isinstance(turn.get("target"), Mapping)
        and TARGET_KEY in turn["target"]
    ]


def validate_conversation(conversation: Any) -> None:
    """Raise ValueError with the precise location of what makes a term-selection case malformed."""
    if not isinstance(conversation, list) or not conversation:
        raise ValueError("conversation: expected a non-empty list of turns")
    for i, turn in enumerate(conversation):
        at = f"conversation[{i}]"
        if not isinstance(turn, Mapping):
            raise ValueError(f"{at}: expected a mapping with role and content, got {turn!r}")
        role = turn.get("role")
        if not isinstance(role, str) or not role:
            raise ValueError(f"{at}: 'role' is missing")
        if role == "user" and not isinstance(turn.get("content"), str):
            raise ValueError(f"{at}: a user turn needs 'content' (the question) as text")
        if "target" not in turn:
            continue
        target = turn["target"]
        if role != "user":
            raise ValueError(f"{at}: only user turns may carry a target (role is {role!r})")
        if not isinstance(target, Mapping) or TARGET_KEY not in target:
            raise ValueError(f"{at}.target: expected a mapping with {TARGET_KEY!r}")
        validate_selection(target[TARGET_KEY], f"{at}.target.{TARGET_KEY}")
    if not targeted_turns(conversation):
        raise ValueError(f"conversation: no user turn carries target.{TARGET_KEY}")


def targets(conversation: Sequence[Mapping[str, Any]]) -> list[Selection]:
    """The target selections of the scored turns, in order (validate the conversation first)."""
    return [conversation[i]["target"][TARGET_KEY] for i in targeted_turns(conversation)]


def predictions_per_turn(predicted: Any, turns: int) -> list[Selection]:
    """Split what a predictor returned into one selection per targeted turn.

    With one targeted turn the prediction is a selection; with several it is a list holding one
    selection per turn. A data set is a mapping and a selection a list, so the two never clash.
    """
    if turns == 1:
        if isinstance(predicted, list) and predicted and all(isinstance(p, list) for p in predicted):
            if len(predicted) == 1:
                return [predicted[0]]
            raise ValueError(f"one targeted turn, but {len(predicted)} selections were predicted")
        return [predicted]
    if not (isinstance(predicted, list) and all(isinstance(p, list) for p in predicted)):
        raise ValueError(f"{turns} targeted turns: expected a list of {turns} selections")
    if len(predicted) != turns:
        raise ValueError(f"{turns} targeted turns, but {len(predicted)} selections were predicted")
    return list(predicted)


# --------------------------------------------------------------------------- scoring


def _terms_by_dimension(selection: Selection) -> dict[str, list[Term]]:
    """Terms per dimension name, union over data sets, first occurrence kept, order preserved."""
    grouped: dict[str, dict[Term, None]] = {}
    for dataset in selection or []:
        for dimension in dataset.get("dimensions") or []:
            terms = grouped.setdefault(str(dimension["dimension_name"]), {})
            for value in dimension.get("values") or []:
                terms[Term(str(value["id"]), str(value["name"]))] = None
    return {name: list(terms) for name, terms in grouped.items()}


def score_term_selection(
    targets: Sequence[Selection], predictions: Sequence[Selection]
) -> TermSelectionScore:
    """Score one case: `predictions[i]` is what was selected for the turn of `targets[i]`."""
    if len(targets) != len(predictions):
        raise ValueError(f"{len(targets)} targeted turns but {len(predictions)} predictions")
    for i, (target, prediction) in enumerate(zip(targets, predictions)):
        validate_selection(target, f"target[{i}]")
        validate_selection(prediction, f"prediction[{i}]")
    tp: dict[str, list[Term]] = {}
    fp: dict[str, list[Term]] = {}
    fn: dict[str, list[Term]] = {}
    order: dict[str, None] = {}  # first appearance: target dimensions before predicted ones
    for target, prediction in zip(targets, predictions):
        expected = _terms_by_dimension(target)
        selected = _terms_by_dimension(prediction)
        order.update(dict.fromkeys(expected))
        order.update(dict.fromkeys(selected))
        for name in {**expected, **selected}:
            want, got = expected.get(name, []), selected.get(name, [])
            got_set, want_set = set(got), set(want)
            tp.setdefault(name, []).extend(t for t in want if t in got_set)
            fn.setdefault(name, []).extend(t for t in want if t not in got_set)
            fp.setdefault(name, []).extend(t for t in got if t not in want_set)
    dimensions = [
        DimensionScore(name, tuple(tp[name]), tuple(fp[name]), tuple(fn[name]))
        for name in order
        if tp[name] or fp[name] or fn[name]  # a dimension named with no term on either side
    ]
    # dimensions in the target first, so the report reads target first, then the extras
    dimensions.sort(key=lambda d: not d.in_target)
    return TermSelectionScore(tuple(dimensions))


def passes(score: TermSelectionScore, min_precision: float = 1.0, min_recall: float = 1.0) -> bool:
    """The case passes iff both macro scores reach their thresholds."""
    return (
        score.macro_precision + _EPSILON >= min_precision
        and score.macro_recall + _EPSILON >= min_recall
    )


def thresholds(compare: Mapping[str, Any] | None) -> tuple[float, float]:
    """(min_precision, min_recall) from a case's `compare` options; default (1.0, 1.0)."""
    compare = compare or {}
    result = []
    for key in ("min_precision", "min_recall"):
        value = compare.get(key, 1.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"compare.{key}: expected a number between 0 and 1, got {value!r}")
        result.append(float(value))
    return result[0], result[1]


def reason_text(score: TermSelectionScore, min_precision: float = 1.0, min_recall: float = 1.0) -> str:
    """The item's `reason` for a failing case: both macro scores and their thresholds."""
    return (
        f"term selection below threshold: macro precision {score.macro_precision:.2f}"
        f" (min {min_precision:.2f}), macro recall {score.macro_recall:.2f} (min {min_recall:.2f})"
    )


# --------------------------------------------------------------------------- presentation


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _term_lines(title: str, terms: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"{title} [{len(terms)}]", *(f"  * {t.get('id')}: {t.get('name')}" for t in terms)]


def details_text(term_selection: Mapping[str, Any] | None) -> str:
    """The spec's "indicator selection details" cell: one block per dimension, then the
    dimensions not in the target with their false positives. Dimensions keep the JSON's order.
    """
    if not term_selection:
        return ""
    by_dimension: Mapping[str, Mapping[str, Any]] = term_selection.get("by_dimension") or {}
    outside = list(term_selection.get("not_in_target") or [])
    blocks = []
    for name, dim in by_dimension.items():
        if name in outside:
            continue
        blocks.append(
            "\n".join(
                [
                    name,
                    f"[recall: {_fmt(dim.get('recall'))}, precision: {_fmt(dim.get('precision'))}]",
                    *_term_lines("True Positives", dim.get("true_positives") or []),
                    *_term_lines("False Negatives", dim.get("false_negatives") or []),
                    *_term_lines("False Positives", dim.get("false_positives") or []),
                ]
            )
        )
    if outside:
        lines = ["dimensions not in target"]
        for name in outside:
            dim = by_dimension.get(name) or {}
            lines.append(f"{name} [precision: {_fmt(dim.get('precision'))}]")
            lines.extend(_term_lines("False Positives", dim.get("false_positives") or []))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# --------------------------------------------------------------------------- aggregation


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def aggregate_term_selection(items: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The summary's `term_selection`, from the JSON report's items.

    Takes the item dicts (not bare scores) because `passed` needs each case's verdict against
    its own thresholds. Term-selection items are those of kind "term_selection" or with a
    `term_selection`; `gold_error` (broken) cases are left out; a case without a score (no
    prediction, predictor error) counts as 0.0 for both macro scores, as an empty selection
    would. Per dimension: mean of the cases' defined scores, and how many cases name it.
    Returns None when there is no term-selection case.
    """
    precisions: list[float] = []
    recalls: list[float] = []
    passed = 0
    dims: dict[str, dict[str, list[float] | int]] = {}
    for item in items:
        ts = item.get("term_selection")
        if item.get("kind") != "term_selection" and ts is None:
            continue
        if item.get("verdict") == Verdict.GOLD_ERROR.value:
            continue
        passed += bool(item.get("passed"))
        if ts is None:
            precisions.append(0.0)
            recalls.append(0.0)
            continue
        precisions.append(float(ts.get("macro_precision") or 0.0))
        recalls.append(float(ts.get("macro_recall") or 0.0))
        for name, dim in (ts.get("by_dimension") or {}).items():
            acc = dims.setdefault(name, {"precision": [], "recall": [], "cases": 0})
            acc["cases"] += 1  # type: ignore[operator]
            for key in ("precision", "recall"):
                if dim.get(key) is not None:
                    acc[key].append(float(dim[key]))  # type: ignore[union-attr]
    if not precisions:
        return None
    return {
        "macro_precision": _mean(precisions),
        "macro_recall": _mean(recalls),
        "by_dimension": {
            name: {
                "precision": _mean(acc["precision"]),  # type: ignore[arg-type]
                "recall": _mean(acc["recall"]),  # type: ignore[arg-type]
                "cases": acc["cases"],
            }
            for name, acc in dims.items()
        },
        "total": len(precisions),
        "passed": passed,
    }
