"""Stored predictions: `--nl2sql-predictions` files and the record of a predictor's answers.

A directory holds result files instead (spec 004's execution-result mode): `<id>.csv` per case,
each the predicted result as CSV (a `PredictedResult`); a case without its file has no prediction.

Two file formats: JSONL (`{"id", "predicted" | "predicted_malloy" | "selection", "file"?, "key"?, "usage"?}` per line, matched by id
and, when given, by file; a recording adds `raw_prediction`, the answer as the model gave it, which
is replayed instead of `predicted`, `usage`, the tokens and cost the model reported, and with `--nl2sql-repeat` `samples`, every answer of the case), and Spider's one-query-per-line `.sql`/`.txt` (aligned with the order of
the cases; a TAB ends the query, as in Spider's `SQL<TAB>db_id` files; blank lines are kept as empty
predictions so that the alignment never shifts). BIRD's `{"0": "SQL\\t----- bird -----\\tdb"}` JSON
is read as aligned too. A JSONL line gives one answer for one case: a line with two answers, or a
case given by two lines, is an error naming the line (which one was meant cannot be told).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.parse import load_json
from pytest_nl2sql.files import FileTooLarge, read_text_capped

BIRD_SEPARATOR = "\t----- bird -----\t"


@dataclass(frozen=True)
class PredictedResult:
    """A prediction given as its result: a CSV file (the case's `predicted_result`, or `<id>.csv`
    in a `--nl2sql-predictions` directory), compared like the result of predicted SQL."""

    path: Path

    def __str__(self) -> str:
        return str(self.path)


@dataclass(frozen=True)
class PredictedMalloy:
    """A prediction written in Malloy (the case key or JSONL key `predicted_malloy`, or a hook's
    `{"malloy": TEXT}`): compiled to the SQL of the case's engine before it is judged. `raw` is
    the answer as given when it was Markdown (`text` being the query in its fenced block)."""

    text: str
    raw: str | None = None

    @classmethod
    def of(cls, answer: str) -> "PredictedMalloy":
        """A Malloy answer, unfenced as a SQL answer is (`answer.extract_sql`): the query in its
        fenced block, the answer kept as `raw`; an answer without one fence is kept as it is."""
        from pytest_nl2sql.judge.answer import extract_sql  # which imports this module

        extracted = extract_sql(answer)
        if extracted.problem is None and extracted.sql is not None and extracted.sql != answer:
            return cls(extracted.sql, raw=answer)
        return cls(answer)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Prediction:
    value: Any  # SQL text, or a term selection
    key: str | None = None  # hash of question + schema when recorded from a predictor
    error: str | None = None  # the predictor raised when this was recorded: replayed as predictor_error
    no_answer: bool = False  # the predictor answered nothing when this was recorded: not asked again
    samples: tuple["Prediction", ...] = ()  # a recording under --nl2sql-repeat: every answer, the first included
    usage: dict[str, int | float] | None = None  # the tokens and cost of this answer, as recorded

    def sample(self, index: int) -> "Prediction | None":
        """The case's answer number `index` (0-based). A recording holds the answers it recorded (None
        past them: the model was not asked that often); any other prediction is the same every time
        (its usage counted once: it was made once)."""
        if index == 0:
            return self
        if self.samples:
            return self.samples[index] if index < len(self.samples) else None
        if self.key is not None:
            return None
        return self if self.usage is None else replace(self, usage=None)


class PredictionsFileError(ValueError):
    """A predictions file cannot be read; `str()` is `path:line: what is wrong` (or `path: ...`)."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        self.path, self.line, self.message = path, line, message
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")


@dataclass(frozen=True)
class PredictionRecord:
    """Where one JSONL prediction came from: its line, and the id and file it is for."""

    line: int
    id: str
    file: str | None = None


