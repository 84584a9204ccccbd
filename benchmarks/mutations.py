"""Neighbour databases against deliberately wrong predictions and equivalent rewrites, on Spider
**train** databases (the dev databases are left out).

Run from the repo root::

    python benchmarks/mutations.py [--spider DIR] [--wrong 750] [--equivalent 400]
                                   [--counts 0,1,2,3,4,6] [--chosen 3] [--workers 2] [--quick]

* **wrong predictions**: golds rewritten by a mutator of this script (its own code, not the
  distiller's mutants, so the distiller is not measured against itself), about equal numbers of
  each kind: dropped DISTINCT, a comparison's bound flipped (`>` for `>=` and the like), MAX for
  MIN, a dropped WHERE conjunct, another literal (a value of the same column where it can be
  read), another ORDER BY column, another LIMIT. Two further kinds that the distiller has no
  operator for are reported apart: another SELECT column, another GROUP BY column. Seeded, spread
  over the databases round-robin. A rewrite that no database the schema allows can tell from
  the gold is not drawn (it is not wrong): DISTINCT dropped on an operand of UNION / EXCEPT /
  INTERSECT, on a LIMIT 1 query, or where a table's primary key is selected (and a second
  table, if any, is joined on its own key); another
  LIMIT of a subquery read as one value (SQLite takes its first row).
* **equivalent rewrites** that must pass: aliases added or removed, every identifier quoted,
  keyword case toggled, SELECT columns reversed, the two tables of an inner join swapped,
  COUNT(1) for COUNT(*), extra parentheses, ORDER BY 1 added to an unordered gold.

Every prediction is judged as the product judges it (`Pipeline(RunOptions(neighbours=N)).evaluate`):
it passes iff it matches on the real database and on every neighbour where the gold runs. For each
neighbour count: wrong predictions still passing, equivalent rewrites failing (those whose gold
has a top-level ORDER BY are counted apart: rows tied on the ORDER BY keys, which neighbours make,
are the other helper's tie handling to accept), generation time per case on a cold cache (a fresh
cache folder per count, `--workers` processes) and the cache's size. Then the wrong predictions
still passing at `--chosen`, for a person to judge. `--quick`: 150 wrong predictions and 80
equivalent rewrites (a subset of the full sets: the same seeds), at `--chosen` only, in under a
minute, for iterating on the generator.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_nl2sql.cases.read import Case  # noqa: E402
from pytest_nl2sql.engines.base import Limits  # noqa: E402
from pytest_nl2sql.judge.order import has_top_level_order_by  # noqa: E402
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions  # noqa: E402
from pytest_nl2sql.metrics.summary import is_fragile_pass  # noqa: E402
from pytest_nl2sql.neighbours import GENERATOR_VERSION, NeighbourCache  # noqa: E402
from pytest_nl2sql.vocab import Verdict  # noqa: E402

DEFAULT_SPIDER = ROOT.parent / "shared" / "data" / "spider"
WRONG_KINDS = ("dropped DISTINCT", "comparison bound", "MAX for MIN", "dropped WHERE conjunct", "another literal",
               "another ORDER BY column", "another LIMIT")
EXTRA_KINDS = ("another SELECT column", "another GROUP BY column")
EQUIVALENT_KINDS = ("aliases", "quoting", "keyword case", "select order", "join order", "COUNT(1)", "parentheses",
                    "ORDER BY added")
LIMITS = Limits(timeout=10.0)


@dataclass(frozen=True)
class Gold:
    sql: str
    db: str
    path: Path


@dataclass(frozen=True)
class Prediction:
    gold: Gold
    sql: str
    kind: str
    wrong: bool


def seeded(*parts: object) -> random.Random:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


# ----------------------------------------------------------------------------- reading Spider

def load_golds(spider: Path) -> list[Gold]:
    dev = {line.rstrip("\n").split("\t")[-1] for line in open(spider / "dev_gold.sql") if line.strip()}
    golds = []
    for line in open(spider / "train_gold.sql"):
        if not line.strip():
            continue
        sql, db = line.rstrip("\n").rsplit("\t", 1)
        path = spider / "database" / db / f"{db}.sqlite"
        if db in dev or not path.is_file():
            continue
        golds.append(Gold(sql.strip(), db, path))
    return list({(g.sql, g.db): g for g in golds}.values())


class Columns:
    """{table: [columns]} of each database, and a few values of a column (for another literal)."""

    def __init__(self) -> None:
        self.tables: dict[Path, dict[str, list[str]]] = {}
        self.primary: dict[Path, dict[str, tuple[str, ...]]] = {}

    def of(self, path: Path) -> dict[str, list[str]]:
        if path not in self.tables:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as connection:
                names = [n for (n,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                self.tables[path] = {n.lower(): [r[1] for r in connection.execute(f'PRAGMA table_info("{n}")')] for n in names}
            connection.close()
        return self.tables[path]

    def keys(self, path: Path) -> dict[str, tuple[str, ...]]:
        """{table: its declared primary key's columns}, lower case."""
        if path not in self.primary:
            connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                self.primary[path] = {
                    table: tuple(r[1].lower() for r in sorted(connection.execute(f'PRAGMA table_info("{table}")'), key=lambda r: r[5]) if r[5])
                    for table in self.of(path)
                }
            finally:
                connection.close()
        return self.primary[path]

    @staticmethod
    def values(path: Path, table: str, column: str) -> list[object]:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return [v for (v,) in connection.execute(f'SELECT DISTINCT "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL LIMIT 30')]
        except sqlite3.Error:
            return []
        finally:
            connection.close()


def table_of(tree: exp.Expression, column: exp.Column, schema: dict[str, list[str]]) -> str | None:
    """The table a column belongs to: its qualifier through the aliases, or the one table having it."""
    aliases = {t.alias_or_name.lower(): t.name.lower() for t in tree.find_all(exp.Table)}
    if column.table:
        return aliases.get(column.table.lower())
    having = [t for t in dict.fromkeys(aliases.values()) if column.name.lower() in (c.lower() for c in schema.get(t, []))]
    return having[0] if len(having) == 1 else None


# ----------------------------------------------------------------------------- wrong predictions

def _pick(rng: random.Random, nodes: list[exp.Expression]) -> exp.Expression | None:
    return rng.choice(nodes) if nodes else None


def wrong_sql(kind: str, gold: Gold, rng: random.Random, columns: Columns) -> str | None:
    """One wrong rewrite of the gold of this kind, or None where the kind does not apply."""
    try:
        tree = sqlglot.parse_one(gold.sql, read="sqlite")
    except SqlglotError:
        return None
    schema = columns.of(gold.path)
    if kind == "dropped DISTINCT":
        keys = columns.keys(gold.path)
        node = _pick(rng, [s for s in tree.find_all(exp.Select) if s.args.get("distinct") and not _distinct_is_redundant(s, keys)] +
                     [c for c in tree.find_all(exp.Count) if isinstance(c.this, exp.Distinct)])
        if node is None:
            return None
        if isinstance(node, exp.Select):
            node.set("distinct", None)
        else:
            node.set("this", node.this.expressions[0])
    elif kind == "comparison bound":
        partner = {exp.GT: exp.GTE, exp.GTE: exp.GT, exp.LT: exp.LTE, exp.LTE: exp.LT}
        node = _pick(rng, [n for n in tree.find_all(exp.GT, exp.GTE, exp.LT, exp.LTE)])
        if node is None:
            return None
        node.replace(partner[type(node)](this=node.this.copy(), expression=node.expression.copy()))
    elif kind == "MAX for MIN":
        node = _pick(rng, list(tree.find_all(exp.Max, exp.Min)))
        if node is None:
            return None
        node.replace((exp.Min if isinstance(node, exp.Max) else exp.Max)(this=node.this.copy()))
    elif kind == "dropped WHERE conjunct":
        node = _pick(rng, [a for a in tree.find_all(exp.And) if isinstance(a.parent, (exp.Where, exp.And, exp.Paren))
                           and a.find_ancestor(exp.Where, exp.Join) is not None and isinstance(a.find_ancestor(exp.Where, exp.Join), exp.Where)])
        if node is None:
            return None
        node.replace(rng.choice([node.this, node.expression]).copy())
    elif kind == "another literal":
        literals = [lit for lit in tree.find_all(exp.Literal) if lit.find_ancestor(exp.Where, exp.Having) is not None]
        node = _pick(rng, literals)
        if node is None:
            return None
        node.replace(_other_literal(node, tree, schema, gold, rng))
    elif kind == "another ORDER BY column":
        node = _pick(rng, [o for o in tree.find_all(exp.Ordered) if isinstance(o.this, exp.Column)])
        if node is None:
            return None
        table = table_of(tree, node.this, schema)
        others = [c for c in schema.get(table or "", []) if c.lower() != node.this.name.lower()]
        if not others:
            return None
        replacement = exp.column(rng.choice(others), table=node.this.table or None, quoted=True)
        node.set("this", replacement)
    elif kind == "another LIMIT":
        node = _pick(rng, [l for l in tree.find_all(exp.Limit) if isinstance(l.expression, exp.Literal) and not _in_scalar_subquery(l)])
        if node is None:
            return None
        value = int(node.expression.this)
        node.set("expression", exp.Literal.number(rng.choice([v for v in (value + 1, value + 2, max(1, value - 1), value * 2) if v != value])))
    elif kind in ("another SELECT column", "another GROUP BY column"):
        if kind == "another SELECT column":
            places = [c for s in tree.find_all(exp.Select) for c in s.expressions if isinstance(c, exp.Column)]
        else:
            places = [c for g in tree.find_all(exp.Group) for c in g.expressions if isinstance(c, exp.Column)]
        node = _pick(rng, places)
        if node is None:
            return None
        table = table_of(tree, node, schema)
        others = [c for c in schema.get(table or "", []) if c.lower() != node.name.lower()]
        if not others:
            return None
        node.replace(exp.column(rng.choice(others), table=node.table or None, quoted=True))
    else:
        raise ValueError(kind)
    text = tree.sql(dialect="sqlite")
    return text if text != sqlglot.parse_one(gold.sql, read="sqlite").sql(dialect="sqlite") else None


def _distinct_is_redundant(select: exp.Select, keys: dict[str, tuple[str, ...]]) -> bool:
    """DISTINCT that no database the schema allows can show: on an operand of UNION, EXCEPT or
    INTERSECT (without ALL: the set operation removes duplicates itself), on a query of one row
    (LIMIT 1), or where a table's declared primary key is selected and the only other table, if
    any, is joined on its own key (one row of it per row). Dropping it is an equivalent
    rewrite, not a wrong prediction."""
    parent = select.parent
    while isinstance(parent, (exp.Paren, exp.Subquery)):
        parent = parent.parent
    if isinstance(parent, (exp.Union, exp.Except, exp.Intersect)) and parent.args.get("distinct", True):
        return True
    limit = select.args.get("limit")
    if limit is not None and isinstance(limit.expression, exp.Literal) and limit.expression.this == "1":
        return True
    source = select.args.get("from_") or select.args.get("from")  # sqlglot renamed it
    joins = select.args.get("joins") or []
    if source is None or not isinstance(source.this, exp.Table) or len(joins) > 1 or select.args.get("group"):
        return False
    tables = [source.this] + [j.this for j in joins]
    if not all(isinstance(t, exp.Table) for t in tables):
        return False
    alias = {t.alias_or_name.lower(): t.name.lower() for t in tables}

    def table_of(column: exp.Column) -> str | None:
        return alias.get(column.table.lower()) if column.table else (tables[0].name.lower() if len(tables) == 1 else None)

    chosen = {(table_of(c), c.name.lower()) for c in select.expressions if isinstance(c, exp.Column)}
    for kept in tables:
        key = keys.get(kept.name.lower())
        if not key or not {(kept.name.lower(), k) for k in key} <= chosen:
            continue
        if not joins:
            return True
        # two tables: the other joined on its own one-column key gives at most one row per kept row
        other = tables[1] if kept is tables[0] else tables[0]
        other_key = keys.get(other.name.lower())
        condition = joins[0].args.get("on")
        if other_key and len(other_key) == 1 and condition is not None:
            for eq in condition.find_all(exp.EQ):
                sides = [s for s in (eq.this, eq.expression) if isinstance(s, exp.Column)]
                if len(sides) == 2 and any(table_of(s) == other.name.lower() and s.name.lower() == other_key[0] for s in sides) \
                        and any(table_of(s) == kept.name.lower() for s in sides):
                    return True
    return False


def _in_scalar_subquery(limit: exp.Limit) -> bool:
    """A LIMIT of a subquery read as one value (`x = (SELECT ... LIMIT 1)`): SQLite takes the
    subquery's first row, so `LIMIT 2` there means the same (not so under IN or EXISTS)."""
    subquery = limit.find_ancestor(exp.Subquery)
    return subquery is not None and not isinstance(subquery.parent, (exp.In, exp.Exists, exp.From, exp.Join, exp.Union, exp.Except, exp.Intersect))


def _other_literal(node: exp.Literal, tree: exp.Expression, schema: dict[str, list[str]], gold: Gold, rng: random.Random) -> exp.Expression:
    """Another value of the compared column when it can be read from the database, else a nearby one."""
    compared = node.parent
    column = None
    if isinstance(compared, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.In)):
        column = compared.this if isinstance(compared.this, exp.Column) else None
    if column is not None and (node.is_string or rng.random() < 0.5):
        table = table_of(tree, column, schema)
        if table:
            names = {c.lower(): c for c in schema[table]}
            values = [v for v in Columns.values(gold.path, table, names.get(column.name.lower(), column.name)) if str(v) != node.this]
            if values:
                value = rng.choice(values)
                if isinstance(value, (int, float)) and not node.is_string:
                    return exp.Literal.number(value)
                return exp.Literal.string(str(value))
    if node.is_string:
        return exp.Literal.string(node.this + "x" if rng.random() < 0.5 else node.this[:-1])
    number = float(node.this)
    changed = rng.choice([number + 1, number - 1, number * 2 + 1, number + 10])
    return exp.Literal.number(int(changed) if changed.is_integer() else changed)


