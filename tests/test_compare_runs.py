"""`nl2sql compare A.json B.json`: two runs side by side, from their JSON reports (no pytest run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.cli import main
from pytest_nl2sql.gate.compare import (
    SHOWN_FLIPS,
    ReportError,
    compare_files,
    compare_reports,
    read_run,
    render_html,
    render_markdown,
    render_text,
)
from pytest_nl2sql.gate.stats import mcnemar_exact
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.summary import build_report, summarize
from pytest_nl2sql.vocab import Kind, Verdict

HARDNESS = ["easy", "medium", "hard", "extra"]


def report(verdicts: list[str], *, file: str = "s.nl2sql.yaml", ids: list[str] | None = None,
           predicted: dict[int, str] | None = None, label: str | None = None, **options: Any) -> dict[str, Any]:
    """A JSON report as the plugin writes it: case n has hardness HARDNESS[n % 4], tag t{n % 2},
    database db{n % 3}, prediction `SELECT n`."""
    ids = ids or [f"q{n}" for n in range(len(verdicts))]
    results = [
        CaseResult(id=ids[n], nodeid=f"{file}::{ids[n]}", file=file, position=n, kind=Kind.SQL, verdict=Verdict(v), hardness=HARDNESS[n % 4], tags=(f"t{n % 2}",),
                   database=f"db{n % 3}", question=f"question {n}", predicted=(predicted or {}).get(n, f"SELECT {n}"),
                   reason=None if v in ("pass", "gold_error") else "values", exact_match=v == "pass")
        for n, v in enumerate(verdicts)
    ]
    data = build_report(results, summarize(results))
    data["run"] = {"label": label, "started": "2026-01-02T03:04:05+00:00", "options": {"neighbours": 3, **options}}
    return data


def save(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


A = ["pass", "pass", "pass", "mismatch", "mismatch", "pass", "gold_error", "pass"]
B = ["pass", "mismatch", "pred_error", "pass", "mismatch", "pass", "pass", "pass"]


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    return save(tmp_path / "a.json", report(A, label="model-a")), save(tmp_path / "b.json", report(B, label="model-b"))


def test_figures_buckets_flips_and_mcnemar(two: tuple[Path, Path]) -> None:
    c = compare_files(*two)
    overall = c.figures[0]
    assert overall.a_counts == (5, 7) and overall.b_counts == (5, 8)  # A's gold_error is outside A's figure
    assert overall.delta == pytest.approx(5 / 8 - 5 / 7)
    assert [f.name for f in c.figures][-1] == "exact set match"
    assert (c.matched_by, c.paired, c.passed_a, c.passed_b) == ("nodeid", 7, 5, 4)  # q6 is not paired
    assert [f.label for f in c.worse] == ["s.nl2sql.yaml::q1", "s.nl2sql.yaml::q2"]
    assert [f.label for f in c.better] == ["s.nl2sql.yaml::q3"]
    assert c.unjudged == ("s.nl2sql.yaml::q6",)
    assert c.p_value == mcnemar_exact(2, 1) == 1.0
    worse = c.worse[1]
    assert (worse.a["verdict"], worse.b["verdict"], worse.b["predicted"]) == ("pass", "pred_error", "SELECT 2")
    hardness = [b for b in c.buckets if b.kind == "hardness"]
    assert [b.name for b in hardness] == HARDNESS
    medium = hardness[1]  # q1 and q5: both passed in A; q1 fails in B
    assert (medium.a, medium.b, medium.delta) == ((2, 2), (1, 2), -0.5)
    databases = [b for b in c.buckets if b.kind == "database"]
    assert abs(databases[0].delta or 0) >= abs(databases[-1].delta or 0)  # largest change first


def test_cases_only_in_one_run_are_listed_apart(tmp_path: Path) -> None:
    a = report(["pass", "pass", "mismatch"], ids=["x", "y", "z"])
    b = report(["mismatch", "pass", "pass"], ids=["y", "z", "w"])
    c = compare_reports(read_run(save(tmp_path / "a.json", a)), read_run(save(tmp_path / "b.json", b)))
    assert c.only_a == ("s.nl2sql.yaml::x",) and c.only_b == ("s.nl2sql.yaml::w",)
    assert (c.paired, [f.label for f in c.worse], [f.label for f in c.better]) == (2, ["s.nl2sql.yaml::y"], ["s.nl2sql.yaml::z"])


def test_one_suite_file_per_model_pairs_by_case_id(tmp_path: Path) -> None:
    a = save(tmp_path / "a.json", report(["pass", "mismatch"], file="dail.nl2sql.yaml"))
    b = save(tmp_path / "b.json", report(["mismatch", "mismatch"], file="c3.nl2sql.yaml"))
    c = compare_files(a, b)
    assert (c.matched_by, c.paired, len(c.worse)) == ("id", 2, 1)
    assert c.worse[0].label == "q0 (dail.nl2sql.yaml / c3.nl2sql.yaml)"
    assert any("paired by their id" in w for w in c.warnings)


def test_neighbour_strict_and_term_selection_figures_when_the_runs_have_them(tmp_path: Path) -> None:
    a, b = report(A), report(B)
    for data, own, fragile, precision in ((a, 6, 1, 0.5), (b, 7, 0, 0.75)):
        data["summary"].update(neighbours={"cases": 7, "databases": 21, "caught": 1}, single_db_passed=own, fragile=fragile,
                               term_selection={"macro_precision": precision, "macro_recall": 1.0})
    figures = {f.name: f for f in compare_files(save(tmp_path / "a.json", a), save(tmp_path / "b.json", b)).figures}
    assert list(figures) == ["execution accuracy (with neighbour databases)", "one-database execution accuracy",
                             "strict (fragile passes fail)", "exact set match",
                             "term selection macro precision", "term selection macro recall"]
    assert (figures["one-database execution accuracy"].a_counts, figures["strict (fragile passes fail)"].a_counts) == ((6, 7), (4, 7))
    assert figures["term selection macro precision"].delta == 0.25 and not figures["term selection macro recall"].delta


def test_runs_with_other_options_are_compared_with_a_warning(tmp_path: Path) -> None:
    a = save(tmp_path / "a.json", report(A))
    b = save(tmp_path / "b.json", report(B, neighbours=0, predictions="other.sql"))
    warnings = compare_files(a, b).warnings
    assert len(warnings) == 1 and "neighbours 3 / 0" in warnings[0] and "predictions" not in warnings[0]


def test_terminal_output_puts_figures_first_and_cuts_long_lists(tmp_path: Path) -> None:
    n = 3 * SHOWN_FLIPS
    a = save(tmp_path / "a.json", report(["pass"] * n))
    b = save(tmp_path / "b.json", report(["mismatch"] * n))
    c = compare_files(a, b)
    lines = render_text(c)
    text = "\n".join(lines)
    assert lines[2].split() == ["A", "B", "B", "-", "A"]
    assert text.index("execution accuracy") < text.index("McNemar exact p") < text.index(f"passed in A, fails in B ({n})")
    assert f"  ... {n - SHOWN_FLIPS} more (-v or --all lists them)" in lines
    assert sum(line.startswith("    A: ") for line in lines) == SHOWN_FLIPS
    everything = render_text(c, everything=True)
    assert sum(line.startswith("    B: ") for line in everything) == n and not any("more (" in line for line in everything)
    assert len(lines) < 45  # a screenful


def test_untrusted_text_is_escaped_everywhere(tmp_path: Path) -> None:
    hostile = "SELECT '\x1b[31m|`<script>alert(1)</script>\u202e' -- ::error::x"
    a = save(tmp_path / "a.json", report(["pass", "pass"], predicted={1: hostile}))
    b = save(tmp_path / "b.json", report(["pass", "mismatch"], predicted={1: hostile}))
    c = compare_files(a, b)
    text = "\n".join(render_text(c))
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[31m" in text
    md = render_markdown(c)
    assert "\x1b" not in md and "\u202e" not in md
    assert "| ``SELECT '\\x1b[31m\\|`<script>alert(1)</script>\\u202e' -- ::error::x`` |" in md  # a code span shows it as text
    page = render_html(c)
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_markdown_and_html_carry_the_figures_and_the_flips(two: tuple[Path, Path]) -> None:
    c = compare_files(*two)
    md = render_markdown(c)
    assert "| execution accuracy | 5/7 = 71.4% | 5/8 = 62.5% | -8.9 pts |" in md
    assert "| paired cases (7, judged in both) | 5/7 = 71.4% | 4/7 = 57.1% | -14.3 pts |" in md
    assert "Passed in A, fail in B (2)" in md and "`SELECT 2`" in md and "McNemar exact p = 1" in md
    page = render_html(c)
    assert page.startswith("<!DOCTYPE html>") and "model-b (B) against model-a (A)" in page
    for fetched in ("http://", "https://", "src=", "<link", "@import", "url("):
        assert fetched not in page  # nothing from the network: the file is all there is
    assert "Failed in A, pass in B (1)" in page
    assert "Content-Security-Policy\" content=\"default-src 'none'" in page


@pytest.mark.parametrize(("content", "problem"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "no `items` list"),
    ('{"items": [1]}', "item 1: not an object"),
    ('{"items": [{"verdict": "pass"}]}', "item 1: no `id`"),
    ('{"items": [{"id": "x"}]}', "item 1: neither `passed` nor `verdict`"),
    ('{"items": [], "summary": []}', "must be objects"),
    (b"\xff\xfe", "cannot be read"),
])
def test_a_file_that_is_not_a_report_is_named(tmp_path: Path, content: str | bytes, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ReportError, match=problem) as raised:
        read_run(path)
    assert str(path) in str(raised.value)


def test_cli_prints_writes_md_and_html_and_exits_0(two: tuple[Path, Path], tmp_path: Path, capsys: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["compare", *map(str, two), "--nl2sql-report=md:out/c.md", "--nl2sql-report=html"])
    out = capsys.readouterr().out
    assert code == 0
    assert "McNemar exact p = 1" in out and "passed in A, fails in B (2):" in out
    assert f"md comparison: {tmp_path / 'out' / 'c.md'}" in out
    assert "| figure | A | B | B − A |" in (tmp_path / "out" / "c.md").read_text()
    assert (tmp_path / "nl2sql-compare.html").read_text().startswith("<!DOCTYPE html>")


def test_cli_refuses_unreadable_reports_naming_the_file(two: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    broken = save(tmp_path / "broken.json", '{"summary": {}}')
    assert main(["compare", str(two[0]), str(broken)]) == 2
    assert f"{broken}: not a JSON report of pytest-nl2sql" in capsys.readouterr().err
    assert main(["compare", str(two[0]), str(tmp_path / "missing.json")]) == 2
    assert "missing.json: cannot be read" in capsys.readouterr().err
    assert main(["compare", *map(str, two), "--nl2sql-report=pdf"]) == 4
    assert "unknown format 'pdf'" in capsys.readouterr().err


def test_python_dash_m_runs_the_command(two: tuple[Path, Path]) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_nl2sql", "compare", *map(str, two), "--all"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"A: {two[0]}, label model-a")
