"""`nl2sql` (also `python -m pytest_nl2sql`): commands around a run that need no pytest.

    nl2sql readonly-role postgresql://admin@host/db [--role nl2sql_reader]
    nl2sql readonly-role mysql://root@host/db [--role nl2sql_reader]

prints the SQL that creates the least-privilege role predictions should run as (the engines
contain a query by what its session is; what needs privilege, only the role can forbid).

    nl2sql merge-reports shard1.json shard2.json ... [--nl2sql-baseline=PATH] [--nl2sql-fail-under=...]
                         [--nl2sql-report=FORMAT[:PATH] ...] [--nl2sql-update-baseline] [--rootdir DIR]

combines the JSON reports of a suite's shards (a CI matrix running parts of it) into one run: one
summary, the baseline and thresholds applied once, the other reports written once, exit code 1
when the gate fails, as if the suite had run in one process.

    nl2sql compare A.json B.json [--nl2sql-report=md[:PATH]] [--nl2sql-report=html[:PATH]] [-v | --all]

puts two runs' JSON reports side by side (pytest_nl2sql/gate/compare.py): every accuracy figure and
bucket of both with the difference, the cases that flipped each way with both predictions, and
McNemar's exact p over the cases judged in both. Exit code 0; 2 for a file that is not a report.

    nl2sql copy-db SOURCE_URL TARGET_URL [--replace] [--create] [--strict] [--numeric-text] [--quiet] [--batch-size N]

copies a database (schema, keys, rows) between SQLite, DuckDB, PostgreSQL and MySQL/MariaDB, so
that a suite can run on another engine (see pytest_nl2sql/copydb). Exit code 0 when copied, 1
when something cannot be copied, 2 for a usage error (a bad URL, a non-empty target).

    nl2sql init [DIR] [--database URL]

scaffolds a model repo that passes on its first `python -m pytest`: a suite (from the database's
own tables with --database, else from a tiny example database), conftest.py with the predictor hook
to fill in, pytest.ini and a GitHub Actions workflow (see pytest_nl2sql/scaffold.py). It never
overwrites a file.

    nl2sql malloy-setup [--home DIR]
    nl2sql malloy-model DATABASE

install the Malloy compiler that Malloy predictions need (Node 20 and npm), and print the Malloy
model generated from a database's schema (see pytest_nl2sql/malloy/commands.py).

    nl2sql review REPORT.json --reviews PATH [--case ID --decision D [--note TEXT]] [--accept-suggestions]

walks the disputed cases of a run and writes a person's decisions to the reviews file that
--nl2sql-reviews reads (see pytest_nl2sql/review_cli.py).

    nl2sql audit-gold REPORT.json [REPORT.json ...] [--min-agree K] [--format md|json]

lists the golds to suspect in one suite's reports from several models: the cases whose failing
predictions agree with one another against the gold, and the reports' own gold audits (see
pytest_nl2sql/gate/audit_gold.py). Exit code 0; 2 for a malformed report or one of another suite.

    nl2sql neighbours build SUITE... [--cache-dir DIR] [--nl2sql-neighbours N] [--nl2sql-timeout S]

generates the neighbour databases of suites ahead of a run, into the cache the run reads (see
pytest_nl2sql/neighbours/commands.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_nl2sql import __version__
from pytest_nl2sql.engines.url import EngineKind, parse_database
from pytest_nl2sql.gate.audit_gold import COMMAND as AUDIT_GOLD_COMMAND
from pytest_nl2sql.gate.audit_gold import add_audit_gold_command, run_audit_gold_command
from pytest_nl2sql.gate.baseline import classify, key_relative_to, load_baseline
from pytest_nl2sql.gate.finish import Finished, Gate, finish_run
from pytest_nl2sql.gate.report_file import ReportFileError, check_shard_item, read_report_file
from pytest_nl2sql.gate.run import PER_CASE, RunInfo, utc_now
from pytest_nl2sql.gate.thresholds import parse_fail_unders
from pytest_nl2sql.judge.result import CaseResult
from pytest_nl2sql.malloy.commands import COMMANDS as MALLOY_COMMANDS
from pytest_nl2sql.malloy.commands import add_malloy_commands, run_malloy_command
from pytest_nl2sql.neighbours.commands import COMMAND as NEIGHBOURS_COMMAND
from pytest_nl2sql.neighbours.commands import add_neighbours_command, run_neighbours_command
from pytest_nl2sql.plugin.settings import parse_report
from pytest_nl2sql.plugin.terminal import summary_lines
from pytest_nl2sql.review_cli import COMMAND as REVIEW_COMMAND
from pytest_nl2sql.review_cli import add_review_command, run_review_command
from pytest_nl2sql.vocab import BaselineStatus, Verdict


def _quoted(name: str, quote: str) -> str:
    return quote + name.replace(quote, quote * 2) + quote


def postgres_role_sql(database: str, role: str) -> str:
    """A role that may log in and read, and nothing else (see engines/postgres.py)."""
    r, d = _quoted(role, '"'), _quoted(database, '"')
    return "\n".join([
        f"-- run as a superuser, connected to the database {database}",
        f"CREATE ROLE {r} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;  -- add PASSWORD '...' unless trust/peer auth",
        f"GRANT CONNECT ON DATABASE {d} TO {r};",
        f"GRANT USAGE ON SCHEMA public TO {r};",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {r};",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {r};",
        "-- any role may signal its own sessions: with -n 2 a prediction could end the other worker's connection",
        "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer, bigint), pg_catalog.pg_cancel_backend(integer) FROM PUBLIC;",
        f"ALTER ROLE {r} SET default_transaction_read_only = on;",
        f"ALTER ROLE {r} SET statement_timeout = '60s';",
        f"-- then: --nl2sql-dsn=postgresql://{role}@HOST/{database} (log in as the role itself, never SET ROLE)",
        "-- Not printed as statements: REVOKE ... FROM PUBLIC on the database or schema public. They take",
        "-- what every other user holds through PUBLIC (connecting, temporary tables, creating in public):",
        "-- on a database shared with others that locks them out. On a copy only this role reads, you may add",
        f"--   REVOKE ALL ON DATABASE {d} FROM PUBLIC;  REVOKE CREATE ON SCHEMA public FROM PUBLIC;",
        "-- (the role's sessions are read-only either way: default_transaction_read_only and the plugin's own).",
    ])


def mysql_role_sql(database: str, role: str) -> str:
    """A user that may read one database: no FILE, PROCESS, SUPER or any write privilege."""
    user, d = f"'{role}'@'%'", _quoted(database, "`")
    return "\n".join([
        "-- run as an administrator",
        f"CREATE USER {user} IDENTIFIED BY 'choose-a-password';",
        f"GRANT SELECT ON {d}.* TO {user};  -- and nothing else: no FILE (INTO OUTFILE, LOAD_FILE), no PROCESS, no SUPER",
        f"ALTER USER {user} WITH MAX_USER_CONNECTIONS 8;",
        f"-- then: --nl2sql-dsn=mysql://{role}:PASSWORD@HOST/{database}",
    ])


def readonly_role(url: str, role: str) -> str:
    spec = parse_database(url)
    database = (spec.server.database if spec.server else None) or "DATABASE"
    if spec.kind is EngineKind.POSTGRES:
        return postgres_role_sql(database, role)
    if spec.kind is EngineKind.MYSQL:
        return mysql_role_sql(database, role)
    raise ValueError(f"{url}: only PostgreSQL and MySQL/MariaDB have roles (SQLite and DuckDB files are opened read-only)")


def merge_reports(paths: Sequence[Path], gate: Gate) -> Finished:
    """One run's outcome from the JSON reports of its shards (a case in two shards: the last wins)."""
    results: dict[str, CaseResult] = {}
    runs = []
    for path in paths:
        data = _read_shard(Path(path))
        runs.append(data.get("run") or {})
        for number, item in enumerate(data["items"]):
            result = _shard_item(Path(path), number, item)
            results[result.nodeid] = result
    started = min((r["started"] for r in runs if r.get("started")), default=utc_now().isoformat(timespec="seconds"))
    run = RunInfo(
        started=started, duration_s=max((r.get("duration_s") or 0.0 for r in runs), default=0.0),
        label=next((r["label"] for r in runs if r.get("label")), None),
        git_commit=next((r["git_commit"] for r in runs if r.get("git_commit")), None),
        engine=next((r["engine"] for r in runs if r.get("engine")), PER_CASE),
        complete=all(r.get("complete", True) for r in runs), options={**(runs[0].get("options") or {}), "shards": len(runs)},
    )
    differences = _shard_differences(runs, paths)
    if gate.baseline is not None:  # shards run without the baseline: classify as one run would
        folder = Path(gate.baseline.path).resolve().parent
        for nodeid, result in results.items():
            if result.baseline is None and not result.verdict.is_error:
                entry = gate.baseline.lookup(key_relative_to(folder, gate.rootdir / result.file), result.id)
                status = classify(entry, result.passed)
                if status is not None:
                    results[nodeid] = result.replace(baseline=status.value)
    finished = finish_run(list(results.values()), run, gate)
    finished.messages[:0] = differences
    return finished


