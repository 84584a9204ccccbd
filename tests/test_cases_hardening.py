"""Hostile case files never stop the run: alias bombs, deep nesting, and what pytest makes of them."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest

from helpers import make_shop, write_suite
from pytest_nl2sql.cases.parse import MAX_ALIAS_NODES, MAX_DEPTH
from pytest_nl2sql.cases.read import Case, CaseFileContents, CaseFileError, load_case_file, read_case_file


def billion_laughs() -> str:
    """Nine levels of nine aliases (9**9 strings), used by a case key so that anything walking
    the value expands it; 600 bytes or so."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join([*lines, "id: *i", "question: *i", "database: shop.sqlite", "gold: SELECT 1"]) + "\n"


# A hostile file must not make loading blow up (a quadratic parse of 50,000 brackets takes minutes);
# the bound is far above the ~1 s a load of 50,000 takes. CPU seconds: a busy CI machine makes the
# load take longer, not cost more.
SECONDS = 10


def load_measured(path: Path, *, memory: bool = False) -> tuple[CaseFileContents, float, int | None]:
    """What the file reads as, the CPU seconds taken, and (`memory`) the peak bytes allocated while
    loading: a second load, traced, which takes five times as long (5.7 s for 50,000 brackets)."""
    started = time.process_time()
    contents = read_case_file(path)
    seconds = time.process_time() - started
    if not memory:
        return contents, seconds, None
    tracemalloc.start()
    try:
        read_case_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return contents, seconds, peak


def unreadable(contents: CaseFileContents) -> CaseFileError:
    """The error of a file that cannot be read as a whole (a collection error: no entries)."""
    assert contents.entries == [] and contents.error is not None, contents
    return contents.error


def test_billion_laughs_is_one_file_error_quickly_and_in_little_memory(tmp_path: Path) -> None:
    path = tmp_path / "bomb.nl2sql.yaml"
    path.write_text(billion_laughs())
    contents, seconds, peak = load_measured(path, memory=True)
    error = unreadable(contents)
    assert error.line == 6  # the alias that passed the budget
    assert f"aliases expand to more than {MAX_ALIAS_NODES} values" in error.message
    assert str(error).startswith(f"{path}:6: invalid YAML")
    assert seconds < SECONDS and peak is not None and peak < 20_000_000


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("database: d\ngold: SELECT 1\ntags: &t [x, *t]\n")
    error = unreadable(read_case_file(path))
    assert error.line == 3 and "recursive" in error.message


def test_ordinary_aliases_and_merge_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "database: d.sqlite\ncases:\n"
        "  - &first {id: a, gold: SELECT 1, compare: &loose {abs_tol: 0.1, case_sensitive: false}, tags: &t [x, y]}\n"
        "  - {<<: *first, id: b}\n"
        + "".join(f"  - {{id: c{i}, gold: SELECT 2, compare: *loose, tags: *t}}\n" for i in range(500))
    )
    entries = load_case_file(path)
    assert all(isinstance(e, Case) for e in entries) and len(entries) == 502
    assert entries[1].gold == ("SELECT 1",) and dict(entries[-1].compare) == {"abs_tol": 0.1, "case_sensitive": False}


@pytest.mark.parametrize(("depth", "ok"), [(MAX_DEPTH - 2, True), (MAX_DEPTH + 1, False), (50_000, False)])
def test_deep_yaml_is_one_file_error(tmp_path: Path, depth: int, ok: bool) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("database: d\ngold: SELECT 1\ncompare: {}\nname:\n  " + "[" * depth + "]" * depth + "\n")
    contents, seconds, _ = load_measured(path)
    assert seconds < SECONDS
    if ok:  # a value that deep is merely of the wrong type
        (entry,) = contents.entries
        assert isinstance(entry, Case) or "nested" not in entry.message
    else:
        error = unreadable(contents)
        assert error.line == 5
        assert error.message == f"invalid YAML: nested deeper than {MAX_DEPTH} levels"


