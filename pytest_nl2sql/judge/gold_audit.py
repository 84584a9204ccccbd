"""Suspect golds: what a case's own database says against its gold, found while the case is
judged. A finding is something for a person to read (JSON item `gold_audit`, the md and HTML
reports, `nl2sql review`), never a change of verdict: the gold stays the reference.

Kept rare on purpose (a flag on most cases would be noise), each kind needs evidence in the data:

- `literal_not_in_data`: a string literal the gold compares a column with (`col = 'x'`,
  `col IN ('x', …)`, `col LIKE 'x'` without wildcards, read with sqlglot) matches no value of that
  column on the case's database, but does once both are trimmed of spaces and case-folded
  (`'APG'` where the data holds `' APG'`, `'english'` where it holds `'English'`). The comparison
  is the engine's own (a MySQL collation that ignores case finds the value, and nothing is said).
- `empty_result`: the gold returns no row, or only NULLs, or only zeros, AND the reason is that
  something it looks for is not in the data at all: a literal it compares a column with (`=`,
  `IN`, `LIKE` without wildcards) matches no value of it, or a join it makes pairs no rows. Such a
  case tests nothing (a prediction that returns nothing passes). An empty answer whose literals
  are all in the data is a fact about the data and is not flagged ("hometowns shared by two
  teachers": none), nor is a count of 0 for rows that exist but fail a range (`age > 20`).
- `fragile_gold`: a fragile pass whose side is the gold alone (JSON item `neighbours.fragile_side`
  is `gold`), where what the neighbour shows is one a gold gets wrong (`fragile_finding`), named.
- `consensus` comes from `nl2sql audit-gold` over several models' reports (gate/audit_gold.py).

Cost: one bounded query per literal (`SELECT 1 … LIMIT 1`), a second only when the first found
nothing; join probes only when the result is empty; all within the case's time limit.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from pytest_nl2sql.engines.base import Engine, EngineError, Limits, QueryResult
from pytest_nl2sql.judge.equality import result_fingerprint
from pytest_nl2sql.judge.execute import Judgement, execute_once_more_if_lost
from pytest_nl2sql.judge.fragile_gold import is_the_gold_s_own
from pytest_nl2sql.neighbours.invariants import InvariantKind
from pytest_nl2sql.neighbours.literals import ColumnRef, parse_gold, read_golds
from pytest_nl2sql.neighbours.schema import OTHER, Column, Schema, Table
from pytest_nl2sql.vocab import FragileSide, GoldFinding, Verdict

if TYPE_CHECKING:
    from pytest_nl2sql.judge.on_neighbours import NeighbourCheck

MAX_PROBES = 32  # queries one case's audit may run (an IN list of hundreds is not probed value by value)
SHOWN_CHARS = 60  # of a literal or a value quoted in a finding
# What a stress neighbour breaks that, when the gold alone shows it, makes a finding: two entities
# sharing a name (merged by a GROUP BY, INTERSECT, EXCEPT or NOT IN on it), a NULL counted or sorted
# as a value, a parent without child dropped by an inner join
SUSPECT_BREAKS = frozenset({InvariantKind.UNIQUE, InvariantKind.NOT_NULL, InvariantKind.PARTICIPATION})


@dataclass(frozen=True)
class Finding:
    """One thing found against a gold: its kind and a sentence saying what, with the values."""

    kind: GoldFinding
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind.value, "detail": self.detail}


def audit_json(findings: Sequence[Finding]) -> dict[str, Any]:
    """The JSON item's `gold_audit` of an audited case (null stays for a case never audited)."""
    return {"suspect": bool(findings), "findings": [finding.to_json() for finding in findings]}


def audit_gold(golds: Sequence[str], dialect: str | None, engine: Engine, limits: Limits,
               results: Sequence[QueryResult | None]) -> tuple[Finding, ...]:
    """The `literal_not_in_data` and `empty_result` findings of a case's golds on its own
    database (`engine`). `results[i]`: gold `i`'s result there (None: too large to hold)."""
    golds = [g for g in golds if isinstance(g, str) and g.strip()]
    if not golds:
        return ()
    try:
        schema = _schema_of(engine)
    except EngineError:
        return ()
    prober = _Prober(engine, limits)
    findings: list[Finding] = []
    for index, gold in enumerate(golds):
        if parse_gold(gold, dialect or "") is None:
            continue
        facts = read_golds([gold], dialect or "", schema)
        if facts is None:
            continue
        which = f"gold {index + 1} of {len(golds)}: " if len(golds) > 1 else ""
        absent: list[str] = []
        for column, value, op in _compared_literals(facts.hints):
            if prober.exists(column, value, like=op == "like"):
                continue
            if op != "!=":  # (a value a row must not have, absent, keeps rows: it explains no emptiness)
                absent.append(f"no value of {_name(column)} {'is LIKE' if op == 'like' else 'equals'} {_shown(value)}")
            found = prober.folded(column, value) if isinstance(value, str) else None
            if found is not None:
                findings.append(Finding(GoldFinding.LITERAL_NOT_IN_DATA, which + (
                    f"the gold asks {_name(column)} {op.upper()} {_shown(value)}, but no value of it is {_shown(value)} on"
                    f" the case's database; {_shown(found)} is, {_how_it_differs(value, found)}")))
        result = results[index] if index < len(results) else None
        emptiness = _emptiness(result)
        if emptiness is None:
            continue
        if not absent:
            absent = [why for why in (prober.unpaired(a, b) for a, b in facts.joins if a != b) if why]
        if absent:
            findings.append(Finding(GoldFinding.EMPTY_RESULT, which + (
                f"the gold returns {emptiness} on its own database, which lacks what it looks for: {absent[0]}")))
    return tuple(dict.fromkeys(findings))


