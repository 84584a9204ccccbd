"""Time Spider hardness and exact set match over the whole dev set (1034 items).

Run from the repo root: ``python benchmarks/hardness_exact.py [SPIDER_DIR]``. Prints wall-clock
figures; the plugin computes hardness for every gold at collection time and exact match for every
item at run time, so both must stay far below a second or two per thousand items.

It also prints how `hardness` agrees with the official labels on dev, which path answered (the
official parser with the schema, without it, or the tree-counted fallback) on dev, train and test,
and how the fallback alone agrees with the official parser on every gold.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_nl2sql.metrics.exact import aggregate_partial, exact_match  # noqa: E402
from pytest_nl2sql.metrics.hardness import estimated_hardness, hardness, official_hardness  # noqa: E402
from pytest_nl2sql.metrics.spider_schema import SpiderSchema  # noqa: E402

MODELS = ("c3sql_gpt35", "dail_sql_gpt4", "din_sql_gpt4", "graphix_t5", "spider_example_baseline")


def main() -> None:
    spider = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared/data/spider"
    golds = [line.rstrip("\n").split("\t") for line in (spider / "dev_gold.sql").read_text().splitlines()]
    tables = spider / "tables.json"

    start = time.perf_counter()
    schemas = [SpiderSchema.from_tables_json(tables, db_id) for _, db_id in golds]
    print(f"schemas for {len(golds)} items (tables.json, cached per db): {time.perf_counter() - start:.3f} s")

    start = time.perf_counter()
    buckets = [hardness(sql, schema) for (sql, _), schema in zip(golds, schemas)]
    elapsed = time.perf_counter() - start
    print(f"hardness, {len(golds)} golds, cold: {elapsed:.3f} s ({elapsed / len(golds) * 1e6:.0f} us/item)")

    start = time.perf_counter()
    for sql, _ in golds:
        hardness(sql)
    print(f"hardness without schema, {len(golds)} golds: {time.perf_counter() - start:.3f} s")

    counts = {name: buckets.count(name) for name in ("easy", "medium", "hard", "extra")}
    print(f"buckets: {counts}")

    start = time.perf_counter()
    fallback = [estimated_hardness(sql) for sql, _ in golds]
    elapsed = time.perf_counter() - start
    print(f"fallback (sqlglot tree) alone, {len(golds)} golds: {elapsed:.3f} s ({elapsed / len(golds) * 1e6:.0f} us/item)")
    labels_file = spider / "reference" / "dev_hardness.tsv"
    if labels_file.exists():
        labels = [line.split("\t")[2] for line in labels_file.read_text().splitlines()]
        without = [hardness(sql) for sql, _ in golds]
        for name, answers in (("hardness(sql, schema)", buckets), ("hardness(sql)", without), ("fallback alone", fallback)):
            agree = sum(a == b for a, b in zip(answers, labels))
            print(f"dev agreement with the official labels, {name}: {agree}/{len(labels)}")
    agreement("dev", golds, tables)
    for gold_file, tables_file in (("train_gold.sql", "tables.json"), ("test_gold.sql", "test_tables.json")):
        if (spider / gold_file).exists():
            rows = [line.rstrip("\n").split("\t") for line in (spider / gold_file).read_text().splitlines()]
            agreement(gold_file.split("_")[0], rows, spider / tables_file)

    for model in MODELS:
        path = spider / "predictions" / f"{model}.sql"
        if not path.exists():
            continue
        predictions = path.read_text().splitlines()
        start = time.perf_counter()
        results = [exact_match(gold, pred, schema) for (gold, _), pred, schema in zip(golds, predictions, schemas)]
        aggregate = aggregate_partial(r.partial for r in results)
        elapsed = time.perf_counter() - start
        matched = sum(r.match for r in results)
        print(
            f"exact match {model:<24} {len(results)} items: {elapsed:.3f} s "
            f"({elapsed / len(results) * 1e6:.0f} us/item), exact={matched / len(results):.3f}, "
            f"select acc={aggregate['select']['acc']:.3f}"
        )


def agreement(name: str, rows: list[list[str]], tables: Path) -> None:
    """Which path answers each gold, and whether the fallback alone gives the official parser's bucket."""
    paths = {"official parser, schema": 0, "official parser, no schema": 0, "fallback": 0}
    compared = agreed = 0
    for sql, db_id in rows:
        try:
            schema = SpiderSchema.from_tables_json(tables, db_id)
        except KeyError:
            schema = None
        official = None
        attempts = [(schema, "official parser, schema")] if schema is not None else []
        for attempt, path in [*attempts, (None, "official parser, no schema")]:
            try:
                official = official_hardness(sql, attempt)
            except ValueError:
                continue
            paths[path] += 1
            break
        if official is None:
            paths["fallback"] += 1
            continue
        compared += 1
        agreed += estimated_hardness(sql) == official
    print(f"{name}: {len(rows)} golds answered by {paths}; fallback alone = official parser on {agreed}/{compared}")


if __name__ == "__main__":
    main()
