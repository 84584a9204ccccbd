"""`nl2sql audit-gold REPORT.json [REPORT.json ...] [--min-agree K] [--format md|json]` (registered
by pytest_nl2sql/cli.py): the JSON reports of one suite from several models, read together for
golds to suspect. A suspect is something to read, never a verdict change.

A case is `consensus`-suspect when at least K of the predictions (default: all but one, at least
2) fail, give the same result as one another wherever the reports show them run, and so differ
from the gold there. What is compared, exactly, is what the items carry:

- a prediction that fails on the case's own database (a `mismatch` that is not a neighbour's):
  its result there, as the item's `fingerprint` (a hash of the predicted result that ignores column
  order, and row order unless the gold orders its rows; the result comparison's notion of "the
  same result"). Such a prediction is never run on neighbours, so nothing more is known of it;
- a prediction right on its own database that fails on a neighbour (reason `neighbour`, or
  `fragile` under `--nl2sql-fragile=fail`): the counterexample database (its tables and rows, as
  `neighbours.counterexample.tables` holds them) and the prediction's rows there (as a multiset).
  Two such predictions agree only when both are equal: the same database and the same rows.

Predictions that agree on nothing (no row, or only 0s and NULLs) are not counted: predictions
that find nothing where the gold finds rows most often spell a value otherwise than the data does
(`'Dog'` where it holds `'dog'`), and a gold that finds nothing is the per-case audit's
`empty_result`. Nor are predictions whose result is the gold's rows with copies added or lost
(the item's `near_miss` is `duplicates`): models drop or add a DISTINCT alike, and on the
hand-read Spider sample none of the eight such agreements was the gold's mistake. Errors (a prediction that did not run), passes and items without that evidence
count as not agreeing; a reviewed case is read by its verdict before the review. The cases the reports' own audits suspect (their items'
`gold_audit`) are listed too, with their findings. Exit code 0; 2 for a file that is not a
report, or a report of another suite (other case ids, or another gold for a case), naming it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from pytest_nl2sql.gate.report_file import ReportFileError, read_report_file
from pytest_nl2sql.judge.equality import result_fingerprint
from pytest_nl2sql.shown import safe_lines
from pytest_nl2sql.vocab import NEIGHBOUR_REASONS, GoldFinding, NearMiss, Verdict

COMMAND = "audit-gold"
SHOWN_ROWS = 10  # evidence rows of one table shown in the md output
KINDS = tuple(kind.value for kind in GoldFinding)
# The fingerprints of results that hold nothing: no row, or one row of up to 4 values each 0 or
# NULL (the fingerprint ignores column order), ordered or not.
NOTHING = frozenset(result_fingerprint(rows, ordered) for ordered in (False, True) for rows in
                    [[], *([row] for width in range(1, 5) for row in itertools.product((0, None), repeat=width))])


class AuditProblem(Exception):
    """What makes the command exit 2; the message names the file."""


def add_audit_gold_command(commands: Any) -> None:
    """Add `nl2sql audit-gold` to the `nl2sql` parser's subparsers."""
    audit = commands.add_parser(
        COMMAND, help="golds to suspect, from several models' reports of one suite (and the reports' own audits)",
        description="Read the JSON reports of one suite from several models: a case is consensus-suspect when at "
                    "least K predictions fail and agree with one another against the gold. Lists every suspect "
                    "case (id, question, gold, the agreeing prediction, the findings, the evidence rows). "
                    "Never changes a verdict.")
    audit.add_argument("reports", nargs="+", metavar="REPORT.json", help="the runs' --nl2sql-report=json files")
    audit.add_argument("--min-agree", type=_at_least_two, metavar="K",
                       help="predictions that must fail and agree (default: all but one, at least 2)")
    audit.add_argument("--format", choices=("md", "json"), default="md", help="the output (default md)")


