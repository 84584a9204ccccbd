"""The Markdown report for pull-request comments and GitHub's step summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.gate.baseline import compare_with_baseline, load_baseline, write_baseline
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.reports.md import MAX_FAILURES, render_markdown, write_markdown
from pytest_nl2sql.vocab import Kind, Verdict


def item(case_id: str, verdict: str = "pass", *, hardness: str = "easy", reason: str | None = None,
         latency: float | None = None) -> dict[str, Any]:
    return CaseResult(
        id=case_id, nodeid=f"shop.nl2sql.yaml::{case_id}", file="shop.nl2sql.yaml", position=0,
        kind=Kind.SQL, verdict=Verdict(verdict), hardness=hardness,
        reason=reason if reason is not None else (None if verdict == "pass" else "values"),
        latency=latency,
    ).to_json()


def report(items: list[dict[str, Any]], **summary: Any) -> dict[str, Any]:
    errors = sum(i["verdict"] == "gold_error" for i in items)
    passed = sum(i["passed"] for i in items)
    return {
        "summary": {
            "total": len(items), "passed": passed, "errors": errors,
            "accuracy": passed / (len(items) - errors),
            "by_hardness": {}, "by_tag": {}, "by_database": {},
            "exact_match": None, "term_selection": None, "baseline": None,
            **summary,
        },
        "items": items,
    }


def table_rows(markdown: str, header: str) -> list[str]:
    lines = markdown.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_headline_buckets_and_failures() -> None:
    items = [item("a"), item("b", hardness="hard"), item("c", "mismatch", hardness="hard"),
             item("d", "gold_error", reason="no such table: x")]
    text = render_markdown(report(
        items,
        by_hardness={"hard": {"total": 2, "passed": 1, "accuracy": 0.5},
                     "easy": {"total": 2, "passed": 1, "errors": 1, "accuracy": 1.0},
                     "zeta": {"total": 0, "passed": 0, "accuracy": None}},
        exact_match=0.25,
    ))
    assert text.startswith("### pytest-nl2sql: execution accuracy 2/3 = 66.7%\n")
    assert text.endswith("\n") and "Compared with the baseline" not in text
    assert "exact match (Spider, without values): 25.0%" in text
    assert "**1 case could not be judged**" in text and "`shop.nl2sql.yaml::d`: no such table: x" in text
    rows = table_rows(text, "| hardness | passed | cases | accuracy | 95% CI |")
    assert rows[2:] == ["| easy | 1 | 2 | 100.0% |  |", "| hard | 1 | 2 | 50.0% |  |", "| zeta | 0 | 0 | n/a |  |"]
    assert "<summary>Failures (1)</summary>" in text
    assert "| `shop.nl2sql.yaml::c` | mismatch | values |" in text


def test_baseline_section(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    write_baseline(path, [item(f"q{i}", "mismatch") for i in range(9)] + [item("q9"), item("k", "mismatch")])
    now = [item(f"q{i}") for i in range(9)] + [item("q9", "mismatch"), item("k", "mismatch"), item("n")]
    comparison = compare_with_baseline(load_baseline(path), now)
    for it in now:
        it["baseline"] = comparison.statuses[(it["file"], it["id"])]
    text = render_markdown(report(now, baseline=comparison.to_json()))
    assert "Accuracy then **9.1%**, now **81.8%** over the 11 cases judged in both runs." in text
    assert "**Regressions (1):** `shop.nl2sql.yaml::q9`" in text
    assert "**Fixed (9):** `shop.nl2sql.yaml::q0`" in text
    assert "1 known failure (xfailed); 1 new case." in text
    assert "p = 0.0215, the change is distinguishable from noise" in text
    assert "--nl2sql-baseline=base.json" in text and str(tmp_path) not in text  # no runner's absolute path in a PR comment
    assert "| `shop.nl2sql.yaml::q9` | mismatch | values | regression |" in text  # enum shown by value
    assert "| `shop.nl2sql.yaml::k` | mismatch | values | known_failure |" in text


def test_noise_is_called_noise(tmp_path: Path) -> None:
    path = tmp_path / "base.json"
    write_baseline(path, [item("a"), item("b", "mismatch")])
    comparison = compare_with_baseline(load_baseline(path), [item("a", "mismatch"), item("b")])
    text = render_markdown(report([item("a", "mismatch"), item("b")], baseline=comparison.to_json()))
    assert "p = 1, the change is **not** distinguishable from noise" in text


def test_table_cells_are_escaped() -> None:
    text = render_markdown(report([item("x|y", "pred_error", reason="near \"|\": syntax error\n<b>")]))
    row = next(line for line in text.splitlines() if "syntax error" in line)
    unescaped_pipes = row.replace("\\|", "").count("|")
    assert unescaped_pipes == 4  # three cells
    assert "&lt;b>" in row and "\n" not in row


def test_long_lists_are_cut_and_folded() -> None:
    items = [item(f"f{i}", "mismatch") for i in range(MAX_FAILURES + 5)]
    by_database = {f"db{i}": {"total": 1, "passed": 0, "accuracy": 0.0} for i in range(20)}
    text = render_markdown(report([item("ok")] + items, by_database=by_database))
    assert "… and 5 more (see the JSON report)." in text
    assert sum(line.startswith("| `shop") for line in text.splitlines()) == MAX_FAILURES
    assert "<details><summary>By database (20)</summary>" in text


def test_latency_percentiles() -> None:
    text = render_markdown(report([item(f"q{i}", latency=float(i)) for i in range(1, 6)]))
    assert "predictor latency over 5 cases: p50 3 s, p95 4.8 s" in text


def test_write_markdown_appends_to_the_step_summary(tmp_path: Path) -> None:
    data = report([item("a"), item("b", "mismatch")])
    summary_file = tmp_path / "step-summary.md"
    summary_file.write_text("earlier step\n", encoding="utf-8")
    out = tmp_path / "reports" / "nl2sql-report.md"
    write_markdown(data, out, environ={"GITHUB_STEP_SUMMARY": str(summary_file)})
    write_markdown(data, out, environ={"GITHUB_STEP_SUMMARY": str(summary_file)})
    body = render_markdown(data)
    assert out.read_text(encoding="utf-8") == body  # overwritten, not appended
    assert summary_file.read_text(encoding="utf-8") == "earlier step\n" + (body + "\n") * 2


@pytest.mark.parametrize("environ", [{}, {"GITHUB_STEP_SUMMARY": ""}])
def test_no_step_summary_outside_github(tmp_path: Path, environ: dict[str, str]) -> None:
    out = tmp_path / "r.md"
    write_markdown(report([item("a")]), out, environ=environ)
    assert out.exists() and [p.name for p in tmp_path.iterdir()] == ["r.md"]


def test_partial_component_that_no_query_has_is_not_applicable() -> None:
    partial = {
        "select": {"acc": 0.9, "rec": 0.8, "f1": 0.85, "pred_count": 4, "gold_count": 4},
        "group": {"acc": 0.0, "rec": 0.0, "f1": 1.0, "pred_count": 0, "gold_count": 0},  # official 0 / 0
    }
    text = render_markdown(report([item("a")], partial=partial))
    rows = table_rows(text, "| component | accuracy | recall | F1 |")
    assert rows[2:] == ["| select | 0.900 | 0.800 | 0.850 |", "| group | n/a | n/a | n/a |"]
    assert "0.000 | 0.000 | 1.000" not in text
    assert "n/a: no gold query and no prediction has the component." in text


def test_hardness_in_vocabulary_order_bird_too() -> None:
    bucket = {"total": 1, "passed": 1, "accuracy": 1.0}
    labels = ("challenging", "other", "moderate", "hard", "simple")
    text = render_markdown(report([item("a")], by_hardness={label: bucket for label in labels}))
    rows = table_rows(text, "| hardness | passed | cases | accuracy | 95% CI |")
    assert [row.split(" | ")[0][2:] for row in rows[2:]] == ["hard", "simple", "moderate", "challenging", "other"]


def test_past_the_limit_the_worst_tags_are_shown() -> None:
    from pytest_nl2sql.reports.md import MAX_BUCKETS

    by_tag = {f"tag{i:03d}": {"total": 10, "passed": 10, "accuracy": 1.0} for i in range(MAX_BUCKETS + 10)}
    by_tag["zz-worst"] = {"total": 4, "passed": 0, "accuracy": 0.0}
    by_tag["zz-bad-big"] = {"total": 40, "passed": 20, "accuracy": 0.5}
    by_tag["zz-bad-small"] = {"total": 2, "passed": 1, "accuracy": 0.5}
    by_tag["zz-unjudged"] = {"total": 1, "passed": 0, "errors": 1, "accuracy": None}
    text = render_markdown(report([item("a")], by_tag=by_tag))
    rows = table_rows(text, "| tag | passed | cases | accuracy | 95% CI |")[2:]
    assert len(rows) == MAX_BUCKETS
    assert [row.split(" | ")[0][2:] for row in rows[:4]] == ["zz-worst", "zz-bad-big", "zz-bad-small", "tag000"]
    assert f"The {MAX_BUCKETS} worst of {len(by_tag)} are shown (see the JSON report)." in text
    few = render_markdown(report([item("a")], by_tag={"b": by_tag["zz-worst"], "a": by_tag["tag000"]}))
    assert [r.split(" | ")[0][2:] for r in table_rows(few, "| tag | passed | cases | accuracy | 95% CI |")[2:]] == ["a", "b"]


def test_bucket_names_cannot_break_the_table() -> None:
    bucket = {"total": 1, "passed": 1, "accuracy": 1.0}
    text = render_markdown(report([item("a")], by_tag={"a|b\nc": bucket}, by_database={"<b>x": bucket}))
    assert "| a\\|b c | 1 | 1 | 100.0% |" in text
    assert "| &lt;b>x | 1 | 1 | 100.0% |" in text


def test_huge_reasons_are_cut_with_a_marker() -> None:
    reason = "no such column: " + "x" * 10_000_000
    text = render_markdown(report([item("a", "pred_error", reason=reason), item("b", "gold_error", reason=reason)]))
    assert len(text) < 5_000
    cut = [line for line in text.splitlines() if "no such column" in line]
    assert len(cut) == 2 and all(line.rstrip(" |").endswith("…") for line in cut)


def test_long_case_lists_are_bounded(tmp_path: Path) -> None:
    broken = [item(f"g{i}", "gold_error", reason="missing") for i in range(MAX_FAILURES + 3)]
    text = render_markdown(report([item("a")] + broken))
    assert text.count("- `shop.nl2sql.yaml::g") == MAX_FAILURES
    assert "- … and 3 more (see the JSON report)." in text
    labels = [f"shop.nl2sql.yaml::r{i}" for i in range(MAX_FAILURES + 2)]
    text = render_markdown(report([item("a")], baseline={"path": "b.json", "regressions": labels}))
    assert f"**Regressions ({MAX_FAILURES + 2}):**" in text and "and 2 more (see the JSON report)" in text
    assert "`shop.nl2sql.yaml::r101`" not in text


def test_a_reason_cannot_open_html_outside_a_table() -> None:
    text = render_markdown(report([item("a"), item("g", "gold_error", reason="<details><summary>x")]))
    assert "<details><summary>x" not in text and "&lt;details>&lt;summary>x" in text


def test_a_lone_surrogate_is_written(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    summary_file = tmp_path / "step.md"
    data = report([item("a", "pred_error", reason="near '\ud800'")])
    assert write_markdown(data, out, environ={"GITHUB_STEP_SUMMARY": str(summary_file)}) == [out]
    for written in (out.read_text(encoding="utf-8"), summary_file.read_text(encoding="utf-8")):
        assert "\ud800" not in written  # no lone surrogate reaches the file
        assert "near '\\ud800'" in written or "near '\\\\ud800'" in written  # shown escaped (a table cell doubles the backslash)


def test_an_unwritable_step_summary_is_a_clear_error(tmp_path: Path) -> None:
    from pytest_nl2sql.reports import ReportWriteError

    (tmp_path / "dir").mkdir()
    with pytest.raises(ReportWriteError, match=r"r\.md was written, but not appended to \$GITHUB_STEP_SUMMARY"):
        write_markdown(report([item("a")]), tmp_path / "r.md", environ={"GITHUB_STEP_SUMMARY": str(tmp_path / "dir")})
    assert (tmp_path / "r.md").exists()


def test_every_accuracy_has_its_interval() -> None:
    """The summary's Wilson intervals (accuracy_ci) stand next to the accuracies they belong to."""
    summary = {"total": 4, "passed": 2, "errors": 0, "accuracy": 0.5, "accuracy_ci": [0.150036, 0.849964],
               "by_hardness": {"easy": {"total": 4, "passed": 2, "errors": 0, "accuracy": 0.5,
                                        "accuracy_ci": [0.150036, 0.849964]}}}
    text = render_markdown({"summary": summary, "items": []})
    assert text.startswith("### pytest-nl2sql: execution accuracy 2/4 = 50.0% (95% CI 15.0%–85.0%)\n")
    assert "| easy | 2 | 4 | 50.0% | 15.0%–85.0% |" in text
