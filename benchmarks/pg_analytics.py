"""A PostgreSQL analytics suite judged as a team would judge its model: 28 questions over a
customers / products / orders / order_items / payments schema, a model stub with 19 right answers
(each written differently from its gold) and 9 wrong ones, run through pytest once with neighbour
databases off and once with the default (3 per case; a PostgreSQL case gets them from a local
DuckDB copy of the server database).

The measurement behind it (an issue): "two wrong answers (BETWEEN for a strict range, > for >=)
passed, because neighbour databases exist only for SQLite and DuckDB cases". The wrong answers
are the kinds a model makes and real data may hide: BETWEEN for a strict range (no price sits on
a bound: prices end in .99, .49 or .95), `>` for `>=` on a timestamp (no order at midnight: shops
open 08:00-22:00), a dropped DISTINCT (no customer returned two orders), a dropped condition (only
electronics cost over 100), ROW_NUMBER for RANK (no two products share their category's top
price), a wrong tie-break under LIMIT (no two customers paid the same), and three the data shows:
BETWEEN with an end date on a timestamp (drops the last day after midnight), an inner join where
a left join is needed (some customers never ordered), an average over order lines for one over
orders. Each wrong answer is first run beside its gold on the database itself: "hidden" when it
gives the gold's result there, "obvious" when not. The data is generated with a seeded random
(about 15,000 rows), so every run makes the same database.

    python benchmarks/pg_analytics.py [--seed 20240701] [--neighbours 3] [--keep DIR]

It prints, per question, right or wrong (hidden / obvious), the verdict without and with
neighbours and how many neighbours were checked; then the wrong answers caught without / with
neighbours, the hidden ones caught, the right answers that fail (false alarms, should be 0) and
each run's wall time (a fresh neighbour cache: the first run of a suite). Exit code 0 whatever is
caught: it is a measurement. At the default seed (generator 17): without neighbours 3 of the 9
wrong answers fail (the obvious ones), with them 8 (5 of the 6 hidden), no right answer fails,
about 2 s against 17 s. The one left is the wrong tie-break: no candidate neighbour at this seed
puts a tie of the customers' 2024 totals inside the top 5 (data seeds 1-4 catch it).

Server: PostgreSQL at 127.0.0.1:5432 (trust auth, user postgres, database `test`); a database
of its own (`nl2sql_analytics_<random>`) is created and dropped at the end, on error and on
Ctrl-C too. No server or no psycopg: reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import yaml

PG_HOST = "127.0.0.1:5432"
ADMIN_URL = f"postgresql://postgres@{PG_HOST}/test"

SCHEMA = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    country CHAR(2) NOT NULL,
    segment TEXT NOT NULL,
    signup_date DATE NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    unit_price NUMERIC(10, 2) NOT NULL
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    ordered_at TIMESTAMP NOT NULL,
    status TEXT NOT NULL,
    channel TEXT NOT NULL,
    shipped_at TIMESTAMP
);
CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders (id),
    product_id INTEGER NOT NULL REFERENCES products (id),
    quantity INTEGER NOT NULL,
    unit_price NUMERIC(10, 2) NOT NULL,
    PRIMARY KEY (order_id, product_id)
);
CREATE TABLE payments (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders (id),
    paid_at TIMESTAMP NOT NULL,
    amount NUMERIC(10, 2) NOT NULL,
    method TEXT NOT NULL
)
"""
COLUMNS = {
    "customers": ("id", "name", "email", "country", "segment", "signup_date"),
    "products": ("id", "sku", "name", "category", "unit_price"),
    "orders": ("id", "customer_id", "ordered_at", "status", "channel", "shipped_at"),
    "order_items": ("order_id", "product_id", "quantity", "unit_price"),
    "payments": ("id", "order_id", "paid_at", "amount", "method"),
}


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold: str
    predicted: str
    mistake: str | None = None  # None: a right answer; else what is wrong with it

    @property
    def right(self) -> bool:
        return self.mistake is None


PAID_2024 = ("FROM customers c JOIN orders o ON o.customer_id = c.id JOIN payments p ON p.order_id = o.id "
             "WHERE p.paid_at >= '2024-01-01' AND p.paid_at < '2025-01-01' GROUP BY c.id, c.name")

