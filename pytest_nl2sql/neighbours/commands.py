"""`nl2sql neighbours build SUITE... [--cache-dir DIR] [--jobs N]`: the neighbour databases of
suites, generated ahead of a run into the cache the run reads (for teams that commit the cache or
keep it between CI runs). Each case gets what a run would generate for it (`neighbours_ahead`: the
pipeline's own plan, so the same source, gold, count and time limit), so the run that follows
finds them all, whichever prediction it judges.

With `--jobs N` (default: the cores this process may run on) the distinct generations (one per
cache key: source content, golds, count, dialect) are shared out to N processes: each key is
built whole by one process, seeded by the key alone, so the neighbours are the same whatever N.
What each case has, and why not, is then read back from the cache in this process, as before.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COMMAND = "neighbours"
CASE_FILES = ("*.nl2sql.yaml", "*.nl2sql.yml", "*.nl2sql.jsonl")  # what a folder argument is searched for (nl2sql_files' default)


def add_neighbours_command(commands: Any) -> None:
    from pytest_nl2sql.judge.pipeline import DEFAULT_NEIGHBOURS

    parser = commands.add_parser(
        COMMAND, help="generate the neighbour databases of suites ahead of a run (build)",
        description="nl2sql neighbours build SUITE...: generate the neighbour databases of every case of the "
                    "given case files (and of the case files found in the given folders) into the cache a run "
                    "reads, so that the run finds them there.")
    parser.add_argument("action", choices=["build"], metavar="build", help="build the neighbours (the only action)")
    parser.add_argument("suites", nargs="+", metavar="SUITE",
                        help="a case file, or a folder searched for " + ", ".join(CASE_FILES))
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where to keep them: the folder the run reads (default $NL2SQL_CACHE_DIR, else "
                             ".pytest_cache/d/nl2sql-neighbours here, pytest's cache of a run from this folder)")
    parser.add_argument("--nl2sql-neighbours", dest="neighbours", type=int, default=DEFAULT_NEIGHBOURS, metavar="N",
                        help=f"neighbours per case, as the run's option (default {DEFAULT_NEIGHBOURS}; a case's "
                             "or suite's `neighbours` key wins)")
    parser.add_argument("--nl2sql-timeout", dest="timeout", type=float, default=30.0, metavar="SECONDS",
                        help="the time a case's generation may take, as the run's option (default 30)")
    parser.add_argument("--nl2sql-db-dir", dest="db_dir", metavar="DIR", help="as the run's option: where db_id databases are")
    parser.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                        help="processes generating at once (default: the cores this process may run on; 1: in this "
                             "process); the neighbours are the same whatever N")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def case_files(arguments: list[str]) -> list[Path]:
    """The case files named, and those found under the folders named (sorted, each once)."""
    found: list[Path] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            for folder, subfolders, names in os.walk(path):
                subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
                found += [Path(folder) / n for n in sorted(names) if any(fnmatch.fnmatch(n, p) for p in CASE_FILES)]
        else:
            found.append(path)
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Generation:
    """One cache key to build: what `NeighbourCache.neighbours_for` is given, and the source's key
    as this process knows it (a server's DuckDB copy is keyed by the rows it was copied from)."""

    source: Path
    golds: tuple[str, ...]
    count: int
    dialect: str
    kind: str
    source_key: str


def generation_of(pipeline: Any, case: Any) -> tuple[str, Generation] | None:
    """(its cache key, what to build) for a case whose neighbours a run would generate, else None
    (`neighbours_ahead` then says why it has none)."""
    from pytest_nl2sql.engines.base import EngineError

    try:
        engine = pipeline.engine_for(case)
    except EngineError:
        return None
    folder, count = pipeline._beyond_plan(case, engine)
    if folder is not None or count <= 0:
        return None
    source, kind = pipeline._neighbour_source(engine)
    if source is None or not Path(source).is_file():
        return None
    cache = pipeline.neighbour_cache()
    try:
        key = cache.key(Path(source), case.gold, count, case.written_in, kind)
    except OSError:
        return None
    return key, Generation(Path(source), tuple(case.gold), count, case.written_in, kind, cache.source_key(Path(source), kind))


_CHILD_CACHE: Any = None  # a generating process's own cache object (its source hashes and invariants, reused)


def _build_one(cache_dir: Path, time_limit: float, generation: Generation) -> dict[str, str]:
    """In a process of the pool: build one key into the cache; why a generation was cut short
    (`NeighbourCache.cuts`), for the parent to know as if it had cut it itself."""
    global _CHILD_CACHE
    from pytest_nl2sql.neighbours import NeighbourCache

    if _CHILD_CACHE is None or _CHILD_CACHE.cache_dir != Path(cache_dir):
        _CHILD_CACHE = NeighbourCache(Path(cache_dir), time_limit=time_limit)
    _CHILD_CACHE.know_content(generation.source, generation.source_key)
    _CHILD_CACHE.neighbours_for(generation.source, generation.golds, generation.count, dialect=generation.dialect,
                                kind=generation.kind)
    return _CHILD_CACHE.cuts()


def build_in_parallel(pipeline: Any, cases: list[Any], jobs: int) -> set[str]:
    """Build the keys `cases` need and the cache lacks, shared out to `jobs` processes (each key
    whole in one of them); the keys built. Started with `spawn`: nothing of this process (open
    databases, DuckDB's threads) is copied into them."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    cache = pipeline.neighbour_cache()
    wanted: dict[str, Generation] = {}
    for case in cases:
        found = generation_of(pipeline, case)
        if found is not None and found[0] not in wanted and cache.cached(found[0]) is None:
            wanted[found[0]] = found[1]
    if len(wanted) < 2:
        return set()  # nothing to share out: this process builds it as it goes
    pool = ProcessPoolExecutor(min(jobs, len(wanted)), mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = [pool.submit(_build_one, cache.cache_dir, cache.time_limit, generation) for generation in wanted.values()]
        for future in futures:
            cache.know_cuts(future.result())
    except BrokenProcessPool:  # a process could not start (a main script read from stdin) or died: build here
        pool.shutdown(wait=False, cancel_futures=True)
        return set()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return set(wanted)


def neighbours_ahead(pipeline: Any, case: Any) -> tuple[int, str | None]:
    """(how many neighbours `case` has, why none): generated now, or found in the cache, as the
    run would when its prediction passes on the case's own database (`Pipeline._check_beyond`)."""
    from pytest_nl2sql.engines.base import EngineError

    try:
        engine = pipeline.engine_for(case)
    except EngineError as error:  # DatabaseMissing too
        return 0, f"its database cannot be opened: {error}"
    folder, count = pipeline._beyond_plan(case, engine)
    if folder is not None or count <= 0:
        return 0, None  # a folder of databases, neighbours off, no gold, Spider mode: nothing to generate
    databases = pipeline._other_databases(case, engine, None, count)
    return len(databases), None if databases else pipeline._neighbours_off(case, engine)


def run_neighbours_command(args: argparse.Namespace) -> int:
    from pytest_nl2sql.cases.model import MAX_NEIGHBOURS, CaseFileError, InvalidCase
    from pytest_nl2sql.cases.read import load_case_file
    from pytest_nl2sql.engines.base import Limits
    from pytest_nl2sql.judge.pipeline import Pipeline, RunOptions

    if not 0 <= args.neighbours <= MAX_NEIGHBOURS:
        print(f"nl2sql neighbours: --nl2sql-neighbours must be from 0 to {MAX_NEIGHBOURS}, not {args.neighbours}", file=sys.stderr)
        return 2
    if not args.timeout > 0:
        print(f"nl2sql neighbours: --nl2sql-timeout must be a number of seconds above 0, not {args.timeout}", file=sys.stderr)
        return 2
    jobs = available_cores() if args.jobs is None else args.jobs
    if jobs < 1:
        print(f"nl2sql neighbours: --jobs must be 1 or more, not {jobs}", file=sys.stderr)
        return 2
    files = case_files(args.suites)
    missing = [str(f) for f in files if not f.is_file()]
    if missing or not files:
        print(f"nl2sql neighbours: no case file: {', '.join(missing) or ' '.join(args.suites)}", file=sys.stderr)
        return 2
    cache_dir = Path(args.cache_dir) if args.cache_dir else (
        Path(os.environ["NL2SQL_CACHE_DIR"]).expanduser() if os.environ.get("NL2SQL_CACHE_DIR")
        else Path(".pytest_cache") / "d" / "nl2sql-neighbours")
    db_dir = Path(args.db_dir) if args.db_dir else None
    options = RunOptions(limits=Limits(timeout=args.timeout), neighbours=args.neighbours, cache_dir=cache_dir, db_dir=db_dir)
    pipeline = Pipeline(options)
    status = 0
    try:
        suites: list[tuple[Path, list[Any]]] = []
        for path in files:
            try:
                entries = load_case_file(path, db_dir=db_dir)
            except CaseFileError as error:
                print(f"nl2sql neighbours: {error}", file=sys.stderr)
                status = 2
                continue
            suites.append((path, [e for e in entries if not isinstance(e, InvalidCase)]))
        built = build_in_parallel(pipeline, [c for _, cases in suites for c in cases], jobs) if jobs > 1 else set()
        for path, cases in suites:
            having = generated = 0
            without: dict[str, int] = {}
            for case in cases:
                before = pipeline.neighbour_cache().generated
                found = generation_of(pipeline, case) if built else None
                count, why = neighbours_ahead(pipeline, case)
                if count:
                    having += 1
                    if found is not None and found[0] in built:  # built by the pool: generated for its first case
                        built.discard(found[0])
                        generated += 1
                    else:
                        generated += pipeline.neighbour_cache().generated > before
                elif why:
                    without[why] = without.get(why, 0) + 1
            line = (f"{path}: {len(cases)} cases, neighbours for {having} ({generated} generated, "
                    f"{having - generated} found in the cache)")
            line += "".join(f"; {n} without: {why}" for why, n in without.items())
            print(line)
    finally:
        pipeline.close()
    print(f"nl2sql neighbours: cache {cache_dir}")
    return status
