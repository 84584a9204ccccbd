"""The execution-match spec's (000) "SQL Execution" and "50/50 Spider validation" categories, run on
the real Spider databases through plain read-only `sqlite3` connections (skipped without the data).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_nl2sql.judge.compare import Comparison, compare_results
from pytest_nl2sql.judge.order import has_top_level_order_by
from pytest_nl2sql.vocab import Reason

pytestmark = pytest.mark.spider


def connect(db_file: Path) -> sqlite3.Connection:
    con = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)
    con.text_factory = lambda b: b.decode(errors="ignore")
    return con


@dataclass(frozen=True)
class ExecMatch:
    match: bool
    error: str | None = None
    comparison: Comparison | None = None


def exec_match(con: sqlite3.Connection, predicted: str, gold: str) -> ExecMatch:
    """What the plugin does for one case, minus pytest: run both, compare in `exec` mode."""
    cursor = con.execute(gold)
    gold_rows, gold_width = cursor.fetchall(), len(cursor.description)
    try:
        cursor = con.execute(predicted)
        pred_rows, pred_width = cursor.fetchall(), len(cursor.description or ())
    except sqlite3.Error as error:
        return ExecMatch(match=False, error=str(error))
    comparison = compare_results(gold_rows, pred_rows, has_top_level_order_by(gold, "sqlite"),
                                 gold_columns=gold_width, pred_columns=pred_width)
    return ExecMatch(match=comparison.match, comparison=comparison)


@pytest.fixture(scope="module")
def concert(spider_dir):
    con = connect(spider_dir / "database" / "concert_singer" / "concert_singer.sqlite")
    yield con
    con.close()


# ---------------------------------------------------------------- 8. SQL execution (8)

class TestSqlExecution:
    def test_identical_queries(self, concert):
        assert exec_match(concert, "SELECT Name, Age FROM singer", "SELECT Name, Age FROM singer").match

    def test_column_order_swap(self, concert):
        result = exec_match(concert, "SELECT Age, Name FROM singer", "SELECT Name, Age FROM singer")
        assert result.match and result.comparison.pairing == (1, 0)

    def test_row_order_differs_without_order_by_in_gold(self, concert):
        assert exec_match(concert, "SELECT Name FROM singer ORDER BY Name DESC", "SELECT Name FROM singer").match

    def test_different_order_by_does_not_match(self, concert):
        result = exec_match(concert, "SELECT Name FROM singer ORDER BY Name", "SELECT Name FROM singer ORDER BY Age")
        assert not result.match and result.comparison.reason == Reason.ORDER.value

    def test_aggregate_count(self, concert):
        assert exec_match(concert, "SELECT COUNT(Singer_ID) FROM singer", "SELECT count(*) FROM singer").match

    def test_wrong_where_clause(self, concert):
        result = exec_match(concert, "SELECT Name FROM singer WHERE Country = 'Netherlands'",
                            "SELECT Name FROM singer WHERE Country = 'France'")
        assert not result.match and result.comparison.reason == Reason.ROW_COUNT.value

    def test_syntax_error_does_not_match(self, concert):
        assert not exec_match(concert, "SELEC Name FROM singer", "SELECT Name FROM singer").match

    def test_syntax_error_has_an_error_message(self, concert):
        result = exec_match(concert, "SELEC Name FROM singer", "SELECT Name FROM singer")
        assert result.error and "syntax error" in result.error


# ---------------------------------------------------------------- 10. 50/50 Spider validation (5)

@dataclass(frozen=True)
class Query:
    index: int
    db_id: str
    gold: str
    rows: int
    columns: int


BREAKAGES = {  # how each kind breaks a gold query, and the rule the comparison must report
    "drop a row": Reason.ROW_COUNT,
    "repeat a row": Reason.ROW_COUNT,
    "add a column": Reason.COLUMN_COUNT,
    "change a value": Reason.VALUES,
}


def broken(query: Query, kind: str) -> str:
    gold = query.gold.rstrip().rstrip(";")
    if kind == "drop a row":
        return f"SELECT * FROM ({gold}) LIMIT {query.rows - 1}"
    if kind == "repeat a row":
        return f"SELECT * FROM ({gold}) UNION ALL SELECT * FROM (SELECT * FROM ({gold}) LIMIT 1)"
    if kind == "add a column":
        return f"SELECT *, 0 FROM ({gold})"
    names = [f"c{i}" for i in range(query.columns)]
    changed = ", ".join([f"coalesce({names[0]}, '') || '#'", *names[1:]])
    return f"WITH q({', '.join(names)}) AS ({gold}) SELECT {changed} FROM q"


@pytest.fixture(scope="module")
def spider_queries(spider_dir):
    """The first 100 dev gold queries (in dev.json order) whose database exists and result has rows."""
    connections: dict[str, sqlite3.Connection] = {}
    found: list[Query] = []
    for index, item in enumerate(json.loads((spider_dir / "dev.json").read_text())):
        db_file = spider_dir / "database" / item["db_id"] / f"{item['db_id']}.sqlite"
        if not db_file.exists():
            continue
        con = connections.setdefault(item["db_id"], connect(db_file))
        cursor = con.execute(item["query"])
        rows = cursor.fetchall()
        if rows:
            found.append(Query(index, item["db_id"], item["query"], len(rows), len(cursor.description)))
        if len(found) == 100:
            break
    yield found, connections
    for con in connections.values():
        con.close()


@pytest.fixture(scope="module")
def verdicts(spider_queries):
    """(expected, got, comparison) for 50 gold queries run as-is and 50 deliberately broken ones."""
    queries, connections = spider_queries
    kinds = list(BREAKAGES)
    out = []
    for n, query in enumerate(queries):
        con = connections[query.db_id]
        if n < 50:
            result = exec_match(con, query.gold, query.gold)
            out.append((True, result, None))
        else:
            kind = kinds[n % len(kinds)]
            result = exec_match(con, broken(query, kind), query.gold)
            out.append((False, result, kind))
    return out


class TestSpiderFiftyFifty:
    def test_found_100_valid_queries(self, spider_queries):
        queries, _ = spider_queries
        assert len(queries) == 100 and len({q.index for q in queries}) == 100

    def test_correct_queries_all_match(self, verdicts):
        correct = [result for expected, result, _ in verdicts if expected]
        assert sum(r.match for r in correct) == 50

    def test_broken_queries_never_match_and_say_why(self, verdicts):
        for expected, result, kind in verdicts:
            if not expected:
                assert result.error is None, (kind, result.error)
                assert not result.match, kind
                assert result.comparison.reason == BREAKAGES[kind].value, kind

    def test_evaluator_accuracy_is_100_percent(self, verdicts):
        assert sum(result.match == expected for expected, result, _ in verdicts) == 100

    def test_simulated_model_accuracy_is_50_percent(self, verdicts):
        assert sum(result.match for _, result, _ in verdicts) / len(verdicts) == 0.5

    def test_reversing_the_columns_of_correct_queries_keeps_them_correct(self, spider_queries):
        queries, connections = spider_queries
        checked = 0
        for query in queries[:50]:
            if query.columns < 2 or has_top_level_order_by(query.gold, "sqlite"):
                continue
            names = [f"c{i}" for i in range(query.columns)]
            reversed_sql = f"WITH q({', '.join(names)}) AS ({query.gold}) SELECT {', '.join(reversed(names))} FROM q"
            result = exec_match(connections[query.db_id], reversed_sql, query.gold)
            assert result.match, query.gold
            checked += 1
        assert checked >= 5