QUESTIONS = [
    Question("q01-segments", "How many customers are in each segment?",
             "SELECT segment, COUNT(*) AS customers FROM customers GROUP BY segment",
             "SELECT segment, COUNT(id) AS n FROM customers GROUP BY 1"),
    Question("q02-price-strict", "Which products cost more than 20 and less than 50?",
             "SELECT name, unit_price FROM products WHERE unit_price > 20 AND unit_price < 50",
             "SELECT name, unit_price FROM products WHERE unit_price BETWEEN 20 AND 50",
             "BETWEEN for a strict range"),
    Question("q03-price-inclusive", "Which products cost from 20 to 50, bounds included?",
             "SELECT name FROM products WHERE unit_price BETWEEN 20 AND 50",
             "SELECT name FROM products WHERE unit_price >= 20.00 AND unit_price <= 50.00"),
    Question("q04-since-july", "Ids of the orders placed on or after 1 July 2024.",
             "SELECT id FROM orders WHERE ordered_at >= '2024-07-01'",
             "SELECT id FROM orders WHERE ordered_at > '2024-07-01'",
             "> for >= on a timestamp"),
    Question("q05-orders-2024", "How many orders were placed in 2024?",
             "SELECT COUNT(*) FROM orders WHERE ordered_at >= '2024-01-01' AND ordered_at < '2025-01-01'",
             "SELECT COUNT(*) AS orders_2024 FROM orders WHERE EXTRACT(YEAR FROM ordered_at) = 2024"),
    Question("q06-first-quarter", "Ids of the orders placed in the first quarter of 2024.",
             "SELECT id FROM orders WHERE ordered_at >= '2024-01-01' AND ordered_at < '2024-04-01'",
             "SELECT id FROM orders WHERE ordered_at BETWEEN '2024-01-01' AND '2024-03-31'",
             "BETWEEN with an end date on a timestamp"),
    Question("q07-signups-h2", "Names of the customers who signed up in the second half of 2023.",
             "SELECT name FROM customers WHERE signup_date BETWEEN '2023-07-01' AND '2023-12-31'",
             "SELECT name FROM customers WHERE signup_date >= DATE '2023-07-01' AND signup_date < DATE '2024-01-01'"),
    Question("q08-returners", "Which customers returned an order? Their names.",
             "SELECT DISTINCT c.name FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'returned'",
             "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'returned'",
             "DISTINCT dropped"),
    Question("q09-buyers-2024", "How many different customers ordered in 2024?",
             "SELECT COUNT(DISTINCT customer_id) FROM orders WHERE ordered_at >= '2024-01-01' AND ordered_at < '2025-01-01'",
             "SELECT COUNT(*) FROM (SELECT DISTINCT customer_id FROM orders "
             "WHERE date_part('year', ordered_at) = 2024) AS buyers"),
    Question("q10-pricey-electronics", "Names of the electronics products that cost over 100.",
             "SELECT name FROM products WHERE category = 'electronics' AND unit_price > 100",
             "SELECT name FROM products WHERE unit_price > 100",
             "a condition dropped (category)"),
    Question("q11-revenue-by-category", "Revenue of completed orders per product category.",
             "SELECT p.category, SUM(oi.quantity * oi.unit_price) AS revenue FROM order_items oi "
             "JOIN orders o ON o.id = oi.order_id JOIN products p ON p.id = oi.product_id "
             "WHERE o.status = 'completed' GROUP BY p.category",
             "SELECT products.category, SUM(order_items.unit_price * order_items.quantity) FROM orders "
             "JOIN order_items ON order_items.order_id = orders.id JOIN products ON products.id = order_items.product_id "
             "WHERE orders.status IN ('completed') GROUP BY products.category"),
    Question("q12-orders-per-customer", "Every customer with their number of orders, zero included.",
             "SELECT c.id, c.name, COUNT(o.id) AS orders FROM customers c LEFT JOIN orders o ON o.customer_id = c.id "
             "GROUP BY c.id, c.name",
             "SELECT c.id, c.name, COUNT(*) AS orders FROM customers c JOIN orders o ON o.customer_id = c.id "
             "GROUP BY c.id, c.name",
             "inner join where a left join is needed"),
    Question("q13-never-ordered", "Names of the customers who never placed an order.",
             "SELECT name FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)",
             "SELECT c.name FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE o.id IS NULL"),
    Question("q14-pricey-categories", "Which categories have an average price above 50?",
             "SELECT category FROM products GROUP BY category HAVING AVG(unit_price) > 50",
             "SELECT category FROM (SELECT category, AVG(unit_price) AS avg_price FROM products GROUP BY category) AS t "
             "WHERE avg_price > 50"),
    Question("q15-top-payers", "The 5 customers who paid the most in 2024, ties broken by name.",
             f"SELECT c.name, SUM(p.amount) AS paid {PAID_2024} ORDER BY paid DESC, c.name LIMIT 5",
             f"SELECT c.name, SUM(p.amount) AS paid {PAID_2024} ORDER BY paid DESC, c.id LIMIT 5",
             "wrong tie-break (id for name) under LIMIT"),
    Question("q16-top-products", "The 3 products sold in the largest quantities, ties broken by name.",
             "SELECT p.name, SUM(oi.quantity) AS units FROM products p JOIN order_items oi ON oi.product_id = p.id "
             "GROUP BY p.id, p.name ORDER BY units DESC, p.name LIMIT 3",
             "SELECT p.name, s.units FROM (SELECT product_id, SUM(quantity) AS units FROM order_items "
             "GROUP BY product_id) AS s JOIN products p ON p.id = s.product_id ORDER BY 2 DESC, 1 ASC LIMIT 3"),
    Question("q17-top-price-per-category", "The most expensive product of each category (all of them if tied).",
             "SELECT category, name, unit_price FROM (SELECT category, name, unit_price, "
             "RANK() OVER (PARTITION BY category ORDER BY unit_price DESC) AS r FROM products) AS ranked WHERE r = 1",
             "SELECT category, name, unit_price FROM (SELECT category, name, unit_price, "
             "ROW_NUMBER() OVER (PARTITION BY category ORDER BY unit_price DESC) AS r FROM products) AS ranked WHERE r = 1",
             "ROW_NUMBER for RANK"),
    Question("q18-orders-per-month", "Number of orders per month of 2024, in month order.",
             "SELECT date_trunc('month', ordered_at) AS month, COUNT(*) AS orders FROM orders "
             "WHERE ordered_at >= '2024-01-01' AND ordered_at < '2025-01-01' GROUP BY 1 ORDER BY 1",
             "SELECT date_trunc('month', ordered_at) AS m, COUNT(id) FROM orders WHERE EXTRACT(YEAR FROM ordered_at) = 2024 "
             "GROUP BY date_trunc('month', ordered_at) ORDER BY m"),
    Question("q19-average-order-value", "The average value of a completed order.",
             "SELECT AVG(total) FROM (SELECT o.id, SUM(oi.quantity * oi.unit_price) AS total FROM orders o "
             "JOIN order_items oi ON oi.order_id = o.id WHERE o.status = 'completed' GROUP BY o.id) AS t",
             "SELECT AVG(oi.quantity * oi.unit_price) FROM orders o JOIN order_items oi ON oi.order_id = o.id "
             "WHERE o.status = 'completed'",
             "average over order lines, not orders"),
    Question("q20-payment-methods", "For each payment method, the number of payments and the amount paid.",
             "SELECT method, COUNT(*) AS payments, SUM(amount) AS total FROM payments GROUP BY method",
             "SELECT method, SUM(1) AS n, SUM(amount) FROM payments GROUP BY method ORDER BY 3 DESC"),
    Question("q21-first-orders", "Each customer's first order: customer, order id and time.",
             "SELECT customer_id, id, ordered_at FROM (SELECT customer_id, id, ordered_at, "
             "ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ordered_at, id) AS rn FROM orders) AS t WHERE rn = 1",
             "SELECT o.customer_id, o.id, o.ordered_at FROM orders o WHERE NOT EXISTS (SELECT 1 FROM orders o2 "
             "WHERE o2.customer_id = o.customer_id AND (o2.ordered_at < o.ordered_at "
             "OR (o2.ordered_at = o.ordered_at AND o2.id < o.id)))"),
    Question("q22-big-spenders", "Names of the customers who paid more than 1000 in all.",
             "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id JOIN payments p ON p.order_id = o.id "
             "GROUP BY c.id, c.name HAVING SUM(p.amount) > 1000",
             "SELECT name FROM customers WHERE id IN (SELECT o.customer_id FROM orders o JOIN payments p "
             "ON p.order_id = o.id GROUP BY o.customer_id HAVING SUM(p.amount) > 1000)"),
    Question("q23-big-baskets", "Ids of the orders with more than 3 different products.",
             "SELECT order_id FROM order_items GROUP BY order_id HAVING COUNT(*) > 3",
             "SELECT order_id FROM order_items GROUP BY order_id HAVING COUNT(DISTINCT product_id) >= 4"),
    Question("q24-never-sold", "Names of the products nobody ever ordered.",
             "SELECT name FROM products p WHERE NOT EXISTS (SELECT 1 FROM order_items oi WHERE oi.product_id = p.id)",
             "SELECT name FROM products WHERE id NOT IN (SELECT product_id FROM order_items)"),
    Question("q25-days-to-ship", "Average number of days from order to shipment, per channel (2 decimals).",
             "SELECT channel, ROUND(AVG(shipped_at::date - ordered_at::date), 2) FROM orders "
             "WHERE shipped_at IS NOT NULL GROUP BY channel",
             "SELECT channel, ROUND(AVG(CAST(shipped_at AS DATE) - CAST(ordered_at AS DATE)), 2) AS avg_days "
             "FROM orders WHERE NOT shipped_at IS NULL GROUP BY 1"),
    Question("q26-cancel-rate", "Percentage of cancelled orders per channel (2 decimals).",
             "SELECT channel, ROUND(100.0 * COUNT(*) FILTER (WHERE status = 'cancelled') / COUNT(*), 2) AS pct "
             "FROM orders GROUP BY channel",
             "SELECT channel, ROUND(100.0 * SUM(CASE WHEN status = 'cancelled' THEN 1 ELSE 0 END) / COUNT(*), 2) "
             "FROM orders GROUP BY channel"),
    Question("q27-countries", "For each country, its number of customers and the number of orders they placed.",
             "SELECT c.country, COUNT(DISTINCT c.id) AS customers, COUNT(o.id) AS orders FROM customers c "
             "LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.country",
             "WITH cc AS (SELECT country, COUNT(*) AS n FROM customers GROUP BY country), "
             "oc AS (SELECT c.country, COUNT(*) AS n FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.country) "
             "SELECT cc.country, cc.n, COALESCE(oc.n, 0) FROM cc LEFT JOIN oc ON oc.country = cc.country"),
    Question("q28-customer-span", "For each customer who ordered, the days between their first and last order.",
             "SELECT customer_id, MAX(ordered_at)::date - MIN(ordered_at)::date AS span_days FROM orders GROUP BY customer_id",
             "SELECT DISTINCT customer_id, CAST(MAX(ordered_at) OVER (PARTITION BY customer_id) AS DATE) "
             "- CAST(MIN(ordered_at) OVER (PARTITION BY customer_id) AS DATE) FROM orders"),
]

