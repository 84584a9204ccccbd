"""The disk cache of neighbours: one folder per key (sha256 of the source's content, the golds,
the count, the generator's version and the engine's), holding the database files and a manifest.
A folder is built under a temporary name and renamed into place, so concurrent workers asking for
the same key never see half a folder (the loser of the race drops its copy and uses the winner's).

The key names the source by what the generator reads of it, never by its path or its times, so a
cache copied to another folder, checkout or machine is found there (`source_key`): a SQLite file
by its bytes (a copy of the file is the same bytes); a DuckDB file, whose bytes differ each time
DuckDB writes the same data, by its content (`duckdb_content`); a server database's DuckDB copy by
its rows (`know_content`). The same key seeds the generator's random draws, so a cache miss on
another machine generates the very neighbours the cache would have held.

Generation is bounded in time (`time_limit`: `--nl2sql-timeout`, see `budget`): a generation cut
short gives no neighbours and leaves nothing in the cache; `cut_short` says why, for the case's
note. A cut while the source itself was read (its schema, its invariants: the same work for every
gold) is remembered for that source, so the other cases on it do not pay the time again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.neighbours import budget
from pytest_nl2sql.neighbours.build import build_neighbours
from pytest_nl2sql.neighbours.generate import Repairer, create_database
from pytest_nl2sql.neighbours.interrupts import ctrl_c_stops, raise_if_interrupt
from pytest_nl2sql.neighbours.invariants import Invariant, learn
from pytest_nl2sql.neighbours.schema import SchemaUnsupported, duckdb_version, quote

MANIFEST = "manifest.json"
# Phases of `build` whose work is the source's alone, the same for every gold: a cut there holds
# for every case on that source.
SOURCE_PHASES = ("reading the schema", "learning the invariants the database shows")


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


CONTENT_ROWS = 50_000  # a DuckDB table of at most this many rowids is keyed by every row; a bigger one by a sample
CONTENT_RUNS = 16  # rowid runs of a big DuckDB table's sample in its key, spread evenly over its rowids
CONTENT_RUN_ROWS = 256  # rows per run


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def duckdb_content(path: Path) -> str:
    """The content of a DuckDB file, as the generator reads it: its schema (tables in order, their
    columns, types and constraints, its views and unique indexes) and its rows in rowid order (the
    order the generator samples in), each row with its rowid: every row of a table of at most
    `CONTENT_ROWS` rowids; of a bigger one, its row count, rowid range and `CONTENT_RUNS` runs of
    `CONTENT_RUN_ROWS` rows spread evenly over it (a change elsewhere in a big table keeps the key)."""
    from pytest_nl2sql.neighbours.schema import DuckdbSource

    digest = hashlib.sha256()
    reader = DuckdbSource(Path(path))
    try:
        schema = reader.schema()
        digest.update(repr(schema).encode())
        for table in schema.tables:
            budget.check()
            name = quote(table.name)
            rows, low, high = reader.connection.execute(f"SELECT count(*), min(rowid), max(rowid) FROM {name}").fetchone()
            digest.update(repr((table.name, rows, low, high)).encode())
            if not rows:
                continue
            if high - low < CONTENT_ROWS:
                cursor = reader.connection.execute(f"SELECT rowid, * FROM {name} ORDER BY rowid")
            else:
                step = (high - low + 1) / CONTENT_RUNS
                starts = [low + int(step * k) for k in range(CONTENT_RUNS)] + [high + 1]
                cursor = reader.connection.execute(" UNION ALL ".join(
                    f"SELECT * FROM (SELECT rowid, * FROM {name} WHERE rowid >= {start} AND rowid < {end}"
                    f" ORDER BY rowid LIMIT {CONTENT_RUN_ROWS})" for start, end in itertools.pairwise(starts) if end > start)
                    + " ORDER BY 1")
            while True:
                batch = cursor.fetchmany(10_000)
                if not batch:
                    break
                for row in batch:
                    digest.update(repr(row).encode())
    finally:
        reader.close()
    return "content:" + digest.hexdigest()


class NeighbourCache:
    """Neighbours cached under `cache_dir`; remembers the content hash of each source file in this
    process (by device, inode, size and mtime: the file itself, however it is named) so a big file
    is hashed once per process. Nothing of the path or the times is in a key."""

    def __init__(self, cache_dir: Path, version: str, *, seed: str | None = None, time_limit: float | None = None) -> None:
        self.cache_dir = Path(cache_dir)
        self.time_limit = time_limit  # seconds a generation may take (None: unbounded)
        self._cut: dict[str, str] = {}  # key (or source hash) -> why its generation was cut short
        self.version = version
        self.seed = version if seed is None else seed  # salts the random draws (not the cache key)
        self._source_hashes: dict[tuple[int, int, int, int], str] = {}
        self._source_contents: dict[tuple[int, int, int, int], str] = {}  # DuckDB files: `duckdb_content`
        self._learned: dict[str, tuple[Invariant, ...]] = {}  # source hash -> its structural invariants
        self._readers: dict[str, dict[Any, Any]] = {}  # SQLite source hash -> what its readers read (`build_neighbours`' memo)
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
        self._source_contents[(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)] = digest

    def source_key(self, source: Path, kind: str) -> str:
        """What names `source` in the cache's keys and the generator's seed: its content as told
        by `know_content`; else a DuckDB file's content (`duckdb_content`: the same rows written
        again, here or on another machine, give the same key), a SQLite file's bytes."""
        if kind != "duckdb":
            return self.source_hash(source)
        info = os.stat(source)
        memo = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        known = self._source_contents.get(memo)
        if known is None:
            import duckdb

            try:
                known = duckdb_content(Path(source))
            except (duckdb.Error, SchemaUnsupported, UnicodeError) as error:  # no DuckDB file, or a damaged one: generation says so
                raise_if_interrupt(error)  # a Ctrl-C inside DuckDB stops the run
                known = self.source_hash(source)
            self._source_contents[memo] = known
        return known

    def key(self, source: Path, golds: Sequence[str], count: int, dialect: str, kind: str) -> str:
        # keyed by the engine that writes and judges the neighbours too: the cache may be shared by
        # projects of several versions, an older DuckDB cannot read a newer one's files (16 KB
        # blocks need 1.2: `schema.DuckdbHost`), and the mutants that choose the neighbours run there
        engine = ".".join(map(str, duckdb_version())) if kind == "duckdb" else sqlite3.sqlite_version
        material = json.dumps([self.version, kind, dialect, self.source_key(source, kind), list(golds), count, engine])
        return hashlib.sha256(material.encode()).hexdigest()

    def cached(self, key: str) -> tuple[Neighbour, ...] | None:
        """The neighbours kept under `key`, if the cache has them."""
        return self._read(self.cache_dir / key[:2] / key)

    def cuts(self) -> dict[str, str]:
        """Why generations were cut short, by key or source key (content hashes: the same in any
        process), for another process building into the same cache to know (`know_cuts`)."""
        return dict(self._cut)

    def know_cuts(self, cuts: dict[str, str]) -> None:
        self._cut.update(cuts)

    def cut_short(self, source: Path, golds: Sequence[str], count: int, *, dialect: str = "sqlite",
                  kind: str = "sqlite") -> str | None:
        """Why `neighbours_for` gave none for these arguments when it ran out of time, else None."""
        source = Path(source)
        if count <= 0 or not source.is_file():
            return None
        return self._cut.get(self.source_key(source, kind)) or self._cut.get(self.key(source, golds, count, dialect, kind))

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
        if key in self._cut or self.source_key(source, kind) in self._cut:
            return ()
        try:
            with budget.deadline(self.time_limit):
                return self._generate(source, golds, count, dialect, kind, key, folder)
        except budget.CutShort as cut:
            self._cut[self.source_key(source, kind) if cut.phase in SOURCE_PHASES else key] = (
                f"cut short: generating them took longer than the time limit ({cut.seconds:g} s, --nl2sql-timeout)"
                f" while {cut.phase}")
            return ()

    def _generate(self, source: Path, golds: Sequence[str], count: int, dialect: str, kind: str, key: str,
                  folder: Path) -> tuple[Neighbour, ...]:
        # the seed leaves out `count`: asking for more neighbours considers the same candidates
        source_hash = self.source_key(source, kind)
        seed = json.dumps([self.seed, kind, dialect, source_hash, list(golds)]).encode()

        def learned(reader: Any, schema: Any) -> tuple[Invariant, ...]:
            if source_hash not in self._learned:
                found = learn(reader, schema)
                budget.check()  # learned up to an interrupted query: incomplete, never kept
                self._learned[source_hash] = found
            return self._learned[source_hash]

        memo = self._readers.setdefault(source_hash, {}) if kind == "sqlite" else None
        built = build_neighbours(source, golds, count, dialect=dialect, kind=kind, seed=seed, learned=learned, memo=memo)
        with budget.phase("writing the neighbours"):
            return self._write(built, key, folder, kind)

    def _write(self, built: Any, key: str, folder: Path, kind: str) -> tuple[Neighbour, ...]:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=folder.parent))
        try:
            entries = []
            suffix = "sqlite" if kind == "sqlite" else "duckdb"
            for index, neighbour in enumerate(built.neighbours):
                budget.check()
                name = f"{index}.{suffix}"
                if kind == "sqlite" and getattr(neighbour, "image", None) is not None:
                    (staging / name).write_bytes(neighbour.image)  # what the line below writes for these rows, made when they were scored
                else:
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

