"""SQL written for one database, run on another: sqlglot's transpiler, plus what SQLite lets pass.

Spider's gold SQL, and much model output, is written for SQLite and leans on its leniencies.
sqlglot translates the syntax; what it cannot know without the schema is fixed here, from the
AST, `engine.schema_columns()` and, where the engine gives them, its column types
(`engine.schema_types()`), when the source dialect is SQLite and the engine is not. Each fix is
a stage (`Fixer.stages`); a stage whose analysis fails on an unusual tree is left out, the others
still apply.

- a double-quoted name that resolves to no column, select alias or table in scope is a string
  (SQLite reads `WHERE name = "Republic"` so; every other engine looks for a column `Republic`);
- table and column names are spelled as the schema spells them when they match ignoring case
  (MariaDB compares table names exactly on Linux; PostgreSQL folds unquoted names to lower case,
  so a mixed-case name is quoted), column qualifiers as their table alias is declared (MySQL
  compares aliases exactly), the columns of HAVING too (sqlglot's scopes leave them out), and a
  derived table's outputs as it declares them;
- comparison affinity, as SQLite applies it (from the engine's column types): a text column
  compared with a number literal compares as text (`year = 2014` is `year = '2014'`, and
  `year > 2000` compares strings, as in SQLite); a numeric column compared with a numeric string
  compares as numbers (`age = '20'` is `age = 20`); `IN (...)` lists and BETWEEN bounds alike. On
  engines that refuse to mix text and numbers (PostgreSQL, DuckDB, ...), a text column compared
  with a numeric column (or `IN` a subquery of one) compares its numeric value, a text column
  compared with an expression (`age < (SELECT avg(age) ...)`) compares the expression as text,
  and a text column under AVG/SUM or arithmetic is read as SQLite reads it: its numeric prefix,
  0 for text that has none (`'1975-10-28'` is 1975). MySQL converts text to numbers itself;
- `LIKE` ignores the case of ASCII letters, as in SQLite: `ILIKE` (MySQL: `LOWER(a) LIKE
  LOWER(b)`, since a copied column's collation is binary); a number under LIKE is its text;
- bare columns of an aggregate query take SQLite's values: with exactly one min() or max()
  aggregate in the query, the values on the row of that minimum or maximum (`ARG_MAX_NULL` on
  DuckDB, `(ARRAY_AGG(c ORDER BY k DESC NULLS LAST))[1]` on PostgreSQL, the first of a
  GROUP_CONCAT in that order on MySQL/MariaDB); otherwise, on engines that refuse a column
  outside GROUP BY (PostgreSQL, DuckDB and the like), a column that an inner join or WHERE
  equates with a grouped column is added to the GROUP BY (the groups stay the same), and any
  other takes one value of its group: `ANY_VALUE`, or before PostgreSQL 16, which has none, the
  group's first, `(ARRAY_AGG(c))[1]` (SQLite takes the group's first row too; so do MySQL and
  MariaDB, which are left as they are);
- MySQL's AVG of integers is a decimal of four more digits: AVG of the values as doubles, as in
  SQLite;
- a scalar subquery used as a value gets `LIMIT 1` (SQLite takes its first row, every other
  engine refuses several);
- a derived table without an alias gets one (`derived_1`);
- on MySQL/MariaDB, a LIMIT inside `IN (subquery)` (or ANY/ALL) is moved into a derived table,
  which MySQL accepts: `x IN (SELECT * FROM (SELECT ... LIMIT 1) AS derived_1)`.

Left as they are: a numeric column compared with a string that is no number (`age = 'abc'`,
false in SQLite, an error on PostgreSQL), `/` between integers (SQLite truncates, DuckDB and
MySQL do not), and ties: which of several tied rows comes first (under ORDER BY ... LIMIT, in a
scalar subquery, beside min/max) is up to each engine's scan order.
"""

from __future__ import annotations

import functools
import math
import re
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from pytest_nl2sql.engines.base import Engine, EngineError, QueryError

# Engines that accept a column outside GROUP BY the way SQLite does (or detect functional
# dependence themselves): no GROUP BY rewriting for them.
_LENIENT_GROUP_BY = frozenset({"sqlite", "mysql", "doris", "starrocks", "singlestore"})
# Engines that compare text with numbers by converting one to the other themselves (MySQL turns
# the text into a number): only the literal side of SQLite's affinity is translated for them.
_MIXING_ENGINES = frozenset({"mysql", "doris", "starrocks", "singlestore"})
# Engines with ANY_VALUE (PostgreSQL from 16, `Target.any_value`) and with ARG_MAX/ARG_MIN.
_ANY_VALUE = frozenset({"duckdb", "snowflake", "bigquery", "databricks", "spark", "trino", "presto", "athena", "redshift"})
_ARG_MAX = frozenset({"snowflake", "bigquery", "databricks", "spark", "trino", "presto", "athena", "clickhouse"})

TEXT, NUMERIC = "text", "numeric"  # SQLite's affinities that matter here (None: no affinity)


@dataclass(frozen=True)
class Target:
    """The engine a query is translated for: its sqlglot dialect and, where known, the server's
    version number (PostgreSQL's `server_version_num`, 150020 for 15.2)."""

    dialect: str
    version: int | None = None

    @property
    def strict_group_by(self) -> bool:
        return self.dialect not in _LENIENT_GROUP_BY

    @property
    def mixes_text_and_numbers(self) -> bool:
        return self.dialect in _MIXING_ENGINES

    @property
    def any_value(self) -> bool:
        if self.dialect == "postgres":
            return self.version is not None and self.version >= 160000
        return self.dialect in _ANY_VALUE


