"""Two runs side by side (`nl2sql compare A.json B.json`), from their JSON reports, without pytest.

A change of model or prompt is judged on the same cases: every accuracy figure and bucket of both
runs with the difference, the cases that flipped each way (with both predictions, so a reviewer
sees *why*), and McNemar's exact test over the cases judged in both runs, which says whether the
flips could be a coin's. Cases are paired by node id (`file::id`); when no node id is shared (two
suite files, one per model, over the same questions) by case id, if ids are unique in each run.
Cases only in one run, or broken (`gold_error`) in one, are listed apart, never paired.

    comparison = compare_reports(read_run("a.json"), read_run("b.json"))
    print("\\n".join(render_text(comparison)))
    Path("c.md").write_text(render_markdown(comparison))   # a PR comment
    Path("c.html").write_text(render_html(comparison))     # one self-contained page
"""

from __future__ import annotations

import functools
import html
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.gate.report_file import ReportFileError, read_report_file
from pytest_nl2sql.gate.stats import SIGNIFICANCE, is_significant, mcnemar_exact
from pytest_nl2sql.reports.json import dumps
from pytest_nl2sql.shown import escaped
from pytest_nl2sql.vocab import Verdict, hardness_sort_key

GOLD_ERROR = Verdict.GOLD_ERROR.value
SHOWN_FLIPS = 5  # cases listed per direction in the terminal (all with --all)
SHOWN_BUCKETS = 8  # tags / databases in the terminal: the largest changes first
SHOWN_SQL = 110  # characters of a prediction on a terminal line
MAX_SQL = 2000  # characters of a prediction anywhere (a prediction can be megabytes)
MAX_MD_ROWS = 100  # rows of a Markdown bucket table: a PR comment has a size limit (65,536 characters)
MAX_MD_FLIPS = 40  # rows of a Markdown table of flips (two predictions each)
MD_SQL = 160
FORMATS = {"md": "md", "html": "html", "json": "json"}  # --nl2sql-report formats of the command


class ReportError(ValueError):
    """A file that is not a readable JSON report of this plugin; the message names it and why."""


@dataclass(frozen=True)
class Run:
    """One run's JSON report, checked enough to compare: `items` a list of objects with an `id`."""

    path: str
    summary: Mapping[str, Any]
    items: tuple[Mapping[str, Any], ...]
    run: Mapping[str, Any]

    @property
    def name(self) -> str:
        """The run's label when it has one, else its file's name."""
        label = self.run.get("label")
        return str(label) if label else Path(self.path).name


def read_run(path: str | os.PathLike[str]) -> Run:
    """Read a JSON report, every field it has checked (`gate.report_file`); anything else is a
    `ReportError` naming the file (and the item and field)."""
    where = os.fspath(path)
    try:
        data = read_report_file(where)
    except ReportFileError as e:
        raise ReportError(str(e)) from None
    for number, item in enumerate(data["items"], start=1):
        if item.get("id") is None:
            raise ReportError(f"{where}: item {number}: no `id`")
        if not isinstance(item.get("passed"), bool) and not isinstance(item.get("verdict"), str):
            raise ReportError(f"{where}: item {number}: neither `passed` nor `verdict`")
    return Run(where, data.get("summary") or {}, tuple(data["items"]), data.get("run") or {})


# --- the comparison -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One summary figure of both runs: a fraction (accuracy) or a score; None where absent."""

    name: str
    a: float | None
    b: float | None
    a_counts: tuple[int, int] | None = None  # (passed, judged), when the figure is a ratio of cases
    b_counts: tuple[int, int] | None = None
    percent: bool = True

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a


@dataclass(frozen=True)
class Bucket:
    """One hardness level, tag or database in both runs: (passed, judged), None when absent."""

    kind: str
    name: str
    a: tuple[int, int] | None
    b: tuple[int, int] | None

    @property
    def accuracies(self) -> tuple[float | None, float | None]:
        return _fraction(self.a), _fraction(self.b)

    @property
    def delta(self) -> float | None:
        a, b = self.accuracies
        return None if a is None or b is None else b - a


