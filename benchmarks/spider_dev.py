"""The whole Spider dev set through pytest, side by side with the official evaluator's execution run.

Run from the repo root::

    python benchmarks/spider_dev.py [--official DIR] [--repeat N] [--model NAME]
                                    [--python LABEL=EXE ...] [--variant LABEL=ARGS ...] [--profile OUT]

* **ours**: ``python -m pytest`` in a subprocess on a ``source: {format: spider}`` suite with one
  predictions file: collection of the 1034 items, hardness of every gold, gold and prediction
  executed and compared, exact set match and partial scores, the summary and a JSON report. The
  whole process is timed (interpreter start-up, imports and plugin loading included). Every
  ``--python LABEL=EXE`` adds one more environment of ours (e.g. a venv with ``sqlglotc``).
* **official**: taoyds/test-suite-sql-eval's ``evaluation.py --etype exec`` (its defaults: no
  ``--plug_value``, no ``--keep_distinct``), from a checkout given with ``--official DIR``. It
  aborts on the first item whose database is missing (``sqlite3.OperationalError: unable to open
  database file`` for ``wta_1``, the 430th line), so it gets the 972 executable items: the gold
  and prediction files are written without the wta_1 lines, the same way for both. Ours still
  gets all 1034 (the 62 are ``gold_error``, cheap). Its interpreter is ``--official-python``
  (needs ``nltk`` and ``sqlparse``); its ``word_tokenize`` needs NLTK's ``punkt_tab`` data, found
  through ``NLTK_DATA`` (``--nltk-data DIR``) as usual. No official code is in this repository.
* **ours new-predictions**: ours again, with the neighbour databases generated but the verdicts
  remembered beside them removed before each run: what a run of another model (or prompt) on the
  same suite costs. Plain **ours** reruns the same predictions, which a neighbour folder remembers.
* **floor**: each gold and predicted query of the executable items run once with plain ``sqlite3``
  in this process. No evaluator can be faster than executing the queries.
* **ours cold** and **ours cold -n 2** (``--cold``): a first run, every neighbour database generated,
  each run with an empty neighbour cache of its own, in one process and with pytest-xdist's two
  workers; alternated with the others like any configuration (issue 32's bar: cold ``-n 2`` at most
  3x the official run).

``--reports DIR`` keeps each configuration's JSON report of its last round there (``LABEL.json``),
and for a cold configuration a digest of the neighbour databases it generated
(``LABEL.neighbours.json``: each cache key's manifest and each database's schema and rows). The
items of every configuration of ours are compared with those of the first, and the neighbour
digests of every cold run with the others: the verdicts and neighbours must be the same whatever
the number of workers and whether the neighbours were generated or found. ``--compare DIR`` compares
them with the reports a run of another tree kept (``--reports``), item by item: what a change that
must not move any verdict or neighbour shows. Timings (``latency``, ``execution_time``, the run's
times) are left out of the comparison.

Each run is its own subprocess, reaped with ``os.wait4``: wall time, CPU time (user + system of it
and its reaped children) and ``ru_maxrss`` (the largest resident set of any one process of it, in
the kernel's count). Ours runs its queries in a worker child process, so the peak of the summed
proportional set size (PSS: shared pages split between the processes, so counted once) of the
process tree is also sampled from ``/proc/PID/smaps_rollup`` every few milliseconds. The
configurations alternate (official, ours, official, ours, ...) so that load from elsewhere on the
machine hits all of them; the first round is a warm-up (bytecode, OS file cache) and is not
counted. The figures are the best and the median of ``--repeat`` rounds; the ratio is ours over
the official's, best against best.

The subprocesses inherit this environment, except that ``PYTHONDONTWRITEBYTECODE`` is dropped
(``--no-bytecode`` keeps it): an installed package has its bytecode cached, and without the cache
every run recompiles pytest, sqlglot and the plugin, which adds seconds that no user pays.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPIDER = ROOT.parent / "shared" / "data" / "spider"
TARGET_RATIO = 0.5  # issue 8: ours on one database at most half the official execution-only wall time
NEIGHBOURS_TARGET_RATIO = 1.0  # issue 9: ours with neighbour databases (the default) at most the official's


COLD_XDIST_TARGET_RATIO = 3.0  # issue 32: the first run, with -n 2, at most 3x the official single-process run


def target_of(config: Config) -> float | None:
    if config.cold:
        return COLD_XDIST_TARGET_RATIO if "-n" in config.command else None
    return TARGET_RATIO if "--nl2sql-neighbours=0" in config.command else NEIGHBOURS_TARGET_RATIO


@dataclass
class Run:
    wall: float
    cpu: float
    maxrss_kb: int  # ru_maxrss of wait4: the largest single process of the tree
    tree_kb: int  # sampled peak of the summed PSS of the process tree
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Config:
    label: str
    command: list[str]
    cwd: Path
    env: dict[str, str]
    check: object  # callable(Run) -> str, the result line; raises SystemExit when the run failed
    runs: list[Run] = field(default_factory=list)
    forget: Path | None = None  # a neighbour cache whose remembered verdicts go before each run (new predictions)
    cold: bool = False  # each run with an empty neighbour cache of its own (removed after the run)
    report: Path | None = None  # where ours writes its JSON report
    tree_kb: int = 0  # the process tree's sampled peak PSS, from the warm-up run (the timed runs are not sampled)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                kids.extend(int(k) for k in handle.read().split())
    except OSError:
        pass
    return kids


def _pss_kb(pid: int) -> int:
    """Proportional set size: pages shared between the processes (libraries, a forked child's
    copy-on-write pages) are split between them, so the sum over a tree counts each page once."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree_rss_kb(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += _pss_kb(current)
        todo.extend(_children(current))
    return total


