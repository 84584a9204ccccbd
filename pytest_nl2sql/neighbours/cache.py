"""The disk cache of neighbours: one folder per key (sha256 of the source's content, the golds,
the count and the generator's version), holding the database files and a manifest. A folder is
built under a temporary name and renamed into place, so concurrent workers asking for the same
key never see half a folder (the loser of the race drops its copy and uses the winner's).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.neighbours.build import build_neighbours
from pytest_nl2sql.neighbours.generate import Repairer, create_database
from pytest_nl2sql.neighbours.interrupts import ctrl_c_stops
from pytest_nl2sql.neighbours.invariants import Invariant, learn
from pytest_nl2sql.neighbours.schema import duckdb_version

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Neighbour:
    """One finished neighbour database in the cache folder."""

    path: Path  # SQLite for a SQLite source, DuckDB for a DuckDB source
    index: int  # 0..count-1
    note: str  # how it was built, in a few words
    breaks: Invariant | None = None  # a stress neighbour: the observed invariant it breaks (None: plausible)
    invariants: tuple[Invariant, ...] = ()  # what the source shows, which the neighbour keeps (but `breaks`)

    @property
    def plausible(self) -> bool:
        return self.breaks is None


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class NeighbourCache:
    """Neighbours cached under `cache_dir`; remembers the content hash of each source file (by
    device, inode, size and mtime: the file itself, however it is named) so a big file is hashed
    once per process."""

    def __init__(self, cache_dir: Path, version: str, *, seed: str | None = None) -> None:
        self.cache_dir = Path(cache_dir)
        self.version = version
        self.seed = version if seed is None else seed  # salts the random draws (not the cache key)
        self._source_hashes: dict[tuple[int, int, int, int], str] = {}
        self._learned: dict[str, tuple[Invariant, ...]] = {}  # source hash -> its structural invariants
        self.generated = 0  # how many keys this object built itself (a cache miss each)

    def source_hash(self, source: Path) -> str:
        info = os.stat(source)
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        known = self._source_hashes.get(key)
        if known is None:
            known = self._source_hashes[key] = file_digest(Path(source))
        return known

    def know_content(self, source: Path, digest: str) -> None:
        """Key `source` by `digest` (its content) instead of its bytes: a file written anew from
        the same data (a DuckDB copy of a server database) then gives the same neighbours."""
        info = os.stat(source)
        self._source_hashes[(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)] = digest

    def key(self, source: Path, golds: Sequence[str], count: int, dialect: str, kind: str) -> str:
        # DuckDB files are keyed by the DuckDB that writes them too: the cache may be shared by
        # projects of several DuckDB versions, and an older one cannot read a newer one's files
        # (16 KB blocks need 1.2: `schema.DuckdbHost`)
        writer = [".".join(map(str, duckdb_version()))] if kind == "duckdb" else []
        material = json.dumps([self.version, kind, dialect, self.source_hash(source), list(golds), count, *writer])
        return hashlib.sha256(material.encode()).hexdigest()

    @ctrl_c_stops()  # DuckDB runs in this thread: a Ctrl-C in it stops the run, never fails the case
    def neighbours_for(self, source: Path, golds: Sequence[str], count: int, *, dialect: str = "sqlite",
                       kind: str = "sqlite") -> tuple[Neighbour, ...]:
        source = Path(source)
        if count <= 0 or not source.is_file():
            return ()
        key = self.key(source, golds, count, dialect, kind)
        folder = self.cache_dir / key[:2] / key
        found = self._read(folder)
        if found is not None:
            return found
        # the seed leaves out `count`: asking for more neighbours considers the same candidates
        seed = json.dumps([self.seed, kind, dialect, self.source_hash(source), list(golds)]).encode()
        source_hash = self.source_hash(source)

        def learned(reader: Any, schema: Any) -> tuple[Invariant, ...]:
            if source_hash not in self._learned:
                self._learned[source_hash] = learn(reader, schema)
            return self._learned[source_hash]

        built = build_neighbours(source, golds, count, dialect=dialect, kind=kind, seed=seed, learned=learned)
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=folder.parent))
        try:
            entries = []
            suffix = "sqlite" if kind == "sqlite" else "duckdb"
            for index, neighbour in enumerate(built.neighbours):
                name = f"{index}.{suffix}"
                connection, _ = create_database(neighbour.schema, neighbour.rows, staging / name, Repairer(neighbour.schema, random.Random(0)))
                connection.close()
                os.chmod(staging / name, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
                entries.append({"file": name, "note": neighbour.note,
                                "breaks": neighbour.breaks.to_json() if neighbour.breaks is not None else None})
            invariants = [i.to_json() for i in built.observed.invariants]
            (staging / MANIFEST).write_text(json.dumps({"version": self.version, "neighbours": entries, "invariants": invariants}))
            self.generated += 1
            try:
                os.replace(staging, folder)
            except OSError:  # another worker put the same key in place first: use theirs
                pass
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        found = self._read(folder)
        return found if found is not None else ()

    def _read(self, folder: Path) -> tuple[Neighbour, ...] | None:
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        if manifest.get("version") != self.version:
            return None
        entries = manifest.get("neighbours", [])
        try:
            invariants = tuple(Invariant.from_json(i) for i in manifest.get("invariants", []))
            neighbours = tuple(Neighbour(folder / e["file"], i, e["note"], Invariant.from_json(e["breaks"]) if e.get("breaks") else None,
                                         invariants) for i, e in enumerate(entries))
        except (KeyError, TypeError, ValueError):
            return None
        if not all(n.path.is_file() for n in neighbours):
            return None
        return neighbours

