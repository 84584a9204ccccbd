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

Cost: a gold with a result and no quote of any kind (no text literal) is not even parsed; for
the others, one query asks after all of a gold's literals (`SELECT EXISTS (…), EXISTS (…)`), a
second looks up trimmed and case-folded those not found; join probes only when the result is empty;
at most `MAX_PROBES` probes a case, all within the case's time limit.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import weakref
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
from pytest_nl2sql.neighbours.literals import ColumnRef, GoldFacts, read_golds
from pytest_nl2sql.neighbours.schema import OTHER, Column, Schema, Table
from pytest_nl2sql.vocab import FragileSide, GoldFinding, Verdict

if TYPE_CHECKING:
    from pytest_nl2sql.judge.on_neighbours import NeighbourCheck

MAX_PROBES = 32  # probes (literals looked for or up, joins) one case's audit may make (an IN list of hundreds is not probed value by value)
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
    emptiness = [_emptiness(results[index] if index < len(results) else None) for index in range(len(golds))]
    # A gold with a result and no text literal has nothing to find (only a text literal is looked
    # up folded); the ones after the last gold that may have are not read at all (the golds before
    # it are: their probes spend the case's budget first, as they always did).
    read = max((index + 1 for index, gold in enumerate(golds) if emptiness[index] is not None or _may_name_text(gold)),
               default=0)
    if not read:
        return ()
    try:
        schema = _schema_of(engine)
    except EngineError:
        return ()
    prober = _Prober(engine, limits)
    findings: list[Finding] = []
    for index, gold in enumerate(golds[:read]):
        facts = _facts((gold,), dialect or "", schema)
        if facts is None:
            continue
        which = f"gold {index + 1} of {len(golds)}: " if len(golds) > 1 else ""
        literals = _compared_literals(facts.hints)
        # Only a text literal can be found folded, and an absent one of any kind matters only to
        # an empty result: the others are not run, but spend their turn as they always did.
        wanted = [emptiness[index] is not None or isinstance(value, str) for _, value, _ in literals]
        absent: list[str] = []
        for (column, value, op), (present, found) in zip(literals, prober.literals(literals, wanted)):
            if present:
                continue
            if op != "!=":  # (a value a row must not have, absent, keeps rows: it explains no emptiness)
                absent.append(f"no value of {_name(column)} {'is LIKE' if op == 'like' else 'equals'} {_shown(value)}")
            if found is not None:
                findings.append(Finding(GoldFinding.LITERAL_NOT_IN_DATA, which + (
                    f"the gold asks {_name(column)} {op.upper()} {_shown(value)}, but no value of it is {_shown(value)} on"
                    f" the case's database; {_shown(found)} is, {_how_it_differs(value, found)}")))
        if emptiness[index] is None:
            continue
        if not absent:
            absent = [why for why in (prober.unpaired(a, b) for a, b in facts.joins if a != b) if why]
        if absent:
            findings.append(Finding(GoldFinding.EMPTY_RESULT, which + (
                f"the gold returns {emptiness[index]} on its own database, which lacks what it looks for: {absent[0]}")))
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
        facts = _facts(tuple(g for g in golds if isinstance(g, str)), dialect or "", _schema_of(engine))
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


# Each engine's schema as the literal reader needs it, read once for the engine's lifetime (a
# database under evaluation keeps its tables, as judge/translate.py assumes too).
_SCHEMAS: weakref.WeakKeyDictionary[Any, Schema] = weakref.WeakKeyDictionary()


def _schema_of(engine: Engine) -> Schema:
    """Table and column names as the database spells them (all the literal reader needs)."""
    try:
        known = _SCHEMAS.get(engine)
    except TypeError:  # an engine that cannot be weakly referenced or hashed
        known = None
    if known is not None:
        return known
    tables = tuple(
        Table(name, tuple(Column(column, "", OTHER, "", False) for column in columns), (), (), (), "", True)
        for name, columns in engine.schema_columns().items()
    )
    schema = Schema(engine.dialect or "", tables, ())
    try:
        _SCHEMAS[engine] = schema
    except TypeError:
        pass
    return schema


@functools.lru_cache(maxsize=4096)  # a pure function of its arguments: a gold is audited once per database and run
def _facts(golds: tuple[str, ...], dialect: str, schema: Schema) -> GoldFacts | None:
    return read_golds(golds, dialect, schema)


def _may_name_text(gold: str) -> bool:
    """Could the gold hold a text literal (or a double-quoted name SQLite reads as one)? Not
    without a quote of some kind: '…', "…", `…`, […], $$…$$ (the cheap test that spares parsing
    most golds)."""
    return any(quote in gold for quote in "'\"`[$")


# --- the probes ------------------------------------------------------------------------------------


# Dialects that read `SELECT EXISTS (...), (SELECT ... LIMIT 1)` without a FROM: a gold's probes
# run there as one query; elsewhere (SQL Server, Oracle...) as one query each
_BATCHED = frozenset({"sqlite", "postgres", "mysql", "duckdb"})