def run_audit_gold_command(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    try:
        audit = audit_reports(args.reports, args.min_agree)
    except AuditProblem as error:
        print(safe_lines(f"nl2sql {COMMAND}: {error}"), file=sys.stderr)
        return 2
    text = json.dumps(audit.to_json(), indent=2, default=str) if args.format == "json" else render_md(audit)
    stdout.write(safe_lines(text) + "\n")
    return 0


def _at_least_two(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("must be at least 2 (one failing prediction agrees with nothing)")
    return value


# --- reading the reports ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    path: str
    label: str  # the run's label, else the file's name
    items: dict[tuple[str, str], Mapping[str, Any]]  # (file, id) -> item


def read_reports(paths: Sequence[str]) -> list[Report]:
    """The reports, each checked (`read_report_file`) and of the same suite as the first: the same
    case ids in the same files, each with the same gold."""
    reports: list[Report] = []
    seen: dict[str, str] = {}
    for path in paths:
        real = os.path.realpath(path)
        if real in seen:
            raise AuditProblem(f"{path}: given twice (as {seen[real]}): one model's predictions would agree with themselves")
        seen[real] = path
        try:
            data = read_report_file(path)
        except ReportFileError as error:
            raise AuditProblem(str(error)) from None
        items: dict[tuple[str, str], Mapping[str, Any]] = {}
        for number, item in enumerate(data["items"], start=1):
            if item.get("id") is None or not isinstance(item.get("file"), str):
                raise AuditProblem(f"{path}: item {number}: no `id` and `file` (not a report of pytest-nl2sql)")
            items.setdefault((item["file"], str(item["id"])), item)
        run = data.get("run") or {}
        label = run.get("label") if isinstance(run.get("label"), str) and run.get("label") else os.path.basename(path)
        reports.append(Report(path, label, items))
    first = reports[0]
    for other in reports[1:]:
        _same_suite(first, other)
    return reports


def _same_suite(first: Report, other: Report) -> None:
    missing, added = first.items.keys() - other.items.keys(), other.items.keys() - first.items.keys()
    if missing or added:
        example = sorted(missing or added)[0]
        raise AuditProblem(
            f"{other.path}: not a report of the same suite as {first.path}: {len(missing)} of its cases missing and "
            f"{len(added)} others (e.g. {example[0]}::{example[1]} is {'missing' if missing else 'not in ' + first.path})")
    for key, item in first.items.items():
        if other.items[key].get("gold") != item.get("gold"):
            raise AuditProblem(f"{other.path}: not a report of the same suite as {first.path}: case {key[0]}::{key[1]} has "
                               "another gold")


# --- the audit ------------------------------------------------------------------------------------


@dataclass
class Suspect:
    """A case to read: its findings from every source, the agreeing predictions and the evidence."""

    key: tuple[str, str]
    item: Mapping[str, Any]  # the first report's item (question, gold)
    findings: list[dict[str, str]] = field(default_factory=list)
    agreeing: list[str] = field(default_factory=list)  # the reports whose predictions agree
    prediction: Any = None  # the agreeing prediction (the first report's of them)
    evidence: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": self.key[0], "id": self.key[1], "question": self.item.get("question"), "gold": self.item.get("gold"),
                "database": self.item.get("database"), "findings": self.findings, "agreeing": self.agreeing,
                "prediction": self.prediction, "evidence": self.evidence}


@dataclass
class Audit:
    reports: list[Report]
    min_agree: int
    suspects: list[Suspect]
    by_report: dict[str, Counter[str]]  # path -> kind -> cases

    @property
    def cases(self) -> int:
        """The cases judged (a broken case, `gold_error` in the first report, has nothing to read)."""
        return sum(1 for item in self.reports[0].items.values() if item.get("verdict") != Verdict.GOLD_ERROR.value)

    def by_kind(self) -> dict[str, int]:
        counts = Counter(kind for suspect in self.suspects for kind in dict.fromkeys(f["kind"] for f in suspect.findings))
        return {kind: counts.get(kind, 0) for kind in KINDS}

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "min_agree": self.min_agree,
            "suspects": len(self.suspects),
            "suspect_share": len(self.suspects) / self.cases if self.cases else None,
            "by_kind": self.by_kind(),
            "reports": [{"path": r.path, "label": r.label, "suspects": sum(1 for s in self.suspects if _flags(s, r)),
                         "by_kind": {kind: self.by_report[r.path].get(kind, 0) for kind in KINDS}} for r in self.reports],
            "cases_suspect": [suspect.to_json() for suspect in self.suspects],
        }