def translate(
    sql: str,
    read: str | None,
    engine: Engine,
    *,
    schema: Mapping[str, Sequence[str]] | None = None,
    types: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """`sql`, written in the sqlglot dialect `read`, as the engine's dialect should run it.

    Identity (no parse) when `read` is empty or the engine's dialect. From SQLite to another
    engine, SQLite's leniencies are fixed with the schema (`schema`, else
    `engine.schema_columns()`) and the column types (`types`, {table: {column: type}}, else
    `engine.schema_types()` where the engine has it; see the module docstring). Raises
    `QueryError` when sqlglot cannot read or write the query.
    """
    write = engine.dialect
    if not read or read == write:
        return sql
    if read == "sqlite" and write != "sqlite":
        if schema is None and types is None:
            catalogue, target = _described(engine)
        else:
            tables = schema if schema is not None else (_schema_of(engine) or {})
            catalogue = Catalogue.of(tables, types if types is not None else _types_of(engine))
            target = Target(write, _version_of(engine))
        return _translated(sql, read, catalogue, target)
    return _translated(sql, read, None, Target(write))


@functools.lru_cache(maxsize=4096)  # a pure function of its arguments: a case's two queries are
def _translated(sql: str, read: str, catalogue: Catalogue | None, target: Target) -> str:  # judged on each neighbour
    """`translate` once the engine is described (`catalogue`: fix SQLite's leniencies)."""
    try:
        expressions = sqlglot.parse(sql, read=read)
        if catalogue is not None:
            expressions = [_fixed(e, catalogue, target) if e is not None else None for e in expressions]
        writer = Dialect.get_or_raise(target.dialect)
        return ";\n".join(writer.generate(e, copy=False) if e is not None else "" for e in expressions)
    except (SqlglotError, RecursionError) as e:  # a deeply nested query exhausts the parser's stack
        raise QueryError(f"cannot translate the query from {read} to {target.dialect}: {e}") from e


# What translating for an engine needs to know of it, read once per engine (PostgreSQL, MySQL and
# SQLite engines read their schema once too; a database under evaluation keeps its tables).
_DESCRIBED: weakref.WeakKeyDictionary[Any, tuple[Catalogue, Target]] = weakref.WeakKeyDictionary()


def _described(engine: Engine) -> tuple[Catalogue, Target]:
    """The engine's schema, column types and version as a `Catalogue` and `Target`, kept for the
    engine's lifetime; an engine whose schema cannot be read is asked again next time."""
    try:
        known = _DESCRIBED.get(engine)
    except TypeError:  # an engine that cannot be weakly referenced or hashed
        known = None
    if known is not None:
        return known
    tables = _schema_of(engine)
    described = Catalogue.of(tables or {}, _types_of(engine)), Target(engine.dialect, _version_of(engine))
    if tables is not None:
        try:
            _DESCRIBED[engine] = described
        except TypeError:
            pass
    return described


def _schema_of(engine: Engine) -> Mapping[str, Sequence[str]] | None:
    """The engine's {table: [column]}; None when it cannot be read (the query then says why)."""
    try:
        return engine.schema_columns()
    except EngineError:
        return None


def _types_of(engine: Engine) -> Mapping[str, Mapping[str, str]]:
    """The engine's {table: {column: type}}; none when the engine cannot say (affinity is then
    left to the engine)."""
    read = getattr(engine, "schema_types", None)
    if read is None:
        return {}
    try:
        return read()
    except EngineError:
        return {}


def _version_of(engine: Engine) -> int | None:
    read = getattr(engine, "server_version", None)
    if read is None:
        return None
    try:
        return int(read())
    except (EngineError, TypeError, ValueError):
        return None


_ANALYSIS_ERRORS = (SqlglotError, RecursionError, KeyError, ValueError, AttributeError, IndexError, TypeError, AssertionError)


def _fixed(expression: exp.Expression, catalogue: Catalogue, target: Target) -> exp.Expression:
    """The expression with SQLite's leniencies fixed, stage by stage; a stage whose analysis fails
    (an unusual tree sqlglot cannot scope) is left out, and the others run again on a fresh copy."""
    stages = Fixer(catalogue, target).stages()
    skipped: set[int] = set()
    while True:
        candidate = expression.copy()  # one copy when every stage works (copying is what costs)
        failed = None
        for number, stage in enumerate(stages):
            if number in skipped:
                continue
            try:
                stage(candidate)
            except _ANALYSIS_ERRORS:
                failed = number
                break
        if failed is None:
            return candidate
        skipped.add(failed)


def type_affinity(name: str | None) -> str | None:
    """SQLite's affinity for a column of an engine's type: TEXT for character types, NUMERIC for
    numbers; None for the rest (dates, booleans, binary, ...: left to the engine)."""
    if not name:
        return None
    lower = name.lower()
    if any(word in lower for word in ("char", "text", "clob", "string")):
        return TEXT
    if "interval" in lower or "point" in lower:
        return None
    if any(word in lower for word in ("int", "double", "float", "real", "numeric", "decimal", "number", "serial")):
        return NUMERIC
    return None


@dataclass(frozen=True, eq=False)
class Catalogue:
    """The schema, looked up ignoring case: table -> (exact name, {column lower: exact column}),
    and table -> {column lower: affinity} where the engine gave the types. Equal catalogues (by
    their content) translate a query alike: translations are remembered by catalogue."""

    tables: Mapping[str, tuple[str, Mapping[str, str]]]
    types: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)

    @functools.cached_property
    def _key(self) -> tuple[Any, ...]:
        return (tuple((t, name, tuple(columns.items())) for t, (name, columns) in self.tables.items()),
                tuple((t, tuple(kinds.items())) for t, kinds in self.types.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Catalogue) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @classmethod
    def of(cls, schema: Mapping[str, Sequence[str]], types: Mapping[str, Mapping[str, str]] | None = None) -> Catalogue:
        tables: dict[str, tuple[str, Mapping[str, str]]] = {}
        for table, columns in schema.items():
            tables.setdefault(table.lower(), (table, {c.lower(): c for c in columns}))
        kinds: dict[str, dict[str, str | None]] = {}
        for table, columns in (types or {}).items():
            found = kinds.setdefault(table.lower(), {})
            for column, kind in columns.items():
                found.setdefault(column.lower(), type_affinity(kind))
        return cls(tables, kinds)


@dataclass(frozen=True)
class Source:
    """One table or derived table in a scope: how it is named there, and its columns if known."""

    alias: exp.Identifier | None  # the identifier a qualifier must spell (alias or table name)
    columns: Mapping[str, str] | None  # lower -> exact; None when unknown (no schema, a star)
    table: str | None = None  # the exact schema table, for a base table
    types: Mapping[str, str | None] | None = None  # lower column -> affinity, where known
    declared: Mapping[str, exp.Identifier] | None = None  # a derived table's outputs: the names it declares


class Fixer:
    """Rewrites one parsed SQLite statement in place for the engine `target`, in stages."""

    def __init__(self, catalogue: Catalogue, target: Target) -> None:
        self.catalogue = catalogue
        self.target = target
        self.dialect = Dialect.get_or_raise(target.dialect)
        self.strict_group_by = target.strict_group_by

    def stages(self) -> list[Callable[[exp.Expression], None]]:
        found: list[Callable[[exp.Expression], None]] = [self.fix_names]
        if self.catalogue.types:
            found.append(self.fix_affinity)
        found += [self.fix_like, self.fix_group_by, self.fix_scalar_subqueries, self.fix_derived_aliases]
        if self.target.dialect in _MIXING_ENGINES:
            found += [self.fix_limit_in_subqueries, self.fix_averages]
        return found

    def fix(self, expression: exp.Expression) -> None:
        """Every stage, in place (a failing stage raises)."""
        for stage in self.stages():
            stage(expression)

    # -- scopes -------------------------------------------------------------------------------

    def _analyse(self, expression: exp.Expression) -> tuple[list[Scope], dict[int, dict[str, Source]]]:
        scopes = list(traverse_scope(expression))
        sources: dict[int, dict[str, Source]] = {}
        for scope in scopes:  # inner scopes first: a derived table's types come from its own scope
            sources[id(scope)] = self._sources(scope, sources)
        return scopes, sources

    # -- names --------------------------------------------------------------------------------

    def fix_names(self, expression: exp.Expression) -> None:
        scopes, sources = self._analyse(expression)
        for scope in scopes:
            self._fix_columns(scope, sources)
            self._fix_output_references(scope)

    def _sources(self, scope: Scope, known: Mapping[int, dict[str, Source]]) -> dict[str, Source]:
        """The scope's sources by lower-case name; base tables respelled as the schema spells them."""
        found: dict[str, Source] = {}
        for name, source in scope.sources.items():
            if isinstance(source, exp.Table):
                entry = self.catalogue.tables.get(source.name.lower())
                if entry is not None and not source.args.get("db"):
                    self._respell(source.this, entry[0])
                alias = source.args["alias"].this if source.args.get("alias") else source.this
                found[name.lower()] = Source(
                    alias if isinstance(alias, exp.Identifier) else None,
                    entry[1] if entry else None,
                    entry[0] if entry else None,
                    self.catalogue.types.get(source.name.lower()) if not source.args.get("db") else None,
                )
            elif isinstance(source, Scope):
                names = source.expression.named_selects if isinstance(source.expression, exp.Query) else []
                known_columns = None if "*" in names or not names else {n.lower(): n for n in names}
                alias_node = _alias_of(scope, name)
                found[name.lower()] = Source(alias_node, known_columns, None, self._derived_types(source, known),
                                             _declared_outputs(source.expression))
        return found

    def _derived_types(self, scope: Scope, known: Mapping[int, dict[str, Source]]) -> dict[str, str | None] | None:
        """The affinity of each output of a derived table whose output is a column, as SQLite has it."""
        select = scope.expression
        if not isinstance(select, exp.Select) or id(scope) not in known:
            return None
        types: dict[str, str | None] = {}
        for projection in select.expressions:
            name = projection.alias_or_name
            if name and name != "*":
                types.setdefault(name.lower(), self._column_affinity(projection.unalias(), scope, known))
        return types

    def _fix_columns(self, scope: Scope, sources: Mapping[int, dict[str, Source]]) -> None:
        chain = list(_chain(scope))  # this scope, then the scopes it is nested in
        aliases = _select_aliases(scope.expression)
        all_known = all(s.columns is not None for c in chain for s in sources[id(c)].values())
        visible = {
            column for c in chain for s in sources[id(c)].values() for column in (s.columns or {})
        } | {name for c in chain for name in sources[id(c)]}
        for column in _own_columns(scope, having=True):
            if isinstance(column.this, exp.Star):
                continue
            name = column.name.lower()
            if column.table:
                for c in chain:
                    source = sources[id(c)].get(column.table.lower())
                    if source is not None:
                        self._fix_qualified(column, source)
                        break
                continue
            owner = next(
                (s for c in chain for s in _owners(sources[id(c)], name)), None
            )
            if owner is not None:
                self._spell(column.this, owner, name)
            elif (
                column.this.quoted
                and all_known
                and name not in visible
                and name not in aliases
            ):
                column.replace(exp.Literal.string(column.name))

    def _fix_output_references(self, scope: Scope) -> None:
        """`ORDER BY age` after `SELECT age`: sqlglot takes it for the output column, not a column of
        a table, so `_fix_columns` never sees it; spell it as the output it names is now spelled
        (PostgreSQL would look for `age` where the output is `"Age"`)."""
        select = scope.expression
        if not isinstance(select, exp.Select) or not select.args.get("order"):
            return
        outputs: dict[str, exp.Identifier] = {}
        for projection in select.expressions:
            name = projection.args["alias"].this if isinstance(projection, exp.Alias) else projection.this
            if isinstance(projection, (exp.Alias, exp.Column)) and isinstance(name, exp.Identifier):
                outputs.setdefault(name.name.lower(), name)
        own = {id(column) for column in _own_columns(scope)}
        for column in select.args["order"].find_all(exp.Column):
            spelled = outputs.get(column.name.lower())
            if column.table or id(column) in own or spelled is None or column.this is spelled:
                continue
            column.this.set("this", spelled.name)
            column.this.set("quoted", spelled.quoted)

    def _fix_qualified(self, column: exp.Column, source: Source) -> None:
        if source.alias is not None:
            qualifier = column.args["table"]
            qualifier.set("this", source.alias.this)
            qualifier.set("quoted", source.alias.quoted)
        if source.columns is not None and column.name.lower() in source.columns:
            self._spell(column.this, source, column.name.lower())

    def _spell(self, identifier: exp.Identifier, source: Source, name: str) -> None:
        """A reference to a column of a source: a table's as the schema spells it, a derived
        table's as it declares it (an unquoted alias stays unquoted: PostgreSQL folds both)."""
        declared = (source.declared or {}).get(name)
        if declared is not None:
            identifier.set("this", declared.name)
            identifier.set("quoted", declared.quoted)
        elif source.columns is not None and name in source.columns:
            self._respell(identifier, source.columns[name])

    def _respell(self, identifier: exp.Identifier, exact: str) -> None:
        """Spell a schema name exactly; quote it where the engine would fold it otherwise."""
        identifier.set("this", exact)
        folds = self.dialect.NORMALIZATION_STRATEGY in (
            NormalizationStrategy.LOWERCASE,
            NormalizationStrategy.UPPERCASE,
        )
        if folds and self.dialect.case_sensitive(exact):
            identifier.set("quoted", True)

    # -- comparison affinity ------------------------------------------------------------------

    def fix_affinity(self, expression: exp.Expression) -> None:
        scopes, sources = self._analyse(expression)
        by_query = {id(scope.expression): scope for scope in scopes}

        def affinity(node: exp.Expression, scope: Scope | None) -> str | None:
            return self._affinity(node, scope, sources, by_query) if scope is not None else None

        mixing = self.target.mixes_text_and_numbers
        kinds = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ, exp.In, exp.Between,
                 exp.Avg, exp.Sum, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg)
        # leaves first: a node is rewritten after everything under it, so a subtree copied into
        # a wrapper (a subquery cast to text) holds its rewritten comparisons already
        for node in reversed(list(expression.find_all(*kinds, bfs=False))):
            scope = by_query.get(id(_nearest_query(node)))
            if scope is None:
                continue
            if isinstance(node, exp.In):
                self._fix_in(node, scope, affinity, mixing, by_query)
            elif isinstance(node, exp.Between):
                left = affinity(node.this, scope)
                for bound in ("low", "high"):
                    if node.args.get(bound) is not None:
                        _literal_as(node.args[bound], left)
            elif isinstance(node, (exp.Avg, exp.Sum, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg)):
                if mixing:  # MySQL reads text as a number itself, as SQLite does
                    continue
                operands = [node.this] if isinstance(node, (exp.Avg, exp.Sum, exp.Neg)) else [node.this, node.expression]
                for operand in operands:  # text read as a number: its numeric prefix, as SQLite does
                    if operand is not None and affinity(operand, scope) == TEXT:
                        _convert(operand, self._numeric_prefix)
            else:
                self._fix_comparison(node, scope, affinity, mixing)

    def _fix_comparison(self, node: exp.Binary, scope: Scope, affinity: Callable[..., str | None], mixing: bool) -> None:
        left, right = node.this, node.expression
        kinds = affinity(left, scope), affinity(right, scope)
        for side, other, kind, other_kind in ((left, right, kinds[0], kinds[1]), (right, left, kinds[1], kinds[0])):
            if kind is None:
                continue
            if _literal_as(other, kind):
                return
            if mixing:
                continue
            if kind == TEXT and other_kind == NUMERIC:  # SQLite compares the text's numeric value
                _convert(side, self._numeric_value)
                return
            if kind == TEXT and other_kind is None and _valued(other):  # the other side compares as text
                other.replace(exp.Cast(this=other.copy(), to=exp.DataType.build("text")))
                return

    def _fix_in(self, node: exp.In, scope: Scope, affinity: Callable[..., str | None], mixing: bool,
                by_query: Mapping[int, Scope]) -> None:
        left = affinity(node.this, scope)
        query = node.args.get("query")
        if query is None:
            if left is not None:
                for item in node.expressions:
                    _literal_as(item, left)
            return
        if mixing:
            return
        inner = query.this if isinstance(query, exp.Subquery) else query
        if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
            return
        projection = inner.expressions[0]
        right = affinity(projection.unalias(), by_query.get(id(inner)))
        if left == TEXT and right == NUMERIC:
            _convert(node.this, self._numeric_value)
        elif left == NUMERIC and right == TEXT:
            _convert(projection.unalias(), self._numeric_value)

    def _affinity(self, node: exp.Expression, scope: Scope, sources: Mapping[int, dict[str, Source]],
                  by_query: Mapping[int, Scope]) -> str | None:
        """SQLite's affinity of an operand: a column's (from the engine's type), a CAST's, a scalar
        subquery's (its one output's); None for literals and other expressions."""
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select) and len(node.this.expressions) == 1:
            inner = by_query.get(id(node.this))
            return self._affinity(node.this.expressions[0].unalias(), inner, sources, by_query) if inner else None
        return self._column_affinity(node, scope, sources)

    def _column_affinity(self, node: exp.Expression, scope: Scope, sources: Mapping[int, dict[str, Source]]) -> str | None:
        if isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
            if node.to.is_type(*exp.DataType.TEXT_TYPES):
                return TEXT
            return NUMERIC if node.to.is_type(*exp.DataType.NUMERIC_TYPES) else None
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            return None
        name = node.name.lower()
        for current in _chain(scope):
            found = sources.get(id(current), {})
            if node.table:
                source = found.get(node.table.lower())
                if source is not None:
                    return (source.types or {}).get(name)
                continue
            owners = [s for s in found.values() if s.columns is not None and name in s.columns]
            if len(owners) == 1:
                return (owners[0].types or {}).get(name)
            if owners or any(s.columns is None for s in found.values()):
                return None  # ambiguous, or a source whose columns are unknown
        return None

    def _numeric_prefix(self, value: exp.Expression) -> exp.Expression:
        """Text as SQLite's arithmetic reads it: its numeric prefix, else 0 (NULL stays NULL)."""
        return _template(self.target.dialect, "prefix", value)

    def _numeric_value(self, value: exp.Expression) -> exp.Expression:
        """Text as SQLite's numeric affinity reads it in a comparison: a number when the whole text
        is one, else NULL (SQLite keeps it text, unequal to any number)."""
        return _template(self.target.dialect, "whole", value)

    # -- LIKE ---------------------------------------------------------------------------------

    def fix_like(self, expression: exp.Expression) -> None:
        """SQLite's LIKE ignores the case of ASCII letters: ILIKE (which sqlglot writes as
        `LOWER(a) LIKE LOWER(b)` where the engine has none); a number under it is its text."""
        numeric_operands = self.catalogue.types and self.target.dialect not in _MIXING_ENGINES
        scopes, sources = self._analyse(expression) if numeric_operands else ([], {})
        by_query = {id(scope.expression): scope for scope in scopes}
        for like in list(expression.find_all(exp.Like)):
            if numeric_operands:
                scope = by_query.get(id(_nearest_query(like)))
                if scope is not None and self._affinity(like.this, scope, sources, by_query) == NUMERIC:
                    like.this.replace(exp.Cast(this=like.this.copy(), to=exp.DataType.build("text")))
            like.replace(exp.ILike(**like.args))

    # -- GROUP BY -----------------------------------------------------------------------------

    def fix_group_by(self, expression: exp.Expression) -> None:
        """Bare columns of aggregate queries. Engines that accept them (MySQL/MariaDB take the
        group's first row, as SQLite does) only need the row of the one min/max."""
        scopes, sources = self._analyse(expression)
        for scope in scopes:
            select = scope.expression
            if isinstance(select, exp.Select) and (select.args.get("group") or _aggregates(select)):
                self._fix_group_by(select, sources[id(scope)])

    def _fix_group_by(self, select: exp.Select, sources: Mapping[str, Source]) -> None:
        extremes = {e.sql(): e for e in _own_nodes(select, exp.Min, exp.Max) if not e.expressions}
        extreme = next(iter(extremes.values())) if len(extremes) == 1 else None
        if not self.strict_group_by and (extreme is None or self.target.dialect not in _MIXING_ENGINES):
            return
        aliases = _select_aliases(select)
        group = select.args.get("group")
        keys = [_group_target(key, select) for key in group.expressions] if group else []
        grouped: set[tuple[str, str]] = set()
        for target in keys:
            resolved = _resolve(target, sources)
            if resolved is not None:
                grouped.add(resolved)
        equal = _Equalities()
        for condition in _equalities(select):
            left, right = (_resolve(side, sources) for side in (condition.left, condition.right))
            if left is not None and right is not None:
                equal.join(left, right)
        added: list[exp.Column] = []
        bare: list[exp.Column] = []
        for column in _outside_aggregates(select):
            if not column.table and column.name.lower() in aliases:
                continue  # a select alias (ORDER BY total)
            key = _resolve(column, sources)
            if key is None or key in grouped or _within_key(column, select, keys):
                continue
            if self.strict_group_by and any(equal.same(key, g) for g in grouped):  # equal on every row of its group
                grouped.add(key)
                added.append(self._column_for(key, sources))
                continue
            bare.append(column)
        if added and group is not None:
            for column in added:
                group.append("expressions", column)
        for column in bare:
            self._wrap_bare(column, select, extreme, sources)

    def _wrap_bare(self, column: exp.Column, select: exp.Select, extreme: exp.Expression | None,
                   sources: Mapping[str, Source]) -> None:
        """A bare column as SQLite reads it: on the row of the query's one min/max, else one value
        of the group. A select item keeps its output name."""
        is_item = column.parent is select and column.arg_key == "expressions"
        key = _resolve(column, sources)
        numeric = key is not None and (sources[key[0]].types or {}).get(key[1]) == NUMERIC
        value = self._bare_value(column.copy(), extreme, numeric)
        column.replace(exp.alias_(value, column.this.copy()) if is_item else value)

    def _bare_value(self, column: exp.Column, extreme: exp.Expression | None, numeric: bool = False) -> exp.Expression:
        dialect = self.target.dialect
        if extreme is not None:
            key = extreme.this.copy()
            if isinstance(key, exp.Distinct) and len(key.expressions) == 1:
                key = key.expressions[0]
            highest = isinstance(extreme, exp.Max)
            if dialect == "duckdb":
                return exp.Anonymous(this="ARG_MAX_NULL" if highest else "ARG_MIN_NULL", expressions=[column, key])
            if dialect == "postgres":
                return _template("postgres", "max_row" if highest else "min_row", column, key)
            if dialect in _ARG_MAX:
                return (exp.ArgMax if highest else exp.ArgMin)(this=column, expression=key)
            if dialect in _MIXING_ENGINES:  # no ARG_MAX: the first of the group's values in that order, as text
                value = _template("mysql", "max_row" if highest else "min_row", column, key)
                return exp.Add(this=value, expression=exp.Literal.number(0)) if numeric else value
        if self.target.any_value:  # named as such: older sqlglot writes MAX for PostgreSQL's
            return exp.Anonymous(this="ANY_VALUE", expressions=[column]) if dialect == "postgres" else exp.AnyValue(this=column)
        if dialect == "postgres":
            return _template("postgres", "first", column)
        return exp.Min(this=column)

    def _column_for(self, key: tuple[str, str], sources: Mapping[str, Source]) -> exp.Column:
        """A new reference to a resolved column, spelled as the query's other references are."""
        source = sources[key[0]]
        identifier = exp.to_identifier(key[1])
        self._spell(identifier, source, key[1])
        qualifier = source.alias.copy() if source.alias is not None else exp.to_identifier(key[0])
        return exp.Column(this=identifier, table=qualifier)

    # -- subqueries ---------------------------------------------------------------------------

    def fix_scalar_subqueries(self, expression: exp.Expression) -> None:
        """`x = (SELECT y ...)`: SQLite takes the subquery's first row; other engines refuse
        several. A scalar subquery that may return several rows gets `LIMIT 1`."""
        for subquery in list(expression.find_all(exp.Subquery)):
            if not _is_scalar(subquery):
                continue
            query = subquery.this
            while isinstance(query, exp.Subquery):
                query = query.this
            if not isinstance(query, exp.Query) or _one_row(query):
                continue
            limit = query.args.get("limit")
            if limit is None:
                query.set("limit", exp.Limit(expression=exp.Literal.number(1)))
            elif isinstance(limit, exp.Limit) and _integer(limit.expression) not in (None, 0, 1):
                limit.set("expression", exp.Literal.number(1))

    def fix_derived_aliases(self, expression: exp.Expression) -> None:
        """`FROM (SELECT ...)` without an alias: PostgreSQL (before 16) and MySQL want one."""
        names = _identifiers(expression)
        for subquery in list(expression.find_all(exp.Subquery)):
            if isinstance(subquery.parent, (exp.From, exp.Join)) and not subquery.alias:
                subquery.set("alias", exp.TableAlias(this=exp.to_identifier(_fresh("derived", names))))

    def fix_averages(self, expression: exp.Expression) -> None:
        """SQLite's AVG is a double; MySQL's AVG of integers or decimals is a decimal of four more
        digits (`div_precision_increment`): averaged as doubles."""
        for average in list(expression.find_all(exp.Avg)):
            value = average.this
            if isinstance(value, exp.Distinct) or value is None:
                continue
            value.replace(exp.Cast(this=value.copy(), to=exp.DataType.build("double")))

    def fix_limit_in_subqueries(self, expression: exp.Expression) -> None:
        """MySQL refuses LIMIT in a subquery of IN/ANY/ALL/SOME, and accepts it in a derived table."""
        names = _identifiers(expression)
        for subquery in list(expression.find_all(exp.Subquery)):
            parent = subquery.parent
            inside = (isinstance(parent, exp.In) and subquery.arg_key == "query") or isinstance(parent, (exp.Any, exp.All))
            query = subquery.this
            if not inside or not isinstance(query, exp.Query) or query.args.get("limit") is None:
                continue
            alias = _fresh("derived", names)
            wrapped = exp.select("*").from_(exp.Subquery(this=query.copy(), alias=exp.TableAlias(this=exp.to_identifier(alias))))
            query.replace(wrapped)