@dataclass(frozen=True)
class Flip:
    """A case judged in both runs that passed in one only."""

    label: str  # file::id
    question: str | None
    a: Mapping[str, Any]  # the items as reported
    b: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        def side(item: Mapping[str, Any]) -> dict[str, Any]:
            return {"verdict": item.get("verdict"), "passed": _passed(item), "reason": item.get("reason"),
                    "predicted": item.get("predicted")}
        return {"case": self.label, "id": self.a.get("id"), "question": self.question, "a": side(self.a), "b": side(self.b)}


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    figures: tuple[Figure, ...]
    buckets: tuple[Bucket, ...]
    matched_by: str  # "nodeid", "id", or "" (nothing paired)
    paired: int  # cases judged in both runs
    passed_a: int  # of the paired cases
    passed_b: int
    worse: tuple[Flip, ...]  # passed in A, fails in B
    better: tuple[Flip, ...]  # failed in A, passes in B
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    unjudged: tuple[str, ...]  # in both runs, a gold_error in one of them
    warnings: tuple[str, ...]

    @functools.cached_property
    def p_value(self) -> float:
        """Computed once: the text, Markdown, HTML and JSON renderings all read it."""
        return mcnemar_exact(len(self.worse), len(self.better))

    @property
    def significant(self) -> bool:
        return is_significant(self.p_value)

    def to_json(self) -> dict[str, Any]:
        return {
            "a": {"path": self.a.path, "run": dict(self.a.run)},
            "b": {"path": self.b.path, "run": dict(self.b.run)},
            "figures": [{"name": f.name, "a": f.a, "b": f.b, "difference": f.delta,
                         "a_counts": f.a_counts, "b_counts": f.b_counts} for f in self.figures],
            "buckets": [{"kind": k.kind, "name": k.name, "a": k.a, "b": k.b, "difference": k.delta} for k in self.buckets],
            "matched_by": self.matched_by,
            "paired": self.paired,
            "passed_a": self.passed_a,
            "passed_b": self.passed_b,
            "worse": [f.to_json() for f in self.worse],
            "better": [f.to_json() for f in self.better],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
            "unjudged": list(self.unjudged),
            "mcnemar": {"b": len(self.worse), "c": len(self.better)},
            "p_value": self.p_value,
            "significant": self.significant,
            "warnings": list(self.warnings),
        }


def compare_reports(a: Run, b: Run) -> Comparison:
    """Run B against run A (A is the reference: "worse" means passed in A, fails in B)."""
    matched_by, pairs, only_a, only_b = _pair(a.items, b.items)
    worse, better, unjudged = [], [], []
    paired = passed_a = passed_b = 0
    for label, item_a, item_b in pairs:
        if GOLD_ERROR in (item_a.get("verdict"), item_b.get("verdict")):
            unjudged.append(label)
            continue
        paired += 1
        was, now = _passed(item_a), _passed(item_b)
        passed_a += was
        passed_b += now
        if was != now:
            flip = Flip(label, item_b.get("question") or item_a.get("question"), item_a, item_b)
            (worse if was else better).append(flip)
    warnings = _differences(a, b)
    if matched_by == "id":
        warnings.append("no case file is in both runs: cases paired by their id alone")
    elif not matched_by and a.items and b.items:
        warnings.append("no case of A is in B (by node id, or by id): nothing to pair")
    return Comparison(
        a=a, b=b, figures=tuple(_figures(a, b)), buckets=tuple(_buckets(a, b)), matched_by=matched_by,
        paired=paired, passed_a=passed_a, passed_b=passed_b, worse=tuple(worse), better=tuple(better),
        only_a=tuple(only_a), only_b=tuple(only_b), unjudged=tuple(unjudged), warnings=tuple(warnings),
    )