FIRST = ["Ada", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kira", "Luca",
         "Maya", "Nils", "Olga", "Pablo", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wen", "Ximena", "Yusuf",
         "Zoe", "Amir", "Bea", "Carl", "Dana", "Emil", "Fay", "Gus", "Hana", "Ivan", "Jade", "Kurt", "Lea", "Marco", "Nora"]
LAST = ["Abe", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Hoffmann", "Ito", "Jensen", "Kowalski",
        "Lopez", "Moreau", "Novak", "Okafor", "Petrov", "Quist", "Rossi", "Silva", "Tanaka", "Ueda", "Varga", "Weber",
        "Xu", "Yilmaz", "Zimmer", "Alves", "Brandt", "Chen", "Dahl", "Engel", "Ferrari", "Gruber", "Haas", "Iglesias",
        "Jovanovic", "Keller", "Lind", "Meyer", "Nagy"]
CATEGORIES = {  # category: (lowest, highest whole price, nouns); only electronics cost over 100
    "electronics": (15, 899, ["Headphones", "Speaker", "Monitor", "Keyboard", "Router", "Tablet", "Camera", "Charger"]),
    "books": (8, 45, ["Atlas", "Cookbook", "Novel", "Guide", "Handbook", "Anthology"]),
    "home": (12, 95, ["Lamp", "Kettle", "Blanket", "Vase", "Clock", "Mirror"]),
    "garden": (9, 99, ["Hose", "Planter", "Shears", "Rake", "Seeds", "Lantern"]),
    "toys": (6, 80, ["Puzzle", "Robot", "Kite", "Blocks", "Doll", "Train"]),
    "apparel": (15, 99, ["Jacket", "Scarf", "Sneakers", "Hoodie", "Cap", "Gloves"]),
    "sports": (10, 99, ["Ball", "Racket", "Mat", "Bottle", "Helmet", "Rope"]),
}
BRANDS = ["Nova", "Apex", "Lumen", "Orbit", "Terra", "Vista", "Pulse", "Echo", "Zen", "Atlas", "Bolt", "Cedar"]


