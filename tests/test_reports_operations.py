"""Reports, viewer and commands as operators meet them (issue 29): strict JSON everywhere, CSV
cells without control characters, `nl2sql compare` / `merge-reports` refusing crafted reports
with exit 2 and the file's name, the HTML viewer's deep links and hostile names, nothing from the
data obeyed by the terminal, paths shown relative to the rootdir, and the one-database figure
named for what it is."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.gate.compare import compare_reports, read_run, render_json
from pytest_nl2sql.gate.run import RunInfo, append_history
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.metrics.summary import build_report, summarize
from pytest_nl2sql.reports import write_report
from pytest_nl2sql.vocab import Kind, Verdict


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"a strict parser refuses {name}")


def strict_loads(text: str) -> Any:
    """`json.loads` as JavaScript's JSON.parse, jq or Go read: no NaN, Infinity or -Infinity."""
    return json.loads(text, parse_constant=_refuse_constant)


def results(n: int = 3, **fields: Any) -> list[CaseResult]:
    return [CaseResult(id=f"q{i}", nodeid=f"s.nl2sql.yaml::q{i}", file="s.nl2sql.yaml", position=i, kind=Kind.SQL,
                       verdict=Verdict.PASS if i % 2 == 0 else Verdict.MISMATCH, database="shop.sqlite",
                       question=f"question {i}", gold="SELECT 1", predicted=f"SELECT {i}", hardness="easy",
                       tags=("t",), **fields) for i in range(n)]


def a_report(n: int = 3, **fields: Any) -> dict[str, Any]:
    rs = results(n, **fields)
    data = build_report(rs, summarize(rs))
    data["run"] = {"started": "2026-01-02T03:04:05+00:00", "duration_s": 1.5, "label": "m", "git_commit": None,
                   "engine": "per case", "complete": True, "options": {"timeout": 30}}
    return data


# --------------------------------------------------------------------------- 2. strict JSON


NON_FINITE = (math.nan, math.inf, -math.inf)


def test_the_json_report_writes_null_for_non_finite_numbers(tmp_path: Path) -> None:
    data = a_report(latency=math.nan, diff={"missing": [[math.inf, "x"]], "extra": [[-math.inf]], "missing_count": 1})
    data["summary"]["r_ves_example"] = math.nan
    write_report("json", data, tmp_path / "r.json")
    back = strict_loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert back["summary"]["r_ves_example"] is None
    assert [item["latency"] for item in back["items"]] == [None, None, None]
    assert back["items"][0]["diff"]["missing"] == [[None, "x"]] and back["items"][0]["diff"]["extra"] == [[None]]
    assert back["summary"]["total"] == 3  # the rest as it was


def test_a_history_line_writes_null_for_non_finite_numbers(tmp_path: Path) -> None:
    run = RunInfo(started="2026-01-02T03:04:05+00:00", duration_s=math.inf, label=None, git_commit=None,
                  engine="per case", complete=True)
    append_history(tmp_path / "h.jsonl", run, {"accuracy": math.nan, "by_hardness": {"easy": {"accuracy": -math.inf}}})
    line = strict_loads((tmp_path / "h.jsonl").read_text(encoding="utf-8"))
    assert line["run"]["duration_s"] is None and line["summary"] == {"accuracy": None, "by_hardness": {"easy": {"accuracy": None}}}


@pytest.mark.parametrize("value", NON_FINITE)
def test_the_json_comparison_writes_null_for_non_finite_numbers(tmp_path: Path, value: float) -> None:
    a, b = a_report(), a_report()
    b["summary"]["exact_match"] = value  # an old report, written before the writer wrote null
    b["run"]["duration_s"] = value
    for name, data in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(data), encoding="utf-8")  # Python writes NaN / Infinity bare
    text = render_json(compare_reports(read_run(tmp_path / "a.json"), read_run(tmp_path / "b.json")))
    back = strict_loads(text)
    assert back["b"]["run"]["duration_s"] is None


# --------------------------------------------------------------------------- 3. CSV cells