def measure(command: list[str], cwd: Path, env: dict[str, str], *, sample: bool = True) -> Run:
    """Run `command` in its own process; wall and CPU time and memory of that process alone.
    `sample`: the process tree's PSS read every 5 ms besides (reading smaps_rollup walks a process's
    mappings under its memory lock: it cost the measured run up to a third of its wall time with
    `-n 2`, so timed runs are not sampled)."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=err)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kb(proc.pid))
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    if sample and os.path.isdir("/proc"):
        sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    done.set()
    if sampler.is_alive():
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    return Run(
        wall=elapsed,
        cpu=usage.ru_utime + usage.ru_stime,
        maxrss_kb=usage.ru_maxrss,
        tree_kb=peak,
        returncode=proc.returncode,
        stdout=out.read().decode(errors="replace"),
        stderr=err.read().decode(errors="replace"),
    )


# -- the inputs -------------------------------------------------------------------------------


def write_suite(directory: Path, spider: Path, predictions: Path) -> Path:
    suite = directory / "spider_dev.nl2sql.yaml"
    suite.write_text(
        "source:\n  format: spider\n"
        f"  questions: {spider / 'dev.json'}\n  db_dir: {spider / 'database'}\n  predictions: {predictions}\n"
    )
    return suite


def write_executable_pairs(directory: Path, spider: Path, predictions: Path) -> tuple[Path, Path, int]:
    """The official's gold and prediction files: dev_gold.sql and the predictions without the
    lines whose database is missing (the official aborts on the first of them)."""
    gold_lines = (spider / "dev_gold.sql").read_text().splitlines()
    pred_lines = predictions.read_text().splitlines()
    if len(gold_lines) != len(pred_lines):
        sys.exit(f"{predictions.name}: {len(pred_lines)} lines for {len(gold_lines)} gold queries")
    keep = []
    for index, line in enumerate(gold_lines):
        db_id = line.rsplit("\t", 1)[-1].strip()
        if (spider / "database" / db_id / f"{db_id}.sqlite").exists():
            keep.append(index)
    gold, pred = directory / "gold_executable.sql", directory / "pred_executable.sql"
    gold.write_text("".join(gold_lines[i] + "\n" for i in keep))
    pred.write_text("".join(pred_lines[i] + "\n" for i in keep))
    return gold, pred, len(keep)


def floor(spider: Path, predictions: Path) -> tuple[float, int]:
    """Execute every gold and predicted query once with plain sqlite3: (seconds, items executed)."""
    questions = json.loads((spider / "dev.json").read_text())
    preds = predictions.read_text().splitlines()
    started = time.perf_counter()
    connections: dict[str, sqlite3.Connection | None] = {}
    executed = 0
    for question, pred in zip(questions, preds):
        db_id = question["db_id"]
        if db_id not in connections:
            path = spider / "database" / db_id / f"{db_id}.sqlite"
            connections[db_id] = sqlite3.connect(f"file:{path}?mode=ro", uri=True) if path.exists() else None
        con = connections[db_id]
        if con is None:  # wta_1: the database is missing
            continue
        executed += 1
        for sql in (question["query"], pred.split("\t", 1)[0]):
            try:
                con.execute(sql).fetchall()
            except sqlite3.Error:
                pass
    for con in connections.values():
        if con is not None:
            con.close()
    return time.perf_counter() - started, executed


# -- the two evaluators -----------------------------------------------------------------------


def file_label(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", label)


def ours_config(label: str, python: str, directory: Path, suite: Path, extra: list[str], env: dict[str, str]) -> Config:
    report = directory / f"report-{file_label(label)}.json"
    command = [python, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider",
               f"--nl2sql-report=json:{report}", *extra]

    def check(run: Run) -> str:
        if not report.exists():
            sys.exit(f"{label}: pytest wrote no report (exit {run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
        summary = json.loads(report.read_text())["summary"]
        judged = summary["total"] - summary["errors"]
        buckets = ", ".join(f"{b} {s['total']}" for b, s in summary["by_hardness"].items())
        return (
            f"{summary['total']} items ({judged} judged, {summary['errors']} gold_error): execution "
            f"{summary['passed']}/{judged} = {summary['passed'] / max(judged, 1):.3f}, exact "
            f"{summary['exact_match_passed']}/{summary['exact_match_total']}; hardness {buckets}"
        )

    return Config(label, command, directory, env, check, report=report)


# -- comparing runs ---------------------------------------------------------------------------


def _timing(key: str) -> bool:
    return key == "worker" or any(word in key for word in ("time", "latency", "duration", "seconds", "elapsed"))


def _untimed(value: object) -> object:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if not _timing(k)}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def report_items(path: Path) -> tuple[dict[str, object], object]:
    """(nodeid -> the item without its timings, the summary without timings) of a JSON report."""
    data = json.loads(path.read_text())
    return {item["nodeid"]: _untimed(item) for item in data["items"]}, _untimed(data["summary"])


def neighbour_digest(cache: Path) -> dict[str, list[object]]:
    """Each cache key's manifest and, per neighbour database, a digest of its schema and rows (in
    rowid order): what two runs generated, compared without the files' bytes."""
    import hashlib

    found: dict[str, list[object]] = {}
    for manifest in sorted(cache.glob("*/*/manifest.json")):
        databases = []
        for entry in json.loads(manifest.read_text()).get("neighbours", []):
            digest = hashlib.sha256()
            path = manifest.parent / entry["file"]
            if path.suffix == ".sqlite":
                con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                try:
                    for name, sql in con.execute("SELECT name, sql FROM sqlite_master ORDER BY type, name"):
                        digest.update(repr((name, sql)).encode())
                        if sql and sql.upper().startswith("CREATE TABLE"):
                            for row in con.execute(f'SELECT * FROM "{name.replace(chr(34), chr(34) * 2)}" ORDER BY rowid'):
                                digest.update(repr(row).encode())
                finally:
                    con.close()
            else:  # DuckDB: its bytes differ between two writes of the same rows; the manifest says enough here
                digest.update(path.name.encode())
            databases.append(digest.hexdigest())
        found[manifest.parent.name] = [manifest.read_text(), databases]
    return found


