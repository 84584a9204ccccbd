"""Reviews: a person's decisions about disputed cases (`--nl2sql-reviews`, `nl2sql review`) and
the review hook's suggestions (gate/reviews.py, review_cli.py).

A review's life: recorded by `nl2sql review --case ... --decision`, applied on the next run (the
case passes with reason `reviewed: <decision>`, the summary gives the accuracy before and after),
stale once the prediction, the gold or the database changes (not applied, counted)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import openpyxl
import pytest
import yaml

from helpers import make_shop, read_report, without_timings, write_suite
from pytest_nl2sql import cli
from pytest_nl2sql.gate.reviews import (
    Review,
    ReviewBook,
    ReviewHookWarning,
    ReviewsError,
    load_reviews,
    parse_reviews,
    record_reviews,
    reviewed,
)
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.summary import summarize
from pytest_nl2sql.vocab import Kind, ReviewDecision, Verdict

# the shop's names are all distinct and no price sits on 2.5: a fragile pass and a neighbour-only failure
CASES = [
    {"id": "distinct", "question": "Which items are there?", "gold": "SELECT name FROM item",  # the prediction's DISTINCT is fragile
     "predicted": "SELECT DISTINCT name FROM item"},
    {"id": "boundary", "question": "Which items cost over 2.5?", "gold": "SELECT name FROM item WHERE price >= 2.5",
     "predicted": "SELECT name FROM item WHERE price > 2.5"},
    {"id": "right", "gold": "SELECT count(*) FROM item", "predicted": "SELECT count(*) FROM item"},
]
HOOK = """
def pytest_nl2sql_review(case, evidence):
    assert evidence["counterexample"]["tables"], evidence  # the rows that tell gold and prediction apart
    return {"decision": "gold-wrong", "note": case.id + ": " + ", ".join(case.disputes)}
