"""From a source database and its gold queries to the chosen neighbours' rows: read the schema,
the gold and the invariants the source shows (`invariants`), build candidates that keep them (one
flavour each, seeded, repaired and settled: `plausible`), run gold and mutants on each, keep the
`count` that separate the most mutants; then the stress neighbours, each of those with one
invariant of the gold's columns broken. Every phase holds the time limit of `budget`.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot.errors import SqlglotError

from pytest_nl2sql.judge.order import has_top_level_order_by
from pytest_nl2sql.neighbours import budget
from pytest_nl2sql.neighbours.distill import Scored, choose, run_query, score
from pytest_nl2sql.neighbours.generate import FLAVOURS, CandidateBuilder, Repairer, Rows, create_candidate
from pytest_nl2sql.neighbours.interrupts import raise_if_interrupt
from pytest_nl2sql.neighbours.invariants import Invariant, InvariantKind, Observed, learn, observe, respelled
from pytest_nl2sql.neighbours.literals import GoldFacts, parse_gold, read_golds
from pytest_nl2sql.neighbours.mutants import mutants
from pytest_nl2sql.neighbours.plausible import Keeper, break_one, gold_literals, settle, violations
from pytest_nl2sql.neighbours.schema import Schema, SchemaUnsupported, open_source

MIN_CANDIDATES = 10


@dataclass(frozen=True)
class Built:
    schema: Schema  # the source's, with the invariants it keeps folded in
    rows: Rows
    note: str
    breaks: Invariant | None = None  # a stress neighbour: the one invariant it breaks
    image: bytes | None = field(default=None, compare=False, repr=False)  # the SQLite file of these rows (`create_candidate`)


@dataclass(frozen=True)
class Neighbourhood:
    """A case's neighbours (plausible first, then stress) and the invariants they were built to keep."""

    neighbours: tuple[Built, ...]
    observed: Observed


