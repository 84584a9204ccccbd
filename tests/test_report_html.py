"""The HTML report: one self-contained page (run, summary, charts, a table of cases with each
failure's explanation, diff and counterexample), escaped against whatever a case holds.

Most tests read the page as text; `test_browser_*` open it in headless Chromium (`--dump-dom`)
and skip where no Chromium or Chrome is installed (CI installs Debian's `chromium`).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from helpers import make_shop, read_report, write_suite
from pytest_nl2sql.gate.finish import TREND_FORMATS
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.summary import accuracy_name
from pytest_nl2sql.reports import default_path, write_report, writer_for
from pytest_nl2sql.reports.html import MAX_TEXT, PAGE_ROWS, render_html, script_json
from pytest_nl2sql.vocab import Kind, Verdict

# Each payload would change the page if it ever ran or became markup.
SCRIPT_BREAKOUT = "</script><script>document.body.setAttribute('data-pwned','script')</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
ATTRIBUTE = "\"><svg onload=\"document.body.setAttribute('data-pwned','svg')\">"
COMMENT = "<!--<script>"
HOSTILE_NODEID = f"shop.nl2sql.yaml::{IMG}"

DIFF = {"gold_columns": ["name"], "predicted_columns": ["name"], "pairing": [0],
        "missing": [["lamp"], ["rug"]], "extra": [["mug"]], "missing_count": 2, "extra_count": 1,
        "first_order_difference": None}
COUNTEREXAMPLE = {"checked": 3, "failed": 1, "fragile": 0, "counterexample": {
    "breaks": None, "tables": {"product": {"columns": ["id", "name", "price"], "rows": [[63, "ink 16", 24.5]]}},
    "gold": [["ink 16"]], "predicted": []}}


def item(case_id: str, verdict: str = "pass", **fields: Any) -> dict[str, Any]:
    fields.setdefault("hardness", "easy")
    fields.setdefault("reason", None if verdict == "pass" else "values")
    extra = fields.pop("extra", {})
    result = CaseResult(
        id=case_id, nodeid=f"shop.nl2sql.yaml::{case_id}", file="shop.nl2sql.yaml", position=0,
        kind=Kind.SQL, verdict=Verdict(verdict), database=fields.pop("database", "shop.sqlite"),
        question=fields.pop("question", f"question of {case_id}"), gold=fields.pop("gold", "SELECT 1"),
        predicted=fields.pop("predicted", "SELECT 1"), extra=extra, **fields,
    ).to_json()
    result["partial"] = {"select": {"acc": 1}}  # bulky, and not shown: left out of the page
    return result


def report(items: list[dict[str, Any]], **summary: Any) -> dict[str, Any]:
    errors = sum(i["verdict"] == "gold_error" for i in items)
    passed = sum(i["passed"] for i in items)
    judged = len(items) - errors
    return {
        "run": {"started": "2026-11-27T12:02:40+00:00", "duration_s": 2.3, "label": "gpt-x prompt 7",
                "git_commit": "e6e6ae7e74604c2c068aa5b9ab65944aa66d355e+dirty", "engine": "per case",
                "complete": True, "options": {"neighbours": 3}},
        "summary": {
            "total": len(items), "passed": passed, "errors": errors, "accuracy": passed / judged if judged else None,
            "accuracy_ci": [0.2, 0.9], "by_hardness": {
                "easy": {"total": 3, "passed": 2, "errors": 0, "accuracy": 2 / 3, "accuracy_ci": [0.2, 0.94]},
                "hard": {"total": 1, "passed": 0, "errors": 1, "accuracy": None}},
            "by_tag": {}, "by_database": {"shop.sqlite": {"total": len(items), "passed": passed, "errors": errors}},
            "exact_match": None, "term_selection": None, "baseline": None, **summary,
        },
        "items": items,
    }


MODEL_LOOP = {  # the item fields of the model in the loop (retries, usage, --nl2sql-repeat, Markdown answers)
    "attempts": 3, "usage": {"prompt_tokens": 120, "completion_tokens": 30, "cost": 0.002},
    "repeats": {"k": 3, "passed": 1, "verdicts": ["mismatch", "pass", "mismatch"], "predicted": ["SELECT 1", "SELECT 2", "SELECT 3"]},
    "raw_prediction": "Here it is:\n```sql\nSELECT name FROM item\n```",
}


def mixed_items() -> list[dict[str, Any]]:
    return [
        item("ok", predicted="SELECT name FROM product"),
        {**item("wrong", "mismatch", diff=DIFF, soft_scores={"row_f1": 0.4, "column_f1": 1.0}, near_miss="duplicates"),
         **MODEL_LOOP},
        item("only-on-a-neighbour", "mismatch", reason="neighbour database", neighbours=COUNTEREXAMPLE),
        item("broken", "gold_error", hardness="hard", reason="no such table: nope"),
        item("hostile", "pred_error", predicted=SCRIPT_BREAKOUT, question=IMG + COMMENT, tags=(ATTRIBUTE,),
             reason=f"near \"{SCRIPT_BREAKOUT}\": syntax error\u2028\u2029", database=ATTRIBUTE),
    ]


def blob(page: str) -> dict[str, Any]:
    """The JSON the page embeds for its script."""
    found = re.search(r'<script type="application/json" id="nl2sql-data">(.*?)</script>', page, re.S)
    assert found, "no data blob"
    return json.loads(found.group(1))


# --------------------------------------------------------------------------- the page as text


def test_registered_beside_the_other_formats() -> None:
    assert writer_for("html").extension == "html"
    assert default_path("html") == Path("nl2sql-report.html")


def test_run_information_summary_figures_and_charts() -> None:
    page = render_html(report(
        mixed_items(), neighbours={"cases": 2, "databases": 6, "caught": 1}, single_db_accuracy=0.75,
        strict_accuracy=0.25, fragile=1, exact_match=0.5, exact_match_passed=2, exact_match_total=4,
        soft_scores={"row_f1": 0.625, "row_precision": 0.7, "row_recall": 0.6, "column_f1": 0.9},
        term_selection={"macro_precision": 0.5, "macro_recall": 1.0, "total": 2, "passed": 1},
        by_verdict={"pass": 1, "mismatch": 2, "pred_error": 1, "gold_error": 1}, gold_warnings=2,
    ))
    assert accuracy_name({"neighbours": True}) == "execution accuracy with neighbour databases"
    for shown in ("gpt-x prompt 7", "2026-11-27 12:02:40 UTC", "e6e6ae7e74604c2c068aa5b9ab65944aa66d355e+dirty",
                  "per case", "execution accuracy with neighbour databases", "25.0%", "1 / 4 judged cases",
                  "one-database execution accuracy", "the cases&#x27; own databases alone", "75.0%", "strict (fragile passes counted as failures)",
                  "1 fragile pass(es)", "exact match (Spider, without values)", "50.0%", "2 / 4 cases",
                  "row F1 0.625", "term selection (macro)", "P 0.500 · R 1.000", "nondeterministic golds",
                  "by hardness", "By database (1)"):
        assert shown in page, shown
    assert "<title>nl2sql report: gpt-x prompt 7 · 25.0%</title>" in page
    assert page.count('<rect class="fill"') >= 1 and 'aria-label="accuracy by h"' in page  # the hardness bars
    assert '<a href="#v=gold_error">' in page and '<a href="#h=hard">' in page  # figures filter the table
    assert "Trend" not in page  # no history


def test_model_in_the_loop_figures() -> None:
    page = render_html(report(
        mixed_items(), predictor_errors=2, answered_accuracy=0.5,
        usage={"cases": 4, "total": {"prompt_tokens": 1200, "completion_tokens": 300, "cost": 0.25},
               "mean": {"prompt_tokens": 300.0, "completion_tokens": 75.0, "cost": 0.0625}},
        pass_at_k={"1": 0.5, "2": 0.6, "3": 0.7}, consistency=0.75,
    ))
    for shown in ("predictor errors", "accuracy over the answered cases: 50.0%", '<a href="#v=predictor_error">',
                  "cost 0.25", "tokens: 1,200 prompt, 300 completion", "pass@k (k = 1 … 3)", "@1 50.0% · @3 70.0%",
                  "consistency 75.0%"):
        assert shown in page, shown
    wrong = next(i for i in blob(page)["items"] if i["id"] == "wrong")
    assert {k: wrong[k] for k in MODEL_LOOP} == MODEL_LOOP
    assert "attempts" not in next(i for i in blob(page)["items"] if i["id"] == "ok")  # asked once: nothing to say


def test_an_interrupted_run_says_so() -> None:
    data = report([item("a")])
    data["run"]["complete"] = False
    assert "Interrupted run" in render_html(data)


def test_hostile_text_stays_text() -> None:
    items = mixed_items()
    items.append(item("x", "mismatch", hardness=ATTRIBUTE, question="\x1b[31mred\u202eevil\ud800"))
    data = report(items, by_tag={ATTRIBUTE: {"total": 1, "passed": 0}})
    data["run"]["label"] = f"</title>{SCRIPT_BREAKOUT}"
    data["summary"]["by_hardness"][ATTRIBUTE] = {"total": 1, "passed": 0, "errors": 0, "accuracy": 0.0}
    page = render_html(data)
    assert page.count("<script") == 2 and page.count("</script>") == 2  # the data blob and the page's script
    for raw in ("<img", "<svg onload", "<!--", "\u2028", "\u2029", "\x1b", "\u202e"):
        assert raw not in page, raw
    assert "<title>nl2sql report: &lt;/title&gt;&lt;/script&gt;" in page
    assert "&lt;/title&gt;&lt;/script&gt;&lt;script&gt;" in page  # the label, shown
    items_back = blob(page)["items"]
    hostile = next(i for i in items_back if i["id"] == "hostile")
    assert hostile["predicted"] == SCRIPT_BREAKOUT and hostile["question"] == IMG + COMMENT
    assert hostile["reason"].endswith("\u2028\u2029") and hostile["tags"] == [ATTRIBUTE]
    assert next(i for i in items_back if i["id"] == "x")["question"] == "\\x1b[31mred\\u202eevil\\ud800"


def test_script_json_is_inert_inside_a_script_element() -> None:
    value = {"a</script>": "<!-- & > \u2028 \u2029 </SCRIPT >", "n": [1, 2.5, None, True]}
    text = script_json(value)
    assert not set(text) & set("<>&\u2028\u2029")
    assert json.loads(text) == value


def test_items_carry_what_the_page_shows_and_no_more() -> None:
    long_sql = "SELECT " + "x, " * MAX_TEXT
    items = [item("a", "predictor_error", predicted=long_sql, reason="RuntimeError: boom",
                  extra={"traceback": "Traceback (most recent call last):\n  boom", "key": "k"},
                  soft_scores={"row_f1": 0.333333333, "column_f1": float("nan")}, latency=0.123456789)]
    (shown,) = blob(render_html(report(items)))["items"]
    assert {"partial", "fingerprint", "position", "extra", "nodeid", "term_selection"}.isdisjoint(shown)
    assert shown["traceback"].startswith("Traceback") and shown["latency"] == 0.1235
    assert shown["soft_scores"] == {"row_f1": 0.333, "column_f1": "nan"}  # JSON.parse rejects NaN
    assert len(shown["predicted"]) < MAX_TEXT + 100 and "[cut: " in shown["predicted"]


def test_self_contained_and_only_its_own_script_and_style_run() -> None:
    page = render_html(report(mixed_items()))
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1).replace("&#x27;", "'")
    assert policy.startswith("default-src 'none';")
    for pattern in (r"<script>(.*?)</script>", r"<style>(.*?)</style>"):
        body = re.search(pattern, page, re.S).group(1)
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy  # else the browser would refuse it
    assert not re.search(r"""(src|href|action)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "@import" not in page and "url(" not in page