"""


def _suite(path: Path, **predicted: str) -> None:
    if not (path / "shop.sqlite").exists():
        make_shop(path)
    write_suite(path, [{**case, "predicted": predicted.get(case["id"], case["predicted"])} for case in CASES], database="shop.sqlite")


def _items(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in report["items"]}


def _review(*args: str) -> int:
    return cli.main(["review", *args])


def test_a_review_is_recorded_applied_and_goes_stale_when_the_prediction_changes(pytester: pytest.Pytester) -> None:
    _suite(pytester.path)
    pytester.runpytest("--nl2sql-report=json:before.json").assert_outcomes(passed=2, failed=1)
    before = read_report(pytester.path / "before.json")
    assert _items(before)["boundary"]["database_hash"].startswith("sha256:")  # a disputed case carries what a review is tied to

    reviews = pytester.path / "reviews.yaml"
    assert _review("before.json", "--reviews", str(reviews), "--case", "boundary", "--decision", "gold-wrong",
                   "--note", "the question says over", "--by", "alice") == 0
    [entry] = yaml.safe_load(reviews.read_text())["reviews"]
    boundary = _items(before)["boundary"]
    assert entry == {**entry, "id": "boundary", "file": "shop.nl2sql.yaml", "decision": "gold-wrong", "by": "alice",
                     "gold": boundary["gold"], "predicted": boundary["predicted"], "database_hash": boundary["database_hash"]}

    # applied: the case passes, and every figure says what the reviews changed
    result = pytester.runpytest(f"--nl2sql-reviews={reviews}", "--nl2sql-report=json:after.json", "--nl2sql-report=md:after.md",
                                "--nl2sql-report=html:after.html", "--nl2sql-report=xlsx:after.xlsx")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "execution accuracy with neighbour databases 3/3 = 100.0% (after reviews)",
        "  before reviews 2/3 = 66.7%; after 3/3 = 100.0% (decisions of --nl2sql-reviews applied: gold-wrong 1)",
    ])
    after = read_report(pytester.path / "after.json")
    item = _items(after)["boundary"]
    assert (item["verdict"], item["reason"]) == ("pass", "reviewed: gold-wrong")
    assert item["review"] == {"decision": "gold-wrong", "note": "the question says over", "by": "alice", "at": entry["at"],
                              "stale": False, "verdict_before": "mismatch", "reason_before": "neighbour database"}
    summary = after["summary"]
    assert (summary["accuracy"], summary["accuracy_before_reviews"]) == (1.0, pytest.approx(2 / 3))
    assert (summary["reviewed"], summary["stale_reviews"]) == ({"gold-wrong": 1}, 0)
    md = (pytester.path / "after.md").read_text()
    assert "**Before reviews: 2/3 = 66.7%**; after: 3/3 = 100.0%" in md and "| `shop.nl2sql.yaml::boundary` | gold-wrong | alice |" in md
    html = (pytester.path / "after.html").read_text()
    assert "<h3>before reviews</h3><p class=\"figure\">66.7%</p>" in html and "gold-wrong 1 applied" in html
    sheet = openpyxl.load_workbook(pytester.path / "after.xlsx")["Statistics"]
    figures = {row[0]: row[1] for row in sheet.iter_rows(values_only=True) if row and row[0]}
    assert figures["before reviews (--nl2sql-reviews; the figure above is after them)"] == pytest.approx(2 / 3)

    # stale: another prediction is not the one decided on
    _suite(pytester.path, boundary="SELECT item.name FROM item WHERE price > 2.5")
    result = pytester.runpytest(f"--nl2sql-reviews={reviews}", "--nl2sql-report=json:stale.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["  1 stale review not applied: the case's gold, prediction or database changed since the decision*"])
    stale = read_report(pytester.path / "stale.json")
    item = _items(stale)["boundary"]
    assert (item["verdict"], item["reason"]) == ("mismatch", "neighbour database")
    assert item["review"]["stale"] is True and item["review"]["stale_because"] == ["predicted"]
    assert (stale["summary"]["reviewed"], stale["summary"]["stale_reviews"]) == ({}, 1)
    assert stale["summary"]["accuracy"] == stale["summary"]["accuracy_before_reviews"] == pytest.approx(2 / 3)


def test_a_hook_suggestion_is_shown_and_applied_only_once_a_person_accepts_it(pytester: pytest.Pytester) -> None:
    _suite(pytester.path)
    pytester.makeconftest(HOOK)
    reviews = pytester.path / "reviews.yaml"
    result = pytester.runpytest(f"--nl2sql-reviews={reviews}", "--nl2sql-report=json:r.json", "--nl2sql-report=md:r.md")
    result.assert_outcomes(passed=2, failed=1)  # a suggestion never changes a verdict
    result.stdout.fnmatch_lines(["  2 suggestions of the pytest_nl2sql_review hook, not applied (nl2sql review * --accept-suggestions)"])
    report = read_report(pytester.path / "r.json")
    items = _items(report)
    assert items["boundary"]["review"]["suggested"] == {"decision": "gold-wrong", "note": "boundary: neighbour-only failure", "by": "hook"}
    assert items["distinct"]["review"]["suggested"]["note"] == "distinct: fragile pass"
    assert items["boundary"]["review"]["decision"] is None and items["right"]["review"] is None  # not disputed: not asked
    assert report["summary"]["review_suggestions"] == 2 and report["summary"]["reviewed"] == {}
    assert "2 suggestions of the review hook, not applied" in (pytester.path / "r.md").read_text()

    assert _review("r.json", "--reviews", str(reviews), "--accept-suggestions", "--case", "boundary", "--by", "carol") == 0
    [entry] = load_reviews(reviews)
    assert (entry.id, entry.decision, entry.by) == ("boundary", ReviewDecision.GOLD_WRONG, "carol")
    assert entry.note == "the review hook's suggestion, accepted: boundary: neighbour-only failure"

    result = pytester.runpytest(f"--nl2sql-reviews={reviews}", "--nl2sql-report=json:r2.json")
    result.assert_outcomes(passed=3)
    items = _items(read_report(pytester.path / "r2.json"))
    assert items["boundary"]["reason"] == "reviewed: gold-wrong"
    assert "suggested" not in items["boundary"]["review"]  # decided: the hook is not asked again
    assert items["distinct"]["review"]["suggested"]["decision"] == "gold-wrong"  # not accepted: still a suggestion


def test_the_json_report_with_reviews_is_the_same_with_and_without_xdist(pytester: pytest.Pytester) -> None:
    _suite(pytester.path)
    pytester.makeconftest(HOOK)
    reviews = pytester.path / "reviews.yaml"
    digest = "sha256:" + hashlib.sha256((pytester.path / "shop.sqlite").read_bytes()).hexdigest()  # the database's bytes
    record_reviews(reviews, [Review(id="boundary", decision=ReviewDecision.BOTH_RIGHT, file="shop.nl2sql.yaml", at="2024-05-01",
                                    gold=CASES[1]["gold"], predicted=CASES[1]["predicted"], database_hash=digest)])
    reports = []
    for args in ([], ["-n", "2"]):
        pytester.runpytest(*args, f"--nl2sql-reviews={reviews}", "--nl2sql-report=json:r.json").assert_outcomes(passed=3)
        reports.append(without_timings(read_report(pytester.path / "r.json")))
    assert reports[0] == reports[1]
    items = _items(reports[0])
    assert items["boundary"]["reason"] == "reviewed: both-right" and items["distinct"]["review"]["suggested"]["by"] == "hook"
    assert reports[0]["summary"]["reviewed"] == {"both-right": 1} and reports[0]["summary"]["review_suggestions"] == 1


# --- nl2sql review: the walk and the script ------------------------------------------------------

def _item(case_id: str, verdict: str = "mismatch", reason: str | None = "neighbour database", **fields: Any) -> dict[str, Any]:
    return {"id": case_id, "nodeid": f"s.nl2sql.yaml::{case_id}", "file": "s.nl2sql.yaml", "question": f"question {case_id}?",
            "gold": f"SELECT {case_id} FROM t", "predicted": f"SELECT {case_id}_2 FROM t", "verdict": verdict,
            "passed": verdict == "pass", "reason": reason, "kind": "sql", "position": 0, "review": None,
            "database_hash": "sha256:abc", "neighbours": {"checked": 3, "failed": 1, "fragile": 0, "counterexample": {
                "breaks": None, "tables": {"t": {"columns": ["a"], "rows": [[f"row of {case_id}"]]}}, "gold": [[1]], "predicted": []}},
            **fields}


def _report(path: Path, *items: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"summary": None, "run": None, "items": list(items)}))
    return path


def test_the_walk_shows_each_disputed_case_and_writes_each_decision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(tmp_path / "r.json", _item("a"), _item("b"), _item("c"), _item("plain", reason="values", neighbours=None))
    reviews = tmp_path / "reviews.yaml"
    # a: an unknown key, then gold-wrong with a note; b: skipped; c: both-right, no note
    monkeypatch.setattr("sys.stdin", io.StringIO("x\ng\nties are broken\ns\nb\n\n"))
    assert _review(str(report), "--reviews", str(reviews), "--by", "dana") == 0
    out = capsys.readouterr().out
    assert "3 disputed case(s) in" in out and "[1/3] s.nl2sql.yaml::a (neighbour-only failure)" in out
    assert "question a?" in out and "SELECT a_2 FROM t" in out and '"row of a"' in out and "answer p, g, b, s or q" in out
    assert "plain" not in out  # a plain mismatch is no dispute
    decisions = {r.id: r for r in load_reviews(reviews)}
    assert set(decisions) == {"a", "c"}
    assert (decisions["a"].decision, decisions["a"].note, decisions["a"].by) == (ReviewDecision.GOLD_WRONG, "ties are broken", "dana")
    assert (decisions["c"].decision, decisions["c"].note) == (ReviewDecision.BOTH_RIGHT, None)
    assert decisions["a"].gold == "SELECT a FROM t" and decisions["a"].database_hash == "sha256:abc"

    # again: the decided cases are left out; `q` stops, the end of the input too
    monkeypatch.setattr("sys.stdin", io.StringIO("q\n"))
    assert _review(str(report), "--reviews", str(reviews)) == 0
    out = capsys.readouterr().out
    assert "2 decided already" in out and "[1/1] s.nl2sql.yaml::b" in out and "no decision written" in out
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert _review(str(report), "--reviews", str(reviews), "--all") == 0
    assert "decided before: gold-wrong by dana" in capsys.readouterr().out
    assert {r.id for r in load_reviews(reviews)} == {"a", "c"}


def test_the_script_form_refuses_what_it_cannot_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(tmp_path / "r.json", _item("a"), {**_item("a"), "file": "other.nl2sql.yaml"},
                     _item("broken", verdict="pred_error", reason="no such column"))
    reviews = str(tmp_path / "reviews.yaml")
    assert _review(str(report), "--reviews", reviews, "--case", "nope", "--decision", "gold-wrong") == 2
    assert "has no case 'nope'" in capsys.readouterr().err
    assert _review(str(report), "--reviews", reviews, "--case", "a", "--decision", "gold-wrong") == 2
    assert "name one with --file" in capsys.readouterr().err
    assert _review(str(report), "--reviews", reviews, "--case", "broken", "--decision", "gold-wrong") == 2
    assert "is pred_error: a review decides between a gold and a prediction that both ran" in capsys.readouterr().err
    assert _review(str(report), "--reviews", reviews, "--decision", "gold-wrong") == 2
    assert not Path(reviews).exists()
    assert _review(str(report), "--reviews", reviews, "--case", "a", "--file", "other.nl2sql.yaml", "--decision", "prediction-wrong") == 0
    assert [(r.file, r.decision) for r in load_reviews(reviews)] == [("other.nl2sql.yaml", ReviewDecision.PREDICTION_WRONG)]


# --- the decisions file ------------------------------------------------------------------------

def _decision(case_id: str, decision: str, at: str, **fields: Any) -> Review:
    return Review(id=case_id, decision=ReviewDecision(decision), file="s.nl2sql.yaml", at=at, gold="SELECT 1", predicted="SELECT 2",
                  **fields)


def test_recording_keeps_every_entry_and_the_newest_decision_per_case_wins(tmp_path: Path) -> None:
    path = tmp_path / "reviews.yaml"
    record_reviews(path, [_decision("a", "gold-wrong", "2024-05-01T10:00:00+00:00", note="line one\nline two"),
                          _decision("b", "both-right", "2024-05-01T10:00:00+00:00")])
    record_reviews(path, [_decision("a", "prediction-wrong", "2024-05-02T10:00:00+00:00")])
    record_reviews(path, [_decision("b", "prediction-wrong", "2024-04-01T10:00:00+00:00")])  # older than what is there: kept out
    book = load_reviews(path)
    assert {r.id: r.decision.value for r in book} == {"a": "prediction-wrong", "b": "both-right"}
    # a hand-merged file holding two decisions about one case: the newest applies
    text = path.read_text() + ("- id: b\n  file: s.nl2sql.yaml\n  decision: gold-wrong\n  at: 2024-06-01T00:00:00Z\n"
                               "  gold: SELECT 1\n  predicted: SELECT 2\n")
    path.write_text(text)
    assert load_reviews(path).lookup("s.nl2sql.yaml", "b").decision is ReviewDecision.GOLD_WRONG
    assert not list(tmp_path.glob("*.lock")) and sorted(p.name for p in tmp_path.iterdir()) == ["reviews.yaml"]


@pytest.mark.parametrize(("text", "line", "message"), [
    ("reviews:\n- id: a\n  decision: gold-wrong\n- id: b\n  decision: maybe\n", 5, "unknown decision 'maybe'"),
    ("reviews:\n- id: a\n  decision: gold-wrong\n  gold: SELECT 1\n  predcited: SELECT 2\n", 5, "unknown key 'predcited'"),
    ("reviews:\n- id: a\n  note: no decision\n", 2, "a decision needs `decision`"),
    ("reviews:\n- id: a\n  decision: [gold-wrong\n", 3, "invalid YAML"),
    ("- id: a\n  decision: gold-wrong\n", 1, "expected a mapping with one key, `reviews:`"),
    ("reviews:\n- id: a\n  decision: gold-wrong\n  gold: {sql: 1}\n", 4, "`gold` must be SQL text"),
])
def test_a_malformed_reviews_file_is_refused_naming_the_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    with pytest.raises(ReviewsError, match=f"^{tmp_path / 'r.yaml'}:{line}: .*{message}".replace("[", r"\[").replace("{", r"\{")):
        load_reviews(_written(tmp_path / "r.yaml", text))


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_malformed_reviews_file_is_a_usage_error_and_is_never_overwritten(pytester: pytest.Pytester,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _suite(pytester.path)
    bad = _written(pytester.path / "reviews.yaml", "reviews:\n- id: boundary\n  decision: gold-wrong\n  by: [me\n")
    result = pytester.runpytest("--nl2sql-reviews=reviews.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*reviews.yaml:4: invalid YAML*"])
    report = _report(pytester.path / "r.json", _item("a"))
    assert _review(str(report), "--reviews", str(bad), "--case", "a", "--decision", "gold-wrong") == 2
    assert "reviews.yaml:4: invalid YAML" in capsys.readouterr().err
    assert bad.read_text().endswith("by: [me\n")  # what a person wrote is never lost


# --- applying a decision --------------------------------------------------------------------------

def _result(verdict: Verdict = Verdict.MISMATCH, reason: str | None = "neighbour database", **fields: Any) -> CaseResult:
    return CaseResult(id="a", nodeid="s.nl2sql.yaml::a", file="s.nl2sql.yaml", position=0, kind=Kind.SQL, verdict=verdict,
                      reason=reason, gold="SELECT 1", predicted="SELECT 2", neighbours={"checked": 3, "failed": 1, "fragile": 0},
                      **fields)


def _book(decision: str, database_hash: str | None = "sha256:one") -> ReviewBook:
    entry = Review(id="a", decision=ReviewDecision(decision), file="s.nl2sql.yaml", gold="SELECT 1", predicted="SELECT 2",
                   database_hash=database_hash)
    return ReviewBook("r.yaml", {entry.key: entry})


def test_a_decision_applies_only_on_the_database_it_was_made_on() -> None:
    applied = reviewed(_result(), _book("both-right"), None, lambda: "sha256:one")
    assert (applied.verdict, applied.reason, applied.review["stale"]) == (Verdict.PASS, "reviewed: both-right", False)
    stale = reviewed(_result(), _book("both-right"), None, lambda: "sha256:two")
    assert (stale.verdict, stale.review["stale"], stale.review["stale_because"]) == (Verdict.MISMATCH, True, ["database"])
    gold = reviewed(_result().replace(gold="SELECT 1 + 0"), _book("gold-wrong"), None, lambda: "sha256:one")
    assert gold.verdict is Verdict.MISMATCH and gold.review["stale_because"] == ["gold"]
    kept = reviewed(_result(), _book("prediction-wrong"), None, lambda: "sha256:one")
    assert (kept.verdict, kept.reason, kept.review["decision"]) == (Verdict.MISMATCH, "neighbour database", "prediction-wrong")
    summary = summarize([applied, kept, stale])
    assert summary["reviewed"] == {"prediction-wrong": 1, "both-right": 1} and summary["stale_reviews"] == 1
    assert (summary["accuracy"], summary["accuracy_before_reviews"], summary["passed_before_reviews"]) == (pytest.approx(1 / 3), 0.0, 0)


def test_a_case_whose_prediction_did_not_run_is_never_reviewed() -> None:
    hashed = []
    broken = _result(Verdict.PRED_ERROR, "no such column")
    assert reviewed(broken, _book("gold-wrong"), None, lambda: hashed.append(1) or "sha256:one") is broken
    assert not hashed  # nor its database hashed


def test_a_hook_that_raises_or_answers_nonsense_changes_nothing() -> None:
    def raising(case: Any, evidence: Any) -> Any:
        raise RuntimeError("the judge is down")

    with pytest.warns(ReviewHookWarning, match="raised for s.nl2sql.yaml::a: RuntimeError: the judge is down"):
        result = reviewed(_result(), None, raising, lambda: "sha256:one")
    assert result.review is None and result.verdict is Verdict.MISMATCH and result.database_hash == "sha256:one"
    with pytest.warns(ReviewHookWarning, match="answered 'yes'"):
        assert reviewed(_result(), None, lambda case, evidence: "yes", lambda: None).review is None


def test_parse_reviews_reads_what_record_reviews_writes(tmp_path: Path) -> None:
    written = [_decision("a", "gold-wrong", "2024-05-01T10:00:00+00:00", note="it: `quoted`", by="ann", database_hash="sha256:x"),
               Review(id="7", decision=ReviewDecision.BOTH_RIGHT, gold=["SELECT 1", "SELECT\n  2"], predicted=None, at="2024-05-01")]
    book = record_reviews(tmp_path / "r.yaml", written)
    assert sorted(parse_reviews((tmp_path / "r.yaml").read_text(), "r.yaml"), key=lambda r: r.id) == sorted(written, key=lambda r: r.id)
    assert book.lookup("any.nl2sql.yaml", "7").decision is ReviewDecision.BOTH_RIGHT  # an entry naming no file: any file's