# -- templates --------------------------------------------------------------------------------

_NUMBER = "[-+]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]+)?"
_TEMPLATES = {
    # text read as a number, as SQLite's arithmetic and AVG/SUM read it: the numeric prefix, else 0
    ("postgres", "prefix"): f"COALESCE(CAST(SUBSTRING(__v FROM '^[[:space:]]*({_NUMBER})') AS DOUBLE PRECISION),"
                            " CASE WHEN NOT __v IS NULL THEN 0 END)",
    ("duckdb", "prefix"): f"COALESCE(TRY_CAST(REGEXP_EXTRACT(__v, '^[[:space:]]*({_NUMBER})', 1) AS DOUBLE),"
                          " CASE WHEN NOT __v IS NULL THEN 0 END)",
    # text compared with a number: a number when the whole text is one, else NULL
    ("postgres", "whole"): f"CASE WHEN __v ~ '^[[:space:]]*{_NUMBER}[[:space:]]*$' THEN CAST(__v AS DOUBLE PRECISION) END",
    ("duckdb", "whole"): f"CASE WHEN REGEXP_FULL_MATCH(__v, '[[:space:]]*{_NUMBER}[[:space:]]*')"
                         " THEN TRY_CAST(TRIM(__v) AS DOUBLE) END",
    # bare columns on PostgreSQL
    ("postgres", "max_row"): "(ARRAY_AGG(__v ORDER BY __k DESC NULLS LAST))[1]",
    ("postgres", "min_row"): "(ARRAY_AGG(__v ORDER BY __k ASC NULLS LAST))[1]",
    ("postgres", "first"): "(ARRAY_AGG(__v))[1]",
    # bare columns beside one min/max on MySQL/MariaDB (no ARG_MAX): the group's values as text in
    # the min/max order, NULL kept ('n'), the first one taken
    ("mysql", "max_row"): "SUBSTRING(NULLIF(SUBSTRING_INDEX(GROUP_CONCAT(COALESCE(CONCAT('v', __v), 'n')"
                          " ORDER BY __k IS NULL, __k DESC SEPARATOR '\x1f'), '\x1f', 1), 'n'), 2)",
    ("mysql", "min_row"): "SUBSTRING(NULLIF(SUBSTRING_INDEX(GROUP_CONCAT(COALESCE(CONCAT('v', __v), 'n')"
                          " ORDER BY __k IS NULL, __k ASC SEPARATOR '\x1f'), '\x1f', 1), 'n'), 2)",
}
_GENERIC = {"prefix": "CAST(__v AS DOUBLE)", "whole": "CAST(__v AS DOUBLE)"}