def test_trend_when_the_report_has_history() -> None:
    def entry(day: int, accuracy: float, complete: bool = True) -> dict[str, Any]:
        return {"run": {"started": f"2026-11-{day:02d}T09:00:00+00:00", "label": f"run {day}", "complete": complete},
                "summary": {"accuracy": accuracy, "by_hardness": {"easy": {"accuracy": accuracy + 0.1}}}}

    data = report([item("a")])
    data["history"] = [entry(1, 0.5), entry(2, 0.4, complete=False), entry(3, 0.7)]
    data["history"][-1]["run"] = data["run"]
    page = render_html(data)
    assert "Trend over 3 runs" in page and page.count("<polyline") == 2  # accuracy and easy
    assert 'class="incomplete"' in page and 'class="current"' in page
    assert "#3 (this run)" in page and "40.0% (interrupted)" in page


def test_empty_and_partial_reports_render() -> None:
    assert blob(render_html({"summary": {}, "items": []}))["items"] == []
    page = render_html({"summary": {"total": 1, "passed": 1}, "items": [{"id": "a", "verdict": "pass", "passed": True}]})
    assert blob(page)["items"] == [{"id": "a", "verdict": "pass", "passed": True}]
    assert "pass</a> 1" in page  # verdicts counted from the items when the summary has none


