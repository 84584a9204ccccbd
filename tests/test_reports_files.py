"""The report registry and how every report reaches the disk: atomically, with the file's mode
kept, with a clear error naming the path, and whatever text the predictions hold."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from pytest_nl2sql.files import FileWriteError, atomic_open, atomic_write_text
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.reports import ReportWriteError, Writer, default_path, write_report, writer_for
from pytest_nl2sql.vocab import REPORT_FORMATS, Kind, Verdict

FORMATS = sorted(REPORT_FORMATS)
POSIX = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


def make_report(predicted: str = "SELECT 1", reason: str | None = None) -> dict[str, Any]:
    results = [
        CaseResult("ok", "s.nl2sql.yaml::ok", "s.nl2sql.yaml", 0, Kind.SQL, Verdict.PASS,
                   question="How many?", database="db", gold="SELECT 1", predicted="SELECT 1", hardness="easy"),
        CaseResult("bad", "s.nl2sql.yaml::bad", "s.nl2sql.yaml", 1, Kind.SQL, Verdict.MISMATCH,
                   question="Which?", database="db", gold="SELECT 2", predicted=predicted, hardness="hard",
                   reason=reason or "values", tags=("t",),
                   diff={"pairing": [0], "missing": [[2]], "extra": [[predicted]], "missing_count": 1, "extra_count": 1}),
    ]
    items = [r.to_json() for r in results]
    bucket = {"total": 1, "passed": 0, "accuracy": 0.0}
    summary = {"total": 2, "passed": 1, "errors": 0, "accuracy": 0.5, "by_hardness": {"hard": bucket},
               "by_tag": {"t": bucket}, "by_database": {"db": {"total": 2, "passed": 1, "accuracy": 0.5}}}
    return {"summary": summary, "items": items}


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") or p.suffix == ".tmp")


# --- the registry -----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_has_a_registered_writer(fmt: str) -> None:
    writer = writer_for(fmt)
    assert isinstance(writer, Writer)
    assert (writer.name, writer.extension) == (fmt, REPORT_FORMATS[fmt])
    assert default_path(fmt) == Path(f"nl2sql-report.{REPORT_FORMATS[fmt]}")


def test_an_unknown_format_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown report format 'pdf'.*json"):
        write_report("pdf", make_report(), tmp_path / "x.pdf")


@pytest.mark.parametrize("fmt", FORMATS)
def test_write_report_returns_the_files_written(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "deep" / "er" / f"r.{REPORT_FORMATS[fmt]}"
    written = write_report(fmt, make_report(), path)
    assert written[0] == path and all(p.is_file() and p.stat().st_size > 0 for p in written)
    assert len(written) == (2 if fmt == "csv" else 1)
    assert leftovers(path.parent) == []


def test_writers_are_imported_lazily(tmp_path: Path) -> None:
    """openpyxl is slow to import: a run that writes only JSON never imports it."""
    code = (
        "import sys, pathlib\n"
        "from pytest_nl2sql.reports import write_report\n"
        f"write_report('json', {{'summary': {{}}, 'items': []}}, pathlib.Path({str(tmp_path / 'r.json')!r}))\n"
        "print('openpyxl' in sys.modules, 'pytest_nl2sql.reports.xlsx' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# --- lone surrogates: every writer writes them, the previous report is not lost -------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_lone_surrogate_in_a_prediction_is_written(tmp_path: Path, fmt: str) -> None:
    predicted = "SELECT '\ud800' || '\udcff'"
    path = tmp_path / f"r.{REPORT_FORMATS[fmt]}"
    write_report(fmt, make_report(predicted, reason="near '\ud800': syntax error"), path)
    if fmt == "json":
        data = json.loads(path.read_text(encoding="utf-8"))  # strict UTF-8: the file is valid
        assert data["items"][1]["predicted"] == predicted  # the escape reads back as the same string
        assert data["items"][1]["reason"] == "near '\ud800': syntax error"
    elif fmt == "xlsx":
        ws = openpyxl.load_workbook(path)["Overview"]  # a corrupt workbook would not load
        header = [c.value for c in ws[1]]
        assert ws.cell(3, header.index("predicted SQL") + 1).value == "SELECT '\\ud800' || '\\udcff'"
    else:
        text = path.read_text(encoding="utf-8")
        assert "\\ud800" in text


def test_json_surrogate_pairs_and_other_text_round_trip(tmp_path: Path) -> None:
    values = ["\ud83d\ude00", "é ü 中文", "back\\slash \ud800", "\x00\x1f", "\u2028"]
    report = {"summary": {"note": values}, "items": [{"v": v} for v in values]}
    write_report("json", report, tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    expected = ["\U0001f600", *values[1:]]  # a pair of surrogate code points is one character in JSON
    assert data["summary"]["note"] == expected and [i["v"] for i in data["items"]] == expected
    assert "中文" in (tmp_path / "r.json").read_text(encoding="utf-8")  # still not ASCII-escaped


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_failing_writer_keeps_the_previous_report(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"r.{REPORT_FORMATS[fmt]}"
    write_report(fmt, make_report(), path)
    before = path.read_bytes()

    class Poison:
        def __str__(self) -> str:
            raise RuntimeError("cannot show this value")

        __repr__ = __str__

    report = make_report()
    report["items"][1]["predicted"] = report["items"][1]["reason"] = Poison()
    report["items"][1]["diff"]["extra"] = [[Poison()]]
    with pytest.raises(ReportWriteError) as raised:
        write_report(fmt, report, path)
    assert isinstance(raised.value, OSError)
    assert str(path) in str(raised.value) and "cannot show this value" in str(raised.value)
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


def test_the_target_is_untouched_until_the_write_completes(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("old\n", encoding="utf-8")
    with atomic_open(path) as stream:
        stream.write("new\n")
        stream.flush()
        assert path.read_text(encoding="utf-8") == "old\n"  # a kill -9 here leaves the old file
    assert path.read_text(encoding="utf-8") == "new\n"
    with pytest.raises(KeyboardInterrupt):
        with atomic_open(path) as stream:
            stream.write("half")
            raise KeyboardInterrupt
    assert path.read_text(encoding="utf-8") == "new\n"
    assert leftovers(tmp_path) == []


def test_a_failing_rename_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.md"
    path.write_text("old\n", encoding="utf-8")

    def refuse(src: Any, dst: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(ReportWriteError, match=r"cannot write the md report .*r\.md: Permission denied"):
        write_report("md", make_report(), path)
    assert path.read_text(encoding="utf-8") == "old\n" and leftovers(tmp_path) == []


# --- file modes -------------------------------------------------------------------------------


@POSIX
@pytest.mark.parametrize("fmt", FORMATS)
def test_replacing_a_report_keeps_its_mode(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"r.{REPORT_FORMATS[fmt]}"
    path.write_text("old", encoding="utf-8")
    path.chmod(0o640)
    write_report(fmt, make_report(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@POSIX
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_new_report_honours_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        write_report("json", make_report(), tmp_path / "r.json")
        atomic_write_text(tmp_path / "plain.txt", "x")
    finally:
        os.umask(old)
    for name in ("r.json", "plain.txt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask  # 0644 with umask 022


@POSIX
def test_a_read_only_report_is_not_replaced(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write anything")
    path = tmp_path / "r.json"
    path.write_text("keep", encoding="utf-8")
    path.chmod(0o444)
    with pytest.raises(ReportWriteError, match="read-only"):
        write_report("json", make_report(), path)
    assert path.read_text(encoding="utf-8") == "keep"


@POSIX
def test_a_symlinked_report_keeps_its_link(tmp_path: Path) -> None:
    real = tmp_path / "runs" / "r1.json"
    real.parent.mkdir()
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write_report("json", make_report(), link)
    assert link.is_symlink() and json.loads(real.read_text(encoding="utf-8"))["summary"]["total"] == 2


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="no /dev/null")
def test_a_device_is_written_in_place() -> None:
    assert write_report("json", make_report(), Path("/dev/null")) == [Path("/dev/null")]


# --- paths that cannot be written -------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_directory_is_a_clear_error(tmp_path: Path, fmt: str) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    with pytest.raises(ReportWriteError) as raised:
        write_report(fmt, make_report(), taken)
    error = raised.value
    assert isinstance(error, OSError) and isinstance(error, FileWriteError)
    assert str(error) == f"cannot write the {fmt} report {taken}: it is a directory; name a file instead"
    assert error.filename == str(taken)
    assert list(taken.iterdir()) == [] and leftovers(tmp_path) == []


def test_a_file_in_the_way_of_the_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ReportWriteError) as raised:
        write_report("csv", make_report(), tmp_path / "file" / "sub" / "r.csv")
    real = tmp_path.resolve()
    assert str(raised.value) == (f"cannot write the csv report {tmp_path}/file/sub/r.csv: cannot create its "
                                 f"directory {real}/file/sub: {real}/file is a file, not a directory")


def test_write_errors_pickle(tmp_path: Path) -> None:
    """They may cross a process boundary (xdist, multiprocessing) and keep their message."""
    import pickle

    error = ReportWriteError("cannot write the json report x: it is a directory", "x")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is ReportWriteError and str(again) == str(error) and again.filename == "x"


def test_csv_report_reads_back_after_an_atomic_write(tmp_path: Path) -> None:
    path, correct = write_report("csv", make_report(), tmp_path / "r.csv")
    with path.open(newline="", encoding="utf-8") as f:
        assert [row["id"] for row in csv.DictReader(f)] == ["ok", "bad"]
    assert correct.read_text(encoding="utf-8").splitlines() == ["instance_id", "ok"]
