"""The per-case result that every report is made from; it travels from a worker to the controller
as plain JSON on the test report, which keeps the numbers identical with and without pytest-xdist.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from pytest_nl2sql.vocab import Kind, Verdict


@dataclass(frozen=True)
class CaseResult:
    """Everything the reports need about one case. Field names match the JSON report's items."""

    id: str
    nodeid: str
    file: str
    position: int  # collection order, so reports list items identically under xdist
    kind: Kind
    verdict: Verdict
    question: str | None = None
    database: str | None = None
    gold: str | list[str] | None = None
    predicted: Any = None  # SQL text, or a term selection (list) for term-selection cases
    hardness: str | None = None
    tags: tuple[str, ...] = ()
    reason: str | None = None
    exact_match: bool | None = None
    partial: dict[str, Any] | None = None  # Spider partial component scores of this item
    term_selection: dict[str, Any] | None = None
    baseline: str | None = None  # regression | known_failure | fixed | new
    fingerprint: str | None = None  # hash of the predicted result, for baselines
    latency: float | None = None  # seconds the predictor hook took
    diff: dict[str, Any] | None = None  # column pairing and rows missing / unexpected
    soft_scores: dict[str, float] | None = None  # SQL cases whose prediction ran (metrics/soft.py)
    execution_time: dict[str, Any] | None = None  # right predictions: timings against the gold (metrics/efficiency.py)
    near_miss: str | None = None  # a mismatch's near miss (vocab.NearMiss), if it has one
    predicted_result: str | None = None  # the CSV file given as the prediction, instead of SQL
    predicted_malloy: str | None = None  # the Malloy query given as the prediction (`predicted`: the SQL it compiled to)
    neighbours: dict[str, int] | None = None  # {"checked", "failed"}: a prediction right on its own database, on the others
    gold_warnings: tuple[str, ...] = ()  # why the gold is nondeterministic (a LIMIT cutting a tie, ...)
    ran_on: str | None = None  # under --nl2sql-dsn: the database the case ran on (password masked)
    raw_prediction: Any = None  # the answer as the model gave it, when it differs from `predicted` (Markdown)
    attempts: int = 0  # calls of the predictor hook for this case (retries and repeats included)
    usage: dict[str, int | float] | None = None  # tokens and cost the hook reported, summed over its answers
    repeats: dict[str, Any] | None = None  # --nl2sql-repeat: {"k", "passed", "verdicts", "predicted"}
    quarantine: str | None = None  # the case's quarantine reason: a failure is xfailed and fails nothing
    review: dict[str, Any] | None = None  # a person's decision about the case, or the review hook's suggestion (gate/reviews.py)
    database_hash: str | None = None  # the content hash of the case's database, which a review is tied to
    gold_audit: dict[str, Any] | None = None  # {"suspect", "findings"}: what the case's database says against its gold (judge/gold_audit.py)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    def replace(self, **changes: Any) -> "CaseResult":
        """`dataclasses.replace` without its call of `__init__` with every field (asked a few
        times per case: 2,000 times a Spider run, ~25 us each). The same object: the class has no
        `__post_init__`, no check to run."""
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise TypeError(f"CaseResult has no field {', '.join(sorted(unknown))}")
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def to_json(self) -> dict[str, Any]:
        """The JSON report's item (contract fields first), plus our own extra fields."""
        return {
            "id": self.id,
            "nodeid": self.nodeid,
            "file": self.file,
            "question": self.question,
            "database": self.database,
            "gold": self.gold,
            "predicted": self.predicted,
            "hardness": self.hardness,
            "tags": list(self.tags),
            "verdict": self.verdict.value,
            "passed": self.passed,
            "reason": self.reason,
            "exact_match": self.exact_match,
            "term_selection": self.term_selection,
            "baseline": self.baseline,
            "soft_scores": self.soft_scores,
            "execution_time": self.execution_time,
            "near_miss": self.near_miss,
            "predicted_result": self.predicted_result,
            **({"predicted_malloy": self.predicted_malloy} if self.predicted_malloy is not None else {}),
            "neighbours": self.neighbours,
            "gold_warnings": list(self.gold_warnings),
            **({"ran_on": self.ran_on} if self.ran_on else {}),
            "raw_prediction": self.raw_prediction,
            "attempts": self.attempts,
            "usage": self.usage,
            "repeats": self.repeats,
            "quarantine": self.quarantine,
            "review": self.review,
            **({"database_hash": self.database_hash} if self.database_hash is not None else {}),
            "gold_audit": self.gold_audit,
            "kind": self.kind.value,
            "position": self.position,
            "partial": self.partial,
            "fingerprint": self.fingerprint,
            "latency": self.latency,
            "diff": self.diff,
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CaseResult":
        return cls(
            id=data["id"],
            nodeid=data["nodeid"],
            file=data["file"],
            position=data.get("position", 0),
            kind=Kind(data.get("kind", "sql")),
            verdict=Verdict(data["verdict"]),
            question=data.get("question"),
            database=data.get("database"),
            gold=data.get("gold"),
            predicted=data.get("predicted"),
            hardness=data.get("hardness"),
            tags=tuple(data.get("tags") or ()),
            reason=data.get("reason"),
            exact_match=data.get("exact_match"),
            partial=data.get("partial"),
            term_selection=data.get("term_selection"),
            baseline=data.get("baseline"),
            fingerprint=data.get("fingerprint"),
            latency=data.get("latency"),
            diff=data.get("diff"),
            soft_scores=data.get("soft_scores"),
            execution_time=data.get("execution_time"),
            near_miss=data.get("near_miss"),
            predicted_result=data.get("predicted_result"),
            predicted_malloy=data.get("predicted_malloy"),
            neighbours=data.get("neighbours"),
            gold_warnings=tuple(data.get("gold_warnings") or ()),
            ran_on=data.get("ran_on"),
            raw_prediction=data.get("raw_prediction"),
            attempts=data["attempts"] if isinstance(data.get("attempts"), int) else 0,
            usage=data.get("usage"),
            repeats=data.get("repeats"),
            quarantine=data.get("quarantine") if isinstance(data.get("quarantine"), str) else None,
            review=data.get("review") if isinstance(data.get("review"), dict) else None,
            database_hash=data.get("database_hash") if isinstance(data.get("database_hash"), str) else None,
            gold_audit=data.get("gold_audit") if isinstance(data.get("gold_audit"), dict) else None,
            extra=data.get("extra") or {},
        )

    def dumps(self) -> str:
        """ASCII JSON: a lone surrogate in a prediction travels as `\ud800` (pytest-xdist's channel
        cannot encode it raw, and a case whose report cannot travel would vanish)."""
        return json.dumps(self.to_json(), default=str)

    @classmethod
    def loads(cls, text: str) -> "CaseResult":
        return cls.from_json(json.loads(text))


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(CaseResult))
