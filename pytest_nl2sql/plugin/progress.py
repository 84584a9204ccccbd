"""Progress of a long run: cases done / total, running accuracy, and an ETA from the pace so far.

pytest owns the terminal's lines (its dots and `[ 45%]`), so the live line goes where it garbles
nothing: the terminal's title (an OSC 2 escape, invisible in the text), updated at most once a
second, only when the output is a terminal. With `-v` (a line per case, so a line of our own
fits between two of pytest's), a progress line is also printed every `LINE_EVERY_S` seconds.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

TITLE_EVERY_S = 1.0
LINE_EVERY_S = 30.0


@dataclass
class Progress:
    total: int
    done: int = 0
    passed: int = 0
    judged: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, passed: bool, judged: bool) -> None:
        self.done += 1
        self.passed += passed
        self.judged += judged

    def text(self, now: float | None = None) -> str:
        """`nl2sql 312/1000 cases, accuracy 84.3%, ETA 11m05s`."""
        elapsed = (now if now is not None else time.monotonic()) - self.started
        parts = [f"nl2sql {self.done}/{self.total} cases"]
        if self.judged:
            parts.append(f"accuracy {100 * self.passed / self.judged:.1f}%")
        if 0 < self.done < self.total:
            parts.append(f"ETA {_duration(elapsed / self.done * (self.total - self.done))}")
        return ", ".join(parts)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


class ProgressDisplay:
    """Shows a `Progress` without touching pytest's own output (see the module docstring)."""

    def __init__(self, reporter: Any, total: int, verbosity: int) -> None:
        self.reporter = reporter
        self.progress = Progress(total)
        self.verbose = verbosity > 0
        self.tty = bool(getattr(reporter, "isatty", False)) and os.environ.get("TERM") != "dumb"
        self.last_title = self.last_line = time.monotonic()

    def add(self, passed: bool, judged: bool) -> None:
        self.progress.add(passed, judged)
        now = time.monotonic()
        if self.tty and now - self.last_title >= TITLE_EVERY_S:
            self.last_title = now
            self.reporter.write(f"\x1b]2;{self.progress.text(now)}\x07", flush=True)
        if self.verbose and now - self.last_line >= LINE_EVERY_S:
            self.last_line = now
            self.reporter.ensure_newline()
            self.reporter.write_line(self.progress.text(now))

    def close(self) -> None:
        if self.tty:
            self.reporter.write("\x1b]2;\x07", flush=True)  # the terminal's own title back
