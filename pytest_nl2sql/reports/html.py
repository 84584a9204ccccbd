"""`--nl2sql-report=html[:PATH]`: one self-contained page to explore a run in a browser.

Why this shape:
- The page fetches nothing (no CDN, font or image): it opens from a CI artifact, offline, and a
  Content-Security-Policy with `default-src 'none'` says so to the browser too. The one inline
  script and the one style sheet are allowed by their SHA-256 only, so even text that escaped
  escaping could not run.
- What reads without a script is rendered here, in Python: the run, the summary figures, the
  charts (inline SVG) and the bucket tables. The cases are embedded once as a JSON blob and the
  table is built by the script, a page of rows at a time, so 10,000 cases open in about a third
  of a second (Spider's 1,034 in a tenth; see the README).
- Every text from cases, predictions and databases is untrusted. Here it is HTML-escaped; in the
  JSON blob `<`, `>`, `&`, U+2028 and U+2029 are written as `\\uXXXX` (so `</script>` cannot close
  the blob); the script puts text into the page with `textContent` only, never as markup. Control
  characters and bidi overrides are shown as escapes (`shown.escaped`), as in the terminal.

The page is rendered from the JSON report's dict (with `history` when `--nl2sql-history` is
given, read as `md.trend` reads it), so it never disagrees with the other reports.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pytest_nl2sql.files import atomic_write_text
from pytest_nl2sql.gate.run import PER_CASE
from pytest_nl2sql.metrics.summary import accuracy_interval, accuracy_name
from pytest_nl2sql.reports import ReportWriteError, register
from pytest_nl2sql.reports.md import Trend, trend
from pytest_nl2sql.shown import escaped
from pytest_nl2sql.vocab import HARDNESS_ORDER, NearMiss, Verdict, hardness_sort_key

ENCODING_ERRORS = "backslashreplace"  # a lone surrogate as the text `\ud800`, not a crash
MAX_TEXT = 20_000  # characters of one text kept in the page (a prediction can be megabytes); the JSON report keeps it whole
MAX_DEPTH = 12  # nesting kept in the page; deeper values are shown as text
MAX_TREND_RUNS = 50  # points of the trend chart: the most recent runs of the history
FOLD_BUCKETS = 12  # a tag or database table longer than this starts folded
PAGE_ROWS = 200  # table rows the script builds at first, and per "show more"

# The item fields the page uses; the rest (partial scores, fingerprints, timings) stays in the
# JSON report, so the page stays small.
ITEM_KEYS = (
    "id", "nodeid", "file", "kind", "question", "database", "ran_on", "hardness", "tags",
    "verdict", "passed", "reason", "near_miss", "baseline", "exact_match", "gold", "predicted",
    "predicted_result", "predicted_malloy", "raw_prediction", "diff", "neighbours",
    "gold_warnings", "soft_scores", "term_selection", "latency", "attempts", "usage", "repeats", "gold_audit",
)

NEAR_MISS_WORDS = {  # the contract's meanings, said in the failure's explanation
    NearMiss.ORDER_ONLY.value: "the right rows in another order",
    NearMiss.DUPLICATES.value: "the same rows with duplicates lost or added",
    NearMiss.EXTRA_COLUMNS.value: "every gold column present, plus others",
    NearMiss.MISSING_COLUMNS.value: "some gold columns absent, the rest right",
    NearMiss.FLOAT_TOLERANCE.value: "numbers within 1e-4 relative",
    NearMiss.NULL_VS_ZERO_OR_EMPTY.value: "NULL against 0 or ''",
    NearMiss.CASE_OR_WHITESPACE.value: "strings that differ only in case or outer whitespace",
    NearMiss.LIMIT_PREFIX.value: "one result a prefix of the other, under an ordered gold",
}

# C0/C1 controls but newline and tab, bidi overrides, lone surrogates: what `escaped` rewrites
_UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# in JSON that sits inside <script>: nothing that could end the element or start a comment
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


# --------------------------------------------------------------------------- escaping


def visible(text: str) -> str:
    """`text` with control characters and bidi overrides written as escapes (`shown.escaped`);
    the regular expression spares the per-character loop for the usual text."""
    return escaped(text) if _UNSHOWN.search(text) else text


def esc(value: Any) -> str:
    """Any value as HTML text (element content or a quoted attribute value)."""
    if isinstance(value, Enum):
        value = value.value
    return html.escape(visible("" if value is None else str(value)), quote=True)


def script_json(value: Any) -> str:
    """`value` as JSON that is safe inside a `<script>` element: `<`, `>`, `&`, U+2028 and U+2029
    occur only inside JSON strings, where their `\\uXXXX` escapes mean the same."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _SCRIPT_UNSAFE_RE.sub(lambda m: _SCRIPT_UNSAFE[m.group()], text)


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return visible(text)
    return visible(text[:MAX_TEXT]) + f"… [cut: {len(text):,} characters in all; the JSON report has them]"


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as the page's JSON holds it: texts cut and made visible, non-finite numbers as
    text (JSON.parse rejects NaN), enums by their spelling, anything else as text."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, str):
        return _cut(value)
    if depth >= MAX_DEPTH:
        return _cut(json.dumps(value, ensure_ascii=False, default=str))
    if isinstance(value, Mapping):
        return {_cut(str(k)): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    return _cut(str(value))


def _slim(item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of an item the page shows; nulls, empty lists and a node id that is just
    `file::id` are left out (the script knows their defaults)."""
    kept: dict[str, Any] = {}
    for key in ITEM_KEYS:
        value = item.get(key)
        if value is None or value == [] or value == ():
            continue
        if key == "soft_scores" and isinstance(value, Mapping):
            value = {k: round(v, 3) if isinstance(v, float) and math.isfinite(v) else v for k, v in value.items()}
        elif key == "latency" and isinstance(value, float) and math.isfinite(value):
            value = round(value, 4)
        elif key == "attempts" and value in (0, 1):  # asked once: nothing to say
            continue
        elif key == "gold_audit" and not (isinstance(value, Mapping) and value.get("suspect")):
            continue  # audited, nothing found
        kept[key] = _plain(value)
    if kept.get("nodeid") == f"{kept.get('file')}::{kept.get('id')}":
        del kept["nodeid"]
    traceback = (item.get("extra") or {}).get("traceback") if isinstance(item.get("extra"), Mapping) else None
    if traceback:
        kept["traceback"] = _plain(traceback)
    return kept


# --------------------------------------------------------------------------- formatting


def _percent(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{100 * value:.1f}%"


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{value:.3f}"


def _seconds(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{value:.3g} s"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _counts(bucket: Mapping[str, Any]) -> tuple[int, int]:
    """(passed, judged): judged leaves out gold errors, as the accuracy does."""
    return _count(bucket.get("passed")), _count(bucket.get("total")) - _count(bucket.get("errors"))


def _interval_text(bucket: Mapping[str, Any]) -> str:
    bounds = accuracy_interval(bucket)
    return f"{_percent(bounds[0])}–{_percent(bounds[1])}" if bounds else ""


def _when(value: Any) -> str:
    """An ISO 8601 time as `YYYY-MM-DD HH:MM:SS UTC` (one without an offset is taken as UTC)."""
    if not isinstance(value, str):
        return "" if value is None else str(value)
    try:
        moment = _dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(_dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _filter_link(key: str, value: str, text: str | None = None) -> str:
    """A link that filters the table of cases (the script reads the page's #fragment)."""
    return f'<a href="#{key}={esc(quote(value, safe=""))}">{esc(value if text is None else text)}</a>'


# --------------------------------------------------------------------------- sections


def _run_section(run: Mapping[str, Any] | None, summary: Mapping[str, Any]) -> str:
    """Which model and run the page describes: a report travels without its command line."""
    run = run if isinstance(run, Mapping) else {}
    engine = run.get("engine") or summary.get("engine")
    facts = [
        ("label", run.get("label") or "(none: --nl2sql-label names the run)"),
        ("started", _when(run.get("started")) if run.get("started") else "n/a"),
        ("duration", f"{run['duration_s']:.1f} s" if isinstance(run.get("duration_s"), (int, float)) else "n/a"),
        ("commit", run.get("git_commit") or "n/a"),
        ("engine", engine if engine not in (None, PER_CASE) else "per case (each case's own database)"),
    ]
    if run.get("shards"):
        facts.append(("shards", run["shards"]))
    rows = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in facts)
    out = [f'<section id="run"><dl class="facts">{rows}</dl>']
    if run.get("complete") is False:
        out.append('<p class="warn"><strong>Interrupted run</strong>: not every case ran; the figures count '
                   "only the cases judged before it stopped.</p>")
    options = run.get("options")
    if isinstance(options, Mapping) and options:
        listed = "".join(f"<li><code>{esc(k)}</code> = <code>{esc(json.dumps(v, default=str))}</code></li>"
                         for k, v in options.items())
        out.append(f"<details><summary>options of the run</summary><ul class=\"options\">{listed}</ul></details>")
    out.append("</section>")
    return "".join(out)


def _card(title: str, figure: str, *notes: str, cls: str = "") -> str:
    body = "".join(f"<p>{note}</p>" for note in notes if note)
    return f'<div class="card {cls}"><h3>{esc(title)}</h3><p class="figure">{figure}</p>{body}</div>'


def _summary_section(summary: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> str:
    passed, judged = _counts(summary)
    interval = _interval_text(summary)
    cards = [_card(
        accuracy_name(summary), esc(_percent(summary.get("accuracy"))),
        esc(f"{passed} / {judged} judged cases") + (esc(f" · 95% CI {interval}") if interval else ""),
        cls="headline",
    )]
    reviewed = summary.get("reviewed") if isinstance(summary.get("reviewed"), Mapping) else {}
    if reviewed or summary.get("stale_reviews"):  # a reviewed figure never passes for a plain one
        decisions = ", ".join(f"{decision} {_count(count)}" for decision, count in reviewed.items()) or "none"
        cards.append(_card(
            "before reviews", esc(_percent(summary.get("accuracy_before_reviews"))),
            esc(f"the accuracy above is after the decisions of --nl2sql-reviews ({decisions} applied; "
                f"{_count(summary.get('stale_reviews'))} stale, not applied)"),
        ))
    if summary.get("neighbours") and summary.get("single_db_accuracy") is not None:
        cards.append(_card(
            "one-database execution accuracy", esc(_percent(summary.get("single_db_accuracy"))),
            esc("the cases' own databases alone, no neighbour databases; not the official Spider figure, which ")
            + "<code>--nl2sql-compat=spider</code> gives",
            esc(f"{_count(summary['neighbours'].get('caught'))} failed only on a neighbour database")
            if isinstance(summary["neighbours"], Mapping) else "",
        ))
    if summary.get("strict_accuracy") is not None and summary.get("neighbours"):
        sides = summary.get("fragile_by_side") if isinstance(summary.get("fragile_by_side"), Mapping) else {}
        by_side = ("; fragile side: " + ", ".join(f"{side} {_count(sides.get(side))}" for side in ("prediction", "both", "gold"))
                   + " (the gold's alone are not counted as failures)") if sides else ""
        cards.append(_card(
            "strict (fragile passes counted as failures)", esc(_percent(summary.get("strict_accuracy"))),
            _filter_link("v", "fragile", f"{_count(summary.get('fragile'))} fragile pass(es)")
            + esc(": right on every database, wrong where the data shows what the database never does" + by_side),
        ))
    by_verdict = summary.get("by_verdict")
    if not isinstance(by_verdict, Mapping):  # a report from elsewhere: counted from its items
        by_verdict = _verdict_counts(items)
    errors = _count(summary.get("errors"))
    cards.append(_card(
        "errors", esc(errors), _filter_link("v", Verdict.GOLD_ERROR.value) + ": broken cases, outside the accuracy",
        cls="bad" if errors else "",
    ))
    unanswered = _count(summary.get("predictor_errors", by_verdict.get(Verdict.PREDICTOR_ERROR.value)))
    if unanswered:  # an outage is not a model that answers worse: kept apart from wrong answers
        answered = summary.get("answered_accuracy")
        cards.append(_card(
            "predictor errors", esc(unanswered),
            _filter_link("v", Verdict.PREDICTOR_ERROR.value) + ": the model could not be asked (it raised, after retries); "
            "failures in the accuracy, not wrong answers",
            esc(f"accuracy over the answered cases: {_percent(answered)}") if answered is not None else "",
            cls="bad",
        ))
    if summary.get("exact_match") is not None:
        counts = ""
        if isinstance(summary.get("exact_match_total"), int):
            counts = f"{_count(summary.get('exact_match_passed'))} / {summary['exact_match_total']} cases"
        cards.append(_card("exact match (Spider, without values)", esc(_percent(summary["exact_match"])), esc(counts)))
    soft = summary.get("soft_scores")
    if isinstance(soft, Mapping) and soft:
        cards.append(_card(
            "soft scores (means)", esc(f"row F1 {_number(soft.get('row_f1'))}"),
            esc(f"rows: precision {_number(soft.get('row_precision'))}, recall {_number(soft.get('row_recall'))}"),
            esc(f"columns: F1 {_number(soft.get('column_f1'))}, precision {_number(soft.get('column_precision'))}, "
                f"recall {_number(soft.get('column_recall'))}"),
        ))
    terms = summary.get("term_selection")
    if isinstance(terms, Mapping) and terms:
        cards.append(_card(
            "term selection (macro)", esc(f"P {_number(terms.get('macro_precision'))} · R {_number(terms.get('macro_recall'))}"),
            esc(f"{_count(terms.get('passed'))} / {_count(terms.get('total'))} term-selection cases passed")
            if terms.get("total") is not None else "",
        ))
    latency = summary.get("latency")
    if isinstance(latency, Mapping) and latency.get("p50") is not None:
        cards.append(_card(
            "predictor latency", esc(f"p50 {_seconds(latency.get('p50'))}"),
            esc(f"p95 {_seconds(latency.get('p95'))} over {_count(latency.get('count'))} cases"),
        ))
    cards += _model_cards(summary)
    if summary.get("gold_warnings"):
        cards.append(_card("nondeterministic golds", esc(summary["gold_warnings"]),
                           "case(s) whose gold's LIMIT cuts through a tie (see each case's gold warnings)", cls="warn"))
    if summary.get("gold_suspects"):
        cards.append(_card("suspect golds", f'<a href="#suspects">{esc(summary["gold_suspects"])}</a>',
                           "case(s) whose own data speaks against the gold: findings to read, no verdict changed", cls="warn"))
    near = {k: v for k, v in (summary.get("near_miss") or {}).items() if v} if isinstance(summary.get("near_miss"), Mapping) else {}
    near_html = ""
    if near:
        near_html = '<p class="near">near misses: ' + ", ".join(
            f'{_filter_link("q", str(name))} {esc(count)}' for name, count in near.items()) + "</p>"
    return (f'<section id="summary"><h2>Summary</h2><div class="cards">{"".join(cards)}</div>'
            f"{_verdict_bar(by_verdict)}{near_html}{_baseline(summary.get('baseline'))}</section>")


def _model_cards(summary: Mapping[str, Any]) -> list[str]:
    """What the model cost (`usage`) and how steady it is (`pass_at_k`, `consistency` under
    `--nl2sql-repeat`), when the run has them."""
    cards = []
    usage = summary.get("usage")
    if isinstance(usage, Mapping) and usage:
        total = usage.get("total") if isinstance(usage.get("total"), Mapping) else {}
        mean = usage.get("mean") if isinstance(usage.get("mean"), Mapping) else {}
        tokens = [f"{_amount(total.get(k))} {k.replace('_tokens', '')}" for k in ("prompt_tokens", "completion_tokens") if k in total]
        means = [f"{_amount(mean.get(k))} {k.replace('_tokens', '')}" for k in ("prompt_tokens", "completion_tokens", "cost") if k in mean]
        figure = f"cost {_amount(total['cost'])}" if "cost" in total else (" + ".join(tokens) or "n/a")
        cards.append(_card(
            "usage (what the hook reported)", esc(figure),
            esc("tokens: " + ", ".join(tokens)) if tokens and "cost" in total else "",
            esc(f"per case ({_count(usage.get('cases'))} cases): " + ", ".join(means)) if means else "",
        ))
    pass_at = summary.get("pass_at_k")
    if isinstance(pass_at, Mapping) and pass_at:
        ks = sorted(pass_at, key=lambda k: int(k) if str(k).isdigit() else 0)
        shown = [ks[0], ks[-1]] if len(ks) > 1 else ks
        consistency = summary.get("consistency")
        cards.append(_card(
            f"pass@k (k = 1 … {ks[-1]})", esc(" · ".join(f"@{k} {_percent(pass_at[k])}" for k in shown)),
            esc(", ".join(f"@{k} {_percent(pass_at[k])}" for k in ks)) if len(ks) > 2 else "",
            esc(f"consistency {_percent(consistency)}: cases whose answers all got the same verdict")
            if consistency is not None else "",
        ))
    return cards


def _amount(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


def _verdict_counts(items: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        verdict = item.get("verdict")
        verdict = verdict.value if isinstance(verdict, Enum) else str(verdict)
        counts[verdict] = counts.get(verdict, 0) + 1
    order = [v.value for v in Verdict]
    return dict(sorted(counts.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])))


def _verdict_bar(by_verdict: Mapping[str, Any]) -> str:
    """One stacked bar of the cases by verdict; each part filters the table."""
    counts = [(name, _count(n)) for name, n in by_verdict.items() if _count(n)]
    total = sum(n for _, n in counts)
    if not total:
        return ""
    width, x, parts, legend = 1000, 0.0, [], []
    for name, n in counts:
        w = width * n / total
        parts.append(f'<a href="#v={esc(quote(name, safe=""))}"><rect x="{x:.2f}" width="{w:.2f}" height="18" '
                     f'class="v-{esc(name)}"><title>{esc(name)}: {n}</title></rect></a>')
        legend.append(f'<span class="chip v-{esc(name)}"></span>{_filter_link("v", name)} {n}')
        x += w
    return (f'<div class="verdicts"><svg viewBox="0 0 {width} 18" preserveAspectRatio="none" role="img" '
            f'aria-label="cases by verdict">{"".join(parts)}</svg><p>{" · ".join(legend)}</p></div>')


def _baseline(comparison: Any) -> str:
    if not isinstance(comparison, Mapping) or not comparison:
        return ""
    lines = [f"<h3>Compared with the baseline <code>{esc(comparison.get('path', ''))}</code></h3><ul>"]
    if comparison.get("accuracy_before") is not None:
        lines.append(f"<li>accuracy then {esc(_percent(comparison.get('accuracy_before')))}, now "
                     f"{esc(_percent(comparison.get('accuracy_now')))}</li>")
    for key, label in (("regressions", "regression"), ("fixed", "fixed"), ("known_failures", "known_failure")):
        listed = comparison.get(key)
        n = len(listed) if isinstance(listed, list) else _count(listed)
        if n:
            lines.append(f"<li>{_filter_link('b', label, key.replace('_', ' '))}: {n}</li>")
    if comparison.get("p_value") is not None:
        p_value = comparison["p_value"]
        lines.append(f"<li>McNemar exact p = {esc(f'{p_value:.3g}' if isinstance(p_value, (int, float)) else p_value)}</li>")
    return "".join(lines) + "</ul>"


def _bars_svg(rows: Sequence[tuple[str, Mapping[str, Any]]], key: str) -> str:
    """A horizontal bar per bucket (accuracy, its 95% interval as a whisker, passed / judged);
    a bar's label filters the table."""
    label_w, bar_w, right, row_h = 100, 340, 140, 28
    height = row_h * len(rows) + 8
    out = [f'<svg class="bars" viewBox="0 0 {label_w + bar_w + right} {height}" width="{label_w + bar_w + right}" '
           f'role="img" aria-label="accuracy by {esc(key)}">']
    for n, (name, bucket) in enumerate(rows):
        y = 4 + n * row_h
        passed, judged = _counts(bucket)
        accuracy = passed / judged if judged else None
        shown = name if len(name) <= 16 else name[:15] + "…"
        out.append(f'<a href="#{key}={esc(quote(name, safe=""))}"><text x="{label_w - 8}" y="{y + 15}" '
                   f'text-anchor="end">{esc(shown)}<title>{esc(name)}</title></text></a>')
        out.append(f'<rect class="track" x="{label_w}" y="{y + 2}" width="{bar_w}" height="18"/>')
        if accuracy is not None:
            out.append(f'<rect class="fill" x="{label_w}" y="{y + 2}" width="{bar_w * accuracy:.1f}" height="18">'
                       f"<title>{esc(name)}: {esc(_percent(accuracy))}</title></rect>")
        bounds = accuracy_interval(bucket)
        if bounds:
            lo, hi = (label_w + bar_w * max(0.0, min(1.0, b)) for b in bounds)
            mid = y + 11
            out.append(f'<path class="ci" d="M{lo:.1f} {mid}H{hi:.1f}M{lo:.1f} {mid - 5}V{mid + 5}M{hi:.1f} {mid - 5}V{mid + 5}"/>')
        text = f"{_percent(accuracy)}  {passed}/{judged}" if judged else "n/a (nothing judged)"
        out.append(f'<text x="{label_w + bar_w + 8}" y="{y + 15}">{esc(text)}</text>')
    out.append("</svg>")
    return "".join(out)


def _hardness_section(summary: Mapping[str, Any]) -> str:
    buckets = summary.get("by_hardness")
    if not isinstance(buckets, Mapping) or not buckets:
        return ""
    rows = [(str(name), b) for name, b in sorted(buckets.items(), key=lambda kv: hardness_sort_key(kv[0]))
            if isinstance(b, Mapping)]
    return (f'<div class="chart"><h3>{esc(accuracy_name(summary))} by hardness</h3>{_bars_svg(rows, "h")}'
            '<p class="note">Whiskers: the 95% interval (Wilson). A label filters the cases.</p></div>')


TREND_COLOURS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def _trend_section(report: Mapping[str, Any]) -> str:
    shown = trend(report, MAX_TREND_RUNS)
    if shown is None:
        return ""
    notes = ["Dashed: each hardness level."]
    if any(run.current for run in shown.runs):
        notes.append("Ringed: this run.")
    if any(run.complete is False for run in shown.runs):
        notes.append("A red diamond: an interrupted run (its accuracy counts only the cases judged before it stopped).")
    return (f'<div class="chart trend"><h3>Trend over {_runs_phrase(shown)}</h3>{_trend_svg(shown)}'
            f'<p class="note">{esc(" ".join(notes))} A point\'s tooltip names its run.</p>{_trend_table(shown)}</div>')


def _runs_phrase(shown: Trend) -> str:
    n = len(shown.runs)
    return f"the last {n} of {shown.total} runs" if shown.total > n else (f"{n} runs" if n != 1 else "1 run")


def _trend_svg(shown: Trend) -> str:
    """Accuracy (thick) and each hardness level (dashed) over the runs; an interrupted run is a
    red diamond, this run a ring; every point says its run in a tooltip."""
    left, top, plot_w, plot_h, legend_w = 44, 12, 500, 200, 130
    width, height = left + plot_w + legend_w, top + plot_h + 34
    runs = shown.runs
    step = plot_w / max(len(runs) - 1, 1)

    def x(i: int) -> float:
        return left + (i * step if len(runs) > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h * (1 - v)

    out = [f'<svg class="trend" viewBox="0 0 {width} {height}" width="{width}" role="img" aria-label="accuracy over runs">']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<path class="grid" d="M{left} {y(tick):.1f}H{left + plot_w}"/>'
                   f'<text class="axis" x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{int(tick * 100)}%</text>')
    every = max(1, math.ceil(len(runs) / 12))
    for i, run in enumerate(runs):
        if i % every == 0 or i == len(runs) - 1:
            out.append(f'<text class="axis" x="{x(i):.1f}" y="{top + plot_h + 16}" text-anchor="middle">#{run.number}</text>')
    series = [("accuracy", [r.accuracy for r in runs], "#1f3864", True)]
    series += [(name, [r.by_hardness.get(name) for r in runs], TREND_COLOURS[n % len(TREND_COLOURS)], False)
               for n, name in enumerate(shown.hardness)]
    for name, values, colour, main in reversed(series):
        segments, current = [], []
        for i, v in enumerate(values):
            if v is None:
                segments, current = segments + ([current] if current else []), []
            else:
                current.append(f"{x(i):.1f},{y(v):.1f}")
        segments += [current] if current else []
        cls = "line main" if main else "line"
        for points in segments:
            out.append(f'<polyline class="{cls}" stroke="{colour}" points="{" ".join(points)}"/>')
        for i, v in enumerate(values):
            if v is None:
                continue
            run = runs[i]
            tip = esc(f"run #{run.number} {run.started} {run.label or ''} {run.commit or ''}: {name} {_percent(v)}")
            if main and run.complete is False:
                cx, cy = x(i), y(v)
                out.append(f'<path class="incomplete" d="M{cx:.1f} {cy - 7:.1f}L{cx + 7:.1f} {cy:.1f}L{cx:.1f} {cy + 7:.1f}'
                           f'L{cx - 7:.1f} {cy:.1f}Z"><title>{tip} (interrupted)</title></path>')
            else:
                r = 4.5 if main else 3
                out.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="{r}" fill="{colour}"><title>{tip}</title></circle>')
            if main and run.current:
                out.append(f'<circle class="current" cx="{x(i):.1f}" cy="{y(v):.1f}" r="9"><title>this run</title></circle>')
    for n, (name, _, colour, main) in enumerate(series):
        ly = top + 8 + 18 * n
        lx = left + plot_w + 16
        dash = "" if main else ' stroke-dasharray="5 3"'
        out.append(f'<path d="M{lx} {ly}h22" stroke="{colour}" stroke-width="{3 if main else 1.5}"{dash}/>'
                   f'<text x="{lx + 28}" y="{ly + 4}">{esc(name if len(name) <= 14 else name[:13] + "…")}</text>')
    out.append("</svg>")
    return "".join(out)


def _trend_table(shown: Trend) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in ("run", "started (UTC)", "label", "commit", "accuracy", *shown.hardness))
    rows = []
    for run in reversed(shown.runs):  # the newest first: that is what one looks for
        cells = [f"#{run.number}" + (" (this run)" if run.current else ""), run.started, run.label or "",
                 run.commit or "", _percent(run.accuracy) + (" (interrupted)" if run.complete is False else "")]
        cells += [_percent(run.by_hardness.get(h)) if h in run.by_hardness else "" for h in shown.hardness]
        rows.append("<tr" + (' class="this"' if run.current else "") + ">" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    return (f"<details><summary>the runs, newest first</summary><table class=\"grid\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></details>")


def _bucket_table(kind: str, key: str, buckets: Any) -> str:
    if not isinstance(buckets, Mapping) or not buckets:
        return ""
    rows = []
    for name in sorted(buckets, key=str):
        bucket = buckets[name] if isinstance(buckets[name], Mapping) else {}
        passed, judged = _counts(bucket)
        accuracy = passed / judged if judged else None
        bar = (f'<svg class="mini" viewBox="0 0 100 10" preserveAspectRatio="none"><rect class="track" width="100" height="10"/>'
               f'<rect class="fill" width="{100 * accuracy:.1f}" height="10"/></svg>') if accuracy is not None else ""
        rows.append(f"<tr><td>{_filter_link(key, str(name))}</td><td class=\"num\">{passed}</td>"
                    f"<td class=\"num\">{_count(bucket.get('total'))}</td><td class=\"num\">{_count(bucket.get('errors'))}</td>"
                    f"<td class=\"num\">{esc(_percent(accuracy))}</td><td>{bar}</td>"
                    f"<td class=\"num\">{esc(_interval_text(bucket))}</td></tr>")
    table = (f'<table class="grid buckets"><thead><tr><th>{esc(kind)}</th><th>passed</th><th>cases</th><th>errors</th>'
             f'<th>accuracy</th><th></th><th>95% CI</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')
    opened = "" if len(buckets) > FOLD_BUCKETS else " open"
    return f"<details{opened}><summary>By {esc(kind)} ({len(buckets)})</summary>{table}</details>"


def _partial_table(partial: Any) -> str:
    if not isinstance(partial, Mapping) or not partial:
        return ""
    rows = []
    for name, s in partial.items():
        s = s if isinstance(s, Mapping) else {}
        if s.get("pred_count") == 0 and s.get("gold_count") == 0:
            cells = ["n/a"] * 3
        else:
            cells = [_number(s.get(k)) for k in ("acc", "rec", "f1")]
        rows.append(f"<tr><td>{esc(name)}</td>" + "".join(f'<td class="num">{esc(c)}</td>' for c in cells) + "</tr>")
    return ("<details><summary>Spider partial matching (per component)</summary><table class=\"grid\"><thead><tr>"
            "<th>component</th><th>accuracy</th><th>recall</th><th>F1</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></details>")


def _charts_section(report: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    charts = _hardness_section(summary) + _trend_section(report)
    tables = (_bucket_table("tag", "t", summary.get("by_tag")) + _bucket_table("database", "db", summary.get("by_database"))
              + _partial_table(summary.get("partial")))
    if not charts and not tables:
        return ""
    return f'<section id="charts"><h2>Breakdowns</h2><div class="charts">{charts}</div>{tables}</section>'


def _suspects_section(items: Sequence[Mapping[str, Any]]) -> str:
    """The cases whose gold the audit suspects, with every finding (judge/gold_audit.py)."""
    suspects = [item for item in items if isinstance(item, Mapping) and isinstance(item.get("gold_audit"), Mapping)
                and item["gold_audit"].get("suspect")]
    if not suspects:
        return ""
    rows = []
    for item in suspects[:PAGE_ROWS]:
        findings = [f for f in item["gold_audit"].get("findings") or [] if isinstance(f, Mapping)] or [{}]
        label = f"{item.get('file')}::{item.get('id')}"
        for number, finding in enumerate(findings):
            case = (f'<td rowspan="{len(findings)}">{_filter_link("q", str(item.get("id")), label)}</td>'
                    f'<td rowspan="{len(findings)}">{esc(item.get("verdict"))}</td>') if number == 0 else ""
            rows.append(f"<tr>{case}<td>{esc(finding.get('kind'))}</td><td>{esc(_cut(str(finding.get('detail') or '')))}</td></tr>")
    more = f'<p class="note">… and {len(suspects) - PAGE_ROWS} more (see the JSON report).</p>' if len(suspects) > PAGE_ROWS else ""
    return (f'<section id="suspects"><h2>Suspect golds ({len(suspects)})</h2><p class="note">What the case\'s own data '
            "says against its gold: something to read, never a verdict change.</p>"
            f'<table class="grid"><thead><tr><th>case</th><th>verdict</th><th>finding</th><th>detail</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>{more}</section>")


CASES_SECTION = """<section id="cases"><h2>Cases</h2>
<div class="controls" id="controls">
<label>search <input type="search" id="f-q" placeholder="id, question, SQL, reason…" autocomplete="off"></label>
<label>verdict <select id="f-v"></select></label>
<label>hardness <select id="f-h"></select></label>
<label>tag <select id="f-t"></select></label>
<label>database <select id="f-db"></select></label>
<label>baseline <select id="f-b"></select></label>
<button type="button" id="f-clear">clear filters</button>
</div>
<p id="count" class="note" aria-live="polite"></p>
<noscript><p class="warn">The table of cases needs JavaScript; the JSON report holds every case.</p></noscript>
<table id="cases-table" class="grid cases"><thead><tr></tr></thead><tbody></tbody></table>
<p id="more"></p>
</section>"""


# --------------------------------------------------------------------------- the page


def render_html(report: Mapping[str, Any]) -> str:
    """The whole page as text."""
    summary: Mapping[str, Any] = report.get("summary") or {}
    items: Sequence[Mapping[str, Any]] = report.get("items") or []
    run = report.get("run") if isinstance(report.get("run"), Mapping) else None
    label = (run or {}).get("label")
    title = "nl2sql report" + (f": {label}" if label else "") + f" · {_percent(summary.get('accuracy'))}"
    data = {
        "items": [_slim(item) for item in items if isinstance(item, Mapping)],
        "verdicts": [v.value for v in Verdict],
        "hardness": list(HARDNESS_ORDER),
        "nearMiss": NEAR_MISS_WORDS,
        "pageRows": PAGE_ROWS,
    }
    body = "".join([
        f"<header><h1>pytest-nl2sql{(' · ' + esc(label)) if label else ''}</h1></header>",
        _run_section(run, summary),
        _summary_section(summary, items),
        _charts_section(report, summary),
        _suspects_section(items),
        CASES_SECTION,
    ])
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CONTENT_SECURITY_POLICY)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n"
        f'<body><div id="nl2sql-error" class="warn" hidden></div>{body}\n'
        f'<script type="application/json" id="nl2sql-data">{script_json(data)}</script>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def write_html(report: Mapping[str, Any], path: Path) -> list[Path]:
    """Write the HTML report of `report` (the JSON report dict) to `path`."""
    text = render_html(report)
    return [atomic_write_text(path, text, errors=ENCODING_ERRORS, what="the html report", error=ReportWriteError)]


# --------------------------------------------------------------------------- style and script

STYLE = """
:root{--fg:#1b1f24;--muted:#5b6470;--line:#d8dde3;--bg:#fff;--soft:#f4f6f8;--accent:#2f5aa8;
--pass:#1a7f37;--fail:#c62828;--err:#b26a00;--pred:#7b3fb0;color-scheme:light}
*{box-sizing:border-box}[hidden]{display:none!important}
body{margin:0 auto;max-width:1400px;padding:16px 24px 48px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:22px;margin:4px 0 8px}h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:14px;margin:0 0 6px}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-word;background:var(--soft);border:1px solid var(--line);border-radius:4px;padding:6px 8px;margin:2px 0 8px}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
.facts{display:flex;flex-wrap:wrap;gap:4px 28px;margin:0}.facts div{display:flex;gap:6px}
.facts dt{color:var(--muted)}.facts dd{margin:0;font-weight:600;word-break:break-all}
.options{columns:3;font-size:12px}
.warn{background:#fff4d6;border:1px solid #e7c36a;border-radius:4px;padding:6px 10px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(230px,1fr));gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:10px 12px;background:var(--soft)}
.card h3{font-weight:600;color:var(--muted);font-size:12.5px}.card p{margin:2px 0;font-size:12.5px;color:var(--muted)}
.card .figure{font-size:24px;font-weight:700;color:var(--fg);margin:0 0 2px}
.card.headline{border-color:var(--accent);background:#eef3fb}.card.headline .figure{font-size:30px;color:var(--accent)}
.card.bad .figure{color:var(--err)}.card.warn .figure{color:var(--err)}
.verdicts{margin:14px 0 4px}.verdicts svg{width:100%;height:18px;display:block;border-radius:3px}
.verdicts p{margin:4px 0;font-size:12.5px}.near{font-size:12.5px}
.chip{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
.v-pass{fill:var(--pass);background:var(--pass)}.v-mismatch{fill:var(--fail);background:var(--fail)}
.v-pred_error{fill:#e57373;background:#e57373}.v-pred_timeout{fill:#f06292;background:#f06292}
.v-too_many_rows{fill:#ff8a65;background:#ff8a65}.v-no_prediction{fill:#90a4ae;background:#90a4ae}
.v-predictor_error{fill:var(--pred);background:var(--pred)}.v-gold_error{fill:var(--err);background:var(--err)}
.charts{display:flex;flex-wrap:wrap;gap:12px 40px}.chart svg{max-width:100%;height:auto;font-size:12px}
.bars .track,.mini .track{fill:#e8ecf1}.bars .fill,.mini .fill{fill:var(--accent)}.ci{stroke:#1b1f24;stroke-width:1.2;fill:none}
.bars text,.trend text{fill:var(--fg)}.bars a text{fill:var(--accent)}
.trend .grid{stroke:#e3e7ec}.trend .axis{fill:var(--muted);font-size:11px}.trend .line{fill:none;stroke-width:1.5;stroke-dasharray:5 3}
.trend .line.main{stroke-width:3;stroke-dasharray:none}.trend .incomplete{fill:#c00000}.trend .current{fill:none;stroke:#1f3864;stroke-width:1.5}
.note{color:var(--muted);font-size:12.5px;margin:4px 0}
details{margin:8px 0}summary{cursor:pointer;font-weight:600}
table.grid{border-collapse:collapse;margin:6px 0;font-size:13px}
.grid th,.grid td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}
.grid th{background:var(--soft);font-weight:600;position:sticky;top:0}
.grid td.num{text-align:right;font-variant-numeric:tabular-nums}
.grid tr.this td{font-weight:700}
.buckets .mini{width:120px;height:10px;display:block;margin-top:5px}
.controls{display:flex;flex-wrap:wrap;gap:8px 14px;align-items:end;background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:8px 10px;position:sticky;top:0;z-index:2}
.controls label{display:flex;flex-direction:column;font-size:12px;color:var(--muted)}
.controls input,.controls select,.controls button{font:inherit;font-size:13px;padding:3px 6px;border:1px solid #b8c0ca;border-radius:4px;background:#fff;color:var(--fg)}
.controls input{width:260px}.controls select{max-width:220px}.controls button{cursor:pointer}
table.cases{width:100%;table-layout:fixed}
.cases th{cursor:pointer;user-select:none;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;position:static}
.cases th[aria-sort=ascending]::after{content:" ▲";font-size:10px}.cases th[aria-sort=descending]::after{content:" ▼";font-size:10px}
.cases td{overflow:hidden}.cases tr.case{cursor:pointer}.cases tr.case:hover td{background:#f7f9fc}
.cases tr.case.open td{background:#eef3fb}
.clamp{display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow:hidden;word-break:break-word}
.cases .idbtn{font:inherit;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;font-size:12.5px;color:var(--accent);background:none;border:0;padding:0;cursor:pointer;text-align:left;word-break:break-all}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;white-space:nowrap;margin:1px 2px 1px 0}
.badge.small{background:#fff;color:var(--muted);border:1px solid var(--line);font-weight:500}
.badge.fragile{background:#fff4d6;color:#8a5a00;border:1px solid #e7c36a}
.badge.regression{background:#fde0e0;color:var(--fail);border:1px solid #f0a0a0}
.badge.fixed{background:#def5e4;color:var(--pass);border:1px solid #9fd8ae}
tr.detail>td{background:#fbfcfe;padding:10px 14px 14px;border-bottom:2px solid var(--accent)}
.detail .cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:4px 24px}
.detail h4{margin:10px 0 4px;font-size:13px}.detail h4:first-child{margin-top:0}
.detail .kv{margin:0 0 4px}.detail .kv span{color:var(--muted)}
.detail table.grid{font-size:12.5px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.detail .scroll{max-width:100%;overflow-x:auto}
.explain{margin:0 0 6px;padding:6px 10px;border-left:4px solid var(--fail);background:#fff5f5}
.explain.pass{border-color:var(--pass);background:#f3fbf5}.explain.error{border-color:var(--err);background:#fffaf0}
.null{color:var(--muted);font-style:italic}.str{color:#0b5394}
#more button{font:inherit;margin-right:8px;padding:4px 10px;cursor:pointer}
"""

SCRIPT = r"""
(function () {
'use strict';
var doc = document;
var started = performance.now();
function fail(message) {
  var box = doc.getElementById('nl2sql-error');
  box.hidden = false;
  box.textContent = 'The page could not build the table of cases: ' + message;
  doc.body.setAttribute('data-error', message);
}
window.addEventListener('error', function (e) { fail(String(e.message)); });
var violations = 0;
doc.addEventListener('securitypolicyviolation', function () {
  violations += 1;
  doc.body.setAttribute('data-csp-violations', String(violations));
});

var data = JSON.parse(doc.getElementById('nl2sql-data').textContent);
var items = data.items;
items.forEach(function (it, n) {
  it.n = n;
  if (!it.nodeid) it.nodeid = (it.file || '') + '::' + it.id;
  if (!it.tags) it.tags = [];
});
// Every table keyed by text from the data is a Map-like object without a prototype: a tag named
// `__proto__` or a `#sort=constructor` link must find nothing, not Object.prototype's members.
function keyed() { return Object.create(null); }
function own(obj, key) { return obj !== null && typeof obj === 'object' && Object.prototype.hasOwnProperty.call(obj, key); }
var VERDICT_RANK = keyed(); data.verdicts.forEach(function (v, n) { VERDICT_RANK[v] = n; });
var HARD_RANK = keyed(); data.hardness.forEach(function (h, n) { HARD_RANK[h] = n; });
var NONE = '~none';
var FAILED = '~failed';
var FRAGILE = 'fragile';

function el(tag, attrs) {
  var node = doc.createElement(tag);
  if (attrs) Object.keys(attrs).forEach(function (k) {
    if (k === 'text') node.textContent = attrs[k];
    else if (k === 'cls') node.className = attrs[k];
    else if (k === 'width') node.style.width = attrs[k];
    else node.setAttribute(k, attrs[k]);
  });
  for (var i = 2; i < arguments.length; i++) {
    var child = arguments[i];
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === 'string' ? doc.createTextNode(child) : child);
  }
  return node;
}
function pct(v) { return typeof v === 'number' ? (100 * v).toFixed(1) + '%' : 'n/a'; }
function num(v) { return typeof v === 'number' ? v.toFixed(3) : 'n/a'; }
function isFragile(it) {
  var nb = it.neighbours;
  return it.verdict === 'pass' && nb && nb.fragile > 0 && !nb.failed;
}
function text(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}
function sqlText(v) { return Array.isArray(v) ? v.map(text).join('\n\n') : text(v); }
function selectionText(sel) {
  if (!Array.isArray(sel)) return text(sel);
  var lines = [];
  sel.forEach(function (ds) {
    if (!ds || typeof ds !== 'object' || !Array.isArray(ds.dimensions)) { lines.push(text(ds)); return; }
    ds.dimensions.forEach(function (dim) {
      var vals = (dim.values || []).map(function (v) { return v && typeof v === 'object' ? v.id + ' (' + v.name + ')' : text(v); });
      lines.push(ds.dataset_id + ' / ' + dim.dimension_name + ': ' + vals.join(', '));
    });
  });
  return lines.join('\n');
}
function predictedText(it) {
  if (it.kind === 'term_selection') return selectionText(it.predicted);
  return sqlText(it.predicted);
}
function hay(it) {
  if (it.hay === undefined) {
    it.hay = [it.id, it.nodeid, it.question, sqlText(it.gold), predictedText(it), it.reason, it.database,
              it.near_miss, it.verdict, it.tags.join(' ')].map(text).join('\n').toLowerCase();
  }
  return it.hay;
}

// ---- state in the #fragment: links can share a view
var KEYS = ['q', 'v', 'h', 't', 'db', 'b', 'sort', 'open'];
var state = keyed();
function readHash() {
  var params = new URLSearchParams(location.hash.replace(/^#/, ''));
  KEYS.forEach(function (k) { state[k] = params.get(k) || ''; });
}
function writeHash() {
  var params = new URLSearchParams();
  KEYS.forEach(function (k) { if (state[k]) params.set(k, state[k]); });
  var hash = params.toString();
  try { history.replaceState(null, '', hash ? '#' + hash : location.pathname + location.search); } catch (e) { /* a file: URL some browsers refuse */ }
}

// ---- filters
function counted(values) {
  var counts = keyed();
  values.forEach(function (v) { counts[v] = (counts[v] || 0) + 1; });
  return counts;
}
function fillSelect(id, all, options) {
  var select = doc.getElementById(id);
  select.appendChild(el('option', {value: ''}, all));
  options.forEach(function (o) { select.appendChild(el('option', {value: o[0]}, o[1])); });
  // a filter with nothing to choose is left out
  select.parentNode.hidden = !options.some(function (o) { return o[0] !== NONE; });
  return select;
}
var vCounts = counted(items.map(function (it) { return it.verdict; }));
var verdictOptions = data.verdicts.filter(function (v) { return vCounts[v]; }).map(function (v) { return [v, v + ' (' + vCounts[v] + ')']; });
Object.keys(vCounts).forEach(function (v) { if (!(v in VERDICT_RANK)) verdictOptions.push([v, v + ' (' + vCounts[v] + ')']); });
var failedCount = items.filter(function (it) { return !it.passed && it.verdict !== 'gold_error'; }).length;
var fragileCount = items.filter(isFragile).length;
if (failedCount) verdictOptions.unshift([FAILED, 'failed, any verdict (' + failedCount + ')']);
if (fragileCount) verdictOptions.push([FRAGILE, 'fragile passes (' + fragileCount + ')']);
fillSelect('f-v', 'all verdicts (' + items.length + ')', verdictOptions);

var hCounts = counted(items.map(function (it) { return it.hardness || NONE; }));
fillSelect('f-h', 'all', Object.keys(hCounts).sort(function (a, b) { return hardRank(a) - hardRank(b) || (a < b ? -1 : 1); })
  .map(function (h) { return [h, (h === NONE ? '(none)' : h) + ' (' + hCounts[h] + ')']; }));
var tCounts = counted([].concat.apply([], items.map(function (it) { return it.tags; })));
var tagOptions = Object.keys(tCounts).sort().map(function (t) { return [t, t + ' (' + tCounts[t] + ')']; });
fillSelect('f-t', 'all', tagOptions);
var dbCounts = counted(items.map(function (it) { return it.database || NONE; }));
fillSelect('f-db', 'all', Object.keys(dbCounts).sort().map(function (d) { return [d, (d === NONE ? '(none)' : d) + ' (' + dbCounts[d] + ')']; }));
var bCounts = counted(items.filter(function (it) { return it.baseline; }).map(function (it) { return it.baseline; }));
var bOptions = Object.keys(bCounts).sort().map(function (b) { return [b, b + ' (' + bCounts[b] + ')']; });
fillSelect('f-b', 'all', bOptions);

function hardRank(h) { return h in HARD_RANK ? HARD_RANK[h] : (h === NONE ? 1000 : 999); }
function matches(it) {
  if (state.v) {
    if (state.v === FAILED) { if (it.passed || it.verdict === 'gold_error') return false; }
    else if (state.v === FRAGILE) { if (!isFragile(it)) return false; }
    else if (it.verdict !== state.v) return false;
  }
  if (state.h && (it.hardness || NONE) !== state.h) return false;
  if (state.t && it.tags.indexOf(state.t) < 0) return false;
  if (state.db && (it.database || NONE) !== state.db) return false;
  if (state.b && it.baseline !== state.b) return false;
  if (state.q) {
    var words = state.q.toLowerCase().split(/\s+/).filter(Boolean);
    var h = hay(it);
    for (var i = 0; i < words.length; i++) if (h.indexOf(words[i]) < 0) return false;
  }
  return true;
}

// ---- columns
function rowF1(it) { return it.soft_scores && typeof it.soft_scores.row_f1 === 'number' ? it.soft_scores.row_f1 : null; }
function verdictCell(it) {
  var td = el('td', null, el('span', {cls: 'badge v-' + it.verdict, text: it.verdict}));
  if (isFragile(it)) td.appendChild(el('span', {cls: 'badge fragile', title: 'right on every database, wrong where the data shows what the database never does; the side is the query whose result shows it', text: 'fragile: ' + (it.neighbours.fragile_side || 'both')}));
  if (it.baseline) td.appendChild(el('span', {cls: 'badge small ' + it.baseline, text: it.baseline}));
  return td;
}
var COLUMNS = [
  {key: 'n', title: 'case', width: '15%', titleText: 'the order of the cases in the run', value: function (it) { return it.n; },
   cell: function (it) { return el('td', null, el('button', {type: 'button', cls: 'idbtn', title: it.nodeid, 'aria-expanded': 'false', text: it.id})); }},
  {key: 'question', title: 'question', width: '30%', value: function (it) { return it.question || ''; },
   cell: function (it) { return el('td', null, el('div', {cls: 'clamp', title: it.question || '', text: it.question || ''})); }},
  {key: 'database', title: 'database', width: '11%', value: function (it) { return it.database || ''; },
   cell: function (it) { return el('td', null, el('div', {cls: 'clamp', text: it.database || ''})); }},
  {key: 'hardness', title: 'hardness', width: '7%', value: function (it) { return hardRank(it.hardness || NONE); },
   cell: function (it) { return el('td', {text: it.hardness || ''}); }},
  {key: 'verdict', title: 'verdict', width: '12%', value: function (it) { return (VERDICT_RANK[it.verdict] || 0) * 2 + (isFragile(it) ? 1 : 0); }, cell: verdictCell},
  {key: 'reason', title: 'reason', width: '17%', value: function (it) { return (it.reason || '') + (it.near_miss ? ' ' + it.near_miss : ''); },
   cell: function (it) {
     var div = el('div', {cls: 'clamp', title: it.reason || '', text: it.reason || ''});
     if (it.near_miss) div.appendChild(el('span', {cls: 'badge small', text: it.near_miss}));
     return el('td', null, div);
   }},
  {key: 'em', title: 'EM', width: '44px', titleText: 'exact match (Spider, without values)',
   value: function (it) { return it.exact_match === true ? 1 : it.exact_match === false ? 0 : -1; },
   cell: function (it) { return el('td', {text: it.exact_match === true ? '✓' : it.exact_match === false ? '✗' : ''}); }},
  {key: 'f1', title: 'row F1', width: '76px', value: function (it) { var f = rowF1(it); return f === null ? -1 : f; },
   cell: function (it) { var f = rowF1(it); return el('td', {cls: 'num', text: f === null ? '' : f.toFixed(2)}); }}
];
var COL_BY_KEY = keyed(); COLUMNS.forEach(function (c) { COL_BY_KEY[c.key] = c; });

var table = doc.getElementById('cases-table');
var headRow = table.tHead.rows[0];
var colgroup = el('colgroup');
COLUMNS.forEach(function (c) {
  colgroup.appendChild(el('col', {width: c.width}));
  var th = el('th', {scope: 'col', 'data-key': c.key, title: 'sort by ' + (c.titleText || c.title), tabindex: '0', text: c.title});
  headRow.appendChild(th);
});
table.insertBefore(colgroup, table.tHead);
var tbody = table.tBodies[0];

function sortSpec() {
  var m = /^(-?)(\w+)$/.exec(state.sort || '');
  return m && COL_BY_KEY[m[2]] ? {key: m[2], desc: m[1] === '-'} : {key: 'n', desc: false};
}
function compare(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  a = String(a); b = String(b);
  return a < b ? -1 : a > b ? 1 : 0;
}

var shownRows = data.pageRows;
var openSet = keyed();
var rendered = [];
function render() {
  var spec = sortSpec();
  var col = COL_BY_KEY[spec.key];
  var found = items.filter(matches);
  if (spec.key !== 'n') {
    found.sort(function (a, b) { return compare(col.value(a), col.value(b)) * (spec.desc ? -1 : 1) || a.n - b.n; });
  } else if (spec.desc) found.reverse();
  // A linked case past the rows shown is built alone, after a gap: building every row before it
  // took 133 s for a case near the end of 100,000.
  var at = state.open ? found.findIndex(function (it) { return it.nodeid === state.open; }) : -1;
  Array.prototype.forEach.call(headRow.cells, function (th) {
    var key = th.getAttribute('data-key');
    if (key === spec.key) th.setAttribute('aria-sort', spec.desc ? 'descending' : 'ascending');
    else th.removeAttribute('aria-sort');
  });
  var fresh = el('tbody');
  var shown = found.slice(0, shownRows);
  function caseRow(it) {
    var tr = el('tr', {cls: 'case', 'data-n': String(it.n)});
    COLUMNS.forEach(function (c) { tr.appendChild(c.cell(it)); });
    fresh.appendChild(tr);
    if (openSet[it.nodeid]) openRow(tr, it, fresh);
  }
  shown.forEach(caseRow);
  var linked = at >= shown.length ? found[at] : null;
  if (linked) {
    fresh.appendChild(el('tr', {cls: 'gap'}, el('td', {colspan: String(COLUMNS.length), cls: 'note',
      text: '… ' + (found.length - shown.length - 1) + ' cases not built here (' + (at - shown.length) + ' before the linked case, ' +
            (found.length - at - 1) + ' after it): "show more" builds them in order'})));
    caseRow(linked);
  }
  table.replaceChild(fresh, tbody);
  tbody = fresh;
  rendered = found;
  var countText = found.length === items.length ? items.length + ' cases' : found.length + ' of ' + items.length + ' cases match';
  if (found.length > shown.length) countText += '; the first ' + shown.length + ' are shown' + (linked ? ', and the linked case' : '');
  doc.getElementById('count').textContent = countText + '. Click a case for its explanation, diff and counterexample; click a header to sort.';
  var more = doc.getElementById('more');
  more.textContent = '';
  if (found.length > shown.length) {
    more.appendChild(el('button', {type: 'button', id: 'show-more', text: 'show ' + Math.min(data.pageRows, found.length - shown.length) + ' more'}));
    more.appendChild(el('button', {type: 'button', id: 'show-all', text: 'show all ' + found.length}));
  }
  doc.body.setAttribute('data-rendered', String(shown.length + (linked ? 1 : 0)));
  doc.body.setAttribute('data-matching', String(found.length));
}

// ---- the detail of one case
function valueNode(v) {
  if (v === null || v === undefined) return el('span', {cls: 'null', text: 'NULL'});
  if (typeof v === 'string') return el('span', {cls: 'str', text: JSON.stringify(v)});
  return document.createTextNode(typeof v === 'object' ? JSON.stringify(v) : String(v));
}
var MAX_ROWS = 50;
function rowsTable(columns, rows, total) {
  var t = el('table', {cls: 'grid'});
  if (columns && columns.length) {
    var head = el('tr');
    columns.forEach(function (c) { head.appendChild(el('th', {text: text(c)})); });
    t.appendChild(el('thead', null, head));
  }
  var body = el('tbody');
  (rows || []).slice(0, MAX_ROWS).forEach(function (r) {
    var tr = el('tr');
    (Array.isArray(r) ? r : [r]).forEach(function (v) { tr.appendChild(el('td', null, valueNode(v))); });
    body.appendChild(tr);
  });
  var count = typeof total === 'number' ? total : (rows || []).length;
  if (count > Math.min((rows || []).length, MAX_ROWS)) {
    body.appendChild(el('tr', null, el('td', {colspan: String(Math.max((columns || []).length, 1)), cls: 'null',
      text: '… ' + (count - Math.min((rows || []).length, MAX_ROWS)) + ' more rows (the JSON report keeps the first ones)'})));
  }
  if (!count) body.appendChild(el('tr', null, el('td', {cls: 'null', text: '(no rows)'})));
  t.appendChild(body);
  return el('div', {cls: 'scroll'}, t);
}
function kv(label, value) { return el('p', {cls: 'kv'}, el('span', {text: label + ': '}), value); }
function explanation(it) {
  var kind = it.passed ? 'pass' : it.verdict === 'gold_error' ? 'error' : '';
  var box = el('div', {cls: 'explain ' + kind});
  var head = el('p', {cls: 'kv'}, el('strong', {text: it.verdict}));
  if (it.reason) head.appendChild(document.createTextNode(': ' + it.reason.split('\n')[0]));
  box.appendChild(head);
  if (it.near_miss) box.appendChild(kv('near miss', document.createTextNode(it.near_miss + (own(data.nearMiss, it.near_miss) ? ': ' + data.nearMiss[it.near_miss] : ''))));
  var nb = it.neighbours;
  if (nb) {
    var words = 'judged on ' + nb.checked + ' neighbour database(s): ' + (nb.failed || 0) + ' failed';
    if (nb.fragile) words += ', differs on ' + nb.fragile + ' stress neighbour(s)' + (isFragile(it) ? ' (a fragile pass; fragile side: ' + (nb.fragile_side || 'both') + ')' : '');
    box.appendChild(kv('neighbours', document.createTextNode(words)));
  }
  if (it.diff && it.diff.database) box.appendChild(kv('shown on', document.createTextNode(it.diff.database)));
  if (it.ran_on) box.appendChild(kv('ran on', document.createTextNode(it.ran_on)));
  (it.gold_warnings || []).forEach(function (w) { box.appendChild(kv('gold warning', document.createTextNode(w))); });
  ((it.gold_audit && it.gold_audit.findings) || []).forEach(function (f) {
    box.appendChild(kv('suspect gold (' + f.kind + ')', document.createTextNode(String(f.detail || ''))));
  });
  if (it.attempts) box.appendChild(kv('attempts', document.createTextNode(String(it.attempts))));
  if (it.repeats) {
    var rp = it.repeats;
    box.appendChild(kv('repeats', document.createTextNode(rp.passed + ' of ' + rp.k + ' answers passed' +
      (Array.isArray(rp.verdicts) ? ': ' + rp.verdicts.join(', ') : ''))));
    if (Array.isArray(rp.predicted) && rp.predicted.length) {
      box.appendChild(el('details', null, el('summary', {text: 'the ' + rp.predicted.length + ' answers'}),
        el('pre', {text: rp.predicted.map(function (p, n) { return '[' + (n + 1) + '] ' + sqlText(p); }).join('\n\n')})));
    }
  }
  if (it.usage) box.appendChild(kv('usage', document.createTextNode(text(it.usage))));
  if (typeof it.latency === 'number') box.appendChild(kv('latency', document.createTextNode(it.latency + ' s')));
  var rest = it.reason && it.reason.indexOf('\n') >= 0 ? it.reason.slice(it.reason.indexOf('\n') + 1) : '';
  if (rest) box.appendChild(el('pre', {text: rest}));
  if (it.traceback) box.appendChild(el('details', null, el('summary', {text: 'traceback'}), el('pre', {text: it.traceback})));
  return box;
}
function diffBlock(diff) {
  var out = el('div');
  out.appendChild(el('h4', {text: 'Diff' + (diff.database ? ' (on ' + diff.database + ')' : '')}));
  var gc = diff.gold_columns || [], pc = diff.predicted_columns || [];
  out.appendChild(kv('gold columns', el('code', {text: gc.join(', ')})));
  out.appendChild(kv('predicted columns', el('code', {text: pc.join(', ')})));
  if (Array.isArray(diff.pairing)) {
    out.appendChild(kv('paired (gold → predicted)', el('code', {text: diff.pairing.map(function (p, g) {
      return (Array.isArray(p) ? p[0] + ' → ' + p[1] : (gc[g] !== undefined ? gc[g] : g) + ' → ' + (p === null ? '-' : (pc[p] !== undefined ? pc[p] : p)));
    }).join(', ')})));
  }
  if (typeof diff.first_order_difference === 'number') out.appendChild(kv('first row out of order', document.createTextNode('#' + (diff.first_order_difference + 1))));
  var missing = typeof diff.missing_count === 'number' ? diff.missing_count : (diff.missing || []).length;
  var extra = typeof diff.extra_count === 'number' ? diff.extra_count : (diff.extra || []).length;
  if (missing) { out.appendChild(el('p', {cls: 'kv', text: 'rows missing (in the gold, not predicted): ' + missing})); out.appendChild(rowsTable(gc, diff.missing, missing)); }
  if (extra) { out.appendChild(el('p', {cls: 'kv', text: 'rows extra (predicted, not in the gold): ' + extra})); out.appendChild(rowsTable(pc, diff.extra, extra)); }
  return out;
}
function counterexampleBlock(ce) {
  var out = el('div');
  out.appendChild(el('h4', {text: 'Counterexample: a neighbour database where gold and prediction differ'}));
  if (ce.breaks) out.appendChild(kv('breaks', document.createTextNode(ce.breaks + ' (a stress neighbour: data the database never shows)')));
  var tables = ce.tables || {};
  Object.keys(tables).forEach(function (name) {
    var t = tables[name] || {};
    out.appendChild(el('p', {cls: 'kv'}, el('span', {text: 'table '}), el('code', {text: name})));
    out.appendChild(rowsTable(t.columns, t.rows));
  });
  out.appendChild(el('p', {cls: 'kv', text: 'the gold returns there:'}));
  out.appendChild(rowsTable(null, ce.gold));
  out.appendChild(el('p', {cls: 'kv', text: 'the prediction returns there:'}));
  out.appendChild(rowsTable(null, ce.predicted));
  return out;
}
function termBlock(ts) {
  var out = el('div', null, el('h4', {text: 'Term selection: macro precision ' + num(ts.macro_precision) + ', macro recall ' + num(ts.macro_recall)}));
  var dims = ts.by_dimension || {};
  var t = el('table', {cls: 'grid'}, el('thead', null, el('tr', null, el('th', {text: 'dimension'}), el('th', {text: 'precision'}), el('th', {text: 'recall'}),
    el('th', {text: 'true positives'}), el('th', {text: 'false negatives'}), el('th', {text: 'false positives'}))));
  var body = el('tbody');
  function terms(list) { return (list || []).map(function (v) { return v && typeof v === 'object' ? v.id + ' (' + v.name + ')' : text(v); }).join(', '); }
  Object.keys(dims).forEach(function (name) {
    var d = dims[name] || {};
    var outside = (ts.not_in_target || []).indexOf(name) >= 0;
    body.appendChild(el('tr', null, el('td', {text: name + (outside ? ' (not in the target)' : '')}), el('td', {text: num(d.precision)}), el('td', {text: num(d.recall)}),
      el('td', {text: terms(d.true_positives)}), el('td', {text: terms(d.false_negatives)}), el('td', {text: terms(d.false_positives)})));
  });
  t.appendChild(body);
  out.appendChild(el('div', {cls: 'scroll'}, t));
  return out;
}
function detail(it) {
  var left = el('div'), right = el('div');
  left.appendChild(explanation(it));
  if (it.question) left.appendChild(kv('question', document.createTextNode(it.question)));
  left.appendChild(kv('node id', el('code', {text: it.nodeid})));
  var facts = [['database', it.database], ['hardness', it.hardness], ['tags', it.tags.join(', ')], ['baseline', it.baseline]];
  facts.forEach(function (f) { if (f[1]) left.appendChild(kv(f[0], document.createTextNode(f[1]))); });
  if (it.kind !== 'term_selection') {
    var golds = Array.isArray(it.gold) ? it.gold : [it.gold];
    golds.forEach(function (g, n) {
      left.appendChild(el('h4', {text: 'gold SQL' + (golds.length > 1 ? ' [' + (n + 1) + ']' : '')}));
      left.appendChild(el('pre', {text: g === null || g === undefined ? '(a gold result file)' : text(g)}));
    });
  }
  left.appendChild(el('h4', {text: it.kind === 'term_selection' ? 'selected terms' : 'predicted SQL'}));
  left.appendChild(el('pre', {text: predictedText(it) || (it.predicted_result ? '(a result file: ' + it.predicted_result + ')' : '(none)')}));
  if (it.predicted_malloy) { left.appendChild(el('h4', {text: 'predicted Malloy'})); left.appendChild(el('pre', {text: it.predicted_malloy})); }
  if (it.raw_prediction) { left.appendChild(el('h4', {text: 'the answer as the model returned it'})); left.appendChild(el('pre', {text: text(it.raw_prediction)})); }
  if (it.diff) right.appendChild(diffBlock(it.diff));
  if (it.neighbours && it.neighbours.counterexample) right.appendChild(counterexampleBlock(it.neighbours.counterexample));
  if (it.term_selection) right.appendChild(termBlock(it.term_selection));
  if (it.soft_scores) {
    var s = it.soft_scores;
    right.appendChild(el('h4', {text: 'Soft scores'}));
    var soft = el('tbody');
    [['columns', 'column'], ['rows', 'row']].forEach(function (r) {
      soft.appendChild(el('tr', null, el('th', {text: r[0]}), el('td', {text: num(s[r[1] + '_precision'])}),
        el('td', {text: num(s[r[1] + '_recall'])}), el('td', {text: num(s[r[1] + '_f1'])})));
    });
    right.appendChild(el('table', {cls: 'grid'}, el('thead', null, el('tr', null, el('th'), el('th', {text: 'precision'}),
      el('th', {text: 'recall'}), el('th', {text: 'F1'}))), soft));
  }
  if (!right.childNodes.length) right.appendChild(el('p', {cls: 'note', text: it.passed ? 'Passed: nothing to show beyond the SQL.' : 'No result diff: the prediction did not produce a result to compare.'}));
  return el('div', {cls: 'cols'}, left, right);
}
function openRow(tr, it, body) {
  tr.classList.add('open');
  tr.cells[0].firstChild.setAttribute('aria-expanded', 'true');
  var row = el('tr', {cls: 'detail', 'data-for': String(it.n)}, el('td', {colspan: String(COLUMNS.length)}, detail(it)));
  (body || tbody).insertBefore(row, tr.nextSibling);
  return row;
}
function toggle(tr) {
  var it = items[Number(tr.getAttribute('data-n'))];
  var next = tr.nextSibling;
  if (next && next.classList.contains('detail')) {
    next.parentNode.removeChild(next);
    tr.classList.remove('open');
    tr.cells[0].firstChild.setAttribute('aria-expanded', 'false');
    delete openSet[it.nodeid];
    if (state.open === it.nodeid) { state.open = ''; writeHash(); }
  } else {
    openSet[it.nodeid] = true;
    openRow(tr, it);
    state.open = it.nodeid;
    writeHash();
  }
}

// ---- events
table.addEventListener('click', function (e) {
  var th = e.target.closest('th[data-key]');
  if (th) {
    var key = th.getAttribute('data-key');
    var spec = sortSpec();
    state.sort = spec.key === key && !spec.desc ? '-' + key : key;
    if (state.sort === 'n') state.sort = '';
    writeHash(); render();
    return;
  }
  if (e.target.closest('tr.detail')) return;
  var tr = e.target.closest('tr.case');
  if (tr) toggle(tr);
});
table.addEventListener('keydown', function (e) {
  if ((e.key === 'Enter' || e.key === ' ') && e.target.matches('th[data-key]')) { e.preventDefault(); e.target.click(); }
});
var controls = {q: 'f-q', v: 'f-v', h: 'f-h', t: 'f-t', db: 'f-db', b: 'f-b'};
function syncControls() {
  Object.keys(controls).forEach(function (k) {
    var c = doc.getElementById(controls[k]);
    if (c.tagName === 'SELECT' && state[k] && !Array.prototype.some.call(c.options, function (o) { return o.value === state[k]; })) {
      c.appendChild(el('option', {value: state[k]}, state[k] + ' (0)'));
    }
    c.value = state[k];
  });
}
var typing = null;
Object.keys(controls).forEach(function (k) {
  var c = doc.getElementById(controls[k]);
  function apply() { typing = null; state[k] = c.value; shownRows = data.pageRows; writeHash(); render(); }
  if (c.tagName === 'INPUT') {  // search as one types, once the typing pauses
    c.addEventListener('input', function () { clearTimeout(typing); typing = setTimeout(apply, items.length > 2000 ? 150 : 50); });
  } else c.addEventListener('change', apply);
});
doc.getElementById('f-clear').addEventListener('click', function () {
  Object.keys(controls).forEach(function (k) { state[k] = ''; });
  shownRows = data.pageRows; syncControls(); writeHash(); render();
});
doc.getElementById('more').addEventListener('click', function (e) {
  if (e.target.id === 'show-more') shownRows += data.pageRows;
  else if (e.target.id === 'show-all') shownRows = rendered.length;
  else return;
  render();
});
window.addEventListener('hashchange', function () {
  readHash(); shownRows = data.pageRows;
  if (state.open) openSet[state.open] = true;
  syncControls(); render();
  if (/(^|[#&])(v|h|t|db|b|q)=/.test(location.hash)) doc.getElementById('cases').scrollIntoView({block: 'start'});
});

readHash();
if (state.open) openSet[state.open] = true;
syncControls();
render();
if (state.open) {
  var opened = tbody.querySelector('tr.case.open');
  if (opened) opened.scrollIntoView({block: 'nearest'});
}
// how long the script took, and the page until it was ready (for measuring; see the README)
doc.body.setAttribute('data-script-ms', (performance.now() - started).toFixed(0));
doc.body.setAttribute('data-ready-ms', performance.now().toFixed(0));
}());
"""

assert "</script" not in SCRIPT.lower() and "</style" not in STYLE.lower()


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


# Nothing is fetched; only this page's own script and style apply (by hash: never text that a case
# smuggled in). The script sizes the columns through the CSSOM, which the policy allows.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"script-src '{_sha256(SCRIPT)}'; "
    f"style-src '{_sha256(STYLE)}'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)


register("html", write_html)