def test_deep_json_line_is_one_invalid_entry_and_the_other_lines_load(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    good = json.dumps({"database": "d", "gold": "SELECT 1"})
    deep = '{"id": "deep", "gold": ' + "[" * 50_000 + "]" * 50_000 + "}"
    brackets_in_text = json.dumps({"id": "text", "database": "d", "gold": "SELECT '" + "[" * 500 + "'"})
    path.write_text("\n".join([good, deep, brackets_in_text, good.replace("1", "2")]) + "\n")
    contents, seconds, _ = load_measured(path)
    entries = contents.entries
    assert seconds < SECONDS
    assert [type(e).__name__ for e in entries] == ["Case", "InvalidCase", "Case", "Case"]
    assert entries[1].line == 2 and entries[1].message == f"invalid JSON: nested deeper than {MAX_DEPTH} levels"


def test_json_nested_past_the_limit_but_within_pythons_recursion_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "deep.jsonl"
    at_limit = {"id": "at", "database": "d", "gold": "SELECT 1", "tags": [], "x": json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))}
    past = '{"id": "past", "gold": ' + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}"
    path.write_text(json.dumps(at_limit) + "\n" + past + "\n")
    entries = load_measured(path)[0].entries
    assert [type(e).__name__ for e in entries][1] == "InvalidCase"
    assert entries[1].message == f"invalid JSON: nested deeper than {MAX_DEPTH} levels"
    assert "nested" not in getattr(entries[0], "message", "")


def test_deep_source_questions_file_is_one_file_error(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text("[" * 50_000 + "]" * 50_000)
    path = tmp_path / "dev.yaml"
    path.write_text("source: {format: spider, questions: dev.json, db_dir: db}\n")
    error = unreadable(read_case_file(path))
    assert error.line == 1 and "nested deeper than" in error.message


def test_source_questions_are_checked_for_depth_one_by_one_in_the_keys_a_case_keeps(tmp_path: Path) -> None:
    """A question nested too deep in a key a case keeps is one broken entry; nesting in a key no
    case reads (Spider's parse tree under `sql`) is never walked, so it costs nothing."""
    deep = json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    questions = [
        {"db_id": "d", "question": "q1", "query": "SELECT 1", "sql": deep},
        {"db_id": "d", "question": "q2", "query": "SELECT 2", "tags": deep},
        {"db_id": "d", "question": "q3", "query": "SELECT 3", "tags": json.loads("[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2))},
    ]
    (tmp_path / "dev.json").write_text(json.dumps(questions))
    path = tmp_path / "dev.yaml"
    path.write_text("source: {format: spider, questions: dev.json, db_dir: db}\n")
    entries = load_case_file(path)
    assert [type(e).__name__ for e in entries] == ["Case", "InvalidCase", "InvalidCase"]
    assert entries[1].message == f"source question 1 is nested deeper than {MAX_DEPTH} levels"
    assert "nested" not in entries[2].message  # within the limit: broken for its tags, not for depth


def test_hostile_files_are_one_error_each_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    make_shop(pytester.path)
    write_suite(pytester.path, [{"id": "one", "gold": "SELECT 1", "predicted": "SELECT 1"},
                                {"id": "two", "gold": "SELECT 2", "predicted": "SELECT 3"}], database="shop.sqlite")
    (pytester.path / "bomb.nl2sql.yaml").write_text(billion_laughs())
    (pytester.path / "deep.nl2sql.yaml").write_text("[" * 50_000 + "]" * 50_000 + "\n")
    (pytester.path / "deep.nl2sql.jsonl").write_text(
        json.dumps({"id": "fine", "database": "shop.sqlite", "gold": "SELECT 1", "predicted": "SELECT 1"}) + "\n"
        + '{"id": "deep", "gold": ' + "[" * 50_000 + "]" * 50_000 + "}\n")
    # a run that expanded the aliases would hit this limit instead of eating the machine's memory
    pytester.makeconftest("""
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = 1_500_000_000
        if hard == resource.RLIM_INFINITY or hard > limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    """)
    started = time.perf_counter()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1, errors=3)
    result.stdout.fnmatch_lines_random([
        "*bomb.nl2sql.yaml:6: *invalid YAML: aliases expand to more than*",
        "*deep.nl2sql.yaml:1: *invalid YAML: nested deeper than 100 levels*",
        "*deep.nl2sql.jsonl:2: *invalid JSON: nested deeper than 100 levels*",
    ])
    assert time.perf_counter() - started < 60


def test_a_case_file_over_the_byte_cap_is_one_file_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_nl2sql.files as files

    path = tmp_path / "big.nl2sql.yaml"
    path.write_text("database: d.sqlite\ngold: SELECT 1\n")
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 10)
    assert "larger than the 10 bytes" in unreadable(read_case_file(path)).message
