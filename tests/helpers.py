"""Small builders shared by the end-to-end tests: a shop database and case files."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import yaml

# The sample test case of spec 002, verbatim.
MEXICO_YAML = """\
id: c48d7624-d376-48ca-b2d8-386999befb45
name: could_you_give_me_the_population_numbers_for_mexico
tags:
- imf
- weo
comments: ''
conversation:
- role: user
  content: Could you give me the population numbers for Mexico?
  target:
    indicator_selection:
    - dataset_id: IMF.RES:WEO
      dimensions:
      - dimension_name: INDICATOR
        values:
        - id: LP
          name: Population, Persons for countries / Index for country groups
      - dimension_name: COUNTRY
        values:
        - id: MEX
          name: Mexico
"""

SHOP_SQL = """
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL, category TEXT);
INSERT INTO item VALUES (1, 'pen', 1.5, 'office'), (2, 'ink', 3.0, 'office'),
                        (3, 'pad', 2.0, 'office'), (4, 'cap', 0.5, 'clothes'), (5, 'mug', 7.0, 'kitchen');
CREATE TABLE sale(item_id INTEGER REFERENCES item(id), qty INTEGER);
INSERT INTO sale VALUES (1, 3), (1, 2), (2, 1), (5, 4);
"""


def generous(seconds: float) -> float:
    """A time limit for work a test needs done, not done fast: `seconds` (ample on an idle machine)
    times the machine's load per core, at least 4 times: a loaded CI runner, or this suite beside
    another, makes the step slower, never a failure. Speed belongs in benchmarks/."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else 1.0
    return seconds * max(4.0, 4.0 * load)


def process_gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in {"Z", "X"}


def make_db(path: Path, sql: str) -> Path:
    """A SQLite file holding what `sql` makes. Not synced to disk statement by statement (the
    script runs in autocommit mode: an fsync per INSERT made each shop database cost ~45 ms, some
    200 of them a run); the file holds the same bytes."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA synchronous = OFF")
    con.executescript(sql)
    con.commit()
    con.close()
    return path


def make_shop(directory: Path, name: str = "shop.sqlite") -> Path:
    return make_db(directory / name, SHOP_SQL)


def write_suite(directory: Path, cases: list[dict[str, Any]], name: str = "shop.nl2sql.yaml", **defaults: Any) -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump({**defaults, "cases": cases}, sort_keys=False))
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def read_report(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def write_spider_suite(directory: Path, spider: Path, predictions: Path, name: str = "spider_dev.nl2sql.yaml") -> Path:
    """A suite over the real Spider dev set with one predictions file."""
    path = directory / name
    path.write_text(yaml.safe_dump({"source": {"format": "spider", "questions": str(spider / "dev.json"),
                                               "db_dir": str(spider / "database"), "predictions": str(predictions)}}))
    return path


TIMINGS = ("latency", "execution_time", "run")  # what differs between any two runs of the same cases


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    """A JSON report without what depends on when and how fast it ran: two runs of the same cases
    (with and without xdist, sharded or not, concurrent or not) must agree on the rest."""
    return {
        "summary": {k: v for k, v in report["summary"].items() if k not in TIMINGS},
        "items": [{k: v for k, v in item.items() if k not in TIMINGS} for item in report["items"]],
    }


def neighbour_databases(cache: Path) -> dict[str, tuple[str, list[list[tuple[Any, ...]]]]]:
    """Each key of a cache of SQLite neighbours: its manifest and every database's rows, table by
    table (two caches built alike compare equal)."""
    found = {}
    for manifest in sorted(cache.glob("*/*/manifest.json")):
        databases = []
        for entry in json.loads(manifest.read_text())["neighbours"]:
            with closing(sqlite3.connect(manifest.parent / entry["file"])) as con:
                tables = [name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
                databases.append([tuple(con.execute(f'SELECT * FROM "{t}" ORDER BY rowid')) for t in tables])
        found[manifest.parent.name] = (manifest.read_text(), databases)
    return found
