"""How names are written in Malloy: which SQL dialect the compiler writes for an engine, when a
name needs backquotes, and how a table's name goes inside `table('…')`.

Malloy's own names are case-sensitive and its keywords are reserved whatever their case (`year`,
`Date`, `days`): such a name is written in backquotes. A table path is SQL that Malloy pastes into
FROM verbatim, so it is quoted as the engine quotes an identifier (sqlglot), always: a bare
`Singer` would fold to `singer` on PostgreSQL, a bare `order` is no table at all.
"""

from __future__ import annotations

from sqlglot import exp

# The sqlglot dialect of a case's engine -> Malloy's dialect for it. SQLite has none: its cases
# compile for DuckDB, whose SQL reads SQLite's data the same way (see the package docstring).
MALLOY_DIALECTS = {"sqlite": "duckdb", "duckdb": "duckdb", "postgres": "postgres", "mysql": "mysql"}

# Words Malloy 0.0.431's lexer reads as a keyword, never as a name (case-insensitive). Checked
# against the lexer itself by tests/test_malloy.py (test_reserved_words_match_the_lexer).
RESERVED = frozenset("""
    all and as asc avg boolean by case cast compose count date day days desc distinct else end
    exclude export extend false filter for from full has hour hours import in include inner
    internal is json left like max min minute minutes month months not now null number on or pick
    private public quarter quarters right second seconds source sql string sum table then this
    timestamp timestamptz to true virtual week weeks when with year years
""".split())

# Malloy's functions (0.0.431), a namespace that no source may take a name from: a table named
# `round` gets a source named `round_table` (model.py). Case-sensitive, as Malloy looks them up.
# Checked against the compiler by tests/test_malloy.py (test_function_names_match_the_compiler).
FUNCTIONS = frozenset("""
    abs acos ascii asin atan atan2 avg_moving byte_length ceil chr coalesce concat cos dense_rank div
    ends_with exp first_value floor greatest ifnull is_inf is_nan lag last_value lead least length ln
    log lower ltrim max_cumulative max_window min_cumulative min_window nullif pi pow rand rank
    regexp_extract replace round row_number rtrim sign sin sql_boolean sql_date sql_number sql_string
    sql_timestamp sqrt starts_with stddev string_repeat strpos substr sum_cumulative sum_moving
    sum_window tan trim trunc unicode upper
""".split())


def malloy_dialect(dialect: str) -> str:
    """Malloy's dialect for an engine's sqlglot dialect name; ValueError for one Malloy lacks."""
    try:
        return MALLOY_DIALECTS[dialect]
    except KeyError:
        known = ", ".join(sorted(MALLOY_DIALECTS))
        raise ValueError(f"Malloy compiles for {known} cases, not {dialect!r}") from None


def sql_dialect(dialect: str) -> str:
    """The sqlglot dialect of the SQL compiled for an engine (a SQLite case's is DuckDB's)."""
    return malloy_dialect(dialect)  # Malloy's names for these three are sqlglot's


def _plain(name: str) -> bool:
    first, rest = name[:1], name[1:]
    return (first.isascii() and (first.isalpha() or first == "_")
            and all(c.isascii() and (c.isalnum() or c == "_") for c in rest))


def malloy_name(name: str) -> str:
    """A name as Malloy source writes it: bare when it can be, else in backquotes."""
    if _plain(name) and name.lower() not in RESERVED:
        return name
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def malloy_string(text: str) -> str:
    """A single-quoted Malloy string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def table_path(name: str, dialect: str) -> str:
    """The table as the compiled SQL names it, quoted for the engine: what goes in `table('…')`."""
    return exp.to_identifier(name, quoted=True).sql(dialect=sql_dialect(dialect))
