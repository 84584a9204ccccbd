"""From a source database and its gold queries to the chosen neighbours' rows: read the schema
and the gold, build candidates (one flavour each, seeded), run gold and mutants on each, keep the
`count` that separate the most mutants, and write them.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot.errors import SqlglotError

from pytest_nl2sql.judge.order import has_top_level_order_by
from pytest_nl2sql.neighbours.distill import Scored, choose, differs, run_query
from pytest_nl2sql.neighbours.generate import FLAVOURS, CandidateBuilder, Repairer, Rows, create_database
from pytest_nl2sql.neighbours.literals import parse_gold, read_golds
from pytest_nl2sql.neighbours.mutants import mutants
from pytest_nl2sql.neighbours.schema import Schema, SchemaUnsupported, open_source

MIN_CANDIDATES = 10


@dataclass(frozen=True)
class Built:
    schema: Schema
    rows: Rows
    note: str


def seeded(material: bytes, number: int) -> random.Random:
    """A Random seeded from sha256 of the inputs (never from hash(), which varies per process)."""
    digest = hashlib.sha256(material + b"/" + str(number).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def _engine_sql(sql: str, dialect: str, kind: str) -> str | None:
    if dialect == kind:
        return sql
    try:
        return ";\n".join(sqlglot.transpile(sql, read=dialect, write=kind))
    except (SqlglotError, RecursionError, ValueError):
        return None


def _source_errors(kind: str) -> tuple[type[BaseException], ...]:
    """What reading the source may raise. duckdb is imported for DuckDB sources only: importing it
    twice in one process (a pytester run restores `sys.modules`) aborts the interpreter."""
    errors: list[type[BaseException]] = [sqlite3.Error, SchemaUnsupported, OSError, UnicodeError]
    if kind == "duckdb":
        try:
            import duckdb

            errors.append(duckdb.Error)
        except ImportError:
            pass
    return tuple(errors)


def _at_computed(connection: Any, rows: Rows, computed: list[tuple[tuple[str, str], str]], builder: CandidateBuilder,
                 repairer: Repairer, kind: str) -> tuple[Any, Rows]:
    """Rows at the values the gold's subqueries compute on this candidate (`x > (SELECT avg(x) ...)`
    has no literal to put rows next to), and the candidate written again with them."""
    for _ in range(2):  # again if the added rows moved the value (floating point, a join)
        added = rows
        for ref, sql in computed:
            outcome = run_query(connection, sql, kind)
            if outcome is None or len(outcome.rows) != 1 or len(outcome.rows[0]) != 1 or outcome.rows[0][0] is None:
                continue
            value = outcome.rows[0][0]
            table = builder.schema.table(ref[0])
            if table is not None and any(row[table.position(ref[1])] == value for row in rows.get(table.name, [])):
                continue  # a row sits on it already
            added = builder.at_computed(added, ref, value)
        if added is rows:
            break
        connection.close()
        connection, rows = create_database(builder.schema, repairer.repair(added), ":memory:", repairer)
    return connection, rows


def build_neighbours(source: Path, golds: Sequence[str], count: int, *, dialect: str, kind: str, seed: bytes) -> list[Built]:
    """The chosen neighbours (at most `count`; none when the gold or schema cannot be handled)."""
    if count <= 0 or not golds:
        return []
    errors = _source_errors(kind)
    try:
        reader = open_source(source, kind)
    except errors:
        return []
    try:
        schema = reader.schema()
        if not schema.tables:
            return []
        facts = read_golds(golds, dialect, schema)
        first = parse_gold(golds[0], dialect)
        engine_golds = [_engine_sql(g, dialect, kind) for g in golds]
        if facts is None or first is None or None in engine_golds:
            return []
        mutant_sql = mutants(first, kind)
        computed = [(ref, sql) for ref, sql in ((ref, _engine_sql(sql, dialect, kind)) for ref, _, sql in facts.computed) if sql]
        order_matters = has_top_level_order_by(golds[0], dialect)
        scored: list[Scored] = []
        candidates: dict[int, Built] = {}
        for number in range(max(MIN_CANDIDATES, 2 * count + 2)):
            flavour = FLAVOURS[number % len(FLAVOURS)]
            rng = seeded(seed, number)
            repairer = Repairer(schema, rng)
            try:
                builder = CandidateBuilder(schema, reader, facts, rng, flavour)
                rows = repairer.repair(builder.build())
                connection, rows = create_database(schema, rows, ":memory:", repairer)
                if computed:
                    connection, rows = _at_computed(connection, rows, computed, builder, repairer, kind)
            except errors:
                continue
            try:
                outcomes = [run_query(connection, sql, kind) for sql in engine_golds]  # type: ignore[arg-type]
                gold = outcomes[0]
                if gold is None or None in outcomes:
                    continue  # the gold must run on every neighbour we keep
                killed = frozenset(i for i, sql in enumerate(mutant_sql) if differs(gold, run_query(connection, sql, kind), order_matters))
            finally:
                connection.close()
            scored.append(Scored(number, len(gold.rows), killed))
            candidates[number] = Built(schema, rows, flavour.note)
        return [candidates[s.index] for s in choose(scored, count)]
    except errors:
        return []
    finally:
        reader.close()
