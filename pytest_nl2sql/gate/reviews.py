"""Reviews: decisions a person made about disputed cases, kept in a YAML file (`--nl2sql-reviews`).

A case is disputed when its verdict is open to argument: it failed on a neighbour database only,
it passed but is fragile, or the gold audit suspects its gold (`vocab.Dispute`). A person looks at
the evidence (`nl2sql review`, pytest_nl2sql/review_cli.py) and decides (`vocab.ReviewDecision`):
`prediction-wrong` leaves the verdict alone, `gold-wrong` and `both-right` make the case pass with
reason `reviewed: <decision>`.

A decision is kept with what it was made on: the case's gold, its prediction and the content hash
of its database. When any of them changes, the decision no longer speaks of this case: it is stale,
is not applied, and the summary counts it. The verdict before the review stays in the item
(`review.verdict_before`), so every report can give the accuracy before and after reviews.

A `pytest_nl2sql_review(case, evidence)` hook (an LLM judge, say) may suggest a decision for a
disputed case: the suggestion is recorded (`review.suggested`) and shown, never applied, until a
person accepts it (`nl2sql review REPORT --accept-suggestions`).

The file is read once per process (each xdist worker reads the same file, so the verdicts do not
depend on where a case ran) and written atomically, merging: an entry is never lost, the newest
decision per case wins.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_nl2sql.cases.parse import yaml_documents, yaml_error
from pytest_nl2sql.files import FileTooLarge, atomic_write_text, read_text_capped
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.shown import ShownWarning
from pytest_nl2sql.vocab import NEIGHBOUR_REASONS, REVIEWED_REASON, Dispute, Kind, ReviewDecision, Verdict

HOOK = "hook"  # `by` of a suggestion made by the pytest_nl2sql_review hook
ENTRY_KEYS = ("id", "file", "decision", "note", "by", "at", "gold", "predicted", "database_hash")
REVIEWABLE = (Verdict.PASS, Verdict.MISMATCH)  # a review decides between a gold and a prediction that both ran
HEADER = """\
# Decisions about disputed cases (pytest-nl2sql: `nl2sql review` writes this file; run with
# --nl2sql-reviews=THIS_FILE). `gold-wrong` and `both-right` make a case pass, `prediction-wrong`
# changes nothing. A decision applies while the case's gold, prediction and database are those it
# was made on (`gold`, `predicted`, `database_hash`); after that it is stale and not applied.
"""


class ReviewsError(ValueError):
    """A reviews file that cannot be read or written; the message names the file (and line)."""


class ReviewHookWarning(ShownWarning, UserWarning):
    """The pytest_nl2sql_review hook raised or answered something that is no decision."""


@dataclass(frozen=True)
class Review:
    """One decision of the file, with what it was made on."""

    id: str
    decision: ReviewDecision
    file: str | None = None  # the case file as the node id spells it (None: any file with this id)
    note: str | None = None
    by: str | None = None
    at: str | None = None  # ISO 8601, UTC
    gold: Any = None  # the item's `gold`: SQL text or a list of SQL texts
    predicted: Any = None  # the item's `predicted`
    database_hash: str | None = None  # the item's `database_hash` (None: the database is not compared)
    line: int | None = field(default=None, compare=False)  # where the entry starts in its file

    @property
    def key(self) -> tuple[str | None, str]:
        return self.file, self.id

    def changes(self, gold: Any, predicted: Any, database_hash: str | None) -> list[str]:
        """What differs from what the decision was made on: `gold`, `predicted`, `database`."""
        changed = []
        if _canonical(self.gold) != _canonical(gold):
            changed.append("gold")
        if _canonical(self.predicted) != _canonical(predicted):
            changed.append("predicted")
        if self.database_hash is not None and self.database_hash != database_hash:
            changed.append("database")
        return changed

    def to_yaml(self) -> dict[str, Any]:
        entry = {"id": self.id, "file": self.file, "decision": self.decision.value, "note": self.note, "by": self.by,
                 "at": self.at, "gold": self.gold, "predicted": self.predicted, "database_hash": self.database_hash}
        return {key: value for key, value in entry.items() if value is not None or key in ("gold", "predicted")}

    @classmethod
    def of_item(cls, item: Mapping[str, Any], decision: ReviewDecision, *, note: str | None, by: str | None,
                at: str | None = None) -> "Review":
        """A decision about a JSON report's item, tied to its gold, prediction and database."""
        return cls(id=str(item["id"]), decision=decision, file=item.get("file"), note=note or None, by=by or None,
                   at=at or now(), gold=item.get("gold"), predicted=item.get("predicted"),
                   database_hash=item.get("database_hash"))


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass(frozen=True)
class ReviewBook:
    """The decisions of a reviews file, one per case (the newest)."""

    path: str | None = None
    entries: Mapping[tuple[str | None, str], Review] = field(default_factory=dict)

    def lookup(self, file: str | None, case_id: str) -> Review | None:
        """The decision about case `case_id` of `file` (an entry naming no file: any file's)."""
        return self.entries.get((file, str(case_id))) or self.entries.get((None, str(case_id)))

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Review]:
        return iter(self.entries.values())


