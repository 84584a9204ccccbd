"""What compiling Malloy costs a run: the start-up of the one Node child, the first compile on each
database's generated model, and then each case, over a 1,000-case run.

Run from the repo root (the compiler set up: ``nl2sql malloy-setup``)::

    python benchmarks/malloy_compile.py [--spider DIR] [--databases concert_singer,...] [--cases 1000]
                                        [--dialects sqlite,postgres,mysql]

1. Each database of ``--databases`` (default ``concert_singer``; ``dev``: Spider dev's, the 19 of 20 that ship) is read as the plugin reads it
   (``copydb.sources``, value-based types for SQLite).
2. One ``MalloyCompiler`` compiles ``--cases`` queries per dialect, cycling through ten kinds of
   query (a count, group_by, where, join_one, join_many with ``count(child.pk)``, nest, ...) over
   the databases' generated models, each with its own literal, as a run's cases would be.
3. Printed: the start-up (the first compile: Node, the compiler, the model), the first compile on
   each further database's model, and the median, p95, mean and max of the other compiles, with
   the run's total.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_nl2sql.copydb.model import Kind, Table  # noqa: E402
from pytest_nl2sql.copydb.sources import open_source  # noqa: E402
from pytest_nl2sql.engines.url import parse_database  # noqa: E402
from pytest_nl2sql.malloy import MalloyCompiler  # noqa: E402
from pytest_nl2sql.malloy.model import layout  # noqa: E402
from pytest_nl2sql.malloy.names import malloy_name  # noqa: E402

DEFAULT_SPIDER = ROOT.parent / "shared" / "data" / "spider"


def queries(tables: list[Table]) -> list[str]:
    """Ten kinds of query over the schema's own names; `{n}` takes each case's literal."""
    plan = layout(tables)
    def kinds(t: Table) -> set[Kind]:
        return {c.type.kind for c in t.columns}

    numbers = (Kind.INTEGER, Kind.REAL)
    first = next(t for t in tables if Kind.TEXT in kinds(t) and kinds(t) & set(numbers))
    text = next(c for c in first.columns if c.type.kind is Kind.TEXT)
    number = next(c for c in first.columns if c.type.kind in numbers)
    src, col, num = malloy_name(plan.final[first.name]), malloy_name(text.name), malloy_name(number.name)
    found = [
        f"run: {src} -> {{ aggregate: n is count() }} // {{n}}",
        f"run: {src} -> {{ group_by: {col}; aggregate: n is count() }} // {{n}}",
        f"run: {src} -> {{ where: {num} > {{n}}; aggregate: n is count() }}",
        f"run: {src} -> {{ select: {col}, {num}; where: {num} != {{n}}; order_by: {num} desc; limit: 5 }}",
        f"run: {src} -> {{ aggregate: a is avg({num}), m is {num}.max(), s is {num}.sum() / count() }} // {{n}}",
        f"run: {src} -> {{ group_by: {col}; aggregate: n is count(); having: n > {{n}} }}",
        f"run: {src} -> {{ group_by: {col}; nest: by_value is {{ group_by: {num}; limit: 3 }} }} // {{n}}",
    ]
    up = next((j for t in tables for j in plan.join_one[t.name]), None)
    if up is not None:  # along the first foreign key: child to parent, and back
        child, parent = up.edge.child, up.edge.parent
        down = next(j for j in plan.join_many[parent.name] if j.edge == up.edge)
        ref, key = malloy_name(up.edge.ref_columns[0]), malloy_name(up.edge.columns[0])
        found += [
            f"run: {malloy_name(plan.final[child.name])} -> {{ group_by: {malloy_name(up.name)}.{ref}; aggregate: n is count() }} // {{n}}",
            f"run: {malloy_name(plan.final[parent.name])} -> {{ group_by: {ref}; aggregate: c is count({malloy_name(down.name)}.{key}) }} // {{n}}",
            f"run: {malloy_name(plan.final[parent.name])} -> {{ where: {malloy_name(down.name)}.{key} != {{n}}; aggregate: n is count() }}",
        ]
    return found


def read(path: Path) -> list[Table]:
    source = open_source(parse_database(str(path)))
    try:
        return source.tables()
    finally:
        source.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spider", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--databases", default="concert_singer", help="comma-separated, or `dev`: Spider dev's")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--dialects", default="sqlite", help="comma-separated: sqlite, duckdb, postgres, mysql")
    args = parser.parse_args(argv)
    schemas = {}
    chosen = args.databases.split(",")
    if args.databases == "dev":
        chosen = list(dict.fromkeys(q["db_id"] for q in json.loads((args.spider / "dev.json").read_text())))
    for name in chosen:
        path = args.spider / "database" / name / f"{name}.sqlite"
        if path.exists() or args.databases != "dev":  # 19 of dev's 20 ship (no wta_1)
            schemas[name] = read(path)
    print(f"Malloy compile cost: {args.cases:,} cases per dialect over {', '.join(schemas)}")
    for dialect in args.dialects.split(","):
        plans = {name: queries(tables) for name, tables in schemas.items()}
        names = list(schemas)
        with MalloyCompiler() as compiler:
            t0 = time.perf_counter()
            compiler.compile(plans[names[0]][0].replace("{n}", "0"), tables=schemas[names[0]], dialect=dialect)
            startup = time.perf_counter() - t0
            first_model, times = [], []
            seen = {names[0]}
            for i in range(1, args.cases):
                name = names[i % len(names)]
                plan = plans[name]
                query = plan[i % len(plan)].replace("{n}", str(i))
                t0 = time.perf_counter()
                compiler.compile(query, tables=schemas[name], dialect=dialect)
                spent = time.perf_counter() - t0
                (times if name in seen else first_model).append(spent)
                seen.add(name)
            assert compiler.starts == 1
        times.sort()
        p95 = times[min(len(times) - 1, int(round(0.95 * len(times))) - 1)]
        total = startup + sum(first_model) + sum(times)
        print(f"\n{dialect} (compiled for {'duckdb' if dialect == 'sqlite' else dialect}):")
        print(f"  start-up (Node, the compiler, the first model and query): {startup * 1000:,.0f} ms")
        if first_model:
            print(f"  first compile on each other database's model: median {statistics.median(first_model) * 1000:.1f} ms"
                  f" over {len(first_model)}")
        print(f"  per case, the other {len(times):,}: median {statistics.median(times) * 1000:.1f} ms, "
              f"p95 {p95 * 1000:.1f} ms, mean {statistics.mean(times) * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms")
        print(f"  the run's total: {total:.2f} s ({total / args.cases * 1000:.1f} ms a case)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