class ShardError(ValueError):
    """A file given to merge-reports that is not a JSON report of this plugin: names it and why."""


def _read_shard(path: Path) -> dict[str, Any]:
    """A shard's report, every field checked (`gate.report_file`): a crafted or corrupt shard is
    refused naming it, before anything is computed or written."""
    try:
        return read_report_file(path)
    except ReportFileError as e:
        raise ShardError(str(e)) from None


def _shard_item(path: Path, number: int, item: Any) -> CaseResult:
    """One item of a shard, with what a case result is made of."""
    where = f"{path}: item {number + 1}"
    try:
        check_shard_item(item, where)
        return CaseResult.from_json(item)
    except ReportFileError as e:
        raise ShardError(str(e)) from None
    except KeyError as e:
        raise ShardError(f"{where}: no {e}") from None
    except (ValueError, TypeError) as e:
        raise ShardError(f"{where}: {e}") from None


def _shard_differences(runs: Sequence[dict[str, Any]], paths: Sequence[Path]) -> list[str]:
    """Warnings when shards do not look like parts of one run: another label, other options (the
    shard count each writes is not an option)."""
    shown = {
        "labels": [run.get("label") for run in runs],
        "options": [{k: v for k, v in (run.get("options") or {}).items() if k != "shards"} for run in runs],
    }
    warnings = []
    for what, values in shown.items():
        if len({json.dumps(value, sort_keys=True, default=str) for value in values}) > 1:
            listed = ", ".join(f"{Path(p).name}: {json.dumps(value, default=str)[:80]}" for p, value in zip(paths, values))
            warnings.append(f"warning: the shards differ in their {what} ({listed}): are they one run?")
    return warnings