@dataclass(frozen=True)
class _Probe:
    """One question to the database, as a query of its own (`alone`, its answer read from its
    rows) or as one column of a query asking several (`inline`, its answer that column's value)."""

    alone: exp.Select
    inline: exp.Expression
    folded: bool  # the answer is a value found once trimmed and case-folded; else whether a row matches

    def from_rows(self, rows: list[tuple[Any, ...]]) -> Any:
        return (rows[0][0] if rows else None) if self.folded else bool(rows)

    def from_value(self, value: Any) -> Any:
        return value if self.folded else bool(value)


class _Prober:
    """Bounded queries on the case's database, built with sqlglot in its dialect: at most
    `MAX_PROBES` probes per case, all within the case's time limit; a probe that fails or is not
    run finds nothing to say (no finding rests on it)."""

    def __init__(self, engine: Engine, limits: Limits) -> None:
        self.engine, self.limits = engine, limits
        self.dialect = engine.dialect or None
        self.deadline = time.monotonic() + limits.timeout
        self.left = MAX_PROBES

    def literals(self, literals: Sequence[tuple[ColumnRef, object, str]], wanted: Sequence[bool]) -> list[tuple[bool, Any]]:
        """For each (column, value, op) of `_compared_literals`: whether a value of the column
        equals (op `like`: is LIKE) the value in the engine's own comparison (True when it cannot
        be told, or is not `wanted`), and when none does and the value is text, a value of the
        column equal to it once both are trimmed and case-folded (else None). In order, each
        literal spends one probe of the budget and each folded look-up one more, as when each ran
        alone; they run as two queries at most: the literals, then the look-ups."""
        ahead = [i for i in range(min(len(literals), self.left)) if wanted[i]]  # (no more can have a turn)
        known = dict(zip(ahead, self._together([_exists(*literals[i]) for i in ahead]) or ()))
        present: list[bool] = []
        fold: list[int] = []
        for i, (_, value, _) in enumerate(literals):
            if not self._turn():
                present.append(True)
                continue
            answer = (known[i] if i in known else self._alone(_exists(*literals[i]))) if wanted[i] else None
            present.append(answer is not False)  # (None: not asked, or the probe failed: nothing to say)
            if not present[-1] and isinstance(value, str) and self._turn():
                fold.append(i)
        probes = [_folded(*literals[i][:2]) for i in fold]
        found = dict(zip(fold, self._together(probes) or [self._alone(probe) for probe in probes]))
        return [(is_there, found.get(i)) for i, is_there in enumerate(present)]

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

    def _turn(self) -> bool:
        """Spend one probe of the budget; False when none is left, or no time."""
        if self.left <= 0 or self.deadline - time.monotonic() <= 0:
            return False
        self.left -= 1
        return True

    def _rows(self, query: exp.Expression) -> list[tuple[Any, ...]] | None:
        return self._run(query) if self._turn() else None

    def _together(self, probes: Sequence[_Probe]) -> list[Any] | None:
        """The probes' answers from one query, the budget already spent; None when the dialect
        cannot ask several at once, or the query failed (one probe's error must not silence the
        others: each then runs alone)."""
        if len(probes) < 2 or self.dialect not in _BATCHED:
            return None
        row = self._run(exp.select(*(probe.inline for probe in probes), copy=False))
        return [probe.from_value(value) for probe, value in zip(probes, row[0])] if row else None

    def _alone(self, probe: _Probe) -> Any:
        """The probe's answer from a query of its own (None: it failed), the budget already spent."""
        rows = self._run(probe.alone)
        return None if rows is None else probe.from_rows(rows)

    def _run(self, query: exp.Expression) -> list[tuple[Any, ...]] | None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return None
        limits = dataclasses.replace(self.limits, timeout=min(self.limits.timeout, remaining), max_rows=10)
        try:
            return list(execute_once_more_if_lost(self.engine, query.sql(dialect=self.dialect), limits, trusted=True).rows)
        except (EngineError, SqlglotError):  # (a name no dialect of sqlglot's can write)
            return None


def _exists(column: ColumnRef, value: object, op: str) -> _Probe:
    """Does a value of `column` equal (op `like`: is LIKE) `value`?"""
    target = _column(column)
    test = exp.Like(this=target, expression=_literal(value)) if op == "like" else exp.EQ(this=target, expression=_literal(value))
    rows = exp.select(exp.Literal.number(1), copy=False).from_(_table(column[0]), copy=False).where(test, copy=False)
    return _Probe(rows.copy().limit(exp.Literal.number(1), copy=False), exp.Exists(this=rows), folded=False)


def _folded(column: ColumnRef, value: object) -> _Probe:
    """A value of `column` equal to `value` once both are trimmed and case-folded."""
    target = _column(column)
    test = exp.EQ(this=_fold(target), expression=_fold(_literal(value)))
    first = exp.select(target.copy(), copy=False).from_(_table(column[0]), copy=False).where(test, copy=False).limit(
        exp.Literal.number(1), copy=False)
    return _Probe(first, exp.Subquery(this=first.copy()), folded=True)


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
