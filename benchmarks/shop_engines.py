"""Mistakes a database's data hides, caught on every engine (issue 20): one shop database on
SQLite, DuckDB, PostgreSQL and MariaDB, four wrong predictions that give the gold's result on it
and four right rewrites, judged with neighbour databases (the default).

The data hides each mistake: no price is exactly 10 or 20 (`BETWEEN 10 AND 20` for a strict
range), no line orders exactly 5 (`>= 5` for `> 5`), no customer has two shipped orders (a
dropped DISTINCT), no order is dated on New Year's Day (`>` for `>=` on a date). The right
rewrites differ only in form: operands swapped, `>= 6` on an integer column, joins reordered,
`NOT EXISTS` for `NOT IN` over a NOT NULL column. On each engine a wrong one should fail with
reason `neighbour database` and a right one pass, checked on neighbours (PostgreSQL and MariaDB
cases get theirs from a local DuckDB copy of the server database).

    python benchmarks/shop_engines.py [--engines sqlite duckdb postgres mariadb]

Servers: PostgreSQL at 127.0.0.1:5432 (trust auth, database `test`) and MariaDB at 127.0.0.1:3306
(root, no password); a schema or database of their own is made and dropped. An absent server is
reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL, country VARCHAR(2) NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL, category VARCHAR(20) NOT NULL, price INTEGER NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers (id), status VARCHAR(10) NOT NULL, ordered DATE NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders (id), product_id INTEGER NOT NULL REFERENCES products (id), quantity INTEGER NOT NULL, PRIMARY KEY (order_id, product_id))
"""

GOLD_RANGE = "SELECT name FROM products WHERE price > 10 AND price < 20"
GOLD_LINES = "SELECT order_id, product_id FROM order_items WHERE quantity > 5"
GOLD_SHIPPED = "SELECT DISTINCT c.name FROM customers AS c JOIN orders AS o ON o.customer_id = c.id WHERE o.status = 'shipped'"
GOLD_YEAR = "SELECT id FROM orders WHERE ordered >= '2024-01-01'"
GOLD_NEVER = "SELECT name FROM products WHERE id NOT IN (SELECT product_id FROM order_items)"

CASES = [
    ("wrong: BETWEEN for a strict range", GOLD_RANGE, "SELECT name FROM products WHERE price BETWEEN 10 AND 20", False),
    ("wrong: >= for >", GOLD_LINES, "SELECT order_id, product_id FROM order_items WHERE quantity >= 5", False),
    ("wrong: DISTINCT dropped", GOLD_SHIPPED,
     "SELECT c.name FROM customers AS c JOIN orders AS o ON o.customer_id = c.id WHERE o.status = 'shipped'", False),
    ("wrong: > for >= on a date", GOLD_YEAR, "SELECT id FROM orders WHERE ordered > '2024-01-01'", False),
    ("right: operands swapped", GOLD_RANGE, "SELECT name FROM products WHERE 10 < price AND price < 20", True),
    ("right: >= 6 on an integer", GOLD_LINES, "SELECT order_id, product_id FROM order_items WHERE quantity >= 6", True),
    ("right: joins reordered", GOLD_SHIPPED,
     "SELECT DISTINCT c.name FROM orders AS o JOIN customers AS c ON c.id = o.customer_id WHERE o.status = 'shipped'", True),
    ("right: NOT EXISTS for NOT IN", GOLD_NEVER,
     "SELECT name FROM products AS p WHERE NOT EXISTS (SELECT 1 FROM order_items AS i WHERE i.product_id = p.id)", True),
]


def shop_rows(seed: int = 7) -> dict[str, list[tuple]]:
    """About 5,000 rows that hide the four mistakes (see the module's doc)."""
    rng = random.Random(seed)
    customers = [(i, f"customer {i:03d}", rng.choice(["FR", "DE", "US", "JP"])) for i in range(1, 401)]
    prices = [5, 7, 12, 15, 18, 25, 30, 45]  # never 10 or 20
    products = [(i, f"product {i:03d}", rng.choice(["toys", "books", "garden"]), rng.choice(prices)) for i in range(1, 161)]
    orders, shipped = [], set()
    for i in range(1, 1201):
        customer = rng.randrange(1, 401)
        status = "shipped" if customer not in shipped and rng.random() < 0.5 else rng.choice(["open", "returned"])
        if status == "shipped":
            shipped.add(customer)  # one shipped order per customer at most
        day = rng.randrange(2, 366)  # never New Year's Day
        year = rng.choice([2023, 2024])
        orders.append((i, customer, status, time.strftime("%Y-%m-%d", time.strptime(f"{year} {day}", "%Y %j"))))
    items = []
    for order in range(1, 1201):
        for product in rng.sample(range(1, 141), rng.randrange(1, 4)):  # products 141-160 are never ordered
            items.append((order, product, rng.choice([1, 2, 3, 4, 6, 8, 10])))  # never 5
    return {"customers": customers, "products": products, "orders": orders, "order_items": items}


