"""`nl2sql review REPORT.json --reviews PATH` (registered by pytest_nl2sql/cli.py): a person decides
the disputed cases of a run, and the decisions go to the reviews file (`gate/reviews.py`).

    nl2sql review REPORT.json --reviews PATH [--all] [--by NAME]
    nl2sql review REPORT.json --reviews PATH --case ID [--file FILE] --decision D [--note TEXT] [--by NAME]
    nl2sql review REPORT.json --reviews PATH --accept-suggestions [--case ID] [--by NAME]

Without `--decision` it walks the disputed cases of the report (a failure on a neighbour database
only, a fragile pass, a suspect gold) that the file has no current decision for: the question, the
gold, the prediction, the rows that tell them apart, the gold audit's findings, the hook's
suggestion; it asks for each `p`rediction-wrong, `g`old-wrong, `b`oth-right, `s`kip or `q`uit, then
a note, and writes each decision as it is made. `--case ID --decision D` records one decision
without asking (for scripts); `--accept-suggestions` turns the review hook's suggestions into
decisions. Exit code 0; 2 for a report or reviews file that cannot be read, an unknown case, or a
case whose prediction did not run.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from pytest_nl2sql.gate.report_file import ReportFileError, read_report_file
from pytest_nl2sql.gate.reviews import REVIEWABLE, Review, ReviewBook, ReviewsError, disputes, load_reviews, record_reviews
from pytest_nl2sql.shown import one_line, safe_lines
from pytest_nl2sql.vocab import ReviewDecision

COMMAND = "review"
KEYS = {"p": ReviewDecision.PREDICTION_WRONG, "g": ReviewDecision.GOLD_WRONG, "b": ReviewDecision.BOTH_RIGHT}
PROMPT = "decision? [p]rediction-wrong, [g]old-wrong, [b]oth-right, [s]kip, [q]uit: "
SHOWN_ROWS = 10  # rows of a counterexample table or result shown per case
SHOWN_CHARS = 2000  # characters of a gold or a prediction shown


class UsageProblem(Exception):
    """What makes the command exit 2; the message says what to do."""


def add_review_command(commands: Any) -> None:
    """Add `nl2sql review` to the `nl2sql` parser's subparsers."""
    review = commands.add_parser(
        COMMAND, help="decide the disputed cases of a run (neighbour-only failures, fragile passes, suspect golds)",
        description="Walk the disputed cases of REPORT.json (a --nl2sql-report=json file) and write the decisions to "
                    "the reviews file that --nl2sql-reviews reads; or record one decision (--case, --decision), or "
                    "accept the review hook's suggestions (--accept-suggestions).")
    review.add_argument("report", metavar="REPORT.json", help="the run's JSON report")
    review.add_argument("--reviews", required=True, metavar="PATH",
                        help="the reviews file (YAML; created if missing, its decisions kept and merged)")
    review.add_argument("--case", metavar="ID", help="only this case (its id)")
    review.add_argument("--file", metavar="FILE", help="the case's file as the report names it, when several files have the id")
    review.add_argument("--decision", choices=[d.value for d in ReviewDecision],
                        help="record this decision about --case without asking")
    review.add_argument("--note", metavar="TEXT", help="why (with --decision)")
    review.add_argument("--by", metavar="NAME", help="who decides (default: the login name)")
    review.add_argument("--accept-suggestions", action="store_true",
                        help="turn the review hook's suggestions (items' review.suggested) into decisions")
    review.add_argument("--all", action="store_true", help="walk the cases already decided too")