def compare_files(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> Comparison:
    return compare_reports(read_run(a), read_run(b))


def _passed(item: Mapping[str, Any]) -> bool:
    passed = item.get("passed")
    return passed if isinstance(passed, bool) else item.get("verdict") == Verdict.PASS.value


def _label(item: Mapping[str, Any]) -> str:
    return str(item.get("nodeid") or f"{item.get('file') or ''}::{item.get('id')}")


def _pair(items_a: Sequence[Mapping[str, Any]], items_b: Sequence[Mapping[str, Any]]) -> tuple[
        str, list[tuple[str, Mapping[str, Any], Mapping[str, Any]]], list[str], list[str]]:
    """(how, [(label, item A, item B)] in A's order, labels only in A, labels only in B)."""
    for how, key in (("nodeid", _label), ("id", lambda item: str(item.get("id")))):
        keyed_a = {key(item): item for item in items_a}
        keyed_b = {key(item): item for item in items_b}
        if len(keyed_a) < len(items_a) or len(keyed_b) < len(items_b):
            continue  # not unique: this key cannot pair (a case in two shards' reports, ids of two files)
        common = keyed_a.keys() & keyed_b.keys()
        if common:
            pairs = [(_label(keyed_b[k]) if how == "nodeid" else _pair_label(keyed_a[k], keyed_b[k]), keyed_a[k], keyed_b[k])
                     for k in keyed_a if k in common]
            return (how, pairs, [_label(keyed_a[k]) for k in keyed_a if k not in common],
                    [_label(keyed_b[k]) for k in keyed_b if k not in common])
    return "", [], [_label(i) for i in items_a], [_label(i) for i in items_b]


def _pair_label(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    return _label(a) if _label(a) == _label(b) else f"{a.get('id')} ({a.get('file')} / {b.get('file')})"


def _counts(bucket: Any, passed_key: str = "passed") -> tuple[int, int] | None:
    """(passed, judged) of a summary bucket; judged leaves out gold errors, as the accuracy does."""
    if not isinstance(bucket, Mapping):
        return None
    passed, total, errors = bucket.get(passed_key), bucket.get("total"), bucket.get("errors") or 0
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (passed, total, errors)):
        return None
    return passed, total - errors


def _fraction(counts: tuple[int, int] | None) -> float | None:
    return counts[0] / counts[1] if counts and counts[1] > 0 else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _figures(a: Run, b: Run) -> list[Figure]:
    """The accuracy figures either run has: overall, own databases alone, strict, exact match, and
    term selection's macro scores."""
    def overall(run: Run) -> tuple[int, int] | None:
        return _counts(run.summary) or _item_counts(run.items)

    def own(run: Run) -> tuple[int, int] | None:
        counts = _counts(run.summary, "single_db_passed")
        return counts if run.summary.get("neighbours") else None  # without neighbours it is the overall figure

    def strict(run: Run) -> tuple[int, int] | None:
        counts, fragile, sides = _counts(run.summary), run.summary.get("fragile"), run.summary.get("fragile_by_side")
        if counts is None or not run.summary.get("neighbours") or not isinstance(fragile, int):
            return None
        if isinstance(sides, dict) and all(isinstance(sides.get(k), int) for k in ("prediction", "gold", "both")) \
                and sum(sides[k] for k in ("prediction", "gold", "both")) == fragile:
            fragile = sides["prediction"] + sides["both"]  # a fragile gold fails no prediction (judge/fragile_side.py)
        return counts[0] - fragile, counts[1]

    def exact(run: Run) -> tuple[int, int] | None:
        passed, total = run.summary.get("exact_match_passed"), run.summary.get("exact_match_total")
        return (passed, total) if isinstance(passed, int) and isinstance(total, int) and total else None

    def neighbours_named(run: Run) -> bool:
        return bool(run.summary.get("neighbours"))

    name = "execution accuracy" + (" (with neighbour databases)" if neighbours_named(a) or neighbours_named(b) else "")
    figures = []
    for title, counts_of in ((name, overall), ("one-database execution accuracy", own),
                             ("strict (fragile passes fail)", strict), ("exact set match", exact)):
        ca, cb = counts_of(a), counts_of(b)
        if ca is not None or cb is not None:
            figures.append(Figure(title, _fraction(ca), _fraction(cb), ca, cb))
    if not any(f.name == "exact set match" for f in figures):  # a report without the counts
        ea, eb = _number(a.summary.get("exact_match")), _number(b.summary.get("exact_match"))
        if ea is not None or eb is not None:
            figures.append(Figure("exact set match", ea, eb))
    terms_a, terms_b = a.summary.get("term_selection"), b.summary.get("term_selection")
    for key in ("macro_precision", "macro_recall"):
        ta = _number(terms_a.get(key)) if isinstance(terms_a, Mapping) else None
        tb = _number(terms_b.get(key)) if isinstance(terms_b, Mapping) else None
        if ta is not None or tb is not None:
            figures.append(Figure(f"term selection {key.replace('_', ' ')}", ta, tb, percent=False))
    return figures


def _item_counts(items: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """(passed, judged) from the items, for a report whose summary lacks the counts."""
    judged = [i for i in items if i.get("verdict") != GOLD_ERROR and i.get("kind", "sql") == "sql"]
    return (sum(_passed(i) for i in judged), len(judged)) if judged else None


def _buckets(a: Run, b: Run) -> list[Bucket]:
    """Hardness levels in their order; tags and databases with the largest change first."""
    out = []
    for kind, key in (("hardness", "by_hardness"), ("tag", "by_tag"), ("database", "by_database")):
        found_a, found_b = a.summary.get(key), b.summary.get(key)
        found_a = found_a if isinstance(found_a, Mapping) else {}
        found_b = found_b if isinstance(found_b, Mapping) else {}
        rows = [Bucket(kind, str(name), _counts(found_a.get(name)), _counts(found_b.get(name)))
                for name in dict.fromkeys([*found_a, *found_b])]
        if kind == "hardness":
            rows.sort(key=lambda r: hardness_sort_key(r.name))
        else:
            rows.sort(key=lambda r: (r.delta is None, -abs(r.delta or 0.0), r.name))
        out += rows
    return out


def _differences(a: Run, b: Run) -> list[str]:
    """Options that make the two runs' figures mean different things (neighbours, compat mode...)."""
    options_a, options_b = a.run.get("options") or {}, b.run.get("options") or {}
    if not isinstance(options_a, Mapping) or not isinstance(options_b, Mapping):
        return []
    ignored = {"predictions", "shards", "concurrency", "baseline"}  # differ by design, or change no verdict
    differing = [key for key in dict.fromkeys([*options_a, *options_b])
                 if key not in ignored and options_a.get(key) != options_b.get(key)]
    if not differing:
        return []
    listed = ", ".join(f"{key} {_short(options_a.get(key), 30)} / {_short(options_b.get(key), 30)}" for key in differing)
    return [f"the runs differ in options ({listed}): their figures may not be comparable"]


# --- text ---------------------------------------------------------------------------------------


def _short(value: Any, limit: int) -> str:
    """One line of escaped text, cut with a visible `…` (a value can be megabytes)."""
    if value is None:
        return ""
    text = " ".join(escaped(str(value)[: 4 * limit]).split())
    return text if len(text) <= limit and len(str(value)) <= 4 * limit else text[: limit - 1] + "…"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _value(figure: Figure, side: str) -> str:
    value = figure.a if side == "a" else figure.b
    counts = figure.a_counts if side == "a" else figure.b_counts
    if not figure.percent:
        return "n/a" if value is None else f"{value:.3f}"
    return f"{counts[0]}/{counts[1]} = {_percent(value)}" if counts and counts[1] else _percent(value)


def _delta(delta: float | None, percent: bool = True) -> str:
    if delta is None:
        return ""
    if not percent:
        return f"{delta:+.3f}"
    return f"{100 * delta:+.1f} pts"


def _bucket_value(counts: tuple[int, int] | None) -> str:
    if counts is None:
        return "-"
    return f"{counts[0]}/{counts[1]} = {_percent(_fraction(counts))}" if counts[1] else f"{counts[0]}/0"


def mcnemar_sentence(c: Comparison) -> str:
    if not c.paired:
        return "McNemar: no case was judged in both runs"
    counts = f"{len(c.worse)} worse in B, {len(c.better)} better"
    if not c.worse and not c.better:
        return f"McNemar exact p = 1 over {c.paired} paired cases: no case changed its verdict"
    words = "distinguishable" if c.significant else "not distinguishable"
    return (f"McNemar exact p = {c.p_value:.3g} over {c.paired} paired cases ({counts}): "
            f"the difference is {words} from noise at the {SIGNIFICANCE:g} level")


def _run_line(letter: str, run: Run) -> str:
    info = run.run
    parts = [_short(run.path, 80)]
    if info.get("label"):
        parts.append(f"label {_short(info['label'], 40)}")
    if info.get("started"):
        parts.append(f"started {_short(info['started'], 30)}")
    if info.get("git_commit"):
        parts.append(f"commit {_short(info['git_commit'], 12)}")
    if info.get("complete") is False:
        parts.append("INTERRUPTED (not every case ran)")
    return f"{letter}: " + ", ".join(parts)


def render_text(c: Comparison, *, everything: bool = False) -> list[str]:
    """The terminal's lines: figures first, then the flips, long lists cut unless `everything`."""
    lines = [_run_line("A", c.a), _run_line("B", c.b)]
    lines += [f"warning: {w}" for w in c.warnings]
    width = max([len(f.name) for f in c.figures] + [18])
    column = max([len(_value(f, s)) for f in c.figures for s in "ab"] + [6])
    lines.append(f"{'':<{width}}  {'A':>{column}}  {'B':>{column}}  {'B - A':>10}")
    for f in c.figures:
        lines.append(f"{f.name:<{width}}  {_value(f, 'a'):>{column}}  {_value(f, 'b'):>{column}}  {_delta(f.delta, f.percent):>10}")
    if c.paired:
        lines.append(f"paired: {c.paired} cases judged in both runs: A {_bucket_value((c.passed_a, c.paired))}, "
                     f"B {_bucket_value((c.passed_b, c.paired))} ({_delta((c.passed_b - c.passed_a) / c.paired)})")
    lines.append(mcnemar_sentence(c))
    for kind in ("hardness", "tag", "database"):
        rows = [b for b in c.buckets if b.kind == kind]
        if not rows:
            continue
        shown = rows if everything or kind == "hardness" else rows[:SHOWN_BUCKETS]
        order = "" if kind == "hardness" else " (largest changes first)"
        lines.append(f"by {kind}{order}:")
        name_width = min(max(len(_short(b.name, 30)) for b in shown), 30)
        for b in shown:
            lines.append(f"  {_short(b.name, 30):<{name_width}}  {_bucket_value(b.a):>18}  {_bucket_value(b.b):>18}  {_delta(b.delta):>10}")
        if len(rows) > len(shown):
            lines.append(f"  ... {len(rows) - len(shown)} more (--all shows all)")
    lines += _flip_lines("passed in A, fails in B", c.worse, everything)
    lines += _flip_lines("failed in A, passes in B", c.better, everything)
    for title, labels in (("only in A", c.only_a), ("only in B", c.only_b),
                          ("not judged in both (a gold_error; not paired)", c.unjudged)):
        if labels:
            shown_labels = labels if everything else labels[:SHOWN_FLIPS]
            lines.append(f"{title} ({len(labels)}): " + ", ".join(_short(label, 80) for label in shown_labels)
                         + (f" ... {len(labels) - len(shown_labels)} more" if len(labels) > len(shown_labels) else ""))
    return lines


def _flip_lines(title: str, flips: Sequence[Flip], everything: bool) -> list[str]:
    if not flips:
        return []
    shown = flips if everything else flips[:SHOWN_FLIPS]
    width = MAX_SQL if everything else SHOWN_SQL
    lines = [f"{title} ({len(flips)}):"]
    for flip in shown:
        lines.append(f"  {_short(flip.label, 100)}: {_verdict(flip.a)} -> {_verdict(flip.b)}")
        lines.append(f"    A: {_short(flip.a.get('predicted'), width)}")
        lines.append(f"    B: {_short(flip.b.get('predicted'), width)}")
    if len(flips) > len(shown):
        lines.append(f"  ... {len(flips) - len(shown)} more (-v or --all lists them)")
    return lines


def _verdict(item: Mapping[str, Any]) -> str:
    verdict = _short(item.get("verdict") or ("pass" if _passed(item) else "fail"), 30)
    reason = item.get("reason")
    return f"{verdict} ({_short(reason, 60)})" if reason and not _passed(item) else verdict


# --- Markdown -----------------------------------------------------------------------------------


def _cell(value: Any, limit: int = 160) -> str:
    """Text safe in a Markdown table cell: one line, pipes escaped, no raw HTML."""
    return _short(value, limit).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")


def _code(value: Any, limit: int = MD_SQL) -> str:
    text = _short(value, limit).replace("|", "\\|")
    if not text:
        return ""
    fence = "`"
    while fence in text:
        fence += "`"
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def render_markdown(c: Comparison) -> str:
    """A PR comment: the figures table, McNemar, buckets and flips (long tables folded)."""
    blocks = [f"### pytest-nl2sql: {_cell(c.b.name, 60)} (B) against {_cell(c.a.name, 60)} (A)",
              "\n".join(f"- {_cell(line, 300)}" for line in (_run_line("A", c.a), _run_line("B", c.b), *c.warnings))]
    rows = ["| figure | A | B | B − A |", "|---|--:|--:|--:|"]
    rows += [f"| {_cell(f.name)} | {_value(f, 'a')} | {_value(f, 'b')} | {_delta(f.delta, f.percent)} |" for f in c.figures]
    if c.paired:
        rows.append(f"| paired cases ({c.paired}, judged in both) | {_bucket_value((c.passed_a, c.paired))} | "
                    f"{_bucket_value((c.passed_b, c.paired))} | {_delta((c.passed_b - c.passed_a) / c.paired)} |")
    blocks += ["\n".join(rows), f"**{_cell(mcnemar_sentence(c), 300)}.**"]
    for kind in ("hardness", "tag", "database"):
        found = [b for b in c.buckets if b.kind == kind]
        if not found:
            continue
        table = [f"| {kind} | A | B | B − A |", "|---|--:|--:|--:|"]
        table += [f"| {_cell(b.name)} | {_bucket_value(b.a)} | {_bucket_value(b.b)} | {_delta(b.delta)} |" for b in found[:MAX_MD_ROWS]]
        if len(found) > MAX_MD_ROWS:
            table.append(f"\n… and {len(found) - MAX_MD_ROWS} more (see `--nl2sql-report=json`).")
        order = "" if kind == "hardness" else ", largest changes first"
        body = "\n".join(table)
        blocks.append(f"#### By {kind}\n\n{body}" if kind == "hardness" and len(found) <= 12
                      else f"<details><summary>By {kind} ({len(found)}{order})</summary>\n\n{body}\n\n</details>")
    for title, flips in (("Passed in A, fail in B", c.worse), ("Failed in A, pass in B", c.better)):
        if not flips:
            continue
        table = ["| case | A | B | A predicted | B predicted |", "|---|---|---|---|---|"]
        table += [f"| {_code(f.label, 100)} | {_cell(_verdict(f.a))} | {_cell(_verdict(f.b))} | "
                  f"{_code(f.a.get('predicted'))} | {_code(f.b.get('predicted'))} |" for f in flips[:MAX_MD_FLIPS]]
        if len(flips) > MAX_MD_FLIPS:
            table.append(f"\n… and {len(flips) - MAX_MD_FLIPS} more (see `--nl2sql-report=html` or `json`).")
        body = "\n".join(table)
        blocks.append(f"<details><summary>{title} ({len(flips)})</summary>\n\n{body}\n\n</details>")
    for title, labels in (("Only in A", c.only_a), ("Only in B", c.only_b), ("Not judged in one run (gold_error)", c.unjudged)):
        if labels:
            listed = ", ".join(_code(label, 100) for label in labels[:MAX_MD_ROWS])
            more = f" and {len(labels) - MAX_MD_ROWS} more" if len(labels) > MAX_MD_ROWS else ""
            blocks.append(f"**{title} ({len(labels)}):** {listed}{more}")
    return "\n\n".join(block for block in blocks if block) + "\n"


# --- HTML ---------------------------------------------------------------------------------------


_STYLE = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:3px 8px;vertical-align:top}
th{background:#f0f0f0;text-align:left}td.n{text-align:right;white-space:nowrap}
td.up{color:#060}td.down{color:#a00}code{font:12px monospace;white-space:pre-wrap;word-break:break-word}
.warn{color:#a60}summary{cursor:pointer;font-weight:bold;margin:.5em 0}"""
_POLICY = "default-src 'none'; style-src 'unsafe-inline'"  # the page may load nothing, run nothing


def _h(value: Any, limit: int = MAX_SQL) -> str:
    """Escaped text: control characters shown as escapes, then HTML-escaped (quotes too)."""
    if value is None:
        return ""
    text = escaped(str(value)[:limit])
    return html.escape(text + ("…" if len(str(value)) > limit else ""), quote=True)


def _td_delta(delta: float | None, percent: bool = True) -> str:
    css = "n" + (" up" if delta and delta > 0 else " down" if delta and delta < 0 else "")
    return f'<td class="{css}">{_h(_delta(delta, percent))}</td>'


def _table(headers: Sequence[str], rows: Sequence[str]) -> str:
    head = "".join(f"<th>{_h(h)}</th>" for h in headers)
    return f"<table><tr>{head}</tr>\n" + "\n".join(rows) + "\n</table>"


def render_html(c: Comparison) -> str:
    """One self-contained page (no script, no stylesheet or image fetched): every text escaped."""
    parts = [f"<h1>{_h(c.b.name, 80)} (B) against {_h(c.a.name, 80)} (A)</h1>",
             "<ul>" + "".join(f"<li>{_h(line, 400)}</li>" for line in (_run_line("A", c.a), _run_line("B", c.b))) + "</ul>"]
    parts += [f'<p class="warn">warning: {_h(w, 400)}</p>' for w in c.warnings]
    rows = [f"<tr><td>{_h(f.name)}</td><td class=n>{_h(_value(f, 'a'))}</td><td class=n>{_h(_value(f, 'b'))}</td>"
            f"{_td_delta(f.delta, f.percent)}</tr>" for f in c.figures]
    if c.paired:
        rows.append(f"<tr><td>paired cases ({c.paired}, judged in both)</td><td class=n>{_h(_bucket_value((c.passed_a, c.paired)))}</td>"
                    f"<td class=n>{_h(_bucket_value((c.passed_b, c.paired)))}</td>{_td_delta((c.passed_b - c.passed_a) / c.paired)}</tr>")
    parts += [_table(["figure", "A", "B", "B − A"], rows), f"<p><b>{_h(mcnemar_sentence(c), 400)}.</b></p>"]
    for kind in ("hardness", "tag", "database"):
        found = [b for b in c.buckets if b.kind == kind]
        if found:
            rows = [f"<tr><td>{_h(b.name, 200)}</td><td class=n>{_h(_bucket_value(b.a))}</td><td class=n>{_h(_bucket_value(b.b))}</td>"
                    f"{_td_delta(b.delta)}</tr>" for b in found]
            opened = " open" if kind == "hardness" else ""
            parts.append(f"<details{opened}><summary>By {kind} ({len(found)})</summary>{_table([kind, 'A', 'B', 'B − A'], rows)}</details>")
    for title, flips in (("Passed in A, fail in B", c.worse), ("Failed in A, pass in B", c.better)):
        if flips:
            rows = [f"<tr><td><code>{_h(f.label, 300)}</code><br>{_h(f.question, 400)}</td><td>{_h(_verdict(f.a))}</td>"
                    f"<td>{_h(_verdict(f.b))}</td><td><code>{_h(f.a.get('predicted'))}</code></td>"
                    f"<td><code>{_h(f.b.get('predicted'))}</code></td></tr>" for f in flips]
            parts.append(f"<details open><summary>{_h(title)} ({len(flips)})</summary>"
                         f"{_table(['case', 'A', 'B', 'A predicted', 'B predicted'], rows)}</details>")
    for title, labels in (("Only in A", c.only_a), ("Only in B", c.only_b), ("Not judged in one run (gold_error)", c.unjudged)):
        if labels:
            items = "".join(f"<li><code>{_h(label, 300)}</code></li>" for label in labels)
            parts.append(f"<details><summary>{_h(title)} ({len(labels)})</summary><ul>{items}</ul></details>")
    title = _h(f"nl2sql compare: {c.b.name} against {c.a.name}", 200)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}"><title>{title}</title>'
            f"<style>{_STYLE}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


def render_json(c: Comparison) -> str:
    return dumps(c.to_json(), indent=1, ensure_ascii=False, default=str) + "\n"  # NaN and infinities as null


RENDERERS: Mapping[str, Callable[[Comparison], str]] = {"md": render_markdown, "html": render_html, "json": render_json}
