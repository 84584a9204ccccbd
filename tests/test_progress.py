"""Progress for long runs: a live title on a terminal, lines between pytest's own under -v."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import make_shop, write_suite
from pytest_nl2sql.plugin import progress
from pytest_nl2sql.plugin.progress import Progress, ProgressDisplay


def test_the_text_counts_accuracy_and_eta() -> None:
    p = Progress(total=10, started=100.0)
    for passed in (True, True, False, True):
        p.add(passed, judged=True)
    p.add(False, judged=False)  # a broken case: done, not judged
    assert p.text(now=110.0) == "nl2sql 5/10 cases, accuracy 75.0%, ETA 10s"
    assert Progress(total=2).text() == "nl2sql 0/2 cases"


class Reporter:
    def __init__(self, isatty: bool) -> None:
        self.isatty, self.out = isatty, []

    def write(self, text: str, **_: Any) -> None:
        self.out.append(text)

    def ensure_newline(self) -> None:
        self.out.append("\n")

    def write_line(self, text: str) -> None:
        self.out.append(text + "\n")


def test_on_a_terminal_the_live_line_is_the_title(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "TITLE_EVERY_S", 0.0)
    monkeypatch.setenv("TERM", "xterm")
    shown = ProgressDisplay(Reporter(isatty=True), total=2, verbosity=0)
    shown.add(True, True)
    shown.close()
    assert shown.reporter.out == ["\x1b]2;nl2sql 1/2 cases, accuracy 100.0%, ETA 0s\x07", "\x1b]2;\x07"]
    piped = ProgressDisplay(Reporter(isatty=False), total=2, verbosity=0)
    piped.add(True, True)
    assert piped.reporter.out == []  # not a terminal: nothing


def test_verbose_runs_print_progress_lines_between_pytests(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    make_shop(pytester.path)
    write_suite(pytester.path, [{"id": f"c{n}", "gold": "SELECT 1", "predicted": "SELECT 1"} for n in range(3)], database="shop.sqlite")
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*::c0 PASSED*", "nl2sql 1/3 cases, accuracy 100.0%, ETA *", "*::c1 PASSED*",
                                 "nl2sql 2/3 cases, accuracy 100.0%, ETA *"])
    assert "nl2sql 1/3" not in pytester.runpytest().stdout.str()  # without -v: pytest's dots only
