"""The Spider dev set on every engine: copy its databases with copy-db, run the suite with pytest
on SQLite, PostgreSQL, MariaDB and DuckDB, and print what differs from SQLite and why.

Run from the repo root, with the local servers up (PostgreSQL 127.0.0.1:5432 trust auth,
MariaDB 127.0.0.1:3306 root without password)::

    python benchmarks/engines.py [--spider DIR] [--predictions FILE] [--engines sqlite,postgres,mariadb,duckdb]
                                 [--workers 0,2] [--out DIR] [--examples N] [--no-copy] [--results]

1. Every Spider dev database (``wta_1`` is missing from the data and skipped, with its cases) is
   copied with ``copy_database`` (what ``nl2sql copy-db`` runs): to PostgreSQL and MariaDB as one
   database each, ``spider_<db_id>`` (``--create --replace``), and to DuckDB files in ``--out``.
   The copy time per engine is printed.
2. One suite per engine is written as a YAML ``cases:`` file whose cases each name their
   database (``database: postgresql://.../spider_<db_id>``; ``--nl2sql-dsn`` runs every case on
   one database, which Spider's 20 are not), written in SQLite's dialect (``dialect: sqlite``), so
   that the plugin translates gold and prediction with sqlglot for the other engines. The
   predictions (one query per line, aligned with dev.json) become a JSONL file keyed by case id.
3. ``python -m pytest SUITE --nl2sql-predictions=... --nl2sql-report=json:...`` runs per engine
   with ``-n 0`` and ``-n 2`` (pytest-xdist), timed as a whole process.
   Neighbour databases (``--nl2sql-neighbours``, generated for SQLite and DuckDB cases only) are
   off unless ``--neighbours N``: with them, SQLite and DuckDB would be judged on more databases
   than the servers.
4. Per engine: accuracy (passed / judged, errors apart, as the plugin counts it) and pass rate over
   all cases, next to SQLite's; agreement with SQLite (cases with the same verdict / all cases);
   the cases whose verdict differs from SQLite's, classified by cause (`classify`: read off the
   engine's error message and the SQL), with examples.
5. With ``--results``: every gold and prediction that runs on SQLite, translated and run on each
   engine, its result compared with SQLite's (a result can differ without changing a verdict,
   where ties decide), counted by cause.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPIDER = ROOT.parent / "shared" / "data" / "spider"
SERVERS = {
    "postgres": "postgresql://postgres@127.0.0.1:5432/spider_{db_id}",
    "mariadb": "mysql://root@127.0.0.1:3306/spider_{db_id}",
}


def dev_cases(spider: Path, predictions: Path) -> list[dict[str, Any]]:
    """(id, db_id, question, gold, predicted) of every dev item whose database exists."""
    questions = json.loads((spider / "dev.json").read_text())
    golds = [line.rstrip("\n").rsplit("\t", 1) for line in (spider / "dev_gold.sql").read_text().splitlines() if line.strip()]
    preds = [line.split("\t", 1)[0].strip() for line in predictions.read_text().splitlines()]
    assert len(questions) == len(golds) == len(preds), (len(questions), len(golds), len(preds))
    cases = []
    for index, (question, (gold, db_id), predicted) in enumerate(zip(questions, golds, preds)):
        if (spider / "database" / db_id / f"{db_id}.sqlite").is_file():
            cases.append({"id": f"dev-{index:04d}", "db_id": db_id, "question": question["question"],
                          "gold": gold, "predicted": predicted})
    return cases


def database_for(engine: str, db_id: str, spider: Path, out: Path) -> str:
    if engine == "sqlite":
        return str(spider / "database" / db_id / f"{db_id}.sqlite")
    if engine == "duckdb":
        return f"duckdb:///{out / 'duckdb' / db_id}.duckdb"
    return SERVERS[engine].format(db_id=db_id)


def copy_all(engine: str, db_ids: list[str], spider: Path, out: Path, numeric_text: bool) -> tuple[float, dict[str, float], int]:
    """Copy every database to the engine: total seconds, seconds per database, warnings."""
    from pytest_nl2sql.copydb import copy_database

    (out / "duckdb").mkdir(parents=True, exist_ok=True)
    per_db, warnings = {}, 0
    started = time.perf_counter()
    for db_id in db_ids:
        began = time.perf_counter()
        report = copy_database(database_for("sqlite", db_id, spider, out), database_for(engine, db_id, spider, out),
                               replace=True, create=True, numeric_text=numeric_text)
        per_db[db_id] = time.perf_counter() - began
        warnings += len(report.warnings)
    return time.perf_counter() - started, per_db, warnings


def write_suite(engine: str, cases: list[dict[str, Any]], spider: Path, out: Path) -> tuple[Path, Path]:
    folder = out / engine
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    suite = folder / f"spider_dev_{engine}.nl2sql.yaml"
    suite.write_text(yaml.safe_dump({"dialect": "sqlite", "cases": [
        {"id": c["id"], "question": c["question"], "database": database_for(engine, c["db_id"], spider, out),
         "gold": c["gold"], "tags": [c["db_id"]]} for c in cases]}, sort_keys=False, width=10_000))
    predictions = folder / "predictions.jsonl"
    predictions.write_text("".join(json.dumps({"id": c["id"], "predicted": c["predicted"]}) + "\n" for c in cases))
    return suite, predictions


def plugin_options(neighbours: int) -> list[str]:
    """`--nl2sql-neighbours=N` where the plugin has it: neighbour databases are generated for
    SQLite and DuckDB cases only, so the engines are compared with them off (the default here)."""
    help_text = subprocess.run([sys.executable, "-m", "pytest", "--help"], check=False, capture_output=True, text=True,
                               cwd=ROOT).stdout
    return [f"--nl2sql-neighbours={neighbours}"] if "--nl2sql-neighbours" in help_text else []


def run_suite(suite: Path, predictions: Path, workers: int, extra: list[str]) -> tuple[float, dict[str, Any]]:
    report = suite.parent / f"report-n{workers}.json"
    command = [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider", "-c", str(suite.parent / "pytest.ini"),
               f"--rootdir={suite.parent}",
               f"--nl2sql-predictions={predictions}", f"--nl2sql-report=json:{report}", "-n", str(workers),
               "--tb=no", "--no-header", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=suite.parent, check=False, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if not report.exists():
        raise SystemExit(f"pytest wrote no report ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds, json.loads(report.read_text())


# -- why a verdict differs from SQLite's -----------------------------------------------------------

_DQ_STRING = re.compile(r'=\s*"[^"]*"|"[^"]*"\s*=|(?i:like)\s*"|(?i:in)\s*\(\s*"')


_TRANSLATED = re.compile(r"\n[^\n]* as translated for \w+: ")  # over a report's reason, not over SQL


def classify(engine: str, item: dict[str, Any], base: dict[str, Any]) -> str:
    """The cause of a verdict that differs from SQLite's, read off the engine's message and the SQL
    (a gold's message ends with the SQL the engine ran, which is not read here)."""
    reason = _TRANSLATED.split(item.get("reason") or "")[0] + " " + " ".join(item.get("gold_warnings") or [])
    low = reason.lower()
    sql = item["gold"] if item["verdict"] == "gold_error" else (item.get("predicted") or "")
    both = f"{item.get('gold') or ''} {item.get('predicted') or ''}"
    if base["verdict"] == "pred_error" and item["verdict"] in ("pass", "mismatch"):
        return "syntax SQLite lacks (`< ANY (...)`): an error on SQLite only"
    if item["verdict"] in ("gold_error", "pred_error"):
        if ("column" in low and ("does not exist" in low or "unknown column" in low or "not found" in low)
                and _DQ_STRING.search(sql)):
            return "double-quoted string literal read as an identifier"
        if re.search(r"relation .* does not exist|table '.*' doesn't exist|table with name .* does not exist", low):
            return "table-name case (or a table that does not exist)"
        if "group by" in low and ("must appear" in low or "isn't in group by" in low):
            return "non-aggregated column outside GROUP BY"
        if ("operator does not exist" in low or "cannot compare" in low or "conversion error" in low
                or "invalid input syntax" in low or "could not convert" in low or "no function matches" in low
                or re.search(r"function \w+\((text|character varying)\) does not exist", low)):
            return "text column compared with a number or aggregated as one (numbers stored as text)"
        if "more than one row" in low or "subquery returns more than 1 row" in low:
            return "scalar subquery returning several rows (SQLite takes the first)"
        if "must have an alias" in low or ("syntax" in low and "near ''" in low and re.search(r"FROM\s*\(", sql, re.IGNORECASE)):
            return "derived table without an alias"
        if "limit & in/all/any/some" in low:
            return "LIMIT inside IN (...) (MariaDB does not support it)"
        if "column" in low and ("does not exist" in low or "unknown column" in low or "not found" in low):
            return "column-name case (PostgreSQL folds unquoted names to lower case)"
        if "function" in low and "does not exist" in low or "scalar function" in low:
            return "SQLite-only function"
        if "syntax" in low or "parser error" in low:
            return "syntax the engine rejects"
        return "other error: " + re.sub(r"\s+", " ", reason)[:80]
    upper = both.upper()
    if re.search(r"\bLIKE\b", upper):
        return "case-sensitive LIKE"
    if re.search(r"[^/*]/[^/*]", both):
        return "integer division"
    if "LIMIT" in upper and "ORDER BY" in upper:
        return "ties under ORDER BY ... LIMIT (another row of the tie comes first)"
    if "ORDER BY" in upper and "order" in low:
        return "ordering: NULLs first/last, or ties"
    if re.search(r"\b(AVG|SUM)\s*\(", upper):
        return "float arithmetic (avg/sum of doubles vs decimals)"
    return "other mismatch: " + re.sub(r"\s+", " ", reason)[:80]


def compare_results_with_sqlite(engines: list[str], cases: list[dict[str, Any]], spider: Path, out: Path,
                                examples: int) -> None:
    """Every gold and prediction that runs on SQLite, translated and run on each engine: is its
    result SQLite's? A result can differ without changing a verdict (both queries of a case see
    the same engine), mostly where ties decide; this says how often, and where."""
    from pytest_nl2sql.engines import Limits, open_engine
    from pytest_nl2sql.engines.base import EngineError
    from pytest_nl2sql.judge.compare import compare_results
    from pytest_nl2sql.judge.order import has_top_level_order_by
    from pytest_nl2sql.judge.translate import translate

    limits, opened = Limits(timeout=30), {}

    def engine_at(url: str) -> Any:
        if url not in opened:
            opened[url] = open_engine(url)
        return opened[url]

    counts: dict[str, collections.Counter[str]] = {e: collections.Counter() for e in engines if e != "sqlite"}
    shown: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for case in cases:
        for kind in ("gold", "predicted"):
            sql = case[kind]
            try:
                reference = engine_at(database_for("sqlite", case["db_id"], spider, out)).execute(sql, limits)
            except EngineError:
                continue  # an error on SQLite: no result to compare with
            ordered = has_top_level_order_by(sql, "sqlite")
            for engine in counts:
                there = engine_at(database_for(engine, case["db_id"], spider, out))
                try:
                    result = there.execute(translate(sql, "sqlite", there), limits)
                except EngineError as error:
                    cause = "an error on the engine only: " + str(error).splitlines()[0][:80]
                else:
                    comparison = compare_results(reference.rows, result.rows, order_matters=ordered,
                                                 gold_columns=len(reference.columns), pred_columns=len(result.columns))
                    if comparison.match:
                        counts[engine]["same"] += 1
                        continue
                    upper = sql.upper()
                    cause = ("ties under ORDER BY ... LIMIT (another tied row)" if "LIMIT" in upper and "ORDER BY" in upper
                             else "the order of tied rows" if comparison.reason == "order"
                             else "ties beside MIN/MAX (another tied row's values)" if re.search(r"\b(MIN|MAX)\s*\(", upper)
                             else "other: " + str(comparison.reason))
                counts[engine][cause] += 1
                if len(shown[engine, cause]) < examples:
                    shown[engine, cause].append(f"{case['id']} {kind}: {sql[:160]}")
    print("\n## results compared with SQLite's (every gold and prediction that runs on SQLite)")
    for engine, found in counts.items():
        total = sum(found.values())
        print(f"\n### {engine}: {found['same']}/{total} the same")
        for cause, number in found.most_common():
            if cause != "same":
                print(f"  {number:4}  {cause}")
                for line in shown[engine, cause]:
                    print(f"        e.g. {line}")
    for engine in opened.values():
        engine.close()


def summarise(report: dict[str, Any]) -> tuple[float | None, float, dict[str, dict[str, Any]]]:
    items = {item["id"]: item for item in report["items"]}
    passed = sum(item["passed"] for item in items.values())
    errors = sum(item["verdict"] == "gold_error" for item in items.values())
    judged = len(items) - errors
    return (passed / judged if judged else None), passed / max(len(items), 1), items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spider", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--predictions", type=Path)
    parser.add_argument("--engines", default="sqlite,postgres,mariadb,duckdb")
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--examples", type=int, default=1, help="examples printed per class of difference")
    parser.add_argument("--no-copy", action="store_true", help="reuse the copies of an earlier run")
    parser.add_argument("--numeric-text", action="store_true", help="copy with copy-db's --numeric-text")
    parser.add_argument("--results", action="store_true",
                        help="also run every gold and prediction on each engine and compare its result with SQLite's")
    parser.add_argument("--neighbours", type=int, default=0,
                        help="--nl2sql-neighbours for every run (default 0: the database's own verdicts only)")
    args = parser.parse_args()
    spider = args.spider.resolve()
    predictions = (args.predictions or spider / "predictions" / "dail_sql_gpt4.sql").resolve()
    out = (args.out or Path(tempfile.mkdtemp(prefix="nl2sql-engines-"))).resolve()
    engines = args.engines.split(",")
    workers = [int(w) for w in args.workers.split(",")]
    cases = dev_cases(spider, predictions)
    db_ids = sorted({c["db_id"] for c in cases})
    print(f"Spider dev: {len(cases)} cases on {len(db_ids)} databases; predictions {predictions.name}; work in {out}")

    print("\n## copy-db (from the SQLite files)")
    for engine in engines:
        if engine == "sqlite" or args.no_copy:
            continue
        total, per_db, warnings = copy_all(engine, db_ids, spider, out, args.numeric_text)
        slowest = max(per_db, key=per_db.get)
        print(f"{engine:9} {total:6.2f} s for {len(db_ids)} databases (slowest {slowest} {per_db[slowest]:.2f} s; "
              f"{warnings} warnings)")

    print("\n## pytest runs (wall time of the whole process)")
    reports: dict[str, dict[str, Any]] = {}
    extra = plugin_options(args.neighbours)
    print(f"options: {' '.join(extra) or '(none)'}")
    for engine in engines:
        suite, preds = write_suite(engine, cases, spider, out)
        times = []
        for n in workers:
            seconds, report = run_suite(suite, preds, n, extra)
            times.append(f"-n {n}: {seconds:6.1f} s")
            reports.setdefault(engine, report)
        print(f"{engine:9} " + "   ".join(times))

    print("\n## accuracy (passed / judged; pass rate over all cases; gold errors)")
    base_items: dict[str, dict[str, Any]] = {}
    for engine in engines:
        accuracy, rate, items = summarise(reports[engine])
        errors = sum(i["verdict"] == "gold_error" for i in items.values())
        shown = f"{accuracy:.3f}" if accuracy is not None else "n/a"
        print(f"{engine:9} accuracy {shown}   pass rate {rate:.3f}   gold errors {errors}")
        if engine == "sqlite":
            base_items = items

    if not base_items:
        return
    print("\n## verdicts that differ from SQLite's, by cause")
    for engine in engines:
        if engine == "sqlite":
            continue
        _, _, items = summarise(reports[engine])
        classes: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = collections.defaultdict(list)
        for case_id, item in items.items():
            base = base_items[case_id]
            if item["verdict"] != base["verdict"]:
                classes[classify(engine, item, base)].append((item, base))
        flips = sum(len(v) for v in classes.values())
        to_pass = sum(1 for v in classes.values() for item, _ in v if item["passed"])
        agree = len(items) - flips
        print(f"\n### {engine}: agreement with SQLite {agree}/{len(items)} ({agree / max(len(items), 1):.1%}); {flips} differ"
              f" ({to_pass} pass only here, {flips - to_pass} pass only on SQLite or fail differently)")
        for cause, pairs in sorted(classes.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(pairs):4}  {cause}")
            for item, base in pairs[:args.examples]:
                sql = item["gold"] if item["verdict"] == "gold_error" else item["predicted"]
                print(f"        e.g. {item['id']} ({item['tags'][0] if item['tags'] else ''}): sqlite {base['verdict']}, "
                      f"{engine} {item['verdict']}: {re.sub(chr(10), ' ', (item.get('reason') or ''))[:160]}")
                print(f"             SQL: {sql[:200]}")
    if args.results:
        compare_results_with_sqlite(engines, cases, spider, out, args.examples)


if __name__ == "__main__":
    main()