def differences(mine: dict[str, object], theirs: dict[str, object]) -> list[str]:
    """The keys whose values differ (or that only one side has), each with the fields that differ."""
    found = []
    for key in list(mine) + [k for k in theirs if k not in mine]:
        a, b = mine.get(key), theirs.get(key)
        if a == b:
            continue
        fields = sorted(f for f in set(a or {}) | set(b or {}) if (a or {}).get(f) != (b or {}).get(f)) \
            if isinstance(a, dict) and isinstance(b, dict) else ["missing" if a is None or b is None else "content"]
        found.append(f"{key} ({', '.join(fields)})")
    return found


def compare_line(what: str, mine: dict[str, object], theirs: dict[str, object]) -> str:
    found = differences(mine, theirs)
    shown = "; ".join(found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
    return f"{what}: {len(mine)} against {len(theirs)}, " + (f"{len(found)} differ: {shown}" if found else "identical")


def official_usable(official: Path | None, python: str, env: dict[str, str]) -> str | None:
    """Why the official run is skipped, or None."""
    if official is None:
        return "no --official DIR given (a checkout of taoyds/test-suite-sql-eval)"
    missing = [f for f in ("evaluation.py", "exec_eval.py", "process_sql.py", "parse.py") if not (official / f).exists()]
    if missing:
        return f"{official} is not a test-suite-sql-eval checkout (no {', '.join(missing)})"
    probe = subprocess.run(
        [python, "-c", "import nltk, sqlparse, tqdm; from nltk import word_tokenize; word_tokenize('SELECT 1')"],
        capture_output=True, text=True, env=env,
    )
    if probe.returncode:
        lines = [line.strip() for line in probe.stderr.splitlines() if line.strip().strip("*")]
        last = next((line for line in reversed(lines) if "Error" in line or "Resource" in line), lines[-1] if lines else "?")
        return (f"its interpreter {python} cannot run it ({last}); it needs nltk, sqlparse and tqdm, "
                "and NLTK's punkt_tab data (--nltk-data DIR)")
    return None


def official_config(official: Path, python: str, directory: Path, spider: Path, gold: Path, pred: Path,
                    env: dict[str, str]) -> Config:
    command = [python, str(official / "evaluation.py"), "--gold", str(gold), "--pred", str(pred),
               "--db", str(spider / "database"), "--table", str(spider / "tables.json"), "--etype", "exec"]

    def check(run: Run) -> str:
        if run.returncode:
            sys.exit(f"official: exit {run.returncode}:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
        counts = re.search(r"^count\s+(.*)$", run.stdout, re.M)
        execution = re.search(r"^execution\s+(.*)$", run.stdout, re.M)
        if not (counts and execution):
            sys.exit(f"official: no execution line in its output:\n{run.stdout[-2000:]}")
        n = counts.group(1).split()
        acc = execution.group(1).split()
        levels = ("easy", "medium", "hard", "extra", "all")
        return "execution " + ", ".join(f"{lv} {a} (n={c})" for lv, a, c in zip(levels, acc, n))

    return Config("official", command, official, env, check)


# -- the run ----------------------------------------------------------------------------------


def profile(directory: Path, suite: Path, out: Path, env: dict[str, str]) -> None:
    """One plain run under cProfile (``python -m cProfile -o OUT -m pytest ...``); print where the time goes."""
    import pstats

    command = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider",
               f"--nl2sql-report=json:{directory / 'report.json'}"]
    subprocess.run(command, cwd=directory, env=env, capture_output=True)
    stats = pstats.Stats(str(out))
    print(f"profile written to {out} (cProfile inflates pure-Python code about 2x); top by cumulative time in the plugin:")
    stats.sort_stats("cumulative").print_stats(r"pytest_nl2sql", 25)


def mib(kb: int) -> str:
    return f"{kb / 1024:.1f} MiB"


def describe(config: Config) -> tuple[float, str]:
    runs = config.runs
    walls = [r.wall for r in runs]
    best_wall, median_wall = min(walls), statistics.median(walls)
    line = (
        f"  wall {best_wall:.3f} s best, {median_wall:.3f} s median (all: {' '.join(f'{w:.2f}' for w in walls)}); "
        f"CPU {min(r.cpu for r in runs):.3f} s; peak RSS {mib(max(r.maxrss_kb for r in runs))} "
        f"(largest process), {mib(config.tree_kb)} (PSS of the process tree, sampled in the warm-up run)"
    )
    return best_wall, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spider", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--model", default="dail_sql_gpt4", help="a file of SPIDER/predictions/ (without .sql)")
    parser.add_argument("--repeat", type=int, default=5, help="counted rounds (the best and the median are shown)")
    parser.add_argument("--official", type=Path, help="a checkout of taoyds/test-suite-sql-eval (skipped when absent)")
    parser.add_argument("--official-python", default=sys.executable, help="the interpreter for the official evaluator")
    parser.add_argument("--nltk-data", type=Path, help="NLTK_DATA for the official evaluator (holds tokenizers/punkt_tab)")
    parser.add_argument("--python", action="append", default=[], metavar="LABEL=EXE",
                        help="run ours with this interpreter too (repeatable), e.g. sqlglotc=/tmp/venv-c/bin/python")
    parser.add_argument("--no-default-python", action="store_true", help="only the --python interpreters for ours")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL=ARGS",
                        help="ours once more with these pytest arguments (repeatable; benchmarks/ is put on PYTHONPATH; "
                             "leading NAME=VALUE words set environment variables, as in a shell), "
                             "e.g. 'lean=--tb=no -p no:hypothesispytest', 'seeded=PYTHONHASHSEED=1 --tb=short'")
    parser.add_argument("--xdist", action="store_true", help="also ours with -n 2 (pytest-xdist)")
    parser.add_argument("--cold", action="store_true",
                        help="also ours cold (an empty neighbour cache for each run), in one process and with -n 2")
    parser.add_argument("--reports", type=Path, metavar="DIR",
                        help="keep each configuration's JSON report (and a cold run's neighbour digest) here")
    parser.add_argument("--compare", type=Path, metavar="DIR",
                        help="compare the reports and neighbour digests item by item with those a run of another tree kept (--reports)")
    parser.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE if set")
    parser.add_argument("--extra", action="append", default=[], help="one more pytest argument for ours (repeatable)")
    parser.add_argument("--profile", type=Path, help="also run once under cProfile, write the stats here, print the top")
    args = parser.parse_args()
    spider, predictions = args.spider.resolve(), (args.spider / "predictions" / f"{args.model}.sql").resolve()
    if not (spider / "dev.json").exists() or not predictions.exists():
        sys.exit(f"no Spider dev set / predictions at {spider} ({predictions.name})")
    env = dict(os.environ)
    if not args.no_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    official_env = dict(env)
    if args.nltk_data:
        official_env["NLTK_DATA"] = str(args.nltk_data.resolve())

    pythons = [] if args.no_default_python else [("ours", sys.executable)]
    for spec in args.python:
        label, sep, exe = spec.partition("=")
        if not sep:
            sys.exit(f"--python {spec!r}: use LABEL=EXE")
        pythons.append((f"ours[{label}]", exe))
    if not pythons:
        sys.exit("no interpreter for ours")

    floors = [floor(spider, predictions) for _ in range(max(1, args.repeat))]
    floor_s, executed = min(f for f, _ in floors), floors[0][1]
    print(f"floor: {executed} items, gold + prediction executed once with sqlite3: {floor_s:.3f} s (best of {len(floors)})")

    with tempfile.TemporaryDirectory(prefix="nl2sql-bench-") as tmp:
        directory = Path(tmp)
        suite = write_suite(directory, spider, predictions)
        cache = directory / "neighbour-cache"  # ours generate neighbours into it once (cold), then reuse them
        env = {**env, "NL2SQL_CACHE_DIR": str(cache)}
        configs: list[Config] = []
        why_not = official_usable(args.official.resolve() if args.official else None, args.official_python, official_env)
        if why_not:
            print(f"official: skipped: {why_not}")
        else:
            gold, pred, kept = write_executable_pairs(directory, spider, predictions)
            print(f"official: {kept} items whose database exists ({args.official_python} {args.official}/evaluation.py --etype exec)")
            configs.append(official_config(args.official.resolve(), args.official_python, directory, spider, gold, pred, official_env))
        for label, exe in pythons:
            configs.append(ours_config(label, exe, directory, suite, args.extra, env))
            fresh = ours_config(f"{label} new-predictions", exe, directory, suite, args.extra, env)
            fresh.forget = cache  # the neighbours warm, but no prediction judged on them before (another model's run)
            configs.append(fresh)
            if args.xdist:
                configs.append(ours_config(f"{label} -n 2", exe, directory, suite, ["-n", "2", *args.extra], env))
            if args.cold:
                for name, words in (("cold", []), ("cold -n 2", ["-n", "2"])):
                    cold = ours_config(f"{label} {name}", exe, directory, suite, [*words, *args.extra], env)
                    cold.cold = True
                    configs.append(cold)
            for spec in args.variant:
                name, sep, variant_args = spec.partition("=")
                if not sep:
                    sys.exit(f"--variant {spec!r}: use LABEL=ARGS")
                variant_env, words = dict(env), shlex.split(variant_args)
                while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
                    key, _, value = words.pop(0).partition("=")
                    variant_env[key] = value
                variant_env["PYTHONPATH"] = os.pathsep.join(
                    p for p in (str(Path(__file__).resolve().parent), env.get("PYTHONPATH")) if p
                )
                configs.append(ours_config(f"{label} {name}", exe, directory, suite,
                                           [*words, *args.extra], variant_env))
        if args.profile:
            profile(directory, suite, args.profile.resolve(), env)

        ours = next((c for c in configs if c.label.startswith("ours")), None)
        if ours is not None:  # the first run of ours generates every neighbour database
            cold = measure(ours.command, ours.cwd, ours.env)
            files = [f for f in cache.rglob("*") if f.is_file()]
            print(f"{ours.label}, cold neighbour cache: {cold.wall:.2f} s wall, {cold.cpu:.2f} s CPU "
                  f"(generating the neighbour databases); cache {len(files)} files, "
                  f"{sum(f.stat().st_size for f in files) / 2**20:.1f} MiB")
        results: dict[str, str] = {}
        kept = args.reports.resolve() if args.reports else directory / "kept"
        kept.mkdir(parents=True, exist_ok=True)
        for round_ in range(args.repeat + 1):  # round 0 is the warm-up
            for config in configs:
                if config.forget is not None:
                    for remembered in config.forget.rglob("verdicts"):
                        shutil.rmtree(remembered, ignore_errors=True)
                run_env, fresh = config.env, None
                if config.cold:
                    fresh = Path(tempfile.mkdtemp(prefix="cold-cache-", dir=directory))
                    run_env = {**config.env, "NL2SQL_CACHE_DIR": str(fresh)}
                run = measure(config.command, config.cwd, run_env, sample=round_ == 0)
                results[config.label] = config.check(run)  # type: ignore[operator]
                if config.report is not None:
                    os.replace(config.report, kept / f"{file_label(config.label)}.json")
                if fresh is not None:
                    (kept / f"{file_label(config.label)}.neighbours.json").write_text(json.dumps(neighbour_digest(fresh)))
                    shutil.rmtree(fresh, ignore_errors=True)
                if round_:
                    config.runs.append(run)
                else:
                    config.tree_kb = run.tree_kb

        print(f"{args.model}, {args.repeat} rounds after a warm-up, alternating {' / '.join(c.label for c in configs)}:")
        bests: dict[str, float] = {}
        for config in configs:
            print(f"{config.label}: {results[config.label]}")
            bests[config.label], line = describe(config)
            print(line)
            print(f"  command: {' '.join(config.command)}")
        if "official" in bests:
            official_best = bests["official"]
            official_median = statistics.median(r.wall for r in configs[0].runs)
            for config in configs[1:]:
                ratio = bests[config.label] / official_best
                median_ratio = statistics.median(r.wall for r in config.runs) / official_median
                target = target_of(config)
                verdict = "no target" if target is None else f"{'within' if ratio <= target else 'above'} the {target}x target"
                print(f"{config.label} / official: {ratio:.2f}x best-to-best, {median_ratio:.2f}x median-to-median "
                      f"({verdict}); {bests[config.label] / floor_s:.1f}x the floor")
        else:
            for config in configs:
                print(f"{config.label}: {bests[config.label] / floor_s:.1f}x the floor (no official run to compare with)")
        ours_configs = [c for c in configs if c.report is not None]
        if ours_configs:
            compare_runs(ours_configs, kept, cache, args.compare.resolve() if args.compare else None)
        if args.reports:
            print(f"reports kept in {kept}")