@functools.lru_cache(maxsize=None)
def _parsed_template(dialect: str, name: str) -> exp.Expression:
    text = _TEMPLATES.get((dialect, name))
    if text is None:
        return sqlglot.parse_one(_GENERIC[name], read="postgres")
    return sqlglot.parse_one(text, read=dialect)


def _template(dialect: str, name: str, value: exp.Expression, key: exp.Expression | None = None) -> exp.Expression:
    """A template's tree with `__v` (and `__k`) replaced by copies of the given expressions."""
    tree = _parsed_template(dialect, name).copy()
    for column in list(tree.find_all(exp.Column)):
        if column.name == "__v":
            column.replace(value.copy())
        elif column.name == "__k" and key is not None:
            column.replace(key.copy())
    return tree


# -- literals ---------------------------------------------------------------------------------

_SQLITE_NUMBER = re.compile(r"\s*[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*")  # over a value


def _convert(node: exp.Expression, conversion: Callable[[exp.Expression], exp.Expression]) -> None:
    """Replace a value by its conversion; a scalar subquery's by converting its one output inside
    it (the subquery is not written twice)."""
    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Subquery) and isinstance(inner.this, exp.Select) and len(inner.this.expressions) == 1:
        node = inner.this.expressions[0].unalias()
    node.replace(conversion(node.copy()))