def seeded(material: bytes, number: int) -> random.Random:
    """A Random seeded from sha256 of the inputs (never from hash(), which varies per process)."""
    digest = hashlib.sha256(material + b"/" + str(number).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def _engine_sql(sql: str, dialect: str, kind: str, schema: Schema) -> str | None:
    """The gold as the candidates' engine runs it: for a SQLite gold on DuckDB, translated as the
    judge translates it (`judge.translate`: SQLite's affinity, bare columns beside GROUP BY, LIKE's
    case), or the gold that the judge runs on every neighbour would fail on every candidate here,
    and the case would silently get none."""
    if dialect == kind:
        return sql
    try:
        if dialect == "sqlite":
            from pytest_nl2sql.engines.base import EngineError
            from pytest_nl2sql.judge.translate import translate

            columns = {t.name: [c.name for c in t.columns] for t in schema.tables}
            types = {t.name: {c.name: c.declared_type for c in t.columns} for t in schema.tables}
            try:
                return translate(sql, dialect, _Target(kind), schema=columns, types=types)
            except EngineError:
                return None
        return ";\n".join(sqlglot.transpile(sql, read=dialect, write=kind))
    except (SqlglotError, RecursionError, ValueError):
        return None


@dataclass(frozen=True)
class _Target:
    """What `translate` needs of the engine it writes for, when the schema is given: its dialect."""

    dialect: str


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


def _at_computed(connection: Any, rows: Rows, image: bytes | None, computed: list[tuple[tuple[str, str], str]],
                 builder: CandidateBuilder, repairer: Repairer, kind: str) -> tuple[Any, Rows, bytes | None]:
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
        connection, rows, image = create_candidate(builder.schema, repairer.repair(added), repairer)
    return connection, rows, image


def build_neighbours(source: Path, golds: Sequence[str], count: int, *, dialect: str, kind: str, seed: bytes,
                     learned: Callable[[Any, Schema], tuple[Invariant, ...]] = learn,
                     memo: dict[Any, Any] | None = None) -> Neighbourhood:
    """The chosen neighbours: at most `count` plausible ones (they keep every invariant the source
    shows), then at most `count` stress ones (each breaks one invariant the gold's columns have).
    None at all when the gold or schema cannot be handled. `learned(reader, schema)`: the source's
    structural invariants (a caller that generates for many golds of one database caches them);
    `memo`: what the source's reader read, kept for the next generation from the same content
    (SQLite: its schema, samples of small tables, parents looked up)."""
    if count <= 0 or not golds:
        return Neighbourhood((), Observed(()))
    errors = _source_errors(kind)
    try:
        reader = open_source(source, kind, memo)
    except errors as error:
        raise_if_interrupt(error)
        return Neighbourhood((), Observed(()))
    try:
        with budget.bounded_source(reader.connection, kind):
            return _build(reader, golds, count, dialect, kind, seed, learned, errors)
    except errors as error:
        budget.check()  # a source query the deadline interrupted: cut short, not "no neighbours"
        raise_if_interrupt(error)
        return Neighbourhood((), Observed(()))
    finally:
        reader.close()


def _build(reader: Any, golds: Sequence[str], count: int, dialect: str, kind: str, seed: bytes,
           learned: Callable[[Any, Schema], tuple[Invariant, ...]], errors: tuple[type[BaseException], ...]) -> Neighbourhood:
    with budget.phase("reading the schema"):
        declared = reader.schema()
        budget.check()
    if not declared.tables:
        return Neighbourhood((), Observed(()))
    with budget.phase("reading the gold"):
        facts = read_golds(golds, dialect, declared)
        first = parse_gold(golds[0], dialect)
        engine_golds = [_engine_sql(g, dialect, kind, declared) for g in golds]
        if facts is None or first is None or None in engine_golds:
            return Neighbourhood((), Observed(()))
        facts = respelled(reader, declared, facts)
        budget.check()
    with budget.phase("learning the invariants the database shows"):
        structural = learned(reader, declared)
        budget.check()
    with budget.phase("building candidate neighbours"):
        observed = observe(reader, declared, facts, structural)
        literals = gold_literals(facts)
        schema = observed.schema_with(declared)
        mutant_sql = mutants(first, kind)
        computed = [(ref, sql) for ref, sql in ((ref, _engine_sql(sql, dialect, kind, declared)) for ref, _, sql in facts.computed) if sql]
        order_matters = has_top_level_order_by(golds[0], dialect)
        scored: list[Scored] = []
        candidates: dict[int, Built] = {}
        for number in range(max(MIN_CANDIDATES, 2 * count + 2)):
            budget.check()
            flavour = FLAVOURS[number % len(FLAVOURS)]
            rng = seeded(seed, number)
            repairer = Repairer(schema, rng, Keeper(schema, observed, literals, rng).keep)
            try:
                builder = CandidateBuilder(schema, reader, facts, rng, flavour)
                settled = settle(repairer.repair(builder.build()), schema, observed, literals)
                connection, rows, image = create_candidate(schema, settled, repairer)
                refused = rows != settled
                if computed:
                    connection, rows, image = _at_computed(connection, rows, image, computed, builder, repairer, kind)
                    refused = True  # rows were added and repaired again: check them
            except errors as error:
                budget.check()  # the source's sample interrupted at the deadline: no bad candidate
                raise_if_interrupt(error)  # a Ctrl-C is no bad candidate: it stops the run
                continue
            try:
                if refused and violations(rows, schema, observed, literals):
                    continue  # the database refused rows, and what is left breaks an invariant
                found = score(connection, engine_golds, mutant_sql, kind, order_matters, run=run_query, schema=schema)  # type: ignore[arg-type]
                if found is None:
                    continue  # the gold must run on every neighbour we keep
                gold, killed = found
            finally:
                connection.close()
            budget.check()  # a candidate finished past the deadline may lack what was interrupted
            scored.append(Scored(number, len(gold.rows), killed))
            candidates[number] = Built(schema, rows, flavour.note, image=image)
        chosen = choose(scored, count)
        plausible = [candidates[s.index] for s in chosen]
        covered = frozenset(i for s in chosen for i in s.killed)
    with budget.phase("building stress neighbours"):
        stress = _stress(plausible, declared, observed, literals, facts, engine_golds, count, seed, kind,  # type: ignore[arg-type]
                         mutant_sql, order_matters, covered)
        budget.check()
    return Neighbourhood(tuple(plausible + stress), observed)


# The order in which invariants are broken, the false alarms they explain most often first.
STRESS_ORDER = (InvariantKind.ONCE, InvariantKind.UNIQUE, InvariantKind.PARTICIPATION, InvariantKind.INCLUSION,
                InvariantKind.NOT_NULL, InvariantKind.SPELLING, InvariantKind.CATEGORY)


STRESS_CANDIDATES = 8  # invariants tried per case; the `count` that tell the most mutants apart are kept


def _stress(plausible: list[Built], declared: Schema, observed: Observed, literals: dict[tuple[str, str], list[Any]], facts: GoldFacts,
            engine_golds: list[str], count: int, seed: bytes, kind: str, mutant_sql: list[str], order_matters: bool,
            covered: frozenset[int]) -> list[Built]:
    """Up to `count` stress neighbours, each a plausible one with one invariant of the gold's
    columns broken (and every other kept): of the invariants of the columns the gold compares with
    literals, then groups or joins by, then names, those whose breaking tells apart the most
    mutants the plausible neighbours did not (`covered`), then the first in that order."""
    if not plausible:
        return []
    hinted = {(h.column[0].lower(), h.column[1].lower()) for h in facts.hints}
    shaping = {(t.lower(), c.lower()) for t, c in facts.grouped} | {(t.lower(), c.lower()) for pair in facts.joins for t, c in pair}
    columns = {(t.lower(), c.lower()) for t, c in facts.mentioned} | shaping
    read = {t.lower() for t in facts.tables}

    def rank(invariant: Invariant) -> tuple[int, int] | None:
        mine = (invariant.table.lower(), invariant.column.lower())
        theirs = (invariant.other_table.lower(), invariant.other_column.lower())
        if invariant.kind in (InvariantKind.INCLUSION, InvariantKind.PARTICIPATION):
            if not ({invariant.table.lower(), invariant.other_table.lower()} <= read and (mine in columns or theirs in columns)):
                return None
        elif mine not in columns:
            return None
        place = 0 if mine in hinted else 1 if mine in shaping or theirs in shaping else 2
        return place, STRESS_ORDER.index(invariant.kind)

    ranked = sorted(((rank(i), n, i) for n, i in enumerate(observed.invariants) if i.kind in STRESS_ORDER), key=lambda t: (t[0] or (9, 9), t[1]))
    wanted = [i for r, _, i in ranked if r is not None][:STRESS_CANDIDATES]
    scored: list[Scored] = []
    made: dict[int, Built] = {}
    for number, invariant in enumerate(wanted):
        budget.check()
        rng = seeded(seed, 1000 + number)
        base = plausible[number % len(plausible)]
        rest = observed.without(invariant)
        schema = rest.schema_with(declared)  # every invariant folded in but the broken one
        broken = break_one(base.rows, invariant, base.schema, rng, literals, observed)
        if broken is None:
            continue
        repairer = Repairer(schema, rng, Keeper(schema, rest, literals, rng).keep)
        try:
            connection, rows, image = create_candidate(schema, settle(repairer.repair(broken), schema, rest, literals), repairer)
        except _source_errors(kind) as error:
            budget.check()
            raise_if_interrupt(error)
            continue
        try:
            if not violations(rows, base.schema, observed, literals, only=[invariant]) or violations(rows, schema, rest, literals):
                continue  # the break did not survive the repair, or another invariant broke with it
            found = score(connection, engine_golds, mutant_sql, kind, order_matters, skip=covered, run=run_query, schema=schema)
            if found is None:
                continue
            gold, killed = found
        finally:
            connection.close()
        scored.append(Scored(number, len(gold.rows), killed))  # on equal kills `choose` takes the first in rank order
        made[number] = Built(schema, rows, f"stress: {invariant.words()}", invariant, image)
    # a name the gold compares with a literal, repeated, comes first: 'Kyle' twice, two customers
    # called Gruber (first and last name both unique: a dropped conjunct shows only there)
    named = [s for s in scored if wanted[s.index].kind in (InvariantKind.ONCE, InvariantKind.UNIQUE)
             and (wanted[s.index].table.lower(), wanted[s.index].column.lower()) in hinted][:count]
    others = choose([s for s in scored if s not in named], count - len(named))
    return [made[s.index] for s in sorted(named + others, key=lambda s: s.index)]
