"""Build `shop.sqlite`, the small database of the example suites (committed; rerun to rebuild).

    python example_suites/make_shop_db.py
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE customer (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT,
    joined INTEGER              -- year the customer joined
);
CREATE TABLE product (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price REAL NOT NULL
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customer(id),
    ordered_on TEXT NOT NULL    -- ISO date
);
CREATE TABLE order_item (
    order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES product(id),
    quantity INTEGER NOT NULL
);
"""

CUSTOMERS = [
    (1, "Ada", "London", 2019), (2, "Brian", "Paris", 2020), (3, "Chen", "Berlin", 2020),
    (4, "Dara", "London", 2021), (5, "Eve", None, 2022), (6, "Farid", "Paris", 2022),
]
PRODUCTS = [
    (1, "pen", "stationery", 1.5), (2, "notebook", "stationery", 3.0), (3, "ink", "stationery", 3.0),
    (4, "mug", "kitchen", 7.25), (5, "kettle", "kitchen", 24.0), (6, "lamp", "home", 18.5),
    (7, "rug", "home", 45.0),
]
ORDERS = [
    (1, 1, "2024-01-03"), (2, 1, "2024-02-11"), (3, 2, "2024-02-14"), (4, 3, "2024-03-01"),
    (5, 4, "2024-03-09"), (6, 4, "2024-04-22"), (7, 6, "2024-05-05"),
]
ORDER_ITEMS = [
    (1, 1, 10), (1, 2, 2), (2, 4, 1), (3, 5, 1), (3, 1, 3), (4, 6, 2), (4, 7, 1),
    (5, 2, 5), (5, 3, 1), (6, 4, 4), (7, 7, 1), (7, 1, 2),
]


def build(path: Path) -> None:
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO customer VALUES (?, ?, ?, ?)", CUSTOMERS)
    con.executemany("INSERT INTO product VALUES (?, ?, ?, ?)", PRODUCTS)
    con.executemany("INSERT INTO orders VALUES (?, ?, ?)", ORDERS)
    con.executemany("INSERT INTO order_item VALUES (?, ?, ?)", ORDER_ITEMS)
    con.commit()
    con.execute("VACUUM")
    con.close()


if __name__ == "__main__":
    build(Path(__file__).with_name("shop.sqlite"))