def run_review_command(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    try:
        return _run(args, stdin, stdout)
    except (UsageProblem, ReviewsError, ReportFileError) as error:
        print(safe_lines(f"nl2sql review: {error}"), file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> int:
    if args.decision and not args.case:
        raise UsageProblem("--decision needs --case ID (the case it is about)")
    if args.decision and args.accept_suggestions:
        raise UsageProblem("--decision and --accept-suggestions: give one of them")
    if args.note and not args.decision:
        raise UsageProblem("--note goes with --decision (the walk asks for a note after each decision)")
    items = [item for item in read_report_file(args.report)["items"] if isinstance(item, dict)]
    book = load_reviews(args.reviews)  # a malformed file is refused before anything is asked
    by = args.by or _login()
    if args.case:
        items = [_one_case(items, args.case, args.file, args.report)]
    if args.decision:
        return _record_one(items[0], ReviewDecision(args.decision), args.note, by, args.reviews, stdout)
    if args.accept_suggestions:
        return _accept_suggestions(items, book, by, args.reviews, stdout)
    return _walk(items, book, by, args, stdin, stdout)


def _login() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (a container): the decision says nobody
        return None


def _one_case(items: Sequence[dict[str, Any]], case_id: str, file: str | None, report: str) -> dict[str, Any]:
    found = [item for item in items if str(item.get("id")) == case_id and (file is None or item.get("file") == file)]
    if not found:
        where = f" of {file}" if file else ""
        raise UsageProblem(f"{report} has no case {case_id!r}{where}")
    if len(found) > 1:
        files = ", ".join(sorted(str(item.get("file")) for item in found))
        raise UsageProblem(f"{len(found)} cases of {report} have the id {case_id!r} ({files}): name one with --file")
    item = found[0]
    if item.get("kind", "sql") != "sql" or item.get("verdict") not in {v.value for v in REVIEWABLE}:
        raise UsageProblem(f"case {item.get('nodeid') or case_id} is {item.get('verdict')}: a review decides between a gold "
                           "and a prediction that both ran (pass or mismatch)")
    return item


def _current(book: ReviewBook, item: Mapping[str, Any]) -> Review | None:
    """The file's decision about `item` when it was made on the item's gold, prediction and database."""
    entry = book.lookup(item.get("file"), str(item.get("id")))
    if entry is None or entry.changes(item.get("gold"), item.get("predicted"), item.get("database_hash")):
        return None
    return entry


def _record_one(item: dict[str, Any], decision: ReviewDecision, note: str | None, by: str | None, path: str,
                stdout: TextIO) -> int:
    review = Review.of_item(item, decision, note=note, by=by)
    record_reviews(path, [review])
    _say(stdout, f"recorded {decision.value} for {_label(item)} in {path}")
    if item.get("database_hash") is None:
        _say(stdout, "note: the report gives no database hash for this case (a run with --nl2sql-reviews gives every case "
                     "one): the decision is tied to its gold and prediction only")
    return 0


def _accept_suggestions(items: Sequence[dict[str, Any]], book: ReviewBook, by: str | None, path: str, stdout: TextIO) -> int:
    decisions = []
    for item in items:
        suggested = (item.get("review") or {}).get("suggested")
        if not isinstance(suggested, Mapping) or _current(book, item) is not None:
            continue  # no suggestion, or a person decided already (a person's decision wins)
        try:
            decision = ReviewDecision(suggested.get("decision"))
        except ValueError:
            continue
        note = "the review hook's suggestion, accepted" + (f": {suggested['note']}" if suggested.get("note") else "")
        decisions.append(Review.of_item(item, decision, note=note, by=by))
        _say(stdout, f"accepted {decision.value} for {_label(item)}")
    if decisions:
        record_reviews(path, decisions)
    _say(stdout, f"{len(decisions)} suggestion(s) recorded as decisions in {path}")
    return 0


def _walk(items: Sequence[dict[str, Any]], book: ReviewBook, by: str | None, args: argparse.Namespace,
          stdin: TextIO, stdout: TextIO) -> int:
    disputed = [item for item in items if disputes(item) or args.case]
    todo = [item for item in disputed if args.all or args.case or _current(book, item) is None]
    decided = len(disputed) - len(todo)
    _say(stdout, f"{len(disputed)} disputed case(s) in {args.report}"
         + (f", {decided} decided already in {args.reviews} (--all shows them too)" if decided else "")
         + (f"; {len(todo)} to review" if todo else "; nothing to review"))
    written = 0
    for number, item in enumerate(todo, start=1):
        _say(stdout, "")
        _say(stdout, case_text(item, book, number, len(todo)))
        decision = _ask_decision(stdin, stdout)
        if decision == "quit":
            break
        if decision is None:
            continue
        note = _ask(stdin, stdout, "note (optional): ")
        record_reviews(args.reviews, [Review.of_item(item, decision, note=(note or "").strip() or None, by=by)])
        written += 1
        _say(stdout, f"recorded {decision.value}")
    _say(stdout, f"{written} decision(s) written to {args.reviews}" if written else "no decision written")
    return 0


def _ask(stdin: TextIO, stdout: TextIO, prompt: str) -> str | None:
    """One line typed in answer to `prompt`; None at the end of the input."""
    stdout.write(prompt)
    stdout.flush()
    line = stdin.readline()
    if line == "":
        stdout.write("\n")  # the input ended: what follows starts a line of its own
        return None
    return line.rstrip("\n")


def _ask_decision(stdin: TextIO, stdout: TextIO) -> ReviewDecision | str | None:
    """A decision, None to skip, or "quit" (`q`, or the end of the input)."""
    while True:
        answer = _ask(stdin, stdout, PROMPT)
        if answer is None:
            return "quit"
        key = answer.strip().lower()[:1]
        if key in KEYS:
            return KEYS[key]
        if key == "s":
            return None
        if key == "q":
            return "quit"
        _say(stdout, "answer p, g, b, s or q")


# --- showing a case -------------------------------------------------------------------------------


def case_text(item: Mapping[str, Any], book: ReviewBook, number: int = 1, total: int = 1) -> str:
    """What a person needs to decide a case: what was asked, both queries, the evidence."""
    kinds = ", ".join(d.value for d in disputes(item)) or "not disputed"
    review = item.get("review") if isinstance(item.get("review"), Mapping) else {}
    verdict, reason = review.get("verdict_before", item.get("verdict")), review.get("reason_before", item.get("reason"))
    lines = [f"[{number}/{total}] {_label(item)} ({kinds})",
             f"verdict: {verdict}" + (f" ({reason})" if reason else "")
             + (f", now {item.get('verdict')} ({item.get('reason')})" if item.get("verdict") != verdict else ""),
             f"question: {one_line(str(item.get('question') or '(none)'))}"]
    lines += _block("gold", item.get("gold"))
    lines += _block("prediction", item.get("predicted"))
    neighbours = item.get("neighbours") if isinstance(item.get("neighbours"), Mapping) else {}
    lines += counterexample_lines(neighbours.get("counterexample"), (item.get("diff") or {}).get("database"))
    lines += _diff_lines(item.get("diff"), neighbours.get("counterexample"))
    audit = item.get("gold_audit") if isinstance(item.get("gold_audit"), Mapping) else {}
    findings = [f for f in audit.get("findings") or [] if isinstance(f, Mapping)]
    if findings:
        lines.append("gold audit findings:")
        lines += [f"  - {one_line(str(f.get('kind')))}: {one_line(str(f.get('detail') or ''))}" for f in findings]
    suggested = review.get("suggested")
    if isinstance(suggested, Mapping):
        lines.append(f"suggested by the review hook: {suggested.get('decision')}"
                     + (f": {one_line(str(suggested['note']))}" if suggested.get("note") else ""))
    entry = book.lookup(item.get("file"), str(item.get("id")))
    if entry is not None:
        changed = entry.changes(item.get("gold"), item.get("predicted"), item.get("database_hash"))
        state = f"stale: {', '.join(changed)} changed since" if changed else "current"
        lines.append(f"decided before: {entry.decision.value} by {entry.by or 'nobody named'} at {entry.at or '?'} ({state})"
                     + (f": {one_line(entry.note)}" if entry.note else ""))
    return safe_lines("\n".join(lines))


def _block(title: str, value: Any) -> list[str]:
    if value is None:
        return [f"{title}: (none)"]
    texts = value if isinstance(value, list) else [value]
    lines = [f"{title}:" if len(texts) == 1 else f"{title} ({len(texts)} alternatives):"]
    for text in texts:
        text = text if isinstance(text, str) else json.dumps(text, default=str)
        if len(text) > SHOWN_CHARS:
            text = text[:SHOWN_CHARS] + f"… [{len(text):,} characters]"
        lines += ["    " + line for line in text.splitlines() or [""]]
    return lines


def counterexample_lines(counterexample: Any, database: Any = None) -> list[str]:
    """The neighbour database's rows that tell gold and prediction apart, and both results there."""
    if not isinstance(counterexample, Mapping):
        return []
    where = f" ({one_line(str(database))})" if database else ""
    breaks = counterexample.get("breaks")
    lines = [f"counterexample{where}" + (f", where {one_line(str(breaks))}" if breaks else "") + ":"]
    for table, content in (counterexample.get("tables") or {}).items():
        if not isinstance(content, Mapping):
            continue
        columns = ", ".join(one_line(str(c)) for c in content.get("columns") or [])
        lines.append(f"  {one_line(str(table))} ({columns}):")
        lines += _rows(content.get("rows"), "    ")
    for name, key in (("gold result there", "gold"), ("predicted result there", "predicted")):
        lines.append(f"  {name}:")
        lines += _rows(counterexample.get(key), "    ")
    return lines


def _diff_lines(diff: Any, counterexample: Any) -> list[str]:
    """A failure on the case's own database: the rows the prediction misses and adds."""
    if not isinstance(diff, Mapping) or isinstance(counterexample, Mapping):
        return []
    lines = []
    for name, key in (("rows of the gold the prediction misses", "missing"), ("rows the prediction adds", "extra")):
        rows = diff.get(key)
        if rows:
            count = diff.get(f"{key}_count", len(rows))
            lines.append(f"{name} ({count}):")
            lines += _rows(rows, "    ")
    return lines


def _rows(rows: Any, indent: str) -> list[str]:
    if not isinstance(rows, list) or not rows:
        return [f"{indent}(no rows)"]
    shown = [indent + one_line(", ".join(json.dumps(v, default=str) for v in row) if isinstance(row, list) else str(row))
             for row in rows[:SHOWN_ROWS]]
    return shown + ([f"{indent}... {len(rows) - SHOWN_ROWS} more"] if len(rows) > SHOWN_ROWS else [])


def _label(item: Mapping[str, Any]) -> str:
    return one_line(str(item.get("nodeid") or f"{item.get('file')}::{item.get('id')}"))


def _say(stdout: TextIO, text: str) -> None:
    stdout.write(safe_lines(text) + "\n")
