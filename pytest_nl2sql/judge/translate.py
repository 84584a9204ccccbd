"""SQL written for one database, run on another: sqlglot's transpiler, plus what SQLite lets pass.

Spider's gold SQL, and much model output, is written for SQLite and leans on its leniencies.
sqlglot translates the syntax; what it cannot know without the schema is fixed here, from the
AST and `engine.schema_columns()`, when the source dialect is SQLite and the engine is not:

- a double-quoted name that resolves to no column, select alias or table in scope is a string
  (SQLite reads `WHERE name = "Republic"` so; every other engine looks for a column `Republic`);
- table and column names are spelled as the schema spells them when they match ignoring case
  (MariaDB compares table names exactly on Linux; PostgreSQL folds unquoted names to lower case,
  so a mixed-case name is quoted), and column qualifiers as their table alias is declared (MySQL
  compares aliases exactly);
- on engines that reject a column outside GROUP BY (PostgreSQL and the like), a column that an
  inner join or WHERE equates with a grouped column is added to the GROUP BY: the groups stay the
  same, so the result is provably the same. When its table has a column equated with a grouped
  one, that column is grouped too, so that PostgreSQL sees the table's primary key grouped.

Left as they are (the engine's error names them): text compared with numbers (`WHERE year_text
> 2000`: the schema in hand has no types), a bare column beside MIN/MAX (`SELECT name,
max(age) FROM singer`: SQLite returns the row of the maximum; ties make any rewrite a guess), and
any column outside GROUP BY that nothing equates with a grouped column.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from pytest_nl2sql.engines.base import Engine, EngineError, QueryError

# Engines that accept a column outside GROUP BY the way SQLite does (or detect functional
# dependence themselves): no GROUP BY rewriting for them.
_LENIENT_GROUP_BY = frozenset({"sqlite", "mysql", "doris", "starrocks", "singlestore"})


def translate(
    sql: str, read: str | None, engine: Engine, *, schema: Mapping[str, Sequence[str]] | None = None
) -> str:
    """`sql`, written in the sqlglot dialect `read`, as the engine's dialect should run it.

    Identity (no parse) when `read` is empty or the engine's dialect. From SQLite to another
    engine, SQLite's leniencies are fixed with the schema (`schema`, else
    `engine.schema_columns()`; see the module docstring). Raises `QueryError` when sqlglot
    cannot read or write the query.
    """
    write = engine.dialect
    if not read or read == write:
        return sql
    try:
        expressions = sqlglot.parse(sql, read=read)
        if read == "sqlite" and write != "sqlite":
            tables = schema if schema is not None else _schema_of(engine)
            expressions = [_fixed(e, tables, write) if e is not None else None for e in expressions]
        writer = Dialect.get_or_raise(write)
        return ";\n".join(writer.generate(e, copy=False) if e is not None else "" for e in expressions)
    except (SqlglotError, RecursionError) as e:  # a deeply nested query exhausts the parser's stack
        raise QueryError(f"cannot translate the query from {read} to {write}: {e}") from e


def _schema_of(engine: Engine) -> Mapping[str, Sequence[str]]:
    """The engine's {table: [column]}; none when it cannot be read (the query then says why)."""
    try:
        return engine.schema_columns()
    except EngineError:
        return {}


def _fixed(expression: exp.Expression, schema: Mapping[str, Sequence[str]], write: str) -> exp.Expression:
    """The expression with SQLite's leniencies fixed; the expression itself when the analysis
    fails (an unusual tree sqlglot cannot scope): sqlglot's translation alone, as before."""
    candidate = expression.copy()
    try:
        Fixer(Catalogue.of(schema), Dialect.get_or_raise(write), write).fix(candidate)
    except (SqlglotError, RecursionError, KeyError, ValueError):
        return expression
    return candidate


@dataclass(frozen=True)
class Catalogue:
    """The schema, looked up ignoring case: table -> (exact name, {column lower: exact column})."""

    tables: Mapping[str, tuple[str, Mapping[str, str]]]

    @classmethod
    def of(cls, schema: Mapping[str, Sequence[str]]) -> Catalogue:
        tables: dict[str, tuple[str, Mapping[str, str]]] = {}
        for table, columns in schema.items():
            tables.setdefault(table.lower(), (table, {c.lower(): c for c in columns}))
        return cls(tables)


@dataclass(frozen=True)
class Source:
    """One table or derived table in a scope: how it is named there, and its columns if known."""

    alias: exp.Identifier | None  # the identifier a qualifier must spell (alias or table name)
    columns: Mapping[str, str] | None  # lower -> exact; None when unknown (no schema, a star)
    table: str | None = None  # the exact schema table, for a base table


