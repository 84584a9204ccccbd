"""`nl2sql neighbours build SUITE... [--cache-dir DIR]`: the neighbour databases of suites,
generated ahead of a run into the cache the run reads (for teams that commit the cache or keep it
between CI runs). Each case gets what a run would generate for it (`neighbours_ahead`: the
pipeline's own plan, so the same source, gold, count and time limit), so the run that follows
finds them all, whichever prediction it judges.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
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
        for path in files:
            try:
                entries = load_case_file(path, db_dir=db_dir)
            except CaseFileError as error:
                print(f"nl2sql neighbours: {error}", file=sys.stderr)
                status = 2
                continue
            cases = [e for e in entries if not isinstance(e, InvalidCase)]
            having = generated = 0
            without: dict[str, int] = {}
            for case in cases:
                before = pipeline.neighbour_cache().generated
                count, why = neighbours_ahead(pipeline, case)
                if count:
                    having += 1
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