def test_write_html_writes_one_file_and_survives_a_lone_surrogate(tmp_path: Path) -> None:
    path = tmp_path / "out" / "r.html"
    path.parent.mkdir()
    written = write_report("html", report([item("a", predicted="SELECT '\ud800'")]), path)
    assert written == [path] and sorted(p.name for p in tmp_path.rglob("*")) == ["out", "r.html"]
    assert "\\ud800" in path.read_text(encoding="utf-8")


def test_html_report_of_a_pytest_run(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, [
        {"id": "right", "gold": "SELECT name FROM item ORDER BY id", "predicted": "SELECT name FROM item ORDER BY id"},
        {"id": "wrong", "gold": "SELECT name FROM item WHERE price > 2", "predicted": "SELECT name FROM item"},
        {"id": "hostile", "question": IMG, "gold": "SELECT 1", "predicted": SCRIPT_BREAKOUT},
        {"id": "broken", "gold": "SELECT * FROM nope", "predicted": "SELECT 1"},
    ], database="shop.sqlite")
    result = pytester.runpytest("--nl2sql-report=html", "--nl2sql-report=json:r.json", "--nl2sql-label=model <b>")
    page = (pytester.path / "nl2sql-report.html").read_text(encoding="utf-8")
    assert "html report: nl2sql-report.html" in result.stdout.lines  # relative to the rootdir
    expected = read_report(pytester.path / "r.json")
    shown = blob(page)["items"]
    assert [(i["id"], i["verdict"]) for i in shown] == [(i["id"], i["verdict"]) for i in expected["items"]]
    assert next(i for i in shown if i["id"] == "wrong")["diff"]["extra"]  # the rows the prediction added
    assert "model &lt;b&gt;" in page and page.count("<script") == 2