@dataclass(frozen=True)
class PredictionStore:
    path: Path
    aligned: tuple[str, ...] | None = None  # one per case position, for .sql/.txt files
    by_id: Mapping[str, tuple[tuple[str | None, Prediction], ...]] = field(default_factory=dict)
    records: tuple[PredictionRecord, ...] = ()  # JSONL: every line, in file order
    directory: bool = False  # a directory of `<id>.csv` result files (`by_id` maps each id to its file)

    def misalignment(self, cases: int, suite: str) -> str | None:
        """Why a one-query-per-line file does not fit a suite of `cases` cases (None when it does)."""
        if self.aligned is None or len(self.aligned) == cases:
            return None
        return (f"{self.path} has {len(self.aligned)} lines for the {cases} cases of {suite}: "
                "one query per line, a blank line for a case without one")

    def lookup(self, case_id: str, position: int, file_names: tuple[str, ...]) -> Prediction | None:
        """The prediction of a case; `file_names` are the spellings its file may have in the JSONL."""
        if self.aligned is not None:
            return Prediction(self.aligned[position]) if position < len(self.aligned) else None
        for file, prediction in self.by_id.get(case_id, ()):
            if file is None or _same_file(file, file_names):
                return prediction
        return None

    def unused(self, cases: Iterable[tuple[str, Sequence[str]]]) -> list[PredictionRecord]:
        """The JSONL lines that match none of `cases`, given as `(case id, spellings of its file)`
        (the `file_names` of `lookup`, e.g. the file as the node id spells it), in file order.

        A pure function of its arguments, so it also works at the end of an xdist run from the
        results the workers sent back. An aligned (.sql/.txt/.json) file has no ids: [] (its line
        count is checked against the suite instead)."""
        if self.aligned is not None:
            return []
        files_of: dict[str, list[Sequence[str]]] = {}
        for case_id, file_names in cases:
            files_of.setdefault(str(case_id), []).append(tuple(file_names))
        return [
            record for record in self.records
            if not any(record.file is None or _same_file(record.file, tuple(names)) for names in files_of.get(record.id, ()))
        ]


def _same_file(given: str, names: tuple[str, ...]) -> bool:
    given = given.replace("\\", "/")
    return any(given == n or n.endswith("/" + given) for n in names)