def analytics_rows(seed: int) -> dict[str, list[tuple]]:
    """About 15,000 rows that hide six of the nine mistakes (see the module's doc)."""
    rng = random.Random(seed)
    names = rng.sample([f"{f} {last}" for f in FIRST for last in LAST], 600)
    countries = ["US"] * 5 + ["DE"] * 3 + ["FR"] * 2 + ["GB"] * 2 + ["JP", "BR", "IN", "ES"]
    segments = ["consumer"] * 7 + ["business"] * 2 + ["enterprise"]
    start = date(2022, 1, 1)
    customers = []
    for i, name in enumerate(names, 1):
        signup = start + timedelta(days=rng.randrange(0, 1096))  # 2022-01-01 .. 2024-12-31
        customers.append((i, name, f"{name.lower().replace(' ', '.')}{i}@example.com", rng.choice(countries),
                          rng.choice(segments), signup))

    products, taken = [], set()
    for i in range(1, 151):
        category = rng.choice(sorted(CATEGORIES))
        low, high, nouns = CATEGORIES[category]
        while (name := f"{rng.choice(BRANDS)} {rng.choice(nouns)} {rng.randrange(1, 10) * 100}") in taken:
            pass
        taken.add(name)
        price = Decimal(f"{rng.randint(low, high)}{rng.choice(['.99', '.49', '.95'])}")  # never a whole number
        products.append([i, f"{category[:3].upper()}-{i:04d}", name, category, price])
    for category in CATEGORIES:  # each category's top price is one product's (ROW_NUMBER = RANK on this data)
        while len(mine := sorted((p for p in products if p[3] == category), key=lambda p: p[4], reverse=True)) > 1 \
                and mine[0][4] == mine[1][4]:
            mine[1][4] -= 1  # down, so that no product but electronics costs over 100
    products = [tuple(p) for p in products]

    buyers = [c for c in customers if c[5] <= date(2024, 10, 31)]
    buyers = buyers[: len(buyers) - 40]  # the last 40 early sign-ups never order, nor does anyone after October 2024
    orders, items, payments, returned = [], [], [], set()
    statuses = ["completed"] * 14 + ["shipped"] * 2 + ["pending", "cancelled", "cancelled", "returned"]
    channels = ["web"] * 5 + ["mobile"] * 3 + ["store"] * 2
    methods = ["card"] * 6 + ["paypal"] * 2 + ["bank_transfer", "gift_card"]
    sellable = [p for p in products if p[0] <= 135]  # products 136-150 are never ordered
    for i in range(1, 3001):
        customer = rng.choice(buyers)
        first = max(customer[5], date(2023, 1, 1))
        day = first + timedelta(days=rng.randrange(0, (date(2024, 12, 31) - first).days + 1))
        ordered_at = datetime(day.year, day.month, day.day, rng.randrange(8, 22), rng.randrange(60), rng.randrange(60))
        status = rng.choice(statuses)
        if status == "returned":
            if customer[0] in returned:  # one returned order per customer at most
                status = "completed"
            returned.add(customer[0])
        shipped_at = None
        if status in ("completed", "shipped", "returned"):
            shipped_at = ordered_at + timedelta(days=rng.randrange(1, 7), hours=rng.randrange(0, 12))
        orders.append((i, customer[0], ordered_at, status, rng.choice(channels), shipped_at))
        total = Decimal(0)
        for product in rng.sample(sellable, rng.choice([1, 1, 2, 2, 2, 3, 3, 4, 5])):
            price = product[4] if rng.random() > 0.15 else (product[4] * Decimal("0.9")).quantize(Decimal("0.01"))
            quantity = rng.choice([1, 1, 1, 2, 2, 3, 4])
            items.append((i, product[0], quantity, price))
            total += quantity * price
        if shipped_at is not None:
            paid_at = ordered_at + timedelta(minutes=rng.randrange(1, 90))
            parts = [total] if rng.random() > 0.1 else [(total * Decimal("0.4")).quantize(Decimal("0.01"))]
            if parts[0] != total:
                parts.append(total - parts[0])
            for part in parts:
                payments.append((len(payments) + 1, i, paid_at, part, rng.choice(methods)))
                paid_at += timedelta(days=rng.randrange(1, 20))
    return {"customers": customers, "products": products, "orders": orders, "order_items": items, "payments": payments}