def _number_literal(node: exp.Expression) -> tuple[str, bool] | None:
    """(text, negative) of a number literal, `-5` included; None for anything else."""
    negative = False
    while isinstance(node, exp.Neg):
        negative = not negative
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        return node.this, negative
    return None


def _literal_as(node: exp.Expression, affinity: str | None) -> bool:
    """Give a literal the affinity of the column it is compared with (SQLite's rule): a number
    compared with a text column becomes its text, a numeric string compared with a numeric column
    its number. True when the node was such a literal (changed or not)."""
    if affinity == TEXT:
        number = _number_literal(node)
        if number is None:
            return isinstance(node, exp.Literal)
        text = _sqlite_text(*number)
        if text is None:
            return False
        node.replace(exp.Literal.string(text))
        return True
    if affinity == NUMERIC and isinstance(node, exp.Literal):
        if node.is_string and _SQLITE_NUMBER.fullmatch(node.this):
            number = node.this.strip()
            negative = number.startswith("-")
            literal = exp.Literal.number(number.lstrip("+-"))
            node.replace(exp.Neg(this=literal) if negative else literal)
        return True
    return False


def _sqlite_text(text: str, negative: bool) -> str | None:
    """A number literal as SQLite writes it as text (`2014`, `2.5`, `100.0`, `1.0e+20`)."""
    sign = "-" if negative else ""
    if text.isdigit():
        return sign + str(int(text))
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    written = f"{value:.15g}"
    if "e" in written:
        mantissa, exponent = written.split("e")
        written = (mantissa if "." in mantissa else mantissa + ".0") + "e" + exponent
    elif "." not in written:
        written += ".0"
    return sign + written


