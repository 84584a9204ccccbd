"""The `nl2sql` section of pytest's terminal summary: every number says what it counts.

Names in it come from the data (tags, hardness labels, database paths, reasons): each is shown
`shown.one_line` in its row, and every line `shown.safe_lines`, so no escape sequence reaches the
terminal and no line reads as a CI workflow command (`::error::…`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_nl2sql.gate.run import PER_CASE
from pytest_nl2sql.metrics.repeats import retries_text
from pytest_nl2sql.metrics.summary import accuracy_interval, accuracy_name
from pytest_nl2sql.shown import one_line, safe_lines

TABLE_ROWS = 15  # rows of a per-tag / per-database table without -v (the worst first)
FRAGILE_NAMED = 10  # fragile passes named by id (the prediction's first), then a count


def percent(passed: int, total: int) -> str:
    return f"{passed}/{total} = {100.0 * passed / total:.1f}%" if total else f"{passed}/0"


def interval(bucket: dict[str, Any]) -> str:
    """`[95% CI 41.2-58.8%]`: how far the accuracy could move on another sample of cases."""
    bounds = accuracy_interval(bucket)
    return f"[95% CI {100 * bounds[0]:.1f}-{100 * bounds[1]:.1f}%]" if bounds else ""


def _worst_first(buckets: dict[str, dict[str, Any]]) -> list[str]:
    """Lowest accuracy first, then the most cases: a cut table shows what needs attention."""
    def key(name: str) -> tuple[float, int, str]:
        b = buckets[name]
        accuracy = b.get("accuracy")
        return (2.0 if accuracy is None else accuracy, -b["total"], name)

    return sorted(buckets, key=key)


def bucket_table(title: str, buckets: dict[str, dict[str, Any]], limit: int | None = None) -> list[str]:
    if not buckets:
        return []
    names = list(buckets)
    if limit is not None and len(names) > limit:
        names = _worst_first(buckets)
        title = f"{title} (the {limit} worst of {len(buckets)})"
    shown = names if limit is None else names[:limit]
    width = max(len(one_line(n)) for n in shown)
    lines = [f"{title}:"]
    for name in shown:
        b = buckets[name]
        errors = f"  ({b['errors']} error{'s' if b['errors'] != 1 else ''})" if b.get("errors") else ""
        judged = b["total"] - b.get("errors", 0)
        lines.append(f"  {one_line(name):<{width}}  {percent(b['passed'], judged):<20} {interval(b)}{errors}".rstrip())
    if len(names) > len(shown):
        lines.append(f"  ... {len(names) - len(shown)} more (-v shows all; all of them in --nl2sql-report=json)")
    return lines


def summary_lines(summary: dict[str, Any], verbosity: int = 0, items: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """The `nl2sql` section of the terminal summary; its first line names the metric. `items`:
    the JSON report's items, whose fragile passes it names."""
    judged = summary["total"] - summary["errors"]
    lines = []
    if summary["total"]:
        lines.append(f"{accuracy_name(summary)} {percent(summary['passed'], judged)}{after_reviews(summary)}")
        if judged:
            lines.append(f"  {interval(summary)} (Wilson score interval over the judged SQL cases)")
        lines += review_lines(summary, judged)
        lines += neighbour_lines(summary, judged, items)
        if summary.get("engine") not in (None, PER_CASE):
            lines.append(f"  every case ran on {summary['engine']} (the databases below are the cases' own labels)")
        lines.append(f"SQL cases: {summary['total']} ({summary['passed']} passed, {summary['failed']} failed, "
                     f"{summary['errors']} error{'s' if summary['errors'] != 1 else ''})")
        lines += predictor_error_lines(summary, judged)
    if summary.get("exact_match") is not None:
        lines.append(f"exact set match {summary['exact_match_passed']}/{summary['exact_match_total']} = "
                     f"{100 * summary['exact_match']:.1f}%")
    if summary["errors"]:
        by_db = summary.get("errors_by_database") or {}
        where = ", ".join(f"{one_line(db)} ({n})" for db, n in by_db.items())
        lines.append(f"errors: {summary['errors']} case(s) could not be judged (gold_error, not in the accuracy)"
                     + (f": {where}" if where else ""))
    ts = summary.get("term_selection")
    if ts:
        lines.append(
            f"term selection: macro precision {ts['macro_precision']:.2f}, macro recall {ts['macro_recall']:.2f} "
            f"({ts['passed']}/{ts['total']} term-selection cases pass)"
        )
        for dim, d in (ts.get("by_dimension") or {}).items():
            p = "-" if d.get("precision") is None else f"{d['precision']:.2f}"
            r = "-" if d.get("recall") is None else f"{d['recall']:.2f}"
            lines.append(f"  {one_line(dim)}: precision {p}, recall {r}")
    soft = summary.get("soft_scores")
    if soft:
        lines.append("soft scores (means over judged SQL cases): columns P {column_precision:.3f} R {column_recall:.3f} "
                     "F1 {column_f1:.3f}; rows P {row_precision:.3f} R {row_recall:.3f} F1 {row_f1:.3f}".format(**soft))
    near = {k: v for k, v in (summary.get("near_miss") or {}).items() if v}
    if near:
        lines.append("near misses (failing SQL cases): " + ", ".join(f"{k} {v}" for k, v in near.items()))
    efficiency = summary.get("execution_time")
    if efficiency:
        lines.append(f"efficiency (BIRD's R-VES over judged SQL cases): {efficiency['r_ves']:.3f}; median slowdown of right "
                     f"predictions {efficiency['median_slowdown']:.2f}x, {efficiency['slower_10x']} of {efficiency['timed']} "
                     "ran 10x slower than their gold or worse")
    lines += quarantine_lines(summary)
    verdicts = summary.get("by_verdict") or {}
    if verdicts:
        lines.append("verdicts (all cases): " + ", ".join(f"{v} {n}" for v, n in verdicts.items()))
    lines += bucket_table("by hardness (SQL cases)", summary.get("by_hardness") or {})
    limit = None if verbosity > 0 else TABLE_ROWS
    lines += bucket_table("by tag (SQL cases)", summary.get("by_tag") or {}, limit)
    lines += bucket_table("by database (SQL cases)", summary.get("by_database") or {}, limit)
    latency = summary.get("latency")
    if latency:
        lines.append(f"prediction latency: total {latency['total']:.2f}s, p50 {latency['p50']:.3f}s, p95 {latency['p95']:.3f}s "
                     f"over {latency['count']} case(s)")
    lines += model_lines(summary)
    partial = summary.get("partial")
    if partial and verbosity > 0:
        lines += partial_table(partial)
    return [safe_lines(line) for line in lines]