@contextmanager
def analytics_database(rows: dict[str, list[tuple]]) -> Iterator[str]:
    """A database of its own on the server holding `rows`; its URL. Dropped afterwards."""
    import psycopg

    admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)
    name = f"nl2sql_analytics_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"postgresql://postgres@{PG_HOST}/{name}"
        with psycopg.connect(url, autocommit=True) as connection:
            for statement in SCHEMA.split(";"):
                connection.execute(statement)
            for table, table_rows in rows.items():
                with connection.cursor().copy(f"COPY {table} ({', '.join(COLUMNS[table])}) FROM STDIN") as copy:
                    for row in table_rows:
                        copy.write_row(row)
            connection.execute("ANALYZE")
        yield url
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def on_the_database(url: str) -> dict[str, bool]:
    """Per question: does the prediction give the gold's result on the database itself (rows as
    a multiset, in order when the gold has a top-level ORDER BY)?"""
    import psycopg
    from sqlglot import parse_one

    same = {}
    with psycopg.connect(url, autocommit=True) as connection:
        for q in QUESTIONS:
            gold = connection.execute(q.gold).fetchall()
            predicted = connection.execute(q.predicted).fetchall()
            if parse_one(q.gold, read="postgres").args.get("order"):
                same[q.id] = gold == predicted
            else:
                same[q.id] = Counter(map(tuple, gold)) == Counter(map(tuple, predicted))
    return same