def fragile_finding(check: NeighbourCheck | None, golds: Sequence[str] = (), dialect: str | None = None,
                    engine: Engine | None = None) -> Finding | None:
    """`fragile_gold` when a fragile pass's side is the gold alone (`neighbours.fragile_side` is
    `gold`: `both` says as much against the prediction) and what its shown stress neighbour breaks
    is one a gold gets wrong (`SUSPECT_BREAKS`: it groups, intersects or excludes by a name, counts
    or sorts a NULL as a value, drops a parent without child), or its plausible neighbour's excuse is
    the gold's own SQL (`fragile_gold.is_the_gold_s_own`: a tie its LIMIT cuts, a bare column, a set
    operation merging names). Not when the name two rows share is one the gold compares with a
    literal (`golds` read on `engine`'s schema): every row so named is what the question names.
    Other fragile golds stay in the report's fragile list, no suspect: on the hand-read Spider
    sample they were answers to the question as asked more often than not (two spellings of a
    reference, an aggregate's NULL row over an empty table, rows a join repeats, two countries
    called Aruba)."""
    if check is None or not check.is_fragile or check.fragile_side is not FragileSide.GOLD or check.failure is None:
        return None
    failure = check.failure
    broken = getattr(failure.database.generated, "breaks", None)
    if broken is None:
        if not is_the_gold_s_own(failure.breaks):
            return None
    elif broken.kind not in SUSPECT_BREAKS or broken.together:
        return None  # (a pair of columns repeated is a repeated row, not two entities merged)
    elif broken.kind is InvariantKind.UNIQUE and _compared_with_a_literal(broken, golds, dialect, engine):
        return None
    what = failure.breaks or "an invariant of the case's database"
    return Finding(GoldFinding.FRAGILE_GOLD, f"on a neighbour database the gold alone shows what breaking it causes: {what}")


def _compared_with_a_literal(broken: Any, golds: Sequence[str], dialect: str | None, engine: Engine | None) -> bool:
    """Does a gold compare the broken invariant's column with a literal (`name = 'Aruba'`)?"""
    if engine is None or not golds:
        return False
    try:
        facts = read_golds([g for g in golds if isinstance(g, str)], dialect or "", _schema_of(engine))
    except EngineError:
        return False
    wanted = (broken.table.lower(), broken.column.lower())
    return facts is not None and any((h.column[0].lower(), h.column[1].lower()) == wanted
                                     for h in facts.hints if h.op in ("=", "in", "like"))


# --- what the gold compares ----------------------------------------------------------------------


def _compared_literals(hints: Sequence[Any]) -> list[tuple[ColumnRef, object, str]]:
    """(column, literal, op) for each value the gold asks a column to have or not have: `=`, `!=`,
    each value of an `IN` (as `=`), a `LIKE` pattern without wildcards (an equality in the engine's
    own LIKE rules: SQLite's ignores ASCII case)."""
    found: list[tuple[ColumnRef, object, str]] = []
    for hint in hints:
        op = hint.op
        if op in ("=", "!="):
            values: tuple[object, ...] = (hint.value,)
        elif op == "in" and isinstance(hint.value, tuple):
            values, op = hint.value, "="
        elif op == "like" and isinstance(hint.value, str) and not any(c in hint.value for c in "%_"):
            values = (hint.value,)
        else:
            continue
        found.extend((hint.column, v, op) for v in values if isinstance(v, (str, int, float)) and not isinstance(v, bool))
    return list(dict.fromkeys(found))


def _emptiness(result: QueryResult | None) -> str | None:
    """How a gold result says nothing ("no row", "only NULLs", "only zeros"), or None."""
    if result is None:
        return None
    if not result.rows:
        return "no row"
    values = [value for row in result.rows for value in row]
    if all(value is None for value in values):
        return "only NULLs"
    if all(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0) for value in values):
        return "only zeros"
    return None


def _schema_of(engine: Engine) -> Schema:
    """Table and column names as the database spells them (all the literal reader needs)."""
    tables = tuple(
        Table(name, tuple(Column(column, "", OTHER, "", False) for column in columns), (), (), (), "", True)
        for name, columns in engine.schema_columns().items()
    )
    return Schema(engine.dialect or "", tables, ())


# --- the probes ------------------------------------------------------------------------------------