def compare_runs(configs: list[Config], kept: Path, warm_cache: Path, other: Path | None) -> None:
    """Every configuration's items against the first's (the same verdicts and neighbours whatever
    the workers and the cache), the cold runs' neighbours against each other and the warm cache's,
    and, with `other`, each against the same-named report another tree's run kept."""
    first = configs[0]
    items = {c.label: report_items(kept / f"{file_label(c.label)}.json") for c in configs}
    for config in configs[1:]:
        print(compare_line(f"items of {config.label} against {first.label}", items[config.label][0], items[first.label][0]))
    digests = {c.label: json.loads((kept / f"{file_label(c.label)}.neighbours.json").read_text()) for c in configs if c.cold}
    warm = neighbour_digest(warm_cache)
    for label, digest in digests.items():
        print(compare_line(f"neighbour databases of {label} against the warm cache's", digest, warm))
    if other is None:
        return
    for config in configs:
        theirs = other / f"{file_label(config.label)}.json"
        if theirs.exists():
            print(compare_line(f"items of {config.label} against {theirs}", items[config.label][0], report_items(theirs)[0]))
        if config.label in digests and (other / f"{file_label(config.label)}.neighbours.json").exists():
            print(compare_line(f"neighbour databases of {config.label} against {other}", digests[config.label],
                               json.loads((other / f"{file_label(config.label)}.neighbours.json").read_text())))


if __name__ == "__main__":
    main()