@pytest.mark.skipif("html" not in TREND_FORMATS,
                    reason="gate/finish.py does not hand --nl2sql-history to the html writer (TREND_FORMATS)")
def test_html_trend_of_a_pytest_run_with_history(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, [{"id": "a", "gold": "SELECT 1", "predicted": "SELECT 1"}], database="shop.sqlite")
    for _ in range(2):
        pytester.runpytest("--nl2sql-history=h.jsonl", "--nl2sql-report=html:r.html")
    assert "Trend over 2 runs" in (pytester.path / "r.html").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- in a real browser

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


@pytest.fixture(scope="module")
def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium or Chrome on PATH (Debian: apt-get install chromium) for the browser test")


def rendered(browser: str, page: Path, fragment: str, profile: Path) -> str:
    """The DOM of `page#fragment` after its script ran, as headless Chromium serialises it."""
    return rendered_many(browser, page, [fragment], profile)[0]


def rendered_many(browser: str, page: Path, fragments: list[str], profile: Path) -> list[str]:
    """The DOM of `page#fragment` for each fragment, after the page's script ran, from one launch
    of headless Chromium (a launch costs ~0.7 s): a harness page beside `page` opens each in its own
    frame and, as each frame's load event fires (before the harness's own, after which Chromium
    dumps the DOM), keeps the frame's serialised DOM as the text of a textarea of its own (escaped
    there by the serialiser, so `html.unescape` gives it back exactly)."""
    harness = page.with_name(page.stem + "-harness.html")
    harness.write_text(f"""<!doctype html><html><body><script>
const fragments = {json.dumps(fragments)};
fragments.forEach((fragment, n) => {{
  const frame = document.createElement("iframe");
  frame.onload = () => {{
    const out = document.createElement("textarea");
    out.id = "dom-" + n;
    out.textContent = frame.contentDocument.documentElement.outerHTML;
    document.body.appendChild(out);
  }};
  frame.src = {json.dumps(page.name)} + fragment;
  document.body.appendChild(frame);
}});
</script></body></html>""", encoding="utf-8")
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--disable-sync", "--allow-file-access-from-files",
               f"--user-data-dir={profile}", "--dump-dom", harness.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0 and "<body" in done.stdout, done.stderr[-2000:]
    doms = dict(re.findall(r'<textarea id="dom-(\d+)">(.*?)</textarea>', done.stdout, re.DOTALL))
    assert len(doms) == len(fragments), done.stdout[-2000:]
    return [html.unescape(doms[str(n)]) for n in range(len(fragments))]