def after_reviews(summary: dict[str, Any]) -> str:
    """` (after reviews)` when decisions of --nl2sql-reviews changed verdicts: a reviewed figure
    never passes for a plain one."""
    before = summary.get("passed_before_reviews")
    return " (after reviews)" if before is not None and before != summary["passed"] else ""


def review_lines(summary: dict[str, Any], judged: int) -> list[str]:
    """Decisions of --nl2sql-reviews applied, stale and suggested, with the accuracy before them."""
    reviewed = summary.get("reviewed") or {}
    stale, suggested = summary.get("stale_reviews") or 0, summary.get("review_suggestions") or 0
    lines = []
    if reviewed:
        decisions = ", ".join(f"{decision} {count}" for decision, count in reviewed.items())
        before = summary.get("passed_before_reviews", summary["passed"])
        lines.append(f"  before reviews {percent(before, judged)}; after {percent(summary['passed'], judged)} "
                     f"(decisions of --nl2sql-reviews applied: {decisions})")
    if stale:
        lines.append(f"  {stale} stale review{'s' if stale != 1 else ''} not applied: the case's gold, prediction or database "
                     "changed since the decision (nl2sql review decides again)")
    if suggested:
        lines.append(f"  {suggested} suggestion{'s' if suggested != 1 else ''} of the pytest_nl2sql_review hook, not applied "
                     "(nl2sql review REPORT.json --reviews PATH --accept-suggestions)")
    return lines


def quarantine_lines(summary: dict[str, Any]) -> list[str]:
    """Cases expected to fail (case key `quarantine`): run, counted in every figure, failing nothing."""
    quarantined = summary.get("quarantined") or 0
    if not quarantined:
        return []
    return [f"{quarantined} quarantined case(s) (case key `quarantine`): a failure is reported as xfailed with its "
            "reason and fails nothing; their verdicts still count in every figure"]


def predictor_error_lines(summary: dict[str, Any], judged: int) -> list[str]:
    """Failures that are no answer at all, kept apart from wrong answers: an outage is not a model
    that got worse."""
    unpredicted = summary.get("predictor_errors") or 0
    if not unpredicted:
        return []
    answered = judged - unpredicted
    figure = f"; accuracy over the {answered} answered: {percent(summary['passed'], answered)}" if answered else ""
    return [f"  {unpredicted} of the {summary['failed']} failed could not be predicted (predictor_error: the predictor "
            f"raised, transient errors retried), not wrong answers{figure}"]