def _valued(node: exp.Expression) -> bool:
    """An expression compared as a value that has no affinity in SQLite: a function, arithmetic,
    a scalar subquery (not a literal, a column, NULL, a parameter or a condition)."""
    return not isinstance(node, (exp.Literal, exp.Column, exp.Null, exp.Placeholder, exp.Parameter, exp.Predicate,
                                 exp.Connector, exp.Not, exp.Boolean, exp.Star))


def _integer(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    return None


# -- helpers ----------------------------------------------------------------------------------


class _Equalities:
    """Union-find over (source, column) keys that inner joins and WHERE hold equal."""

    def __init__(self) -> None:
        self._parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(self, key: tuple[str, str]) -> tuple[str, str]:
        root = key
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        return root

    def join(self, a: tuple[str, str], b: tuple[str, str]) -> None:
        self._parent.setdefault(a, a)
        self._parent.setdefault(b, b)
        self._parent[self.find(a)] = self.find(b)

    def same(self, a: tuple[str, str], b: tuple[str, str]) -> bool:
        return a == b or (a in self._parent and b in self._parent and self.find(a) == self.find(b))


def _chain(scope: Scope | None) -> Iterator[Scope]:
    current: Scope | None = scope
    while current is not None:
        yield current
        current = current.parent


def _nearest_query(node: exp.Expression) -> exp.Expression | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Query):
        parent = parent.parent
    return parent