def body_attributes(dom: str) -> dict[str, str]:
    return dict(re.findall(r'([\w-]+)="([^"]*)"', re.search(r"<body([^>]*)>", dom).group(1)))


def case_ids(dom: str) -> list[str]:
    return re.findall(r'<button type="button" class="idbtn"(?: [\w-]+="[^"]*")*>([^<]*)</button>', dom)


TAG = re.compile(r'<([a-zA-Z][\w-]*)((?:\s+[^\s"=/>]+(?:="[^"]*")?)*)\s*/?>')


def elements(dom: str) -> list[tuple[str, list[str]]]:
    """(name, attribute names) of every start tag; a `<` inside a quoted attribute value (text
    shown in a tooltip) is part of that value, not a tag."""
    return [(m.group(1).lower(), re.findall(r'\s([^\s"=/>]+)(?:="[^"]*")?', m.group(2))) for m in TAG.finditer(dom)]


def detail_row(dom: str) -> str:
    """The opened case's detail row (up to the next case's row)."""
    return dom.split('<tr class="detail"', 1)[1].split('<tr class="case"', 1)[0]


def test_browser_filters_opens_a_failure_and_keeps_hostile_text_inert(browser: str, tmp_path: Path) -> None:
    items = mixed_items() + [item(f"p{n:03d}") for n in range(PAGE_ROWS + 20)]
    items[4]["nodeid"] = HOSTILE_NODEID  # an opened row keyed by hostile text, too
    page = tmp_path / "r.html"
    write_report("html", report(items), page)
    open_it = "&open=" + quote("shop.nl2sql.yaml::only-on-a-neighbour", safe="")
    filtered, searched, hostile = rendered_many(browser, page, [
        "#v=mismatch&sort=-n" + open_it, "#q=wrong&open=" + quote("shop.nl2sql.yaml::wrong", safe=""),
        "#open=" + quote(HOSTILE_NODEID, safe="")], tmp_path / "profile")
    dom = filtered
    attributes = body_attributes(dom)
    assert "data-error" not in attributes and "data-pwned" not in attributes
    assert attributes["data-matching"] == attributes["data-rendered"] == "2"
    assert case_ids(dom) == ["only-on-a-neighbour", "wrong"]  # the last case first
    assert dom.count('<tr class="detail"') == 1
    detail = detail_row(dom)
    for shown in ("mismatch", "neighbour database", "judged on 3 neighbour database(s): 1 failed", "Counterexample",
                  "<code>product</code>", '"ink 16"', "24.5", "the prediction returns there:"):
        assert shown in detail, shown

    dom = searched
    assert "data-error" not in body_attributes(dom)
    detail = detail_row(dom)
    for shown in ("near miss", "duplicates: the same rows with duplicates lost or added", "attempts", "1 of 3 answers passed",
                  "rows missing (in the gold, not predicted): 2", '"lamp"', "rows extra (predicted, not in the gold): 1",
                  "the answer as the model returned it", "Soft scores"):
        assert shown in detail, shown

    dom = hostile
    attributes = body_attributes(dom)
    assert "data-error" not in attributes and "data-pwned" not in attributes
    assert attributes["data-matching"] == str(len(items)) and attributes["data-rendered"] == str(PAGE_ROWS)
    tags = elements(dom)
    assert [name for name, _ in tags].count("script") == 2 and "img" not in {name for name, _ in tags}
    assert not [(name, a) for name, attrs in tags for a in attrs if a.lower().startswith("on")]
    detail = detail_row(dom)  # the hostile case, opened: its prediction shown as text
    assert "pred_error" in detail and "&lt;/script&gt;&lt;script&gt;document.body.setAttribute" in detail


def test_browser_search_and_sort(browser: str, tmp_path: Path) -> None:
    items = [item(f"c{n}", "mismatch" if n % 2 else "pass", soft_scores={"row_f1": n / 10}, hardness=("easy", "hard")[n % 2],
                  question="How many pens?" if n in (3, 4, 7) else "Which mug?") for n in range(10)]
    page = tmp_path / "r.html"
    write_report("html", report(items), page)
    dom = rendered(browser, page, "#q=how%20PENS&h=hard&sort=-f1", tmp_path / "profile")  # every word, any case
    assert body_attributes(dom)["data-matching"] == "2" and case_ids(dom) == ["c7", "c3"]