class _Prober:
    """Bounded queries on the case's database, built with sqlglot in its dialect: at most
    `MAX_PROBES` per case, all within the case's time limit; a probe that fails or is not run
    finds nothing to say (no finding rests on it)."""

    def __init__(self, engine: Engine, limits: Limits) -> None:
        self.engine, self.limits = engine, limits
        self.dialect = engine.dialect or None
        self.deadline = time.monotonic() + limits.timeout
        self.left = MAX_PROBES

    def exists(self, column: ColumnRef, value: object, like: bool = False) -> bool:
        """A value of `column` equals (`like`: is LIKE) `value` in the engine's own comparison
        (True when it cannot be told)."""
        target = _column(column)
        test = exp.Like(this=target, expression=_literal(value)) if like else exp.EQ(this=target, expression=_literal(value))
        rows = self._rows(exp.select(exp.Literal.number(1)).from_(_table(column[0])).where(test).limit(1))
        return rows is None or bool(rows)

    def folded(self, column: ColumnRef, value: str) -> Any:
        """A value of `column` equal to `value` once both are trimmed and case-folded, or None."""
        target = _column(column)
        test = exp.EQ(this=_fold(target), expression=_fold(_literal(value)))
        rows = self._rows(exp.select(target).from_(_table(column[0])).where(test).limit(1))
        return rows[0][0] if rows else None

    def unpaired(self, left: ColumnRef, right: ColumnRef) -> str | None:
        """Why the join `left = right` pairs no rows (and whether it would trimmed and
        case-folded), or None when it pairs some (or cannot be told)."""
        if left[0].lower() == right[0].lower():
            return None  # within one table: a self-join's emptiness is the query's, not the data's
        a, b = _column(left, "l"), _column(right, "r")
        pairs = exp.select(exp.Literal.number(1)).from_(_table(left[0], "l")).join(_table(right[0], "r"), on=exp.EQ(this=a, expression=b))
        rows = self._rows(pairs.limit(1))
        if rows is None or rows:
            return None
        why = f"no value of {_name(left)} equals a value of {_name(right)}"
        folded = exp.select(a, b).from_(_table(left[0], "l")).join(
            _table(right[0], "r"), on=exp.EQ(this=_fold(a), expression=_fold(b))).limit(1)
        found = self._rows(folded)
        if found:
            why += f" ({_shown(found[0][0])} and {_shown(found[0][1])} do {_how_it_differs(found[0][0], found[0][1])})"
        return why

    def _rows(self, query: exp.Expression) -> list[tuple[Any, ...]] | None:
        remaining = self.deadline - time.monotonic()
        if self.left <= 0 or remaining <= 0:
            return None
        self.left -= 1
        limits = dataclasses.replace(self.limits, timeout=min(self.limits.timeout, remaining), max_rows=10)
        try:
            return list(execute_once_more_if_lost(self.engine, query.sql(dialect=self.dialect), limits, trusted=True).rows)
        except (EngineError, SqlglotError):  # (a name no dialect of sqlglot's can write)
            return None


def _table(name: str, alias: str | None = None) -> exp.Table:
    table = exp.Table(this=exp.to_identifier(name, quoted=True))
    return table.as_(alias) if alias else table  # type: ignore[return-value]


def _column(ref: ColumnRef, table: str | None = None) -> exp.Column:
    return exp.Column(this=exp.to_identifier(ref[1], quoted=True),
                      table=exp.to_identifier(table or ref[0], quoted=True))


def _literal(value: object) -> exp.Expression:
    return exp.Literal.string(value) if isinstance(value, str) else exp.Literal.number(value)


def _fold(node: exp.Expression) -> exp.Expression:
    """lower(trim(CAST(node AS TEXT))): the value with spaces trimmed and case folded."""
    return exp.Lower(this=exp.Trim(this=exp.Cast(this=node, to=exp.DataType.build("text"))))


# --- the words -------------------------------------------------------------------------------------


def _name(ref: ColumnRef) -> str:
    return f"{ref[0]}.{ref[1]}"


def _shown(value: object) -> str:
    """A value as a finding quotes it: text in quotes with its spaces visible, cut when long."""
    if isinstance(value, str):
        shown = repr(value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "…")
        return shown
    return repr(value)[:SHOWN_CHARS]


def _how_it_differs(wanted: object, found: object) -> str:
    wanted, found = str(wanted), str(found)
    if wanted.strip() == found.strip():
        return "once spaces are trimmed"
    if wanted.lower() == found.lower():
        return "ignoring case"
    return "once spaces are trimmed and case ignored"


def failed_fingerprint(judgement: Judgement, order_matters: bool) -> str | None:
    """The fingerprint of a failing prediction's result (what `nl2sql audit-gold` compares across
    models), when the run keeps none (it does for baselines): a mismatch whose result is held."""
    if judgement.fingerprint is not None or judgement.verdict is not Verdict.MISMATCH or judgement.result is None or judgement.streamed:
        return judgement.fingerprint
    return result_fingerprint(judgement.result.rows, order_matters)