# ----------------------------------------------------------------------------- equivalent rewrites

def equivalent_sql(kind: str, gold: Gold, rng: random.Random, columns: Columns) -> str | None:
    try:
        tree = sqlglot.parse_one(gold.sql, read="sqlite")
    except SqlglotError:
        return None
    if kind == "quoting":
        return tree.sql(dialect="sqlite", identify=True)
    if kind == "keyword case":
        return _toggled_keywords(gold.sql)
    if kind == "COUNT(1)":
        stars = [c for c in tree.find_all(exp.Count) if isinstance(c.this, exp.Star)]
        if not stars:
            return None
        for count in stars:
            count.set("this", exp.Literal.number(1))
        return tree.sql(dialect="sqlite")
    if kind == "parentheses":
        where = next(tree.find_all(exp.Where), None)
        if where is None:
            return None
        for node in list(where.find_all(exp.EQ, exp.GT, exp.LT, exp.GTE, exp.LTE, exp.NEQ)):
            node.replace(exp.Paren(this=node.copy()))
        where.set("this", exp.Paren(this=where.this))
        return tree.sql(dialect="sqlite")
    if kind == "ORDER BY added":
        if has_top_level_order_by(gold.sql, "sqlite") or not isinstance(tree, exp.Select) or tree.args.get("limit"):
            return None
        return tree.order_by("1").sql(dialect="sqlite")
    if not isinstance(tree, exp.Select):
        return None  # the rest rewrite one SELECT
    if kind == "select order":
        items = tree.expressions
        positional = any(isinstance(o.this, exp.Literal) for o in tree.find_all(exp.Ordered)) or any(
            isinstance(e, exp.Literal) for g in tree.find_all(exp.Group) for e in g.expressions)
        if len(items) < 2 or positional or any(isinstance(e, exp.Star) for e in items):
            return None
        tree.set("expressions", list(reversed(items)))
        return tree.sql(dialect="sqlite")
    if kind == "join order":
        joins = tree.args.get("joins") or []
        if len(joins) != 1 or joins[0].side or joins[0].kind or joins[0].args.get("on") is None:
            return None
        first = tree.args["from_"].this if "from_" in tree.args else tree.args["from"].this
        second = joins[0].this
        if not isinstance(first, exp.Table) or not isinstance(second, exp.Table) or any(isinstance(e, exp.Star) for e in tree.expressions):
            return None
        first_copy, second_copy = first.copy(), second.copy()
        first.replace(second_copy)
        second.replace(first_copy)
        return tree.sql(dialect="sqlite")
    if kind == "aliases":
        tables = list(tree.find_all(exp.Table))
        names = [t.name.lower() for t in tables]
        if len(set(names)) != len(names) or any(s is not tree for s in tree.find_all(exp.Select)):
            return None
        if any(t.alias for t in tables):  # remove them: qualify by the table's name instead
            renames = {t.alias.lower(): t.name for t in tables if t.alias}
            for t in tables:
                t.set("alias", None)
            for column in tree.find_all(exp.Column):
                if column.table and column.table.lower() in renames:
                    column.set("table", exp.to_identifier(renames[column.table.lower()]))
        else:  # add them: every table gets one, qualified columns use it
            renames = {t.name.lower(): f"x{i}" for i, t in enumerate(tables, start=1)}
            for t in tables:
                t.set("alias", exp.TableAlias(this=exp.to_identifier(renames[t.name.lower()])))
            for column in tree.find_all(exp.Column):
                if column.table and column.table.lower() in renames:
                    column.set("table", exp.to_identifier(renames[column.table.lower()]))
        return tree.sql(dialect="sqlite")
    raise ValueError(kind)