def _own_columns(scope: Scope, *, having: bool = False) -> list[exp.Column]:
    """The columns whose nearest enclosing query is this scope's (sqlglot's `scope.columns` may
    also list those of a subquery in a condition). `having`: also the unqualified columns of
    HAVING, which sqlglot leaves out (they may name a select alias)."""
    own = [column for column in scope.columns if _nearest_query(column) is scope.expression]
    if having and isinstance(scope.expression, exp.Select) and scope.expression.args.get("having") is not None:
        seen = {id(column) for column in own}
        own += [
            column for column in scope.expression.args["having"].find_all(exp.Column)
            if id(column) not in seen and _nearest_query(column) is scope.expression
        ]
    return own


def _own_nodes(select: exp.Select, *kinds: type[exp.Expression]) -> list[exp.Expression]:
    """Nodes of these kinds in the select list, HAVING and ORDER BY of this query itself (not of
    its subqueries, not inside a window)."""
    parts: list[exp.Expression] = list(select.expressions)
    for arg in ("having", "order"):
        if select.args.get(arg) is not None:
            parts.append(select.args[arg])
    found = []
    for part in parts:
        for node in part.find_all(*kinds):
            if _nearest_query(node) is select and not node.find_ancestor(exp.Window):
                found.append(node)
    return found