# --- reading --------------------------------------------------------------------------------------


def load_reviews(path: str | os.PathLike[str]) -> ReviewBook:
    """The decisions in `path`; a file that does not exist yet holds none. A file that cannot be
    read, or holds anything but decisions, is a `ReviewsError` naming the file and the line."""
    where = os.fspath(path)
    if Path(where).is_dir():
        raise ReviewsError(f"reviews file {where} is a directory; name a file, such as {Path(where) / 'reviews.yaml'}")
    try:
        text = read_text_capped(where)
    except FileNotFoundError:
        return ReviewBook(where)
    except UnicodeDecodeError as error:
        raise ReviewsError(f"reviews file {where} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except (FileTooLarge, OSError) as error:
        raise ReviewsError(f"cannot read reviews file {where}: {getattr(error, 'strerror', None) or error}") from None
    return ReviewBook(where, _newest(parse_reviews(text, where)))


def parse_reviews(text: str, where: str) -> list[Review]:
    """The entries of a reviews file's text, in file order; `ReviewsError` for anything else."""
    try:
        documents = list(yaml_documents(text))
    except yaml.YAMLError as error:
        line, message = yaml_error(error, text)
        raise ReviewsError(f"{where}:{line or 1}: {message}") from None
    if not documents or documents[0][1] is None:
        return []
    if len(documents) > 1:
        raise ReviewsError(f"{where}:{documents[1][0].start_mark.line + 1}: a reviews file is one YAML document")
    node, data = documents[0]
    if not isinstance(data, dict) or set(data) - {"reviews"}:
        raise ReviewsError(f"{where}:{node.start_mark.line + 1}: expected a mapping with one key, `reviews:` "
                           "(a list of decisions)")
    entries = data.get("reviews")
    if entries is None:
        return []
    value_node = next(v for k, v in node.value if k.value == "reviews")
    if not isinstance(entries, list):
        raise ReviewsError(f"{where}:{value_node.start_mark.line + 1}: `reviews` must be a list of decisions")
    return [_entry(entry, entry_node, where) for entry, entry_node in zip(entries, value_node.value)]


def _entry(entry: Any, node: yaml.Node, where: str) -> Review:
    line = node.start_mark.line + 1

    def bad(what: str, key: str | None = None) -> ReviewsError:
        at = line
        if key is not None and isinstance(node, yaml.MappingNode):
            at = next((v.start_mark.line + 1 for k, v in node.value if k.value == key), line)
        return ReviewsError(f"{where}:{at}: {what}")

    if not isinstance(entry, dict):
        raise bad("a decision must be a mapping (id, decision, note, by, at, gold, predicted, database_hash)")
    unknown = [str(k) for k in entry if k not in ENTRY_KEYS]
    if unknown:
        raise bad(f"unknown key {unknown[0]!r} (a decision has {', '.join(ENTRY_KEYS)})", unknown[0])
    for key in ("id", "decision"):
        if entry.get(key) in (None, ""):
            raise bad(f"a decision needs `{key}`")
    if not isinstance(entry["id"], (str, int)) or isinstance(entry["id"], bool):
        raise bad("`id` must be the case's id (text)", "id")
    try:
        decision = ReviewDecision(str(entry["decision"]).strip().lower())
    except ValueError:
        raise bad(f"unknown decision {entry['decision']!r} (use {', '.join(d.value for d in ReviewDecision)})", "decision") from None
    for key in ("file", "note", "by", "predicted", "database_hash"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            raise bad(f"`{key}` must be text", key)
    gold = entry.get("gold")
    if gold is not None and not (isinstance(gold, str) or isinstance(gold, list) and all(isinstance(g, str) for g in gold)):
        raise bad("`gold` must be SQL text or a list of SQL texts, as the JSON report's item gives it", "gold")
    at = entry.get("at")
    if isinstance(at, (_dt.date, _dt.datetime)):  # written by hand, unquoted
        at = at.isoformat()
    if at is not None and not isinstance(at, str):
        raise bad("`at` must be a time (ISO 8601)", "at")
    return Review(id=str(entry["id"]), decision=decision, file=entry.get("file"), note=entry.get("note"), by=entry.get("by"),
                  at=at, gold=gold, predicted=entry.get("predicted"), database_hash=entry.get("database_hash"), line=line)


def _moment(review: Review) -> _dt.datetime:
    """When a decision was made, for "the newest wins" (one without a readable time: oldest)."""
    try:
        moment = _dt.datetime.fromisoformat(review.at or "")
    except ValueError:
        return _dt.datetime.min.replace(tzinfo=_dt.timezone.utc)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.timezone.utc)


def _newest(reviews: Iterable[Review]) -> dict[tuple[str | None, str], Review]:
    """One decision per case: the newest; of two made at the same time, the later one listed."""
    kept: dict[tuple[str | None, str], Review] = {}
    for review in reviews:
        earlier = kept.get(review.key)
        if earlier is None or _moment(review) >= _moment(earlier):
            kept[review.key] = review
    return kept


# --- writing --------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """SQL over several lines as a literal block, so a decisions file reads (and diffs) well."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def render_reviews(reviews: Iterable[Review]) -> str:
    listed = [review.to_yaml() for review in sorted(reviews, key=lambda r: (r.file or "", r.id))]
    body = yaml.dump({"reviews": listed}, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return HEADER + body


def record_reviews(path: str | os.PathLike[str], decisions: Sequence[Review]) -> ReviewBook:
    """Add `decisions` to the file at `path` (created if need be) and return what it holds now.
    The file is read again right before it is written (under a lock: two reviewers at once lose
    nothing), every entry it holds is kept, the newest decision per case wins, and it is replaced
    in one step. A file that cannot be read is never overwritten (`ReviewsError`)."""
    where = os.fspath(path)
    with _locked(where):
        book = load_reviews(where)
        merged = _newest([*book, *decisions])
        try:
            atomic_write_text(where, render_reviews(merged.values()), what="the reviews file")
        except OSError as error:
            raise ReviewsError(str(error)) from None
    return ReviewBook(where, merged)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An advisory lock on the file's folder where the platform has one (POSIX): no lock file is
    left beside a file that is committed with the suite. Elsewhere nothing (the write is atomic)."""
    try:
        import fcntl

        handle = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except (ImportError, OSError):  # Windows, or a folder that does not exist (the write says why)
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # (closing releases the lock)


# --- disputes, and applying a decision --------------------------------------------------------------


def disputes(item: CaseResult | Mapping[str, Any]) -> tuple[Dispute, ...]:
    """Why a case (a result, or a JSON report's item) is disputed; () when it is not."""
    data = item if isinstance(item, Mapping) else {
        "verdict": item.verdict.value, "reason": item.reason, "neighbours": item.neighbours, "review": item.review,
        "gold_audit": getattr(item, "gold_audit", None)}  # (the gold audit's field, where the result has one)
    verdict, reason = data.get("verdict"), data.get("reason")
    neighbours = data.get("neighbours") if isinstance(data.get("neighbours"), Mapping) else {}
    audit = data.get("gold_audit") if isinstance(data.get("gold_audit"), Mapping) else {}
    review = data.get("review") if isinstance(data.get("review"), Mapping) else {}
    before = review.get("verdict_before", verdict), review.get("reason_before", reason)  # a reviewed case stays disputed
    found = []
    if before[0] == Verdict.MISMATCH.value and before[1] in NEIGHBOUR_REASONS:
        found.append(Dispute.NEIGHBOUR_FAILURE)
    if before[0] == Verdict.PASS.value and (neighbours.get("fragile") or 0) > 0 and not neighbours.get("failed"):
        found.append(Dispute.FRAGILE_PASS)
    if audit.get("suspect") is True:
        found.append(Dispute.SUSPECT_GOLD)
    return tuple(found)


@dataclass(frozen=True)
class DisputedCase:
    """The `case` the pytest_nl2sql_review hook receives: what was judged, and why it is disputed."""

    id: str
    file: str
    question: str | None
    database: str | None
    gold: Any  # SQL text, or a list of them
    predicted: Any  # the SQL judged
    verdict: str
    reason: str | None
    disputes: tuple[str, ...]  # `vocab.Dispute` values

    @classmethod
    def of(cls, result: CaseResult, found: Sequence[Dispute]) -> "DisputedCase":
        return cls(result.id, result.file, result.question, result.database, result.gold, result.predicted,
                   result.verdict.value, result.reason, tuple(d.value for d in found))


def evidence_of(result: CaseResult) -> dict[str, Any]:
    """The `evidence` the review hook receives: plain JSON data from the case's item."""
    neighbours = result.neighbours or {}
    audit = getattr(result, "gold_audit", None) or {}
    return {
        "counterexample": neighbours.get("counterexample") if isinstance(neighbours, Mapping) else None,
        "neighbours": {k: v for k, v in neighbours.items() if k != "counterexample"} if isinstance(neighbours, Mapping) else None,
        "diff": result.diff,
        "findings": list(audit.get("findings") or []) if isinstance(audit, Mapping) else [],
        "near_miss": result.near_miss,
    }


Reviewer = Callable[[DisputedCase, dict[str, Any]], Any]  # the hook: a decision, {"decision", "note"}, or None


def reviewed(result: CaseResult, book: ReviewBook | None, reviewer: Reviewer | None,
             database_hash: Callable[[], str | None]) -> CaseResult:
    """`result` with its review: a person's decision applied (or found stale), or the hook's
    suggestion for a disputed case that has no decision. Cases that are neither disputed nor
    decided, and cases whose prediction did not run, come back as they are. `database_hash` is
    called only for cases that may be reviewed (hashing a database is not free)."""
    if result.kind is not Kind.SQL or result.verdict not in REVIEWABLE:
        return result
    entry = book.lookup(result.file, result.id) if book is not None else None
    found = disputes(result)
    if entry is None and not found and book is None:
        return result
    digest = database_hash()
    result = result.replace(database_hash=digest)
    if entry is None and not found:
        return result  # any case of a run with --nl2sql-reviews carries its hash: any may be reviewed
    review: dict[str, Any] = {"decision": None, "note": None, "by": None, "at": None, "stale": False,
                              "verdict_before": result.verdict.value, "reason_before": result.reason}
    fresh = False
    if entry is not None:
        changed = entry.changes(result.gold, result.predicted, digest)
        fresh = not changed
        review.update(decision=entry.decision.value, note=entry.note, by=entry.by, at=entry.at, stale=not fresh)
        if changed:
            review["stale_because"] = changed
    if not fresh and found and reviewer is not None:
        suggestion = _suggestion(reviewer, result, found)
        if suggestion is not None:
            review["suggested"] = suggestion
    if entry is None and "suggested" not in review:
        return result
    if fresh and entry is not None and entry.decision.passes:
        return result.replace(verdict=Verdict.PASS, reason=REVIEWED_REASON + entry.decision.value, near_miss=None, review=review)
    return result.replace(review=review)


def _suggestion(reviewer: Reviewer, result: CaseResult, found: Sequence[Dispute]) -> dict[str, Any] | None:
    """The hook's answer as `{"decision", "note", "by": "hook"}`; None when it has none. A hook
    that raises or answers no decision is a warning: it never changes a verdict."""
    try:
        answer = reviewer(DisputedCase.of(result, found), evidence_of(result))
    except Exception as error:  # noqa: BLE001 - a suggestion is never worth a case
        import warnings

        warnings.warn(ReviewHookWarning(f"pytest_nl2sql_review raised for {result.nodeid}: {type(error).__name__}: {error}"),
                      stacklevel=2)
        return None
    if answer is None:
        return None
    note = None
    if isinstance(answer, Mapping):
        note = answer.get("note")
        answer = answer.get("decision")
    try:
        decision = ReviewDecision(str(answer).strip().lower())
    except ValueError:
        import warnings

        warnings.warn(ReviewHookWarning(
            f"pytest_nl2sql_review answered {str(answer)[:80]!r} for {result.nodeid}: not a decision "
            f"(use {', '.join(d.value for d in ReviewDecision)}, or None)"), stacklevel=2)
        return None
    return {"decision": decision.value, "note": None if note is None else str(note), "by": HOOK}


# --- the summary ----------------------------------------------------------------------------------


def passed_before_reviews(result: CaseResult) -> bool:
    review = result.review or {}
    return review.get("verdict_before", result.verdict.value) == Verdict.PASS.value


def summarize_reviews(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The summary's review figures over the SQL results: `reviewed` (decision -> cases whose
    decision was applied, `prediction-wrong` included), `stale_reviews`, `review_suggestions`
    (hook suggestions no person has decided yet), and the accuracy before reviews."""
    reviews = [r.review for r in results if r.review]
    decided = Counter(r["decision"] for r in reviews if r.get("decision") and not r.get("stale"))
    judged = [r for r in results if not r.verdict.is_error]
    passed = sum(1 for r in judged if passed_before_reviews(r))
    return {
        "reviewed": {d.value: decided[d.value] for d in ReviewDecision if decided[d.value]},
        "stale_reviews": sum(1 for r in reviews if r.get("stale")),
        "review_suggestions": sum(1 for r in reviews if r.get("suggested") and (r.get("stale") or not r.get("decision"))),
        "passed_before_reviews": passed,
        "accuracy_before_reviews": passed / len(judged) if judged else None,
    }