class Fixer:
    """Rewrites one parsed SQLite statement in place for the dialect `write`."""

    def __init__(self, catalogue: Catalogue, dialect: Dialect, write: str) -> None:
        self.catalogue = catalogue
        self.dialect = dialect
        self.strict_group_by = write not in _LENIENT_GROUP_BY

    def fix(self, expression: exp.Expression) -> None:
        scopes = list(traverse_scope(expression))
        sources = {id(scope): self._sources(scope) for scope in scopes}
        for scope in scopes:
            self._fix_columns(scope, sources)
            self._fix_output_references(scope)
        if self.strict_group_by:
            for scope in scopes:
                if isinstance(scope.expression, exp.Select) and scope.expression.args.get("group"):
                    self._fix_group_by(scope, sources[id(scope)])

    # -- names --------------------------------------------------------------------------------

    def _sources(self, scope: Scope) -> dict[str, Source]:
        """The scope's sources by lower-case name; base tables respelled as the schema spells them."""
        found: dict[str, Source] = {}
        for name, source in scope.sources.items():
            if isinstance(source, exp.Table):
                known = self.catalogue.tables.get(source.name.lower())
                if known is not None and not source.args.get("db"):
                    self._respell(source.this, known[0])
                alias = source.args["alias"].this if source.args.get("alias") else source.this
                found[name.lower()] = Source(
                    alias if isinstance(alias, exp.Identifier) else None,
                    known[1] if known else None,
                    known[0] if known else None,
                )
            elif isinstance(source, Scope):
                names = source.expression.named_selects if isinstance(source.expression, exp.Query) else []
                known_columns = None if "*" in names or not names else {n.lower(): n for n in names}
                alias_node = _alias_of(scope, name)
                found[name.lower()] = Source(alias_node, known_columns)
        return found

    def _fix_columns(self, scope: Scope, sources: Mapping[int, dict[str, Source]]) -> None:
        chain = list(_chain(scope))  # this scope, then the scopes it is nested in
        aliases = _select_aliases(scope.expression)
        all_known = all(s.columns is not None for c in chain for s in sources[id(c)].values())
        visible = {
            column for c in chain for s in sources[id(c)].values() for column in (s.columns or {})
        } | {name for c in chain for name in sources[id(c)]}
        for column in _own_columns(scope):
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
                assert owner.columns is not None
                self._respell(column.this, owner.columns[name])
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
            self._respell(column.this, source.columns[column.name.lower()])

    def _respell(self, identifier: exp.Identifier, exact: str) -> None:
        """Spell a schema name exactly; quote it where the engine would fold it otherwise."""
        identifier.set("this", exact)
        folds = self.dialect.NORMALIZATION_STRATEGY in (
            NormalizationStrategy.LOWERCASE,
            NormalizationStrategy.UPPERCASE,
        )
        if folds and self.dialect.case_sensitive(exact):
            identifier.set("quoted", True)

    # -- GROUP BY -----------------------------------------------------------------------------

    def _fix_group_by(self, scope: Scope, sources: Mapping[str, Source]) -> None:
        select = scope.expression
        assert isinstance(select, exp.Select)
        aliases = _select_aliases(select)
        grouped: set[tuple[str, str]] = set()
        for key in select.args["group"].expressions:
            target = _group_target(key, select)
            if isinstance(target, exp.Column):
                resolved = _resolve(target, sources)
                if resolved is not None:
                    grouped.add(resolved)
        if not grouped:
            return
        equal = _Equalities()
        for condition in _equalities(select):
            left, right = (_resolve(side, sources) for side in (condition.left, condition.right))
            if left is not None and right is not None:
                equal.join(left, right)
        added: list[exp.Column] = []
        for column in _outside_aggregates(select, scope):
            if not column.table and column.name.lower() in aliases:
                continue  # a select alias (ORDER BY total)
            key = _resolve(column, sources)
            if key is None or key in grouped:
                continue
            if any(equal.same(key, g) for g in grouped):
                new = key
            else:  # a column of its table equated with a grouped one: group that one too
                new = next(
                    (k for k in equal.members(key[0]) if any(equal.same(k, g) for g in grouped)), None
                )
                if new is None or new in grouped:
                    continue
            grouped.add(new)
            added.append(self._column_for(new, sources))
        for column in added:
            select.args["group"].append("expressions", column)

    def _column_for(self, key: tuple[str, str], sources: Mapping[str, Source]) -> exp.Column:
        """A new reference to a resolved column, spelled as the query's other references are."""
        source = sources[key[0]]
        identifier = exp.to_identifier(key[1])
        if source.columns and key[1] in source.columns:
            self._respell(identifier, source.columns[key[1]])
        qualifier = source.alias.copy() if source.alias is not None else exp.to_identifier(key[0])
        return exp.Column(this=identifier, table=qualifier)


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

    def members(self, source: str) -> Iterator[tuple[str, str]]:
        return (key for key in self._parent if key[0] == source)


def _chain(scope: Scope) -> Iterator[Scope]:
    current: Scope | None = scope
    while current is not None:
        yield current
        current = current.parent


def _own_columns(scope: Scope) -> list[exp.Column]:
    """The columns whose nearest enclosing query is this scope's (sqlglot's `scope.columns` may
    also list those of a subquery in a condition)."""
    own = []
    for column in scope.columns:
        parent = column.parent
        while parent is not None and not isinstance(parent, exp.Query):
            parent = parent.parent
        if parent is scope.expression:
            own.append(column)
    return own


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


def _outside_aggregates(select: exp.Select, scope: Scope) -> list[exp.Column]:
    """Columns of the select list, HAVING and ORDER BY that no aggregate or window encloses."""
    found = []
    parts: list[exp.Expression] = list(select.expressions)
    for arg in ("having", "order"):
        if select.args.get(arg) is not None:
            parts.append(select.args[arg])
    own = {id(c) for c in _own_columns(scope)}
    for part in parts:
        for column in part.find_all(exp.Column):
            if id(column) not in own:
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