def _aggregates(select: exp.Select) -> bool:
    """Whether the query aggregates (an aggregate function of its own, outside any window)."""
    return bool(_own_nodes(select, exp.AggFunc))


def _owners(sources: Mapping[str, Source], name: str) -> list[Source]:
    """The one source of this scope with a column `name`, if exactly one has it."""
    owners = [s for s in sources.values() if s.columns is not None and name in s.columns]
    return owners if len(owners) == 1 else []


def _alias_of(scope: Scope, name: str) -> exp.Identifier | None:
    """The alias identifier a derived table or CTE is declared with in this scope."""
    for node in scope.expression.find_all(exp.TableAlias):
        if isinstance(node.this, exp.Identifier) and node.this.name == name:
            return node.this
    return None


def _declared_outputs(query: exp.Expression) -> dict[str, exp.Identifier] | None:
    """The identifiers that name a query's outputs (an alias, or a column's own name), by lower
    case; a set operation's are its first query's."""
    while isinstance(query, exp.SetOperation):
        query = query.this
    if not isinstance(query, exp.Select):
        return None
    declared: dict[str, exp.Identifier] = {}
    for projection in query.expressions:
        if isinstance(projection, exp.Alias) and isinstance(projection.args.get("alias"), exp.Identifier):
            declared.setdefault(projection.alias.lower(), projection.args["alias"])
        elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Identifier):
            declared.setdefault(projection.name.lower(), projection.this)
    return declared


def _select_aliases(query: exp.Expression) -> set[str]:
    if not isinstance(query, exp.Select):
        return set()
    return {e.alias.lower() for e in query.expressions if isinstance(e, exp.Alias) and e.alias}


def _resolve(node: exp.Expression, sources: Mapping[str, Source]) -> tuple[str, str] | None:
    """(source, column) in lower case for a column of this scope, else None."""
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        return None
    name = node.name.lower()
    if node.table:
        table = node.table.lower()
        return (table, name) if table in sources else None
    owners = [key for key, s in sources.items() if s.columns is not None and name in s.columns]
    return (owners[0], name) if len(owners) == 1 else None


def _group_target(key: exp.Expression, select: exp.Select) -> exp.Expression:
    """A GROUP BY key as an expression: `GROUP BY 2` and `GROUP BY alias` name a select item."""
    items = select.expressions
    if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
        index = int(key.this) - 1
        if 0 <= index < len(items):
            return items[index].unalias()
    if isinstance(key, exp.Column) and not key.table:
        for item in items:
            if isinstance(item, exp.Alias) and item.alias.lower() == key.name.lower():
                return item.this
    return key


def _within_key(column: exp.Column, select: exp.Select, keys: Sequence[exp.Expression]) -> bool:
    """Whether the column is part of an expression that is itself a GROUP BY key
    (`substr(name, 1, 1)` grouped)."""
    expressions = [k for k in keys if not isinstance(k, exp.Column)]
    if not expressions:
        return False
    node: exp.Expression | None = column
    while node is not None and node is not select:
        if any(node == key for key in expressions):
            return True
        node = node.parent
    return False


def _conjuncts(condition: exp.Expression | None) -> Iterator[exp.Expression]:
    if condition is None:
        return
    if isinstance(condition, exp.Paren):
        yield from _conjuncts(condition.this)
    elif isinstance(condition, exp.And):
        yield from _conjuncts(condition.left)
        yield from _conjuncts(condition.right)
    else:
        yield condition


def _equalities(select: exp.Select) -> Iterator[exp.EQ]:
    """`a = b` holding on every row of the grouped input: WHERE's conjuncts and inner joins' ON."""
    where = select.args.get("where")
    conditions = list(_conjuncts(where.this if where else None))
    for join in select.args.get("joins") or ():
        if not join.side and (join.kind or "INNER").upper() in ("INNER", "CROSS", ""):
            conditions += _conjuncts(join.args.get("on"))
    return (c for c in conditions if isinstance(c, exp.EQ))


def _outside_aggregates(select: exp.Select) -> list[exp.Column]:
    """Columns of the select list, HAVING and ORDER BY of this query that no aggregate or window
    encloses."""
    found = []
    for column in _own_nodes(select, exp.Column):
        assert isinstance(column, exp.Column)
        if isinstance(column.this, exp.Star):
            continue
        parent = column.parent
        inside = False
        while parent is not None and parent is not select:
            if isinstance(parent, (exp.AggFunc, exp.Window)):
                inside = True
                break
            parent = parent.parent
        if not inside:
            found.append(column)
    return found


def _is_scalar(subquery: exp.Subquery) -> bool:
    """A subquery used as a value (not a derived table, not the set of IN/ANY/ALL/EXISTS, not a
    member of a set operation)."""
    parent = subquery.parent
    if isinstance(parent, (exp.From, exp.Join, exp.Lateral, exp.SetOperation, exp.Subquery, exp.CTE, exp.Exists,
                           exp.Any, exp.All)):
        return False
    return not (isinstance(parent, exp.In) and subquery.arg_key == "query")


def _one_row(query: exp.Query) -> bool:
    """A query that returns at most one row: LIMIT 0 or 1, or aggregates without GROUP BY."""
    limit = query.args.get("limit")
    if isinstance(limit, exp.Limit) and _integer(limit.expression) in (0, 1):
        return True
    return isinstance(query, exp.Select) and not query.args.get("group") and _aggregates(query)


def _identifiers(expression: exp.Expression) -> set[str]:
    return {identifier.name.lower() for identifier in expression.find_all(exp.Identifier)}


def _fresh(prefix: str, taken: set[str]) -> str:
    """A name not yet used in the query (`derived_1`, `derived_2`, ...); remembered as taken."""
    number = 1
    while f"{prefix}_{number}" in taken:
        number += 1
    name = f"{prefix}_{number}"
    taken.add(name)
    return name