def audit_reports(paths: Sequence[str], min_agree: int | None = None) -> Audit:
    reports = read_reports(paths)
    wanted = min_agree if min_agree is not None else max(2, len(reports) - 1)
    if wanted > len(reports):
        raise AuditProblem(f"--min-agree {wanted} with {len(reports)} report(s): no case can have {wanted} agreeing predictions")
    suspects: list[Suspect] = []
    by_report: dict[str, Counter[str]] = {r.path: Counter() for r in reports}
    for key, first in reports[0].items.items():
        items = [(report, report.items[key]) for report in reports]
        suspect = Suspect(key, first)
        for report, item in items:
            own = _own_findings(item)
            for kind in dict.fromkeys(f["kind"] for f in own):
                by_report[report.path][kind] += 1
            suspect.findings.extend(f for f in own if f not in suspect.findings)
        groups: dict[str, list[tuple[Report, Mapping[str, Any]]]] = {}
        for report, item in items:
            evidence = evidence_key(item)
            if evidence is not None:
                groups.setdefault(evidence, []).append((report, item))
        agreeing = max(groups.values(), key=len, default=[])
        if len(agreeing) >= wanted:
            suspect.agreeing = [report.path for report, _ in agreeing]
            item = agreeing[0][1]
            suspect.prediction = item.get("predicted")
            suspect.evidence = _evidence_rows(item)
            where = "on a neighbour database" if item.get("reason") in NEIGHBOUR_REASONS else "on the case's own database"
            suspect.findings.insert(0, {"kind": GoldFinding.CONSENSUS.value, "detail": (
                f"{len(agreeing)} of {len(reports)} models' predictions fail and give the same result as one another "
                f"{where}, which differs from the gold's ({', '.join(r.label for r, _ in agreeing)})")})
            for report, _ in agreeing:
                by_report[report.path][GoldFinding.CONSENSUS.value] += 1
        if suspect.findings:
            suspects.append(suspect)
    return Audit(reports, wanted, suspects, by_report)


def evidence_key(item: Mapping[str, Any]) -> str | None:
    """What a failing prediction's result is known to be, as text two agreeing predictions share
    (see the module's docstring); None for a pass, an error, or a failure without that evidence."""
    review = item.get("review") if isinstance(item.get("review"), Mapping) else {}
    verdict = review.get("verdict_before") or item.get("verdict")
    reason = review.get("reason_before") if review.get("verdict_before") else item.get("reason")
    if verdict != Verdict.MISMATCH.value:
        return None
    if reason in NEIGHBOUR_REASONS:
        neighbours = item.get("neighbours") if isinstance(item.get("neighbours"), Mapping) else {}
        counterexample = neighbours.get("counterexample")
        if not isinstance(counterexample, Mapping) or not isinstance(counterexample.get("tables"), Mapping):
            return None
        predicted = counterexample.get("predicted")
        if not isinstance(predicted, list) or _nothing(predicted):
            return None
        rows = sorted(json.dumps(row, sort_keys=True, default=str) for row in predicted)
        return "neighbour:" + json.dumps([counterexample["tables"], rows], sort_keys=True, default=str)
    if item.get("near_miss") == NearMiss.DUPLICATES.value:
        return None  # the gold's rows with copies added or lost: models drop or add a DISTINCT alike
    fingerprint = item.get("fingerprint")
    return f"own:{fingerprint}" if isinstance(fingerprint, str) and fingerprint and fingerprint not in NOTHING else None


def _nothing(rows: list[Any]) -> bool:
    """No row, or only 0s and NULLs (a count of nothing, an aggregate over nothing)."""
    values = [value for row in rows for value in (row if isinstance(row, list) else [row])]
    return all(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0) for value in values)


def _own_findings(item: Mapping[str, Any]) -> list[dict[str, str]]:
    """The item's `gold_audit` findings (a report's own audit), as plain {"kind", "detail"}."""
    audit = item.get("gold_audit")
    if not isinstance(audit, Mapping) or not isinstance(audit.get("findings"), list):
        return []
    return [{"kind": str(f.get("kind")), "detail": str(f.get("detail") or "")} for f in audit["findings"] if isinstance(f, Mapping)]


def _evidence_rows(item: Mapping[str, Any]) -> dict[str, Any]:
    """The rows behind an agreement: on a neighbour, its tables and both results there; on the
    case's own database, the gold's rows the prediction misses and the rows it adds instead."""
    neighbours = item.get("neighbours") if isinstance(item.get("neighbours"), Mapping) else {}
    counterexample = neighbours.get("counterexample")
    if item.get("reason") in NEIGHBOUR_REASONS and isinstance(counterexample, Mapping):
        return {"database": (item.get("diff") or {}).get("database") or "a neighbour database",
                "breaks": counterexample.get("breaks"), "tables": counterexample.get("tables"),
                "gold": counterexample.get("gold"), "predicted": counterexample.get("predicted")}
    diff = item.get("diff") if isinstance(item.get("diff"), Mapping) else {}
    return {"database": "the case's own database", "reason": item.get("reason"),
            "gold_columns": diff.get("gold_columns"), "predicted_columns": diff.get("predicted_columns"),
            "missing": diff.get("missing"), "missing_count": diff.get("missing_count"),
            "extra": diff.get("extra"), "extra_count": diff.get("extra_count")}