def _toggled_keywords(sql: str) -> str | None:
    """Keywords in the other case, everything else untouched (token offsets, not a regex)."""
    try:
        tokens = sqlglot.tokenize(sql, read="sqlite")
    except SqlglotError:
        return None
    pieces = []
    last = 0
    plain = {TokenType.VAR, TokenType.STRING, TokenType.IDENTIFIER, TokenType.NUMBER}
    for token in tokens:
        if token.token_type in plain or not token.text.isalpha():
            continue
        pieces.append(sql[last:token.start])
        text = sql[token.start:token.end + 1]
        pieces.append(text.lower() if text.isupper() else text.upper())
        last = token.end + 1
    pieces.append(sql[last:])
    toggled = "".join(pieces)
    return toggled if toggled != sql else None


# ----------------------------------------------------------------------------- building the sets

def runs_on_real(sql: str, path: Path) -> list[tuple] | None:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    steps = [0]

    def handler() -> int:
        steps[0] += 1
        return int(steps[0] > 20000)

    connection.set_progress_handler(handler, 1000)
    try:
        return connection.execute(sql).fetchmany(100001)
    except (sqlite3.Error, sqlite3.Warning):
        return None
    finally:
        connection.close()


def build_sets(golds: list[Gold], wrong_total: int, equivalent_total: int) -> tuple[list[Prediction], list[Prediction]]:
    columns = Columns()
    runnable = [g for g in golds if runs_on_real(g.sql, g.path) is not None]
    by_db: dict[str, list[Gold]] = defaultdict(list)
    for gold in runnable:
        by_db[gold.db].append(gold)
    databases = sorted(by_db)
    for db in databases:
        seeded("order", db).shuffle(by_db[db])

    def draw(kinds: tuple[str, ...], per_kind: int, make, wrong: bool) -> list[Prediction]:  # noqa: ANN001
        made: list[Prediction] = []
        for kind in kinds:
            rng = seeded("kind", kind)
            dbs = list(databases)
            rng.shuffle(dbs)
            cursor = {db: 0 for db in dbs}
            got: list[Prediction] = []
            stalled = 0
            while len(got) < per_kind and stalled < len(dbs):
                stalled = 0
                for db in dbs:
                    if len(got) >= per_kind:
                        break
                    found = None
                    while cursor[db] < len(by_db[db]) and found is None:
                        gold = by_db[db][cursor[db]]
                        cursor[db] += 1
                        sql = make(kind, gold, seeded("make", kind, gold.sql), columns)
                        if sql is not None and runs_on_real(sql, gold.path) is not None:
                            found = Prediction(gold, sql, kind, wrong)
                    if found is None:
                        stalled += 1
                    else:
                        got.append(found)
            made += got
        return made

    per_wrong = -(-wrong_total // len(WRONG_KINDS))
    wrong = draw(WRONG_KINDS, per_wrong, wrong_sql, True)[:wrong_total] if wrong_total else []
    extra = draw(EXTRA_KINDS, max(1, wrong_total // len(WRONG_KINDS)), wrong_sql, True) if wrong_total else []
    per_equivalent = -(-equivalent_total // len(EQUIVALENT_KINDS))
    equivalent = draw(EQUIVALENT_KINDS, per_equivalent, equivalent_sql, False) if equivalent_total else []
    return wrong + extra, equivalent


# ----------------------------------------------------------------------------- generating, judging

def _generate(job: tuple[str, str, str, int]) -> tuple[float, float, int]:
    """One case, cold: the time includes hashing the source, as a first run pays it."""
    folder, path, sql, count = job
    started, cpu = time.perf_counter(), time.process_time()
    found = NeighbourCache(Path(folder)).neighbours_for(Path(path), [sql], count)
    return time.perf_counter() - started, time.process_time() - cpu, len(found)


def generate_all(golds: list[Gold], count: int, folder: Path, workers: int) -> tuple[float, float, float, int]:
    jobs = [(str(folder), str(g.path), g.sql, count) for g in golds]
    started = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        results = list(pool.map(_generate, jobs, chunksize=8))
    wall = time.perf_counter() - started
    per_case = sum(r[0] for r in results) / max(1, len(results))
    cpu_per_case = sum(r[1] for r in results) / max(1, len(results))
    return per_case, cpu_per_case, wall, sum(1 for r in results if r[2] == 0)


class Judge:
    """The product's path: `Pipeline.evaluate` with `neighbours=count` over a cache folder."""

    def __init__(self, count: int, folder: Path | None) -> None:
        self.pipeline = Pipeline(RunOptions(limits=LIMITS, neighbours=count, cache_dir=folder))

    def verdict(self, prediction: Prediction, position: int) -> tuple[bool, bool]:
        """(passes unflagged, passes marked fragile: it differs from the gold only on stress neighbours)."""
        gold = prediction.gold
        case = Case(id=f"{gold.db}-{position}", file=Path("mutations.yml"), line=None, position=position, database=gold.db,
                    database_target=str(gold.path), gold=(gold.sql,), predicted=prediction.sql)
        outcome = self.pipeline.evaluate(case, CaseLabel(f"mutations.yml::{case.id}", "mutations.yml", position))
        result = outcome.result
        fragile = is_fragile_pass(result)
        return result.verdict is Verdict.PASS and not fragile, fragile

    def close(self) -> None:
        closer = getattr(self.pipeline.engines, "close", None) or getattr(self.pipeline.engines, "close_all", None)
        if closer is not None:
            closer()


def folder_size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spider", type=Path, default=DEFAULT_SPIDER)
    parser.add_argument("--wrong", type=int, default=750)
    parser.add_argument("--equivalent", type=int, default=400)
    parser.add_argument("--counts", default="0,1,2,3,4,6")
    parser.add_argument("--chosen", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a subset for iterating: 150 wrong, 80 equivalent, counts 3")
    args = parser.parse_args()
    if args.quick:
        args.wrong, args.equivalent, args.counts = 150, 80, str(args.chosen)
    counts = [int(c) for c in args.counts.split(",")]
    if not (args.spider / "train_gold.sql").is_file():
        raise SystemExit(f"no Spider data at {args.spider}")

    started = time.perf_counter()
    golds = load_golds(args.spider)
    wrong, equivalent = build_sets(golds, args.wrong, args.equivalent)
    predictions = wrong + equivalent
    print(f"generator {GENERATOR_VERSION}; {len(golds)} train golds on {len({g.db for g in golds})} databases;"
          f" {len(wrong)} wrong predictions ({len({p.gold.db for p in wrong})} databases),"
          f" {len(equivalent)} equivalent rewrites; sets built in {time.perf_counter() - started:.1f} s")
    print("wrong:", dict(Counter(p.kind for p in wrong)))
    print("equivalent:", dict(Counter(p.kind for p in equivalent)))

    real_verdict = dict(zip(predictions, (v for v, _ in map(Judge(0, None).verdict, predictions, range(len(predictions))))))
    cases = list({(p.gold.sql, p.gold.db): p.gold for p in predictions}.values())
    rows = []
    passing_at_chosen: list[Prediction] = []
    failing_equivalent_at_chosen: list[Prediction] = []
    base = Path(tempfile.mkdtemp(prefix="nl2sql-mutations-"))
    for count in counts:
        folder = base / f"count-{count}"
        per_case, cpu_per_case, wall, none = generate_all(cases, count, folder, args.workers) if count else (0.0, 0.0, 0.0, 0)
        judge_ = Judge(count, folder) if count else None
        passed: Counter[str] = Counter()
        failed_equivalent: Counter[str] = Counter()
        failed_ordered = 0
        flagged: Counter[str] = Counter()  # passing, but marked fragile
        for position, prediction in enumerate(predictions):
            ok, fragile = judge_.verdict(prediction, position) if judge_ is not None else (real_verdict[prediction], False)
            flagged[("wrong " if prediction.wrong else "equivalent ") + prediction.kind] += fragile
            ok = ok or (fragile and not prediction.wrong)
            if prediction.wrong and ok:
                passed[prediction.kind] += 1
                if count == args.chosen:
                    passing_at_chosen.append(prediction)
            if not prediction.wrong and not ok:
                if has_top_level_order_by(prediction.gold.sql, "sqlite") and real_verdict[prediction]:
                    failed_ordered += 1
                else:
                    failed_equivalent[prediction.kind] += 1
                if count == args.chosen:
                    failing_equivalent_at_chosen.append(prediction)
        if judge_ is not None:
            judge_.close()
        main_wrong = sum(passed[k] for k in WRONG_KINDS)
        extra_wrong = sum(passed[k] for k in EXTRA_KINDS)
        size = folder_size(folder) if count else 0
        rows.append((count, main_wrong, extra_wrong, sum(failed_equivalent.values()), failed_ordered, per_case, cpu_per_case, wall, size,
                     none, dict(passed)))
        print(f"count {count}: wrong passing {main_wrong}/{sum(1 for p in wrong if p.kind in WRONG_KINDS)}"
              f" (+ other kinds {extra_wrong}/{sum(1 for p in wrong if p.kind in EXTRA_KINDS)}),"
              f" equivalent failing {sum(failed_equivalent.values())} (+ {failed_ordered} under ORDER BY, ties),"
              f" generation {per_case * 1000:.1f} ms/case, CPU {cpu_per_case * 1000:.1f} ms/case ({wall:.1f} s wall, {args.workers} workers, {len(cases)} cases,"
              f" {none} with no neighbour), cache {size / 1e6:.1f} MB; by kind {dict(passed)};"
              f" passing marked fragile: {dict(+flagged)}", flush=True)

    print()
    print("| neighbours | wrong passing (of %d) | other kinds passing (of %d) | equivalent failing (of %d) | + ordered-gold ties |"
          " generation ms/case | CPU ms/case | wall s | cache MB | cases without neighbours |"
          % (sum(1 for p in wrong if p.kind in WRONG_KINDS), sum(1 for p in wrong if p.kind in EXTRA_KINDS), len(equivalent)))
    print("|---|---|---|---|---|---|---|---|---|---|")
    for count, main_wrong, extra_wrong, eq, ordered, per_case, cpu_per_case, wall, size, none, _ in rows:
        print(f"| {count} | {main_wrong} | {extra_wrong} | {eq} | {ordered} | {per_case * 1000:.1f} | {cpu_per_case * 1000:.1f} | {wall:.1f}"
              f" | {size / 1e6:.1f} | {none} |")
    print()
    print("per kind (wrong passing):")
    for count, *_, by_kind in rows:
        print(f"  {count}: " + ", ".join(f"{k}: {by_kind.get(k, 0)}" for k in WRONG_KINDS + EXTRA_KINDS))
    print()
    print(f"wrong predictions still passing with {args.chosen} neighbours:")
    for prediction in passing_at_chosen:
        print(f"- [{prediction.kind}] {prediction.gold.db}\n    gold: {prediction.gold.sql}\n    pred: {prediction.sql}")
    print()
    print(f"equivalent rewrites failing with {args.chosen} neighbours:")
    for prediction in failing_equivalent_at_chosen:
        print(f"- [{prediction.kind}] {prediction.gold.db} (real db pass: {real_verdict[prediction]})\n"
              f"    gold: {prediction.gold.sql}\n    pred: {prediction.sql}")
    print(f"\ncache folders under {base} (delete when done)")


if __name__ == "__main__":
    main()