def _merge_command(args: argparse.Namespace) -> int:
    rootdir = Path(args.rootdir).resolve()
    if args.baseline:  # as pytest reads a command-line path: relative to where it runs
        args.baseline = str(Path.cwd() / args.baseline)
    try:
        thresholds = parse_fail_unders(args.fail_under or ())
        baseline = load_baseline(args.baseline) if args.baseline and not args.update_baseline else None
        reports = [(r.format, r.path) for r in (parse_report(text, Path.cwd()) for text in args.report or ())]
    except ValueError as e:
        print(f"nl2sql: {e}", file=sys.stderr)
        return 4
    gate = Gate(rootdir=rootdir, baseline=baseline, baseline_path=Path(args.baseline) if args.baseline else None,
                update_baseline=args.update_baseline, full_run=args.update_baseline, reports=reports, fail_under=thresholds)
    try:
        finished = merge_reports([Path(p) for p in args.reports], gate)
    except ShardError as e:  # a malformed shard: named, exit 2 (not the failed gate's 1, not a traceback)
        print(f"nl2sql: cannot merge the reports: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError) as e:
        print(f"nl2sql: cannot merge the reports: {e}", file=sys.stderr)
        return 4
    for line in [*summary_lines(finished.summary, items=finished.report.get("items") or []), *finished.messages, *finished.failures]:
        print(line)
    return 1 if gate_fails(finished, args.update_baseline) else 0


def gate_fails(finished: Finished, update_baseline: bool) -> bool:
    """What makes a pytest run exit 1: a broken case, a failure the baseline does not expect
    (none while the baseline is being written), a threshold or an unwritable file. A quarantined
    case fails nothing, whatever its verdict."""
    items = [item for item in finished.report["items"] if not item.get("quarantine")]
    broken = any(item["verdict"] == Verdict.GOLD_ERROR.value for item in items)
    unexpected = [item for item in items if not item["passed"] and item["verdict"] != Verdict.GOLD_ERROR.value
                  and item.get("baseline") != BaselineStatus.KNOWN_FAILURE.value]
    return bool(finished.failures or broken or (unexpected and not update_baseline))


def _compare_command(args: argparse.Namespace) -> int:
    from pytest_nl2sql.files import atomic_write_text
    from pytest_nl2sql.gate.compare import FORMATS, RENDERERS, ReportError, compare_files, render_text

    reports = []
    for text in args.report or ():
        fmt, _, path = text.partition(":")
        fmt = fmt.strip().lower()
        if fmt not in FORMATS:
            print(f"nl2sql compare: --nl2sql-report: unknown format {fmt!r} (use one of {', '.join(FORMATS)})", file=sys.stderr)
            return 4
        reports.append((fmt, Path.cwd() / (path or f"nl2sql-compare.{FORMATS[fmt]}")))
    try:
        comparison = compare_files(args.a, args.b)
    except ReportError as e:  # named, exit 2, as merge-reports refuses a malformed shard
        print(f"nl2sql compare: cannot compare the reports: {e}", file=sys.stderr)
        return 2
    written, failed = [], []
    for fmt, path in reports:  # before printing: a reader that stops early (`| head`) costs no file
        try:
            atomic_write_text(path, RENDERERS[fmt](comparison), errors="backslashreplace", what=f"the {fmt} comparison")
        except OSError as e:
            failed.append(f"nl2sql compare: {e}")
        else:
            written.append(f"{fmt} comparison: {path}")
    for line in [*render_text(comparison, everything=args.everything), *written]:
        print(line)
    for message in failed:
        print(message, file=sys.stderr)
    return 1 if failed else 0


def _copy_db_command(args: argparse.Namespace) -> int:
    from pytest_nl2sql.copydb import CopyError, TextProgress, UsageError, copy_database

    def warn(message: str) -> None:
        if progress is not None:
            progress.finish()
        print(f"nl2sql copy-db: warning: {message}", file=sys.stderr)

    progress = None if args.quiet or not sys.stderr.isatty() else TextProgress()
    try:
        report = copy_database(args.source, args.target, replace=args.replace, create=args.create, strict=args.strict,
                               numeric_text=args.numeric_text, batch_size=args.batch_size, progress=progress, warn=warn)
    except UsageError as error:
        print(f"nl2sql copy-db: {error}", file=sys.stderr)
        return 2
    except CopyError as error:
        print(f"nl2sql copy-db: cannot copy: {error}", file=sys.stderr)
        return 1
    finally:
        if progress is not None:
            progress.finish()
    if not args.quiet:
        print(f"nl2sql copy-db: copied {report.tables} tables, {report.rows:,} rows in {report.seconds:.1f} s"
              + (f" ({len(report.warnings)} warnings)" if report.warnings else ""), file=sys.stderr)
    return 0


def _init_command(args: argparse.Namespace) -> int:
    import pytest_nl2sql
    from pytest_nl2sql.scaffold import InitError, init_repo

    folder = Path(args.dir)
    try:
        scaffold = init_repo(folder, args.database, version=getattr(pytest_nl2sql, "__version__", None))
    except InitError as error:
        print(f"nl2sql init: {error}", file=sys.stderr)
        return 2
    for entry in scaffold.files:
        shown = entry.path.relative_to(folder) if entry.path.is_relative_to(folder) else entry.path
        print(f"{'wrote' if entry.written else 'kept (exists)'}  {shown}")
    for note in scaffold.notes:
        print(note)
    print(f"next: cd {folder} && python -m pytest" if args.dir != "." else "next: python -m pytest")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The `nl2sql` command line: every subcommand and its flags (the docs' CLI reference is checked
    against it, tests/test_docs_reference.py)."""
    parser = argparse.ArgumentParser(prog="nl2sql", description="pytest-nl2sql commands that need no pytest run")
    parser.add_argument("--version", action="version", version=f"pytest-nl2sql {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    role = commands.add_parser("readonly-role", help="print the SQL that creates a least-privilege role for predictions")
    role.add_argument("url", help="the server database the suite will run on (postgresql://… or mysql://…)")
    role.add_argument("--role", default="nl2sql_reader", help="the role (user) to create (default nl2sql_reader)")
    merge = commands.add_parser("merge-reports", help="one run's summary, gate and reports from its shards' JSON reports")
    merge.add_argument("reports", nargs="+", help="the shards' --nl2sql-report=json files")
    merge.add_argument("--nl2sql-baseline", dest="baseline", help="compare with (or, with --nl2sql-update-baseline, write) this baseline")
    merge.add_argument("--nl2sql-update-baseline", dest="update_baseline", action="store_true")
    merge.add_argument("--nl2sql-fail-under", dest="fail_under", action="append", help="as the pytest option (repeatable)")
    merge.add_argument("--nl2sql-report", dest="report", action="append", help="FORMAT[:PATH], as the pytest option (repeatable)")
    merge.add_argument("--rootdir", default=".", help="the rootdir the shards ran in (case files are relative to it)")
    compare = commands.add_parser(
        "compare", help="two runs' JSON reports side by side: figures, flipped cases, McNemar's p",
        description="Compare run B with run A (their --nl2sql-report=json files): each accuracy figure and bucket of "
                    "both with the difference, the cases that flipped each way, McNemar's exact p over the cases "
                    "judged in both.")
    compare.add_argument("a", metavar="A.json", help="the reference run's JSON report")
    compare.add_argument("b", metavar="B.json", help="the run compared with it")
    compare.add_argument("--nl2sql-report", dest="report", action="append",
                         help="md[:PATH], html[:PATH] or json[:PATH]: write the comparison too (repeatable; "
                              "default PATH nl2sql-compare.EXT)")
    compare.add_argument("-v", "--verbose", "--all", dest="everything", action="store_true",
                         help="list every flipped case and bucket, not the first few")
    copy = commands.add_parser(
        "copy-db", help="copy a database (schema, keys, rows) to another engine",
        description="Copy every table of SOURCE_URL into TARGET_URL: sqlite:///path (or a plain path), "
                    "duckdb:///path, postgresql://user@host:port/db, mysql://user@host:port/db. File targets are "
                    "created; a server database must exist unless --create.")
    copy.add_argument("source", metavar="SOURCE_URL")
    copy.add_argument("target", metavar="TARGET_URL")
    copy.add_argument("--replace", action="store_true",
                      help="the target may hold tables: drop those this copy creates (others stay)")
    copy.add_argument("--create", action="store_true", help="create the server database when it does not exist")
    copy.add_argument("--strict", action="store_true",
                      help="fail instead of leaving out a constraint the data violate or reading a mixed column as text")
    copy.add_argument("--numeric-text", action="store_true",
                      help="from SQLite: copy a text column holding only numbers ('2014', '15.5') as numbers")
    copy.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary line (warnings stay)")
    copy.add_argument("--batch-size", type=_positive, default=5000, help="rows per batch (default 5000)")
    init = commands.add_parser(
        "init", help="scaffold a model repo: a suite, conftest.py, pytest.ini and a CI workflow",
        description="Write a model repo that passes on its first `python -m pytest`: suites/NAME.nl2sql.yaml, "
                    "conftest.py (the predictor hook), pytest.ini and .github/workflows/nl2sql.yml. Existing files are kept.")
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the folder to write into (default: here)")
    init.add_argument("--database", metavar="URL",
                      help="write the cases from this database's tables (a SQLite or DuckDB file, or a server URL); "
                           "default: a tiny example database")
    add_malloy_commands(commands)
    add_review_command(commands)
    add_audit_gold_command(commands)
    add_neighbours_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "init":
        return _init_command(args)
    if args.command in MALLOY_COMMANDS:
        return run_malloy_command(args)
    if args.command == "copy-db":
        return _copy_db_command(args)
    if args.command == "merge-reports":
        return _merge_command(args)
    if args.command == "compare":
        return _compare_command(args)
    if args.command == REVIEW_COMMAND:
        return run_review_command(args)
    if args.command == AUDIT_GOLD_COMMAND:
        return run_audit_gold_command(args)
    if args.command == NEIGHBOURS_COMMAND:
        return run_neighbours_command(args)
    try:
        print(readonly_role(args.url, args.role))
    except ValueError as e:
        print(f"nl2sql: {e}", file=sys.stderr)
        return 2
    return 0