def _flags(suspect: Suspect, report: Report) -> bool:
    """The suspect is one of `report`'s: its own audit found something, or its prediction agrees."""
    return report.path in suspect.agreeing or bool(_own_findings(report.items[suspect.key]))


# --- the Markdown output ------------------------------------------------------------------------------


def render_md(audit: Audit) -> str:
    from pytest_nl2sql.reports.md import _cell, _code, _inline

    share = len(audit.suspects) / audit.cases if audit.cases else 0.0
    lines = [f"### Suspect golds: {len(audit.suspects)} of {audit.cases} cases ({share:.1%})", "",
             f"{len(audit.reports)} reports; `consensus`: at least {audit.min_agree} failing predictions that agree with one "
             "another against the gold. A suspect is a finding to read, never a verdict.", "",
             "| report | suspects | " + " | ".join(KINDS) + " |", "|---|---|" + "---|" * len(KINDS)]
    for row in audit.to_json()["reports"]:
        lines.append(f"| {_cell(row['label'])} | {row['suspects']} | " + " | ".join(str(row["by_kind"][k]) for k in KINDS) + " |")
    totals = audit.by_kind()
    lines.append(f"| **any** | {len(audit.suspects)} | " + " | ".join(str(totals[k]) for k in KINDS) + " |")
    for suspect in audit.suspects:
        item = suspect.item
        lines += ["", f"#### {_code(f'{suspect.key[0]}::{suspect.key[1]}')}", "",
                  f"- question: {_inline(item.get('question'))}",
                  f"- database: {_inline(item.get('database'))}"]
        lines += _sql_block("gold", item.get("gold"))
        if suspect.agreeing:
            names = ", ".join(r.label for r in audit.reports if r.path in suspect.agreeing)
            lines += _sql_block(f"agreeing prediction ({names})", suspect.prediction)
        lines.append("- findings:")
        lines += [f"  - {_code(f['kind'])}: {_inline(f['detail'])}" for f in suspect.findings]
        if suspect.evidence:
            lines += _evidence_md(suspect.evidence)
    return "\n".join(lines)


def _sql_block(title: str, sql: Any) -> list[str]:
    texts = sql if isinstance(sql, list) else [sql]
    lines = [f"- {title}:"]
    for text in texts:
        text = text if isinstance(text, str) else json.dumps(text, default=str)
        fence = "```"
        while fence in text:
            fence += "`"
        lines += ["", f"  {fence}sql", *("  " + line for line in text.splitlines()), f"  {fence}"]
    return lines


def _evidence_md(evidence: Mapping[str, Any]) -> list[str]:
    from pytest_nl2sql.reports.md import _inline

    lines = [f"- evidence ({_inline(evidence.get('database'))})" + (f", where {_inline(evidence['breaks'])}" if evidence.get("breaks") else "") + ":"]
    tables = evidence.get("tables") if isinstance(evidence.get("tables"), Mapping) else {}
    for name, content in tables.items():
        if isinstance(content, Mapping):
            lines += _rows_md(f"table {name}", content.get("columns"), content.get("rows"))
    if "missing" in evidence:
        lines += _rows_md(f"gold rows the predictions miss ({evidence.get('missing_count')})", evidence.get("gold_columns"), evidence.get("missing"))
        lines += _rows_md(f"rows they give instead ({evidence.get('extra_count')})", evidence.get("predicted_columns"), evidence.get("extra"))
    else:
        lines += _rows_md("the gold's result there", None, evidence.get("gold"))
        lines += _rows_md("the predictions' result there", None, evidence.get("predicted"))
    return lines


def _rows_md(title: str, columns: Any, rows: Any) -> list[str]:
    from pytest_nl2sql.reports.md import _cell, _inline

    rows = rows if isinstance(rows, list) else []
    width = max([len(r) for r in rows if isinstance(r, list)] + [len(columns) if isinstance(columns, list) else 0, 1])
    header = [_cell(c) for c in columns] if isinstance(columns, list) and len(columns) == width else [""] * width
    lines = ["", f"  {_inline(title)}:" + (" (no rows)" if not rows else ""), ""]
    if rows:
        lines += ["  | " + " | ".join(header) + " |", "  |" + "---|" * width]
        for row in rows[:SHOWN_ROWS]:
            cells = [_cell(json.dumps(v, default=str)) for v in (row if isinstance(row, list) else [row])]
            lines.append("  | " + " | ".join(cells + [""] * (width - len(cells))) + " |")
        if len(rows) > SHOWN_ROWS:
            lines.append(f"  \n  … {len(rows) - SHOWN_ROWS} more rows")
    return lines
