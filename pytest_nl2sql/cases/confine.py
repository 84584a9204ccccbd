"""`--nl2sql-confine`: the files a case file names must lie under the rootdir.

Under the option, a case file cannot make the run open a database or read a file elsewhere on the
machine (`database: /home/someone/secret.sqlite`, `gold_result: ../../etc/passwd`): paths are
resolved (symlinks followed, `..` removed) and must lie under the root; a refusal names the
symlink that leads out. A `database:` that names a folder of databases (the official test-suite
layout) is refused when any file in it leads out of the tree: the case would otherwise run on part
of its folder, or on another file as its own, without a word. Server URLs
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
        return f"{what} lies outside the rootdir {self.root} (--nl2sql-confine): {_leads_to(path, real)}"

    def database_problem(self, label: str, target: str, *, trusted: bool = False, named: str | None = None) -> str | None:
        """As `problem`, for a case's database: a file path (`named`: as the case file named it,
        before symlinks are resolved), a folder of databases, or a URL that names a file
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
        path = named or target
        return self.problem(f"database {label!r}", path, trusted=trusted) or self._folder_problem(label, Path(path), trusted)

    def _folder_problem(self, label: str, folder: Path, trusted: bool) -> str | None:
        """A folder of databases holding a file that leads out of the tree (a symlink, or under one)."""
        try:
            if not folder.is_dir():
                return None
            entries = sorted(folder.iterdir())
        except OSError:  # unreadable: the run reports the database
            return None
        for entry in entries:
            real = self.outside(entry, trusted=trusted) if entry.is_file() else None
            if real is not None:
                return (f"database {label!r} is a folder of databases, and {_leads_to(entry, real)}, outside the rootdir "
                        f"{self.root} (--nl2sql-confine): the case would run without that database; "
                        "remove the link, or copy the file into the tree")
        return None


def _leads_to(path: Path | str, real: Path) -> str:
    """`real`, or which symlink leads there: the file itself, or a folder on its way."""
    shown = os.path.abspath(path)
    if Path(shown) == real:
        return str(real)
    return f"{shown} is a symlink to {real}" if os.path.islink(shown) else f"{shown} leads through a symlink to {real}"