def insert_sql(rows: dict[str, list[tuple]]) -> str:
    """INSERT statements for the servers (values are ints and plain texts)."""
    def literal(value: object) -> str:
        return str(value) if isinstance(value, int) else "'" + str(value).replace("'", "''") + "'"
    statements = []
    for table, table_rows in rows.items():
        for start in range(0, len(table_rows), 500):
            values = ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in table_rows[start:start + 500])
            statements.append(f"INSERT INTO {table} VALUES {values}")
    return ";\n".join(statements)


def make_sqlite(path: Path, rows: dict[str, list[tuple]]) -> str:
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA)
    for table, table_rows in rows.items():
        connection.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(table_rows[0]))})", table_rows)
    connection.commit()
    connection.close()
    return str(path)


def make_duckdb(path: Path, rows: dict[str, list[tuple]]) -> str:
    import duckdb

    connection = duckdb.connect(str(path))
    for statement in SCHEMA.split(";"):
        if statement.strip():
            connection.execute(statement)
    connection.execute(insert_sql(rows))
    connection.close()
    return str(path)


def judge(database: str, folder: Path, label: str) -> dict[str, object]:
    """The eight cases on `database`, in a pytest subprocess; the items of its JSON report."""
    suite = folder / f"shop_{label}.nl2sql.yaml"
    cases = [{"id": f"case-{n}", "question": name, "gold": gold, "predicted": predicted}
             for n, (name, gold, predicted, _) in enumerate(CASES)]
    suite.write_text(yaml.safe_dump({"database": database, "cases": cases}, sort_keys=False))
    report = folder / f"report_{label}.json"
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite),
                    f"--nl2sql-report=json:{report}"], cwd=folder, capture_output=True, text=True,
                   env={**__import__("os").environ, "NL2SQL_CACHE_DIR": str(folder / f"cache_{label}")})
    seconds = time.perf_counter() - started
    items = {item["id"]: item for item in json.loads(report.read_text())["items"]}
    return {"items": items, "seconds": seconds}


def summarize(label: str, outcome: dict[str, object]) -> list[str]:
    items = outcome["items"]
    caught = right = 0
    lines = []
    for n, (name, _, _, is_right) in enumerate(CASES):
        item = items[f"case-{n}"]  # type: ignore[index]
        neighbours = item.get("neighbours") or {}
        if is_right:
            ok = item["verdict"] == "pass" and neighbours.get("checked", 0) > 0
            right += ok
        else:
            ok = item["verdict"] == "mismatch" and item["reason"] == "neighbour database"
            caught += ok
        lines.append(f"    {'ok ' if ok else 'BAD'} {name}: {item['verdict']}"
                     f"{' (' + item['reason'] + ')' if item['reason'] else ''}; neighbours {neighbours or None}")
    return [f"{label}: {caught}/4 hidden mistakes fail on a neighbour, {right}/4 right rewrites pass checked on"
            f" neighbours ({outcome['seconds']:.1f} s, a cold neighbour cache)", *lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["sqlite", "duckdb", "postgres", "mariadb"])
    args = parser.parse_args()
    rows = shop_rows()
    print(f"shop database: {sum(len(r) for r in rows.values())} rows in {len(rows)} tables")
    with tempfile.TemporaryDirectory(prefix="nl2sql-shop-") as tmp:
        folder = Path(tmp)
        for engine in args.engines:
            try:
                if engine == "sqlite":
                    print("\n".join(summarize(engine, judge(make_sqlite(folder / "shop.sqlite", rows), folder, engine))))
                elif engine == "duckdb":
                    print("\n".join(summarize(engine, judge("duckdb:///" + make_duckdb(folder / "shop.duckdb", rows), folder, engine))))
                else:
                    from servers import mariadb_database, postgres_schema

                    scratch = postgres_schema if engine == "postgres" else mariadb_database
                    with scratch("nl2sql_shop", SCHEMA + ";\n" + insert_sql(rows)) as made:
                        print("\n".join(summarize(engine, judge(made.url, folder, engine))))
            except BaseException as error:  # pytest.skip from the server helpers: no server here
                if type(error).__name__ != "Skipped":
                    raise
                print(f"{engine}: skipped ({error})")


if __name__ == "__main__":
    main()