def run_suite(url: str, folder: Path, label: str, neighbours: int | None) -> dict[str, object]:
    """The 28 questions in a pytest subprocess (a fresh neighbour cache); its JSON report's items by id."""
    suite = folder / "analytics.nl2sql.yaml"
    if not suite.exists():
        cases = [{"id": q.id, "question": q.question, "gold": q.gold} for q in QUESTIONS]
        suite.write_text(yaml.safe_dump({"database": url, "dialect": "postgres", "cases": cases}, sort_keys=False))
        (folder / "model_stub.jsonl").write_text(
            "".join(json.dumps({"id": q.id, "predicted": q.predicted}) + "\n" for q in QUESTIONS))
    report = folder / f"report_{label}.json"
    options = [] if neighbours is None else [f"--nl2sql-neighbours={neighbours}"]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite),
                           f"--nl2sql-predictions={folder / 'model_stub.jsonl'}", f"--nl2sql-report=json:{report}",
                           *options], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "NL2SQL_CACHE_DIR": str(folder / f"cache_{label}")})
    seconds = time.perf_counter() - started
    if not report.exists():
        raise RuntimeError(f"pytest wrote no report (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    data = json.loads(report.read_text())
    items = {item["id"]: item for item in data["items"]}
    warned = sorted({line.strip() for line in done.stdout.splitlines() if "no neighbour databases" in line})
    return {"items": items, "seconds": seconds, "warnings": warned, "exit": done.returncode,
            "summary": data.get("summary") or {}}


def verdict(item: dict) -> str:
    reason = item.get("reason") or ""
    text = item["verdict"] + (f" ({reason.splitlines()[0][:40]})" if reason else "")
    if item["verdict"] == "pass" and (item.get("neighbours") or {}).get("fragile"):
        text += " fragile"
    return text


def checked(item: dict) -> str:
    neighbours = item.get("neighbours")
    if not neighbours:
        off = (item.get("extra") or {}).get("neighbours_off")
        return f"- ({off})" if off else "-"
    return f"{neighbours.get('checked', 0)} ({neighbours.get('failed', 0)} failed)"


def report(same: dict[str, bool], off: dict[str, object], on: dict[str, object], rows: int) -> None:
    items_off, items_on = off["items"], on["items"]
    width = max(len(q.id) for q in QUESTIONS)
    print(f"{'question':<{width}}  {'answer':<15} {'no neighbours':<30} {'with neighbours':<40} checked")
    caught_off = caught_on = hidden = hidden_caught = false_off = false_on = 0
    misses = []
    for q in QUESTIONS:
        a, b = items_off[q.id], items_on[q.id]  # type: ignore[index]
        if q.right:
            kind = "right" if same[q.id] else "right (DIFFERS)"
            false_off += a["verdict"] != "pass"
            false_on += b["verdict"] != "pass"
            if b["verdict"] != "pass":
                misses.append(f"{q.id}: right answer fails: {verdict(b)}")
        else:
            kind = "wrong (hidden)" if same[q.id] else "wrong (obvious)"
            hidden += same[q.id]
            caught_off += a["verdict"] != "pass"
            caught_on += b["verdict"] != "pass"
            hidden_caught += same[q.id] and b["verdict"] != "pass"
            if b["verdict"] == "pass":
                misses.append(f"{q.id}: wrong answer not caught ({q.mistake}): {verdict(b)}")
        print(f"{q.id:<{width}}  {kind:<15} {verdict(a):<30} {verdict(b):<40} {checked(b)}")
        if not q.right:
            print(f"{'':<{width}}    mistake: {q.mistake}")
    wrong = sum(not q.right for q in QUESTIONS)
    right = len(QUESTIONS) - wrong
    print()
    print(f"database: {rows} rows; {right} right answers, {wrong} wrong ({hidden} hidden on the database itself, "
          f"{wrong - hidden} obvious)")
    print(f"wrong answers caught:        without neighbours {caught_off}/{wrong}, with neighbours {caught_on}/{wrong}")
    print(f"hidden wrong answers caught: without neighbours 0/{hidden}, with neighbours {hidden_caught}/{hidden}")
    print(f"right answers that fail:     without neighbours {false_off}/{right}, with neighbours {false_on}/{right}"
          f"{'' if false_on == 0 else '   <-- FALSE ALARMS'}")
    print(f"wall time:                   without neighbours {off['seconds']:.1f} s, with neighbours {on['seconds']:.1f} s"
          f" (a fresh neighbour cache)")
    print(f"report summary (with neighbours): neighbours {on['summary'].get('neighbours')}, "  # type: ignore[union-attr]
          f"accuracy {on['summary'].get('accuracy')}, single-database accuracy "  # type: ignore[union-attr]
          f"{on['summary'].get('single_db_accuracy')}")  # type: ignore[union-attr]
    for line in on["warnings"]:  # type: ignore[union-attr]
        print(f"warning (with neighbours): {line}")
    if misses:
        print("\nnot as a perfect judge would have it:")
        for line in misses:
            print(f"  {line}")
    disagree = [q.id for q in QUESTIONS if (items_off[q.id]["verdict"] == "pass") != same[q.id]]  # type: ignore[index]
    if disagree:
        print(f"\nNOTE: the plugin's verdict without neighbours disagrees with the direct comparison for {disagree}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=20240701)
    parser.add_argument("--neighbours", type=int, default=None, help="neighbours per case in the second run "
                        "(default: the plugin's default)")
    parser.add_argument("--keep", type=Path, default=None, help="copy the suite, model stub and reports here")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the database is dropped on SIGTERM too
    try:
        import psycopg

        psycopg.connect(ADMIN_URL, connect_timeout=3).close()
    except ImportError:
        print("pg_analytics: skipped (psycopg is not installed)")
        return
    except Exception as error:  # psycopg.OperationalError and the like
        print(f"pg_analytics: skipped (no PostgreSQL server at {PG_HOST} database test: {error})")
        return
    rows = analytics_rows(args.seed)
    count = sum(len(r) for r in rows.values())
    print(f"analytics database: {count} rows in {len(rows)} tables "
          + ", ".join(f"{table} {len(r)}" for table, r in rows.items()))
    with tempfile.TemporaryDirectory(prefix="nl2sql-pg-analytics-") as tmp, analytics_database(rows) as url:
        folder = Path(tmp)
        same = on_the_database(url)
        off = run_suite(url, folder, "off", 0)
        on = run_suite(url, folder, "on", args.neighbours)
        print(f"suite on {url.rsplit('/', 1)[0]}/nl2sql_analytics_…; pytest exit codes {off['exit']} and {on['exit']}\n")
        report(same, off, on, count)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for name in ("analytics.nl2sql.yaml", "model_stub.jsonl", "report_off.json", "report_on.json"):
                shutil.copy(folder / name, args.keep / name)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # the database is already dropped (analytics_database's finally)
        print("pg_analytics: interrupted", file=sys.stderr)
        sys.exit(130)
