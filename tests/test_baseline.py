"""Baseline file, per-case classification and the comparison shown in the summary."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.gate.baseline import (
    Baseline,
    BaselineEntry,
    BaselineError,
    BaselineStatus,
    classify,
    compare_with_baseline,
    load_baseline,
    natural_key,
    write_baseline,
)
from pytest_nl2sql.gate.stats import mcnemar_exact
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.vocab import Kind, Verdict

FILE = "suites/shop.nl2sql.yaml"


def item(case_id: str, verdict: str = "pass", fingerprint: str | None = "f0", file: str = FILE) -> dict[str, Any]:
    """A JSON report item, built the way the plugin builds it."""
    return CaseResult(
        id=case_id,
        nodeid=f"{file}::{case_id}",
        file=file,
        position=0,
        kind=Kind.SQL,
        verdict=Verdict(verdict),
        reason=None if verdict == "pass" else "values",
        fingerprint=fingerprint,
    ).to_json()


def baseline_of(tmp_path: Path, items: list[dict[str, Any]]) -> Baseline:
    path = tmp_path / "baseline.json"
    write_baseline(path, items)
    return load_baseline(path)


@pytest.mark.parametrize(
    ("entry", "passed_now", "expected"),
    [
        (BaselineEntry("pass", True), True, None),
        (BaselineEntry("pass", True), False, BaselineStatus.REGRESSION),
        (BaselineEntry("mismatch", False), False, BaselineStatus.KNOWN_FAILURE),
        (BaselineEntry("pred_error", False), True, BaselineStatus.FIXED),
        (None, True, BaselineStatus.NEW),
        (None, False, BaselineStatus.NEW),
        (BaselineEntry("gold_error", False), False, BaselineStatus.NEW),  # nothing was judged then
    ],
)
def test_classify(entry: BaselineEntry | None, passed_now: bool, expected: BaselineStatus | None) -> None:
    assert classify(entry, passed_now) is expected


def test_status_spellings_are_the_contract() -> None:
    assert [s.value for s in BaselineStatus] == ["regression", "known_failure", "fixed", "new"]


def test_round_trip(tmp_path: Path) -> None:
    items = [item("count"), item("cheap", "mismatch", "f1"), item("q", "pass", None, file="other.jsonl")]
    baseline = baseline_of(tmp_path, items)
    assert baseline.path == str(tmp_path / "baseline.json")
    assert baseline.entries == {
        (FILE, "count"): BaselineEntry("pass", True, "f0", None),
        (FILE, "cheap"): BaselineEntry("mismatch", False, "f1", "values"),
        ("other.jsonl", "q"): BaselineEntry("pass", True, None, None),
    }


def test_the_file_is_reviewable_and_deterministic(tmp_path: Path) -> None:
    items = [item(f"q{i}", "pass" if i % 3 else "mismatch", f"f{i}") for i in range(12)]
    items += [item("a", file="a.nl2sql.yaml")]
    write_baseline(tmp_path / "one.json", items)
    shuffled = list(items)
    random.Random(3).shuffle(shuffled)  # xdist reports arrive in any order
    write_baseline(tmp_path / "two.json", shuffled)
    text = (tmp_path / "one.json").read_text(encoding="utf-8")
    assert text == (tmp_path / "two.json").read_text(encoding="utf-8")
    assert text.endswith("}\n")
    json.loads(text)  # valid JSON
    case_lines = [line for line in text.splitlines() if '"verdict"' in line]
    assert len(case_lines) == len(items)  # one case per line
    ids = [json.loads("{" + line.strip().rstrip(",") + "}").popitem()[0] for line in case_lines]
    assert ids == ["a"] + [f"q{i}" for i in range(12)]  # files sorted, q2 before q10


def test_updating_from_a_subset_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    write_baseline(path, [item("a"), item("b", "mismatch")])
    write_baseline(path, [item("b")], previous=load_baseline(path))
    assert load_baseline(path).entries == {
        (FILE, "a"): BaselineEntry("pass", True, "f0"),
        (FILE, "b"): BaselineEntry("pass", True, "f0"),
    }


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(BaselineError, match="nope.json does not exist.*--nl2sql-update-baseline"):
        load_baseline(path)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "format"),
        ('{"format": "pytest-nl2sql baseline", "version": 99, "cases": {}}', "version 99"),
        ('{"format": "pytest-nl2sql baseline", "version": 1, "cases": []}', "cases"),
        ('{"format": "pytest-nl2sql baseline", "version": 1, "cases": {"f": {"x": {}}}}', "f::x"),
        ('{"format": "pytest-nl2sql baseline", "version": 1, "cases": {"f": {"x": {"verdict": "pass", "passed": "yes"}}}}', "passed"),
    ],
)
def test_malformed_file_names_the_path(tmp_path: Path, text: str, complaint: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BaselineError) as raised:
        load_baseline(path)
    assert str(path) in str(raised.value) and complaint in str(raised.value)


def test_comparison(tmp_path: Path) -> None:
    before = [
        item("count"), item("names"), item("max"),
        item("cheap", "mismatch", "f1"), item("slow", "pred_timeout", None), item("gone"),
        item("broken", "gold_error", None),
    ]
    now = [
        item("count", "mismatch", "f9"),  # regression
        item("names"),  # still passing
        item("max"),
        item("cheap"),  # fixed
        item("slow", "pred_error", None),  # known failure, failing differently
        item("broken", "mismatch"),  # its gold was broken then: new
        item("fresh", "mismatch"),  # new
        item("dead", "gold_error", None),  # an error now: outside the comparison
    ]
    comparison = compare_with_baseline(baseline_of(tmp_path, before), now)
    label = lambda case_id: f"{FILE}::{case_id}"  # noqa: E731
    assert comparison.regressions == (label("count"),)
    assert comparison.fixed == (label("cheap"),)
    assert comparison.known_failures == (label("slow"),)
    assert comparison.changed_failures == (label("slow"),)
    assert comparison.new == (label("broken"), label("fresh"))
    assert comparison.missing == (label("gone"),)
    assert comparison.statuses[(FILE, "names")] is None
    assert comparison.statuses[(FILE, "dead")] is None
    assert comparison.statuses[(FILE, "count")] is BaselineStatus.REGRESSION
    # Paired: count, names, max, cheap, slow.
    assert (comparison.paired, comparison.passed_before, comparison.passed_now) == (5, 3, 3)
    assert comparison.accuracy_before == comparison.accuracy_now == 0.6
    assert (comparison.b, comparison.c) == (1, 1)
    assert comparison.p_value == 1.0

    data = comparison.to_json()
    assert data["regressions"] == [label("count")] and data["fixed"] == [label("cheap")]
    assert data["known_failures"] == 1 and data["new"] == [label("broken"), label("fresh")]
    assert data["p_value"] == 1.0 and data["path"] == comparison.path
    json.dumps(data)  # plain JSON

    text = "\n".join(comparison.render_lines())
    assert label("count") in text and label("cheap") in text
    assert "update the baseline with --nl2sql-update-baseline" in text
    assert "McNemar exact p = 1" in text and "not distinguishable from noise" in text


def test_a_real_change_is_distinguishable(tmp_path: Path) -> None:
    before = [item(f"q{i}", "mismatch") for i in range(9)] + [item("q9")]
    now = [item(f"q{i}") for i in range(9)] + [item("q9", "mismatch")]
    comparison = compare_with_baseline(baseline_of(tmp_path, before), now)
    assert (comparison.b, comparison.c) == (1, 9)
    assert comparison.p_value == mcnemar_exact(1, 9) == 0.021484375
    assert comparison.accuracy_before == 0.1 and comparison.accuracy_now == 0.9
    assert comparison.significant
    assert any("p = 0.0215" in line and "the change is distinguishable" in line for line in comparison.render_lines())


def test_unchanged_run(tmp_path: Path) -> None:
    items = [item("a"), item("b", "mismatch")]
    comparison = compare_with_baseline(baseline_of(tmp_path, items), items)
    assert comparison.regressions == comparison.fixed == comparison.new == ()
    assert comparison.changed_failures == ()
    lines = comparison.render_lines()
    assert "no case changed its verdict" in lines[-1]
    assert not any("update the baseline" in line for line in lines)


def test_empty_baseline_makes_everything_new(tmp_path: Path) -> None:
    comparison = compare_with_baseline(baseline_of(tmp_path, []), [item("a"), item("b", "mismatch")])
    assert comparison.paired == 0 and comparison.accuracy_before is None
    assert comparison.new == (f"{FILE}::a", f"{FILE}::b")


def test_natural_key() -> None:
    assert sorted(["q10", "q2", "10", "2", "case-0001", "a"], key=natural_key) == [
        "2", "10", "a", "case-0001", "q2", "q10",
    ]


def test_rewriting_keeps_the_file_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    import os
    import stat

    path = tmp_path / "baseline.json"
    write_baseline(path, [item("a")])
    if os.name == "posix":
        path.chmod(0o644)  # tempfile.mkstemp made it 0600 before
        write_baseline(path, [item("a"), item("b")])
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]


def test_a_new_baseline_honours_the_umask(tmp_path: Path) -> None:
    import os
    import stat

    if os.name != "posix":
        pytest.skip("POSIX permission bits")
    old = os.umask(0o022)
    try:
        write_baseline(tmp_path / "baseline.json", [item("a")])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "baseline.json").stat().st_mode) == 0o644  # not mkstemp's 0600


def test_a_directory_is_a_clear_error_both_ways(tmp_path: Path) -> None:
    from pytest_nl2sql.gate.baseline import BaselineWriteError

    taken = tmp_path / "baselines"
    taken.mkdir()
    with pytest.raises(BaselineError, match=f"baseline path {taken} is a directory; name a file"):
        load_baseline(taken)
    with pytest.raises(BaselineWriteError) as raised:
        write_baseline(taken, [item("a")])
    assert isinstance(raised.value, OSError) and isinstance(raised.value, BaselineError)
    assert str(raised.value) == f"cannot write the baseline {taken}: it is a directory; name a file instead"
    assert list(taken.iterdir()) == [] and [p.name for p in tmp_path.iterdir()] == ["baselines"]


def test_a_failed_write_keeps_the_old_baseline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from pytest_nl2sql.gate.baseline import BaselineWriteError

    path = tmp_path / "baseline.json"
    write_baseline(path, [item("a")])
    before = path.read_text(encoding="utf-8")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(BaselineWriteError, match="No space left on device"):
        write_baseline(path, [item("a"), item("b")])
    assert path.read_text(encoding="utf-8") == before
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.json"]


def test_a_lone_surrogate_in_a_reason_round_trips(tmp_path: Path) -> None:
    case = item("a", "pred_error")
    case["reason"] = "near '\ud800': syntax error"
    baseline = baseline_of(tmp_path, [case])
    assert baseline.lookup(FILE, "a").reason == "near '\ud800': syntax error"


def test_a_baseline_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(BaselineError, match=f"baseline file {path} is not UTF-8 text"):
        load_baseline(path)
