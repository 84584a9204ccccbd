"""Stored predictions: `--nl2sql-predictions` files and the record of a predictor's answers.

Two formats: JSONL (`{"id", "predicted" | "selection", "file"?, "key"?}` per line, matched by id
and, when given, by file), and Spider's one-query-per-line `.sql`/`.txt` (aligned with the order of
the cases; a TAB ends the query, as in Spider's `SQL<TAB>db_id` files; blank lines are kept as empty
predictions so that the alignment never shifts). BIRD's `{"0": "SQL\\t----- bird -----\\tdb"}` JSON
is read as aligned too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIRD_SEPARATOR = "\t----- bird -----\t"


@dataclass(frozen=True)
class Prediction:
    value: Any  # SQL text, or a term selection
    key: str | None = None  # hash of question + schema when recorded from a predictor
    error: str | None = None  # the predictor raised when this was recorded: replayed as predictor_error


@dataclass(frozen=True)
class PredictionStore:
    path: Path
    aligned: tuple[str, ...] | None = None  # one per case position, for .sql/.txt files
    by_id: Mapping[str, tuple[tuple[str | None, Prediction], ...]] = field(default_factory=dict)

    def lookup(self, case_id: str, position: int, file_names: tuple[str, ...]) -> Prediction | None:
        """The prediction of a case; `file_names` are the spellings its file may have in the JSONL."""
        if self.aligned is not None:
            return Prediction(self.aligned[position]) if position < len(self.aligned) else None
        for file, prediction in self.by_id.get(case_id, ()):
            if file is None or _same_file(file, file_names):
                return prediction
        return None


def _same_file(given: str, names: tuple[str, ...]) -> bool:
    given = given.replace("\\", "/")
    return any(given == n or n.endswith("/" + given) for n in names)


def read_aligned_predictions(path: Path) -> list[str]:
    """One prediction per case position, from a .sql/.txt (or BIRD .json) file."""
    text = Path(path).read_text(encoding="utf-8")
    if Path(path).suffix == ".json":
        data = json.loads(text)
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: a .json predictions file must map positions to SQL (BIRD's format)")
        out = [""] * (max((int(k) for k in data), default=-1) + 1)
        for k, v in data.items():
            out[int(k)] = str(v).split(BIRD_SEPARATOR)[0].strip()
        return out
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline ends the last line; it is not an empty prediction
    return [line.rstrip("\r").split("\t")[0].strip() for line in lines]


def load_predictions(path: Path) -> PredictionStore:
    """Read a `--nl2sql-predictions` file; raise ValueError naming the file and line."""
    path = Path(path)
    if path.suffix != ".jsonl":
        return PredictionStore(path=path, aligned=tuple(read_aligned_predictions(path)))
    by_id: dict[str, list[tuple[str | None, Prediction]]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: invalid JSON: {e.msg}") from e
        if not isinstance(record, Mapping) or "id" not in record:
            raise ValueError(f"{path}:{number}: each line needs an \"id\"")
        if "selection" in record:
            value = record["selection"]
        elif "predicted" in record:
            value = record["predicted"]
        elif "error" in record:
            value = None
        else:
            raise ValueError(f"{path}:{number}: each line needs \"predicted\" (SQL) or \"selection\" (terms)")
        file = record.get("file")
        by_id.setdefault(str(record["id"]), []).append(
            (str(file) if file is not None else None, Prediction(value, record.get("key"), record.get("error")))
        )
    return PredictionStore(path=path, by_id={k: tuple(v) for k, v in by_id.items()})


def prediction_key(question: str | None, schema: str | None, conversation: Any = None) -> str:
    """What a recorded prediction depends on: replaying it for a changed question is refused."""
    payload = json.dumps([question or "", schema or "", conversation], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def record_lines(records: list[dict[str, Any]]) -> str:
    """JSONL text of recorded predictions, in collection order (readable back by load_predictions)."""
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