def _read_text(path: Path) -> str:
    try:
        return read_text_capped(path)
    except FileTooLarge as e:
        raise PredictionsFileError(path, None, str(e)) from None
    except UnicodeDecodeError as e:
        line = e.object[: e.start].count(b"\n") + 1
        raise PredictionsFileError(path, line, f"not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_aligned_predictions(path: Path) -> list[str]:
    """One prediction per case position, from a .sql/.txt (or BIRD .json) file."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix == ".json":
        try:
            data = load_json(text)
        except ValueError as e:
            line = getattr(e, "lineno", None)
            raise PredictionsFileError(path, line, f"invalid JSON: {getattr(e, 'msg', e)}") from None
        if not isinstance(data, Mapping):
            raise PredictionsFileError(path, None, "a .json predictions file must map positions to SQL (BIRD's format)")
        bad = [k for k in data if not (isinstance(k, str) and k.isdigit())]
        if bad:
            raise PredictionsFileError(path, None, f"a .json predictions file maps positions (0, 1, ...) to SQL; {bad[0]!r} is not a position")
        out = [""] * (max((int(k) for k in data), default=-1) + 1)
        for k, v in data.items():
            out[int(k)] = str(v).split(BIRD_SEPARATOR)[0].strip()
        return out
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the file's final newline ends the last line; it is not an empty prediction
    return [line.rstrip("\r").split("\t")[0].strip() for line in lines]


def load_predictions(path: Path) -> PredictionStore:
    """Read a `--nl2sql-predictions` file (or directory of `<id>.csv` results); raise
    `PredictionsFileError` (a ValueError) naming the file and line, or OSError when it cannot be
    read at all."""
    path = Path(path)
    if path.is_dir():
        return load_result_directory(path)
    if path.suffix != ".jsonl":
        return PredictionStore(path=path, aligned=tuple(read_aligned_predictions(path)))
    by_id: dict[str, list[tuple[str | None, Prediction]]] = {}
    records: list[PredictionRecord] = []
    lines_of: dict[str, list[PredictionRecord]] = {}  # the lines of each id so far
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = load_json(line)
        except ValueError as e:
            detail = f"{e.msg} (column {e.colno})" if hasattr(e, "colno") else str(e)
            raise PredictionsFileError(path, number, f"invalid JSON: {detail}") from None
        if not isinstance(record, Mapping) or "id" not in record:
            raise PredictionsFileError(path, number, "each line needs an \"id\"")
        if not isinstance(record["id"], (str, int)) or isinstance(record["id"], bool):
            raise PredictionsFileError(path, number, f"\"id\" must be a string or a number, not {type(record['id']).__name__}")
        given = _answer_fields(record)
        if len(given) > 1:
            raise PredictionsFileError(path, number, f"a line gives one answer, and this one has both {given[0]} and {given[1]}")
        if given == ['"predicted_malloy"'] and not isinstance(record["predicted_malloy"], str):
            raise PredictionsFileError(path, number, f"\"predicted_malloy\" must be Malloy text, not {type(record['predicted_malloy']).__name__}")
        if not given and "error" not in record and record.get("no_answer") is not True:
            raise PredictionsFileError(path, number, "each line needs \"predicted\" (SQL), \"predicted_malloy\" (Malloy) or \"selection\" (terms)")
        file = record.get("file")
        if file is not None and not isinstance(file, str):
            raise PredictionsFileError(path, number, f"\"file\" must be a string, not {type(file).__name__}")
        case_id = str(record["id"])
        earlier = _same_case(lines_of.get(case_id, ()), file)
        if earlier is not None:
            where = f"for {earlier.file}" if earlier.file is not None else "for every file"
            raise PredictionsFileError(path, number, f"id {case_id!r} is given again (first on line {earlier.line}, {where}): "
                                                     "one line per case")
        key = record.get("key")
        samples = record.get("samples")
        if samples is not None and not (isinstance(samples, list) and all(isinstance(x, Mapping) for x in samples)):
            raise PredictionsFileError(path, number, "\"samples\" must be a list of objects (one per answer)")
        for index, entry in enumerate(samples or ()):
            both = _answer_fields(entry)
            if len(both) > 1:
                raise PredictionsFileError(path, number, f"samples[{index}] has both {both[0]} and {both[1]}: one answer each")
        try:
            prediction = Prediction(_recorded_value(record), key, record.get("error"), no_answer=record.get("no_answer") is True,
                                    samples=tuple(_sample_of(x, key) for x in samples or ()), usage=_usage(record))
        except ValueError as e:
            raise PredictionsFileError(path, number, str(e)) from None
        by_id.setdefault(case_id, []).append((file, prediction))
        records.append(PredictionRecord(number, case_id, file))
        lines_of.setdefault(case_id, []).append(records[-1])
    return PredictionStore(path=path, by_id={k: tuple(v) for k, v in by_id.items()}, records=tuple(records))


_ANSWER_FIELDS = ("predicted", "predicted_malloy", "selection")


def _answer_fields(record: Mapping[str, Any]) -> list[str]:
    """The answers a line (or a recorded sample) gives, quoted for a message."""
    return [f'"{name}"' for name in _ANSWER_FIELDS if name in record]


def _same_case(earlier: Iterable[PredictionRecord], file: str | None) -> PredictionRecord | None:
    """The earlier line of the same id (`earlier`) that is for the same case: the same file, or no
    file on either (a line without a file is for the id in every file)."""
    for record in earlier:
        if record.file is None or file is None or record.file.replace("\\", "/") == file.replace("\\", "/"):
            return record
    return None


def _recorded_value(record: Mapping[str, Any]) -> Any:
    """The answer of a line (or a recorded sample). A recorded answer replays as the model gave it
    (`raw_prediction`, e.g. Markdown), so that the SQL taken out of it, and the item's
    `raw_prediction`, are those of the live run."""
    raw = record.get("raw_prediction")
    if isinstance(record.get("predicted_malloy"), str):
        return PredictedMalloy.of(raw if isinstance(raw, str) else record["predicted_malloy"])
    if isinstance(raw, str):
        return raw
    return record.get("selection", record.get("predicted"))


def _usage(record: Mapping[str, Any]) -> dict[str, int | float] | None:
    """The answer's recorded `usage` (what the model reported: tokens, cost), checked as a hook's is."""
    from pytest_nl2sql.judge.answer import usage_of  # which imports this module

    return usage_of(record.get("usage"))


def _sample_of(entry: Mapping[str, Any], key: str | None) -> Prediction:
    """One recorded answer of a repeated case (`{"predicted"}`, `{"predicted_malloy"}`, `{"selection"}`,
    `{"error"}` or `{"no_answer"}`, with its `usage`)."""
    return Prediction(_recorded_value(entry), key, entry.get("error"), no_answer=entry.get("no_answer") is True,
                      usage=_usage(entry))


def load_result_directory(path: Path) -> PredictionStore:
    """A directory of predicted results, `<id>.csv` each (ids match in any file of the run, since a
    file name carries no suite). Files are only listed here; each is read when its case is judged."""
    path = Path(path)
    by_id = {
        entry.name[: -len(".csv")]: ((None, Prediction(PredictedResult(entry))),)
        for entry in sorted(path.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".csv") and entry.is_file()
    }
    return PredictionStore(path=path, by_id=by_id, directory=True)


def prediction_key(question: str | None, schema: str | None, conversation: Any = None) -> str:
    """What a recorded prediction depends on: replaying it for a changed question is refused."""
    payload = json.dumps([question or "", schema or "", conversation], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def record_lines(records: list[dict[str, Any]]) -> str:
    """JSONL text of recorded predictions, in collection order (readable back by load_predictions)."""
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
