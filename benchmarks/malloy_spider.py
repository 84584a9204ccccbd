"""Hand-written Malloy answers to Spider dev questions, judged on the SQLite original and on a DuckDB
copy of it: how many pass, and why the others do not (issue 21).

Run from the repo root (the compiler set up: ``nl2sql malloy-setup``)::

    python benchmarks/malloy_spider.py [--spider DIR] [--answers FILE] [--keep DIR] [--only ID,...]

1. ``benchmarks/malloy_spider/answers.yaml`` holds the answers: per case an id, the Spider database,
   the question's index in ``dev.json``, the question, the gold SQL (checked against ``dev.json``),
   the Malloy answer (``predicted_malloy``, written by hand against the model that
   ``nl2sql malloy-model DB.sqlite`` prints, not tuned to pass) and a note where Malloy means
   something other than the SQL.
2. Each database is copied to DuckDB with ``nl2sql copy-db`` (the plain copy: a column keeps the
   type its SQLite values have) in a temporary directory (``--keep DIR``: there, and left behind).
3. Two suites per database are written there from the one answers file: ``DB.nl2sql.yaml`` on the
   SQLite file (the gold runs on it; the compiled DuckDB SQL on the plugin's own DuckDB copy) and
   ``DB_duckdb.nl2sql.yaml`` on the DuckDB copy (``dialect: sqlite``: Spider's gold is translated
   by sqlglot, the Malloy compiled for DuckDB; both run on the copy).
4. Each suite runs in its own ``python -m pytest -q -p no:cacheprovider SUITE
   --nl2sql-report=json:...`` (neighbours on, the default), one after another.
5. Printed: per case the verdict on the SQLite original and on the DuckDB copy (for a pass, how
   many neighbour databases it was checked on: ``pass 6nb``, ``pass fragile 3/5`` when it differs
   from the gold on stress neighbours, ``pass no-nb`` when none ran), the failure's reason or else
   the answer's note; the passes per database and engine; then, for every case that did not pass
   somewhere, its Malloy, the compiled SQL (the JSON item's ``predicted``) and the reason.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SPIDER = ROOT.parent / "shared" / "data" / "spider"
DEFAULT_ANSWERS = ROOT / "benchmarks" / "malloy_spider" / "answers.yaml"
ENGINES = ("sqlite", "duckdb")


def _norm(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip().lower()


def load_answers(path: Path, spider: Path) -> list[dict]:
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))["cases"]
    dev = json.loads((spider / "dev.json").read_text(encoding="utf-8"))
    for case in cases:
        item = dev[case["spider"]]
        if item["db_id"] != case["database"] or _norm(item["query"]) != _norm(case["gold"]):
            raise SystemExit(f"{case['id']}: not dev.json's question {case['spider']} ({item['db_id']}: {item['query']})")
    return cases


def copy_to_duckdb(source: Path, target: Path) -> None:
    subprocess.run([sys.executable, "-m", "pytest_nl2sql", "copy-db", "--quiet", str(source), f"duckdb:///{target}"],
                   check=True)


def write_suite(path: Path, database: str, cases: list[dict], *, dialect: str | None) -> None:
    suite: dict = {"database": database}
    if dialect:
        suite["dialect"] = dialect
    suite["cases"] = [
        {"id": c["id"], "question": c["question"], "gold": c["gold"], "predicted_malloy": c["predicted_malloy"],
         **({"comments": c["note"]} if c.get("note") else {})}
        for c in cases
    ]
    path.write_text(yaml.safe_dump(suite, sort_keys=False, allow_unicode=True, width=1000), encoding="utf-8")


def run_suite(suite: Path, report: Path) -> dict[str, dict]:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite),
                           f"--nl2sql-report=json:{report}"], check=False,  # failing cases exit 1
                          cwd=suite.parent, capture_output=True, text=True)
    if not report.exists():
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"{suite.name}: no JSON report (pytest exit code {done.returncode})")
    items = json.loads(report.read_text(encoding="utf-8"))["items"]
    return {item["id"]: item for item in items}


def _verdict(item: dict | None) -> str:
    if item is None:
        return "missing"
    return "pass" if item.get("passed") else str(item.get("verdict"))


def _cell(item: dict | None) -> str:
    """The verdict with what the neighbours said of a pass: `pass 6nb` (six checked), `pass
    fragile 3/5` (differs from the gold on three stress neighbours of five), `pass no-nb` (none ran)."""
    verdict = _verdict(item)
    if verdict != "pass":
        return verdict
    neighbours = item.get("neighbours") or {}
    if not neighbours.get("checked"):
        return "pass no-nb"
    if neighbours.get("fragile"):
        return f"pass fragile {neighbours['fragile']}/{neighbours['checked']}"
    return f"pass {neighbours['checked']}nb"


def _reason(item: dict | None) -> str:
    if item is None or item.get("passed"):
        return ""
    return str(item.get("reason") or "").splitlines()[0][:110] if item.get("reason") else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spider", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--answers", type=Path, default=DEFAULT_ANSWERS)
    parser.add_argument("--keep", type=Path, help="write the copies, suites and reports here and keep them")
    parser.add_argument("--only", help="comma-separated case ids")
    args = parser.parse_args(argv)
    cases = load_answers(args.answers, args.spider)
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c["id"] in wanted]
    databases = list(dict.fromkeys(c["database"] for c in cases))

    with tempfile.TemporaryDirectory(prefix="malloy_spider_") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results: dict[tuple[str, str], dict[str, dict]] = {}
        for db in databases:
            original = (args.spider / "database" / db / f"{db}.sqlite").resolve()
            copy = work / f"{db}.duckdb"
            copy.unlink(missing_ok=True)
            copy_to_duckdb(original, copy)
            mine = [c for c in cases if c["database"] == db]
            suites = {"sqlite": (work / f"{db}.nl2sql.yaml", str(original), None),
                      "duckdb": (work / f"{db}_duckdb.nl2sql.yaml", f"duckdb:///{copy}", "sqlite")}
            for engine, (suite, database, dialect) in suites.items():
                write_suite(suite, database, mine, dialect=dialect)
                print(f"running {suite.name} ({len(mine)} cases) ...", file=sys.stderr, flush=True)
                results[db, engine] = run_suite(suite, work / f"{suite.name.split('.')[0]}.json")

        width = max(len(c["id"]) for c in cases)
        print(f"\n{'case':<{width}}  {'SQLite original':<18} {'DuckDB copy':<18} reason (or the answer's note)")
        for c in cases:
            got = {e: results[c["database"], e].get(c["id"]) for e in ENGINES}
            reasons = [f"{e}: {_reason(got[e])}" for e in ENGINES if _reason(got[e])]
            if len(reasons) == 2 and _reason(got["sqlite"]) == _reason(got["duckdb"]):
                reasons = [_reason(got["sqlite"])]
            why = "; ".join(reasons) or (f"note: {c['note']}" if c.get("note") else "")
            print(f"{c['id']:<{width}}  {_cell(got['sqlite']):<18} {_cell(got['duckdb']):<18} {why}")

        print("\npasses")
        for db in databases:
            n = sum(1 for c in cases if c["database"] == db)
            cells = []
            for engine in ENGINES:
                verdicts = Counter(_verdict(results[db, engine].get(c["id"])) for c in cases if c["database"] == db)
                others = ", ".join(f"{v} {k}" for k, v in sorted(verdicts.items()) if k != "pass")
                cells.append(f"{'SQLite original' if engine == 'sqlite' else 'DuckDB copy'} {verdicts['pass']}/{n}"
                             + (f" ({others})" if others else ""))
            print(f"  {db}: " + "; ".join(cells))
            unchecked = [c["id"] for c in cases if c["database"] == db
                         and any(_cell(results[db, e].get(c["id"])) == "pass no-nb" for e in ENGINES)]
            if unchecked:
                print(f"    passed with no neighbour database checked: {', '.join(unchecked)}")
        for engine in ENGINES:
            total = sum(1 for c in cases if _verdict(results[c["database"], engine].get(c["id"])) == "pass")
            print(f"  all, {'SQLite original' if engine == 'sqlite' else 'DuckDB copy'}: {total}/{len(cases)}")

        print("\nnot passed" + ("" if any(_verdict(item) != "pass" for item in
                                            (r.get(c["id"]) for c in cases for (db, _), r in results.items()
                                             if db == c["database"])) else ": none"))
        for c in cases:
            got = {e: results[c["database"], e].get(c["id"]) for e in ENGINES}
            if all(_verdict(item) == "pass" for item in got.values()):
                continue
            print(f"\n== {c['id']} ({c['database']}, dev #{c['spider']}): {c['question']}")
            print(f"   gold: {c['gold']}")
            print("   malloy: " + c["predicted_malloy"].strip().replace("\n", "\n           "))
            for engine in ENGINES:
                item = got[engine] or {}
                print(f"   {engine}: {_verdict(got[engine])}: {item.get('reason')}")
                if item.get("predicted") and not item.get("passed"):
                    print("     compiled: " + " ".join(str(item["predicted"]).split()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