def test_csv_cells_show_control_characters_as_escapes(tmp_path: Path) -> None:
    import csv

    hostile = {"question": "which\x1b[31m red\x07?", "predicted": "SELECT 1 -- \x1b]0;title\x07\u202eevil\r",
               "reason": "near \x00: syntax error\x9b", "database": "db\x1b[2J.sqlite"}
    data = a_report(1)
    data["items"][0].update(hostile, tags=["t\x1b[1m"], id="q\x1b0", gold=["SELECT '\u202e'", "SELECT 2"])
    written = write_report("csv", data, tmp_path / "r.csv")
    for path in written:
        text = path.read_text(encoding="utf-8")
        raw = sorted({ch for ch in text if (ord(ch) < 0x20 and ch not in "\n\r\t") or 0x7F <= ord(ch) < 0xA0 or ch == "\u202e"})
        assert raw == [], (path.name, raw)
    with open(written[0], newline="", encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    assert row["question"] == "which\\x1b[31m red\\x07?"
    assert row["predicted"] == "SELECT 1 -- \\x1b]0;title\\x07\\u202eevil\\x0d"
    assert row["reason"] == "near \\x00: syntax error\\x9b" and row["database"] == "db\\x1b[2J.sqlite"
    assert row["tags"] == "t\\x1b[1m" and row["id"] == "q\\x1b0"
    assert json.loads(row["gold"].replace("\\u202e", "\\\\u202e")) == ["SELECT '\\u202e'", "SELECT 2"]  # a list: JSON, shown escaped
    assert (tmp_path / "r.correct.csv").read_text(encoding="utf-8").splitlines() == ["instance_id", "q\\x1b0"]


# --------------------------------------------------------------------------- 4. crafted reports


def _item(data: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data["items"][0].update(changes)
    return data


def _set(part: str, **changes: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(data: dict[str, Any]) -> dict[str, Any]:
        data[part].update(changes)
        return data
    return change


HUGE = 10**400
# (what is wrong, how the valid report is changed): each must be refused, exit 2, naming the file
CRAFTED: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("a 400-digit position", lambda d: _item(d, position=HUGE)),
    ("a 400-digit latency", lambda d: _item(d, latency=HUGE)),
    ("a 400-digit count in the summary", _set("summary", passed=HUGE)),
    ("a 400-digit duration", _set("run", duration_s=HUGE)),
    ("a 400-digit attempts", lambda d: _item(d, attempts=HUGE)),
    ("latency a string", lambda d: _item(d, latency="fast")),
    ("started an integer", _set("run", started=20260102)),
    ("label a list", _set("run", label=["m"])),
    ("complete a string", _set("run", complete="yes")),
    ("options a list", _set("run", options=[1])),
    ("run a list", lambda d: {**d, "run": [1]}),
    ("summary a number", lambda d: {**d, "summary": 5}),
    ("items an object", lambda d: {**d, "items": {"q0": d["items"][0]}}),
    ("items a string", lambda d: {**d, "items": "q0"}),
    ("no items", lambda d: {"summary": d["summary"]}),
    ("an item a number", lambda d: {**d, "items": [5]}),
    ("an item without an id", lambda d: {**d, "items": [{k: v for k, v in d["items"][0].items() if k != "id"}]}),
    ("id a list", lambda d: _item(d, id=["q0"])),
    ("nodeid a number", lambda d: _item(d, nodeid=5)),
    ("an unknown verdict", lambda d: _item(d, verdict="passing")),
    ("an unknown baseline status", lambda d: _item(d, baseline="sometimes")),
    ("passed a string", lambda d: _item(d, passed="true")),
    ("tags a string", lambda d: _item(d, tags="joins")),
    ("tags of numbers", lambda d: _item(d, tags=[1])),
    ("gold a number", lambda d: _item(d, gold=5)),
    ("question a list", lambda d: _item(d, question=["a"])),
    ("exact_match a string", lambda d: _item(d, exact_match="yes")),
    ("soft scores of strings", lambda d: _item(d, soft_scores={"row_f1": "high"})),
    ("soft scores a list", lambda d: _item(d, soft_scores=[1, 2])),
    ("partial scores of numbers", lambda d: _item(d, partial={"select": 5})),
    ("repeats of a billion answers", lambda d: _item(d, repeats={"k": 10**9, "passed": 1})),
    ("repeats.k a string", lambda d: _item(d, repeats={"k": "3", "passed": 1})),
    ("more repeats passed than asked", lambda d: _item(d, repeats={"k": 2, "passed": 3})),
    ("usage cost a string", lambda d: _item(d, usage={"cost": "free"})),
    ("neighbours a list", lambda d: _item(d, neighbours=[1])),
    ("neighbours.checked a string", lambda d: _item(d, neighbours={"checked": "3", "failed": 0})),
    ("diff a string", lambda d: _item(d, diff="rows differ")),
    ("diff.missing a number", lambda d: _item(d, diff={"missing": 5})),
    ("execution_time without a reward", lambda d: _item(d, execution_time={"slowdown": 1.0})),
    ("extra.neighbours_off a list", lambda d: _item(d, extra={"neighbours_off": ["x"]})),
    ("term selection of strings", lambda d: _item(d, term_selection={"macro_precision": "high"})),
    ("a bucket a list", _set("summary", by_tag={"t": [1]})),
    ("by_hardness a list", _set("summary", by_hardness=[1])),
    ("accuracy a string", _set("summary", accuracy="high")),
    ("term selection figures of strings", _set("summary", term_selection={"macro_recall": "x"})),
    ("a 5000-digit integer", lambda d: json.dumps(d).replace('"position": 0', '"position": ' + "9" * 5000)),
    ("nested 200 deep", lambda d: _item(d, predicted=json.loads("[" * 200 + "]" * 200))),
    ("not JSON", lambda d: "{not json"),
    ("null", lambda d: None),
    ("empty", lambda d: ""),
    ("not UTF-8", lambda d: b"\xff\xfe{}"),
]


def _write(path: Path, content: Any) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


@pytest.mark.parametrize(("what", "craft"), CRAFTED, ids=[what for what, _ in CRAFTED])
def test_crafted_reports_are_refused_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     what: str, craft: Callable[[dict[str, Any]], Any]) -> None:
    from pytest_nl2sql.cli import main

    good = _write(tmp_path / "good.json", a_report())
    bad = _write(tmp_path / "crafted.json", craft(a_report()))
    out_dir = tmp_path / "out"
    reports = [f"--nl2sql-report={fmt}:{out_dir}/merged.{fmt}" for fmt in ("json", "md", "html", "csv")]
    for command in (["compare", str(good), str(bad)], ["compare", str(bad), str(good)],
                    ["merge-reports", str(good), str(bad), f"--rootdir={tmp_path}", *reports]):
        code = main(command)  # a crash would raise here: no traceback may reach the user
        captured = capsys.readouterr()
        assert code == 2, (command[0], captured.out, captured.err)
        assert f"{bad}:" in captured.err, (command[0], captured.err)
        assert "Traceback" not in captured.err + captured.out
    assert not out_dir.exists()  # refused before any report was written


def test_the_valid_report_the_crafted_ones_start_from_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_nl2sql.cli import main

    data = a_report()
    data["items"][0]["latency"] = None  # what the old writer wrote NaN for reads back as null
    text = json.dumps(data).replace('"latency": null', '"latency": NaN', 1)
    good, other = _write(tmp_path / "good.json", text), _write(tmp_path / "other.json", a_report())
    assert main(["compare", str(good), str(other)]) == 0
    assert main(["merge-reports", str(good), str(other), f"--rootdir={tmp_path}",
                 f"--nl2sql-report=json:{tmp_path}/merged.json"]) == 1  # a failing case fails the gate, as pytest would
    assert strict_loads((tmp_path / "merged.json").read_text(encoding="utf-8"))["summary"]["total"] == 3
    capsys.readouterr()


# --------------------------------------------------------------------------- 1. the HTML viewer


@pytest.fixture(scope="module")
def browser() -> str:
    import shutil

    from test_report_html import BROWSERS

    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium or Chrome on PATH (Debian: apt-get install chromium) for the browser test")


def test_browser_a_link_to_a_late_case_builds_one_page_of_rows_and_that_case(browser: str, tmp_path: Path) -> None:
    from urllib.parse import quote

    from test_report_html import body_attributes, case_ids, detail_row, item, rendered_many, report

    from pytest_nl2sql.reports.html import PAGE_ROWS

    items = [item(f"c{n:04d}", "mismatch" if n % 7 == 0 else "pass") for n in range(3 * PAGE_ROWS + 10)]
    page = tmp_path / "r.html"
    write_report("html", report(items), page)
    late = items[-3]["id"]
    dom, early = rendered_many(browser, page, [
        "#open=" + quote(f"shop.nl2sql.yaml::{late}", safe=""),
        "#v=mismatch&sort=-n&open=" + quote(f"shop.nl2sql.yaml::{items[0]['id']}", safe="")], tmp_path / "profile")
    attributes = body_attributes(dom)
    assert "data-error" not in attributes
    assert attributes["data-matching"] == str(len(items))
    assert int(attributes["data-rendered"]) <= PAGE_ROWS + 1  # was every row up to the case: 133 s at 100,000 cases
    ids = case_ids(dom)
    assert ids[:PAGE_ROWS] == [i["id"] for i in items[:PAGE_ROWS]] and ids[-1] == late
    assert dom.count('<tr class="detail"') == 1 and f"shop.nl2sql.yaml::{late}" in detail_row(dom)
    assert f"{len(items) - PAGE_ROWS - 1} cases" in dom  # the gap says what it leaves out

    dom = early  # within the first page: no gap, as before
    attributes = body_attributes(dom)
    assert "data-error" not in attributes and attributes["data-rendered"] == attributes["data-matching"]
    assert case_ids(dom)[-1] == items[0]["id"] and dom.count('<tr class="detail"') == 1


def test_browser_names_that_are_object_properties_stay_names(browser: str, tmp_path: Path) -> None:
    from urllib.parse import quote

    from test_report_html import body_attributes, case_ids, detail_row, item, rendered_many, report

    items = [item("a", tags=("__proto__", "x"), hardness="constructor", database="__proto__"),
             item("b", "mismatch", tags=("__proto__",), near_miss="constructor", hardness="toString"),
             item("c", tags=("hasOwnProperty",), database="constructor"),
             item("d", "mismatch", hardness="easy")]
    page = tmp_path / "r.html"
    write_report("html", report(items), page)
    filters = [
        ("#sort=constructor", ["a", "b", "c", "d"]),  # not a column: the cases' order
        ("#sort=-__proto__", ["a", "b", "c", "d"]),
        ("#sort=-hardness", None),
        ("#t=__proto__", ["a", "b"]),
        ("#t=hasOwnProperty", ["c"]),
        ("#t=constructor", []),
        ("#db=__proto__", ["a"]),
        ("#db=constructor", ["c"]),
        ("#h=constructor", ["a"]),
        ("#h=toString&sort=verdict", ["b"]),
        ("#v=constructor", []),
        ("#b=__proto__", []),
    ]
    *doms, sorted_dom, opened = rendered_many(
        browser, page, [fragment for fragment, _ in filters] + ["#sort=hardness", "#open=" + quote("shop.nl2sql.yaml::b", safe="")],
        tmp_path / "profile")
    for (fragment, shown), dom in zip(filters, doms, strict=True):
        attributes = body_attributes(dom)
        assert "data-error" not in attributes, (fragment, attributes.get("data-error"))
        if shown is not None:
            assert case_ids(dom) == shown, fragment
        else:
            assert sorted(case_ids(dom)) == ["a", "b", "c", "d"], fragment
    assert "data-error" not in body_attributes(sorted_dom)
    assert '<option value="__proto__">__proto__ (2)</option>' in sorted_dom  # the tag filter offers it, counted
    assert '<option value="constructor">constructor (1)</option>' in sorted_dom
    dom = opened
    assert "data-error" not in body_attributes(dom)
    detail = detail_row(dom)
    assert "constructor" in detail and "function" not in detail and "[native code]" not in detail


# --------------------------------------------------------------------------- 5. the terminal obeys nothing from the data

ESC_CSI = "\x1b[31m"
ESC_OSC = "\x1b]0;title\x07"


def _unsafe_lines(out: str) -> list[str]:
    """Lines of pytest's output holding a raw escape or bell, or starting like a CI workflow command."""
    return [line for line in out.splitlines()
            if "\x1b" in line or "\x07" in line or line.lstrip().startswith(("::", "##[", "##vso["))]


def test_text_from_the_data_reaches_the_terminal_escaped_and_inert(pytester: pytest.Pytester) -> None:
    from helpers import make_db, make_shop, write_suite

    make_shop(pytester.path)
    hostile_db = f"db{ESC_CSI}x.sqlite"
    make_db(pytester.path / hostile_db, f"CREATE TABLE t(a TEXT); INSERT INTO t VALUES ('v{ESC_CSI}red{ESC_OSC}'), ('::error::row');")
    cases = [
        {"id": "tagged", "gold": "SELECT 1", "predicted": "SELECT 2", "tags": [f"tag{ESC_OSC}", "::error::tag"],
         "hardness": f"::warning::h{ESC_CSI}", "question": f"q{ESC_OSC}"},
        {"id": "tagged-ok", "gold": "SELECT 1", "predicted": "SELECT 1", "tags": [f"tag{ESC_OSC}", "::error::tag"],
         "hardness": f"::warning::h{ESC_CSI}"},
        {"id": "values", "database": hostile_db, "gold": "SELECT a FROM t", "predicted": "SELECT a FROM t LIMIT 1"},
        {"id": "values-ok", "database": hostile_db, "gold": "SELECT a FROM t", "predicted": "SELECT a FROM t"},
        {"id": "broken", "database": f"missing{ESC_CSI}\n::error::x.sqlite", "gold": "SELECT 1", "predicted": "SELECT 1"},
        {"id": "known", "gold": "SELECT 1", "predicted": f"SELECT '{ESC_CSI}\n::error::known"},
        {"id": "parked", "gold": "SELECT 1", "predicted": "SELECT 2", "quarantine": f"flaky{ESC_OSC}\n::error::quarantined"},
    ]
    write_suite(pytester.path, cases, database="shop.sqlite")
    pytester.makepyfile(test_warns=f"""
        import warnings
        from pytest_nl2sql.neighbours.servers import NoNeighbours
        from pytest_nl2sql.plugin.items import NL2SQLWarning

        def test_warns():
            warnings.warn(NoNeighbours("no neighbour databases for {hostile_db!r}: {ESC_OSC!r}\\n::error::w"))
            warnings.warn(NL2SQLWarning("case file {ESC_CSI!r}\\n::error::w2"))
    """)
    pytester.runpytest("--nl2sql-baseline=b.json", "--nl2sql-update-baseline", "-p", "no:cacheprovider")
    result = pytester.runpytest("-v", "-rA", "--nl2sql-baseline=b.json", "--nl2sql-fail-under=tag:nope=0.5",
                                "--nl2sql-fail-under=tag:::error::tag=0.9", "-W", "always", "-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert "known failure (baseline)" in out and "quarantined: flaky" in out and "NoNeighbours" in out  # each vector was shown
    assert "tag\\x1b]0;title\\x07" in out and "db\\x1b[31mx.sqlite" in out  # as escapes
    assert _unsafe_lines(out) == []


# --------------------------------------------------------------------------- 7. the one-database figure's name


def test_the_one_database_figure_is_not_called_spider_s(tmp_path: Path) -> None:
    from pytest_nl2sql.gate.compare import render_text
    from pytest_nl2sql.plugin.terminal import summary_lines
    from pytest_nl2sql.reports.html import render_html
    from pytest_nl2sql.reports.md import render_markdown

    data = a_report(4, neighbours={"checked": 3, "failed": 0, "fragile": 0})
    summary = data["summary"]
    assert summary["neighbours"] and summary["single_db_accuracy"] is not None
    lines = summary_lines(summary)
    one_db = [line for line in lines if "one-database execution accuracy" in line]
    assert len(one_db) == 1 and "2/4 = 50.0%" in one_db[0] and "--nl2sql-compat=spider" in one_db[0]
    (tmp_path / "a.json").write_text(json.dumps(data), encoding="utf-8")
    comparison = compare_reports(read_run(tmp_path / "a.json"), read_run(tmp_path / "a.json"))
    texts = {"terminal": "\n".join(lines), "md": render_markdown(data), "html": render_html(data),
             "compare": "\n".join(render_text(comparison))}
    for name, text in texts.items():
        assert "Spider's execution accuracy" not in text and "(Spider's)" not in text, name
        assert "one-database execution accuracy" in text, name
    for name in ("md", "html"):
        assert "--nl2sql-compat=spider" in texts[name], name


# --------------------------------------------------------------------------- 6. paths relative to the rootdir


def test_hints_summary_and_report_headers_show_paths_relative_to_the_rootdir(pytester: pytest.Pytester) -> None:
    from helpers import make_shop, read_report, write_suite

    make_shop(pytester.path)
    pytester.makeini("[pytest]\n")
    suite = write_suite(pytester.path, [{"id": "a", "gold": "SELECT 1", "predicted": "SELECT 2"},
                                        {"id": "b", "gold": "SELECT 1", "predicted": "SELECT 1"}], database="shop.sqlite")
    first = pytester.runpytest("--nl2sql-baseline=ci/b.json", "--nl2sql-update-baseline", "-p", "no:cacheprovider")
    first.stdout.fnmatch_lines(["baseline written: ci/b.json (2 cases*"])
    suite.write_text(suite.read_text().replace("SELECT 2", "SELECT 1"))  # `a` is fixed: the hint to update the baseline
    result = pytester.runpytest("--nl2sql-baseline=ci/b.json", "--nl2sql-history=ci/h.jsonl", "--nl2sql-record=ci/rec.jsonl",
                                "--nl2sql-report=json:out/r.json", "--nl2sql-report=md:out/r.md",
                                "--nl2sql-report=html:out/r.html", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["baseline ci/b.json: 2 cases judged in both runs",
                                 "*update the baseline with --nl2sql-update-baseline --nl2sql-baseline=ci/b.json",
                                 "history: ci/h.jsonl (+1 run)", "predictions recorded: ci/rec.jsonl*",
                                 "json report: out/r.json", "md report: out/r.md", "html report: out/r.html"])
    root = str(pytester.path)
    assert [line for line in result.stdout.lines if root in line and not line.startswith("rootdir:")] == []
    assert read_report(pytester.path / "out" / "r.json")["summary"]["baseline"]["path"] == "ci/b.json"
    for name in ("r.md", "r.html"):
        text = (pytester.path / "out" / name).read_text(encoding="utf-8")
        assert root not in text and "ci/b.json" in text, name


def test_a_path_outside_the_rootdir_is_shown_as_it_is(tmp_path: Path) -> None:
    from pytest_nl2sql.shown import shown_path

    root = tmp_path / "repo"
    root.mkdir()
    assert shown_path(root / "ci" / "b.json", root) == str(Path("ci") / "b.json")
    assert shown_path(tmp_path / "elsewhere" / "h.jsonl", root) == str(tmp_path / "elsewhere" / "h.jsonl")
    assert shown_path("relative/r.json", root) == "relative/r.json"  # not made absolute first: said as given


def test_a_dsn_file_is_named_relative_to_the_rootdir_in_the_summary_and_headers(pytester: pytest.Pytester) -> None:
    from helpers import make_shop, read_report, write_suite

    make_shop(pytester.path)
    write_suite(pytester.path, [{"id": "a", "gold": "SELECT 1", "predicted": "SELECT 1"}])
    result = pytester.runpytest("--nl2sql-dsn=shop.sqlite", "--nl2sql-report=json:r.json", "--nl2sql-report=md:r.md",
                                "--nl2sql-report=html:r.html", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["  every case ran on sqlite:///shop.sqlite *"])
    assert read_report(pytester.path / "r.json")["run"]["engine"] == "sqlite:///shop.sqlite"
    root = str(pytester.path)
    assert [line for line in result.stdout.lines if root in line and not line.startswith("rootdir:")] == []
    md = (pytester.path / "r.md").read_text(encoding="utf-8")
    assert root not in md and "engine `sqlite:///shop.sqlite`" in md
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    header = page.split('<section id="run">', 1)[1].split('<section id="charts">', 1)[0]  # the run and the summary
    assert root not in header and "sqlite:///shop.sqlite" in header


def test_printable_lines_are_shown_as_they_are_without_a_look_at_each_character(monkeypatch: pytest.MonkeyPatch) -> None:
    # a failure's explanation is many lines: newline and tab kept, nothing to escape, checked in C
    # (the per-character loop took ~1 ms a failure; it still escapes what needs it)
    from pytest_nl2sql import shown

    looked: list[str] = []
    monkeypatch.setattr(shown, "ord", lambda ch: looked.append(ch) or ord(ch), raising=False)
    text = "nl2sql case wrong: mismatch\n  - (1, 'a')\n\t+ (2, 'b')\n"
    assert shown.escaped(text) == text and looked == []
    assert shown.escaped("a\n\x1b[31mred\u202e") == "a\n\\x1b[31mred\\u202e" and looked
