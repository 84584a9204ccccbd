"""`--nl2sql-confine`: the files a case file names must lie under the rootdir.

Under the option, a case file cannot make the run open a database or read a file elsewhere on the
machine (`database: /home/someone/secret.sqlite`, `gold_result: ../../etc/passwd`): paths are
resolved (symlinks followed, `..` removed) and must lie under the root. Server URLs
(`postgresql://`, `mysql://`, any URL that names no file) are not paths and are allowed. Databases
found through `db_id` under the `--nl2sql-db-dir` given on the command line are allowed too: the
user, not the case file, named that directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pytest_nl2sql.engines.base import DatabaseMissing
from pytest_nl2sql.engines.url import looks_like_url, parse_database


def _resolved(path: Path | str) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):  # pragma: no cover - realpath does not raise for ordinary input
        return Path(os.path.abspath(path))


@dataclass(frozen=True)
class Confinement:
    """The root every file a case names must lie under (None: no confinement)."""

    root: Path | None = None
    trusted: tuple[Path, ...] = ()  # further roots named on the command line (--nl2sql-db-dir)

    @classmethod
    def of(cls, root: Path | None, *trusted: Path | None) -> "Confinement":
        if root is None:
            return cls()
        return cls(_resolved(root), tuple(_resolved(t) for t in trusted if t is not None))

    def outside(self, path: Path | str, *, trusted: bool = False) -> Path | None:
        """The resolved path when it lies outside the root (and, with `trusted`, outside the
        trusted roots too); None when it is allowed."""
        if self.root is None:
            return None
        real = _resolved(path)
        roots = (self.root, *self.trusted) if trusted else (self.root,)
        return None if any(real == r or real.is_relative_to(r) for r in roots) else real

    def problem(self, what: str, path: Path | str, *, trusted: bool = False) -> str | None:
        """The message of an InvalidCase when `path` (named as `what`) lies outside the root."""
        real = self.outside(path, trusted=trusted)
        if real is None:
            return None
        return f"{what} lies outside the rootdir {self.root} (--nl2sql-confine): {real}"

    def database_problem(self, label: str, target: str, *, trusted: bool = False) -> str | None:
        """As `problem`, for a case's database: a file path, or a URL that names a file
        (`sqlite:///…`, `duckdb:///…`); server URLs are allowed."""
        if self.root is None:
            return None
        if looks_like_url(target):
            try:
                spec = parse_database(target)
            except DatabaseMissing:
                return None  # not a file (in memory, unsupported scheme): the run reports it
            if spec.path is None:
                return None
            return self.problem(f"database {label!r}", spec.path, trusted=trusted)
        return self.problem(f"database {label!r}", target, trusted=trusted)