def model_lines(summary: dict[str, Any]) -> list[str]:
    """What the model cost (the usage its hook reported) and how steady its answers are
    (`--nl2sql-repeat`)."""
    lines = [retries_text(summary["retries"])] if summary.get("retries") else []
    usage = summary.get("usage")
    if usage:
        total, mean = usage.get("total") or {}, usage.get("mean") or {}
        parts, means = [], []
        for key, words in (("prompt_tokens", "prompt"), ("completion_tokens", "completion")):
            if key in total:
                parts.append(f"{total[key]:,} {words}")
                means.append(f"{mean[key]:,.1f} {words}")
        text = " + ".join(parts) + " tokens" if parts else ""
        each = " + ".join(means) + " tokens" if means else ""
        if "cost" in total:
            text += (", " if text else "") + f"cost {total['cost']:.4f}"
            each += (", " if each else "") + f"cost {mean['cost']:.4f}"
        elif "cost" in (usage.get("not_finite") or ()):  # a sum beyond floating point
            text += (", " if text else "") + "cost too large to add up"
            each += (", " if each else "") + f"cost {mean['cost']:.4g}"
        lines.append(f"model usage over {usage['cases']} case(s): {text} (per case {each})")
    pass_at = summary.get("pass_at_k")
    if pass_at:
        k = max(int(key) for key in pass_at)
        figures = ", ".join(f"pass@{key} {100 * value:.1f}%" for key, value in pass_at.items())
        consistency = summary.get("consistency")
        steady = f"; consistency {100 * consistency:.1f}% (all {k} answers got the same verdict)" if consistency is not None else ""
        lines.append(f"repeated answers ({k} per case, judged SQL cases): {figures}{steady}")
    return lines


def neighbour_lines(summary: dict[str, Any], judged: int, items: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """The accuracy on the cases' own databases alone (one database per case, as leaderboards run, but by this
    plugin's comparison: not the official Spider figure, which compat mode gives), and what the
    neighbour databases changed; golds whose result is not determined."""
    lines = []
    neighbours = summary.get("neighbours")
    if neighbours and judged:
        lines.append(f"  one-database execution accuracy (the cases' own databases alone, by this plugin's comparison; not the official "
                     f"Spider figure, which --nl2sql-compat=spider gives) {percent(summary['single_db_passed'], judged)}; neighbour databases failed "
                     f"{neighbours['caught']} prediction{'s' if neighbours['caught'] != 1 else ''} right there "
                     f"({neighbours['databases']} databases checked over {neighbours['cases']} cases)")
        fragile = summary.get("fragile") or 0
        sides = summary.get("fragile_by_side") or {"both": fragile}
        against = (sides.get("prediction") or 0) + (sides.get("both") or 0)
        by_side = ", ".join(f"{side} {sides.get(side) or 0}" for side in ("prediction", "both", "gold"))
        lines.append(f"  strict (fragile passes counted as failures, unless only the gold is fragile) "
                     f"{percent(summary['passed'] - against, judged)}; {fragile} fragile pass{'es' if fragile != 1 else ''} "
                     f"(right only while the data keeps what the case's database shows; fragile side: {by_side}; "
                     f"--nl2sql-fragile=fail fails those of the prediction and both)")
        lines += fragile_cases(items)
    for reason, cases in (summary.get("neighbours_off") or {}).items():
        lines.append(f"  neighbour databases off for {cases} right prediction{'s' if cases != 1 else ''}: {one_line(reason)}")
    if summary.get("gold_warnings"):
        n = summary["gold_warnings"]
        lines.append(f"  {n} gold quer{'ies' if n != 1 else 'y'} with a nondeterministic result (see each item's gold_warnings)")
    return lines


def fragile_cases(items: Iterable[Mapping[str, Any]]) -> list[str]:
    """The fragile passes by id and side, the prediction's first (what to fix), at most
    `FRAGILE_NAMED`, then how many more."""
    rank = {"prediction": 0, "both": 1, "gold": 2}
    found = []
    for item in items:
        neighbours = item.get("neighbours") or {}
        if item.get("verdict") == "pass" and (neighbours.get("fragile") or 0) > 0 and not neighbours.get("failed"):
            side = neighbours.get("fragile_side") if neighbours.get("fragile_side") in rank else "both"
            found.append((rank[side], len(found), f"{one_line(str(item.get('id')))} ({side})"))
    if not found:
        return []
    named = [text for _, _, text in sorted(found)[:FRAGILE_NAMED]]
    more = f", and {len(found) - len(named)} more (each item's neighbours.fragile_side in --nl2sql-report=json)" if len(found) > len(named) else ""
    return [f"  fragile passes: {', '.join(named)}{more}"]


def partial_table(partial: dict[str, dict[str, Any]]) -> list[str]:
    """Spider's partial component scores; a component no query has is not applicable (the official
    aggregation prints 0.000 0.000 1.000 for it)."""
    lines = ["partial component match (Spider):", f"  {'component':<16} {'acc':>6} {'rec':>6} {'f1':>6}"]
    for comp, s in partial.items():
        if s.get("pred_count") == 0 and s.get("gold_count") == 0:
            lines.append(f"  {comp:<16} {'n/a':>6} {'n/a':>6} {'n/a':>6}  (no query has it)")
        else:
            lines.append(f"  {comp:<16} {s['acc']:>6.3f} {s['rec']:>6.3f} {s['f1']:>6.3f}")
    return lines
