"""What a run was: when, how long, which model (`--nl2sql-label`), which commit, which engine, with
which options, and whether it ran to the end. Every report carries it; `--nl2sql-history` keeps
one line per run, so that numbers can be traced to what produced them and followed over time.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.parse import load_json
from pytest_nl2sql.engines.url import DatabaseMissing, looks_like_url, parse_database, redact
from pytest_nl2sql.reports.json import dumps  # NaN and infinities as null: strict parsers read every line
from pytest_nl2sql.shown import shown_path


@dataclass(frozen=True)
class RunInfo:
    """The JSON report's `run` (its first six keys are the contract's)."""

    started: str  # ISO 8601, UTC
    duration_s: float
    label: str | None
    git_commit: str | None
    engine: str  # the --nl2sql-dsn database (password masked), or "per case"
    complete: bool  # false when the run was interrupted (Ctrl-C, -x, a crash of the session)
    options: Mapping[str, Any] = field(default_factory=dict)
    partial: bool = False  # some cases of the files collected only (-k, -m, node ids, --lf): not the suite's figures

    def to_json(self) -> dict[str, Any]:
        return {"started": self.started, "duration_s": self.duration_s, "label": self.label,
                "git_commit": self.git_commit, "engine": self.engine, "complete": self.complete,
                "partial": self.partial, "options": dict(self.options)}


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def git_commit(directory: Path) -> str | None:
    """The commit checked out in `directory` (with `+dirty` when the tree has changes), or None
    outside a repository or without git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=directory,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


class CommitLookup:
    """`git_commit(directory)` asked in a thread when a run starts and read when it ends: the two git
    processes (`git status` reads the whole tree) then cost the run no time of its own."""

    def __init__(self, directory: Path) -> None:
        self._commit: str | None = None
        self._thread = threading.Thread(target=self._look, args=(directory,), name="nl2sql-git-commit", daemon=True)
        self._thread.start()

    def _look(self, directory: Path) -> None:
        self._commit = git_commit(directory)

    def result(self) -> str | None:
        self._thread.join()
        return self._commit


PER_CASE = "per case"  # the engine of a run without --nl2sql-dsn: each case's own database


def engine_label(dsn: str | None, rootdir: Path | None = None) -> str:
    """Where the cases ran, for reports: the `--nl2sql-dsn` database as a URL that names its engine,
    password masked (`postgresql://user:***@127.0.0.1:5432/db`, `sqlite:////abs/shop.sqlite`,
    `snowflake://user:***@account/db`), or "per case" (each case's own database). With `rootdir`,
    a database file inside it is named relative to it (`sqlite:///data/shop.sqlite`): a CI runner's
    absolute path says nothing to a reader of the summary or a report's header."""
    if not dsn:
        return PER_CASE
    try:
        spec = parse_database(dsn)
        if rootdir is not None and spec.path is not None:
            shown = shown_path(spec.path, rootdir)
            if not os.path.isabs(shown):
                return f"{spec.kind.value}:///{Path(shown).as_posix()}"
        return spec.label()
    except DatabaseMissing:  # a run stops before this (a usage error); merged reports may still ask
        return redact(dsn) if looks_like_url(dsn) else dsn


def history_line(run: RunInfo, summary: Mapping[str, Any]) -> str:
    """One JSON line of `--nl2sql-history`: the run and its summary, without per-item detail."""
    return dumps({"run": run.to_json(), "summary": dict(summary)}, ensure_ascii=True, sort_keys=True, default=str) + "\n"


def append_history(path: Path, run: RunInfo, summary: Mapping[str, Any]) -> None:
    """Append one line (one `write` of a whole line, so concurrent runs do not interleave)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = False
    try:
        with open(path, "rb") as existing:
            existing.seek(0, os.SEEK_END)
            if existing.tell():
                existing.seek(-1, os.SEEK_END)
                torn = existing.read(1) != b"\n"  # a run stopped mid-line: its fragment keeps a line of its own
    except OSError:
        pass
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(("\n" if torn else "") + history_line(run, summary))


class HistoryError(ValueError):
    """A history file that cannot be read: names the file and the line (a usage error)."""


def read_history(path: Path) -> list[dict[str, Any]]:
    """Every line of a history file, oldest first. A torn line (a run stopped while writing it: an
    object begun and not ended) is skipped; any other unreadable line (bad bytes, not JSON,
    nested too deep) is a `HistoryError` naming the file and the line, never a crash of the run."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    runs = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
            entry = load_json(text)
        except UnicodeDecodeError as error:
            raise HistoryError(f"history file {path}:{number}: not UTF-8 text ({error.reason} at byte {error.start})") from None
        except json.JSONDecodeError as error:
            if text.lstrip().startswith("{") and not text.rstrip().endswith("}"):
                continue  # torn: a run stopped while writing it (every line written is one whole object)
            raise HistoryError(f"history file {path}:{number}: not JSON ({error.msg}, column {error.colno})") from None
        except ValueError as error:  # nested too deep
            raise HistoryError(f"history file {path}:{number}: {error}") from None
        if isinstance(entry, dict) and isinstance(entry.get("run"), dict):
            runs.append(entry)
    return runs
