"""Results too big for memory compared inside the engine that holds them (issue 20).

Why: the streamed comparison (`large.py`) reads every value of both results through Python and
hashes it, tens of seconds of CPU for 1,000,000 rows. When gold and prediction run on the same engine,
the engine can compute their multiset difference itself, and only the differing rows need to leave
it. `judge_in_engine` does so on SQLite, DuckDB, PostgreSQL and MariaDB for unordered ``exec``
comparisons without tolerances, and returns None (the caller streams) for anything else (MySQL
too), or wherever it cannot be sure to give the verdict the comparison rules
(`equality.normalise_value`) give.

How:

1. Each side runs as written (a stream closed after `SAMPLE_ROWS` rows): its columns, first rows
   to show, its own errors (a gold's raises `GoldError`, a prediction's is its verdict). Then,
   wrapped as a CTE with columns of our naming (`c0, c1, ...`: duplicate names, ORDER BY, LIMIT
   and WITH inside are fine), its row count over at most `max_rows + 1` rows (the row cap) and,
   on DuckDB, PostgreSQL and MariaDB, its column types (MariaDB: the column metadata of the
   wrapped query's stream, run with `LIMIT 0`) and longest value (`max_value_bytes`).
2. Columns are paired as the samples suggest (names, shared values); one query computes the
   multiset difference under that pairing: both results unioned with a side marker (+1 gold,
   -1 prediction), grouped by every column, the groups whose markers do not sum to 0 returned with
   that sum. On SQLite and DuckDB the union is grouped in parts of about `PARTITION_BYTES`, split on
   one column, so that the engine's memory does not grow with the result (PostgreSQL's grouping
   and MariaDB's sort spill to disk).
3. The grouping key is one under which the engine calls values equal only if the rules do: text
   under a binary collation (`COLLATE BINARY`, `"binary"`, `"C"`, `utf8mb4_nopad_bin`), never a
   case-blind or space-padding one; integers and decimals in one exact type per column pair
   (HUGEINT, DECIMAL(38, s), numeric, DECIMAL(65, s)), floats as DOUBLE, integers against floats
   as doubles below 1e15 only (exact there, and a double equal to an integer normalises to it); on
   SQLite, where 2**60 equals 2.0**60 (which the rules' 15 digits tell apart), reals of 1e15 or
   more in groups of their own (a flag tested on every row, so only for columns whose extremes on
   either side reach 1e15: there the statistics of 5 are read before the first difference), and
   values unioned without their column's affinity (a REAL or NUMERIC gold column would convert the
   prediction's integers); other columns whose kinds differ on the two sides never grouped
   across sides at all. A column of a type the engine compares by other rules (PostgreSQL citext
   or char(n), JSON, lists, ...), or whose values reach Python by rules the engine cannot follow
   (MariaDB FLOAT and fixed-decimal doubles, see `_Mariadb`), sends the case to the streamed path.
4. That key is finer than the rules (`"1.50"` and 1.5, 0.1 + 0.2 and 0.3 differ in the engine), so
   the differing rows are compared again in Python under `normalise_value`, exactly when there are
   at most `RECONCILE_CAP` of them. Past that, a mismatch stands only when certain: a value that is
   neither a float nor a text that could read as a number (nor differs only in case or edge
   spaces, when those are ignored) is equal under the rules only to what the engine groups with it,
   so more differing rows made of such values alone than "loose" rows on the other side is a sure
   difference. Otherwise the case is streamed.
5. A mismatch of equal row counts stands only once no other pairing could match: per-column
   statistics (non-NULL count, extremes, whether any value is a blob) rule out the pairings under
   which some column pair provably differs as a multiset under the rules; each pairing left (at
   most `MAX_CANDIDATES`, else streamed) gets its own difference query. The search for them pairs
   a column only where the rest can still be paired (a bipartite matching), so that columns the
   statistics cannot tell apart cost no factorial search, within `PAIRING_STEPS` (else streamed).

Every query goes through the engine's own `stream` (untrusted whenever the prediction is in it), so
the prediction keeps its containment: the statement check, the read-only session or authorizer,
the SQLite worker for unbounded functions, the time limit per query. The prediction's text must be
one statement whose parentheses balance (it already ran alone in step 1), so the wrapping cannot be
closed early by it, and our CTEs have names no table has (random), so it cannot read them (SQLite
lets a CTE read a later one). A wrapped query that fails (a construct the wrapping does not allow, the two
queries together past the time limit) sends the case to the streamed path, which runs the SQL as
written.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot.tokens import TokenType

from pytest_nl2sql.engines.base import ConnectionLost, EngineError, Limits, QueryResult, TooManyRows
from pytest_nl2sql.judge.compare import DIFF_CAP, CompareOptions, Comparison, Mode, bipartite_matching, greedy_pairing
from pytest_nl2sql.judge.equality import normalise_value
from pytest_nl2sql.judge.large import SAMPLE_ROWS, LargeComparison, ResultSummary
from pytest_nl2sql.vocab import Reason, Verdict

if TYPE_CHECKING:
    from pytest_nl2sql.judge.execute import Judgement

RECONCILE_CAP = 50_000  # differing rows compared again in Python, exactly
MAX_CANDIDATES = 4  # other column pairings the statistics allow, one query each; more: streamed
PAIRING_STEPS = 2_000  # column pairs the search for those pairings may try (each checks a matching); more: streamed
_MAX_SEARCH_WIDTH = 64  # wider results whose likeliest pairing fails are streamed (the in-memory search is fast)
PARTITION_BYTES = 64 * 1024**2  # about this much grouped data (both sides) per query, SQLite and DuckDB

_NUMBER_START = frozenset("+-.0123456789")
_FLAGS_PER_TERM = 60  # SQLite: big-real flags of this many columns summed into one grouping term


class _Decline(Exception):
    """The engine cannot give a verdict here that is sure to be the rules' one: stream instead."""


# ----------------------------------------------------------------------------- what we learn of a side

@dataclass(frozen=True)
class _Stats:
    """One column of one side: its non-NULL count and extremes (as the engine orders them)."""

    nn: int
    low: Any
    high: Any


def _may_be_big(stats: _Stats) -> bool:
    """SQLite: whether a column may hold a number of magnitude 1e15 or more. Its extremes are in
    SQLite's order (numbers < texts < blobs, NULLs left out): a text or blob as the smallest means
    no number at all; numbers at both ends bound every number."""
    if not stats.nn:
        return False
    low, high = stats.low, stats.high
    if not isinstance(low, (int, float)):
        return False
    if low <= -1e15:
        return True
    return not isinstance(high, (int, float)) or high >= 1e15


@dataclass
class _Side:
    sql: str  # the query as written (run alone)
    columns: tuple[str, ...]
    sample: list[tuple[Any, ...]]
    seconds: float
    body: str = ""  # the query as it goes inside the wrapping parentheses
    types: tuple[str, ...] = ()  # typed engines: each column's type as the engine names it
    kinds: tuple[str, ...] = ()  # each column's kind (`_Dialect.classify`; "" on SQLite)
    rows: int = 0
    longest: tuple[int | None, ...] = ()  # bytes of each column's longest value, where measured (`size_expr`)
    stats: tuple[_Stats, ...] = ()

    @property
    def width(self) -> int:
        return len(self.columns)

    def summary(self) -> ResultSummary:
        return ResultSummary(self.columns, self.rows, tuple(self.sample), self.seconds)

    def row_bytes(self) -> float:
        """About the bytes one row takes in a grouping (from the sample)."""
        if not self.sample:
            return 16.0 * (self.width + 1)
        total = sum(len(v) + 8 if isinstance(v, (str, bytes)) else 9 for row in self.sample for v in row)
        return total / len(self.sample) + 16


@dataclass(frozen=True)
class _Slot:
    """How one gold column and its paired predicted column are grouped in the union."""

    gold_value: str  # SQL of the gold value, `{0}` the column
    pred_value: str
    gold_collate: str = ""  # appended to the union column in GROUP BY and the select list
    pred_collate: str = ""
    split: bool = False  # kinds differ: the sides' values in two union columns, never grouped together
    flag: str = ""  # SQLite: a term over `{v}` that keeps reals of 1e15 or more apart
    extra: str = ""  # MariaDB: one more grouping term over `{v}` (a hash of values too long to group by)
    keys: tuple[tuple[str, str], ...] = ()  # (gold, predicted) SQL of grouping keys; the values
    # (`gold_value`, `pred_value`) then go in two union columns, shown as the group's min()


def _float_and_int(int_is_gold: bool, int_value: str, as_double: str, as_text: str, tagged: str = "'f' || {0}"
                   ) -> _Slot:
    """Integers (`int_value`, SQL over `{0}`) and floats of one column pair, grouped as doubles
    where that is exact: below 1e15 an integer is exactly a double, and a double equal to it
    normalises to it (15 digits). From 1e15 on, a second key keeps each integer to itself and
    each double apart from every integer (`tagged`: SQL of a text prefixed with "f")."""
    whole, double = as_double.format(int_value), as_double.format("{0}")
    int_keys = (whole, f"CASE WHEN abs({whole}) >= 1e15 THEN {as_text.format(int_value)} END")
    float_keys = (double, f"CASE WHEN abs({double}) >= 1e15 THEN {tagged.format(as_text.format(double))} END")
    if int_is_gold:
        return _Slot(int_value, double, keys=tuple(zip(int_keys, float_keys)))
    return _Slot(double, int_value, keys=tuple(zip(float_keys, int_keys)))


# ----------------------------------------------------------------------------- engines

class _Dialect:
    """What differs between engines: types, statistics, grouping keys, how to split a union."""

    sqlglot_dialect = ""
    typed = True  # column types are static, read with `types_sql` (or `type_name`)
    metadata_types = False  # the types are read from the stream's column metadata (`type_name`)
    partitions = True  # the engine's grouping memory grows with the rows: group in parts
    select_hint = ""  # written after SELECT in the difference query
    session_exprs: tuple[str, ...] = ()  # settings read with the row counts (`_InEngine.session`)
    stats_up_front = False  # both sides' statistics read before the first difference query, not once it fails

    @classmethod
    def accepts(cls, engine: Any) -> bool:
        """Whether this engine object (of the dialect's class) can compare inside."""
        return True

    def quote(self, name: str) -> str:
        return f'"{name}"'

    def types_sql(self, name: str, body: str, width: int) -> str:
        raise NotImplementedError

    def type_name(self, field: Any) -> str:
        """A column's type named from the stream's metadata (`metadata_types`)."""
        raise NotImplementedError

    def hash_bytes(self, session: dict[str, Any]) -> int | None:
        """Values longer than this many bytes are grouped by a hash too (`hash_expr`); None: never."""
        return None

    def hash_expr(self) -> str:
        """A grouping term over `{v}`: a hash of the value, for values too long to group by exactly."""
        raise NotImplementedError

    def classify(self, type_name: str) -> str | None:
        """A column's kind ("int", "float", "decimal", "text", "exact:<type>"), or None when the
        engine's equality for the type is not known to agree with the rules."""
        raise NotImplementedError

    def size_expr(self, column: str, kind: str) -> str | None:
        """SQL of the byte length of a value whose stream may refuse it (`max_value_bytes`)."""
        return None

    def stats_exprs(self, column: str, kind: str, type_name: str) -> list[str]:
        """Non-NULL count, smallest and largest value of one column (`_Stats`)."""
        raise NotImplementedError

    def slot(self, gold_kind: str, pred_kind: str, gold_type: str, pred_type: str) -> _Slot:
        raise NotImplementedError

    def partition_expr(self, value: str, kind: str, parts: int) -> str:
        """SQL of the part (0 .. parts - 1) of a row from one union column's value. Values the key
        groups together should fall in the same part; those that do not are identical only to
        themselves under other representations (3 and 3.0, -0.0 and 0.0): "loose" values, shown
        as differing by the engine and paired up again in Python (module docstring, 4)."""
        raise NotImplementedError


class _Sqlite(_Dialect):
    sqlglot_dialect = "sqlite"
    typed = False
    # the extremes say where no value reaches 1e15 (`_may_be_big`): a column pair without one
    # needs no big-real flag, whose test on every row of every difference query costs more than
    # reading the extremes (a million rows: ~0.35 s a side against ~0.8 s a query)
    stats_up_front = True

    def stats_exprs(self, column: str, kind: str, type_name: str) -> list[str]:
        # SQLite orders numbers < texts < blobs: the types of the extremes say which kinds occur
        return [f"count({column})", f"min({column} COLLATE BINARY)", f"max({column} COLLATE BINARY)"]

    def slot(self, gold_kind: str, pred_kind: str, gold_type: str, pred_type: str) -> _Slot:
        # SQLite groups 3 with 3.0 (equal under the rules too), but also 2**60 with 2.0**60,
        # which normalise apart (floats to 15 digits): reals of 1e15 or more go in groups apart.
        # The unary + takes the column's affinity away: a UNION ALL column takes the gold's
        # (REAL, NUMERIC, TEXT), which would turn the prediction's 2**60 into 2.0**60 before grouping.
        # BINARY is written in both branches, so the union column has it whichever branch SQLite
        # takes it from, and GROUP BY names the plain column (`GROUP BY v COLLATE BINARY` sorted a
        # million rows ~20% slower)
        return _Slot("+{0} COLLATE BINARY", "+{0} COLLATE BINARY", flag="(typeof({v}) = 'real' AND abs({v}) >= 1e15)")

    def partition_expr(self, value: str, kind: str, parts: int) -> str:
        # `%` reads its operands as integers: 3 and 3.0 fall in the same part, a text in part 0
        return f"coalesce(abs({value} % {parts}), 0)"


_DUCKDB_INTS = {
    "BOOLEAN": 1, "TINYINT": 3, "SMALLINT": 5, "INTEGER": 10, "BIGINT": 19, "HUGEINT": 39,
    "UTINYINT": 3, "USMALLINT": 5, "UINTEGER": 10, "UBIGINT": 20,
}  # fmt: skip  (decimal digits of each integer type)
_DUCKDB_EXACT = frozenset({
    "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP WITH TIME ZONE",
    "UUID", "BLOB",
})  # fmt: skip
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


class _Duckdb(_Dialect):
    sqlglot_dialect = "duckdb"

    def types_sql(self, name: str, body: str, width: int) -> str:
        return _types_sql(name, body, width, "typeof({0})")

    def classify(self, type_name: str) -> str | None:
        name = type_name.upper()
        if name in _DUCKDB_INTS:
            return "int"
        if name in ("FLOAT", "DOUBLE"):
            return "float"
        if _DECIMAL.fullmatch(name):
            return "decimal"
        if name == "VARCHAR" or name.startswith("ENUM("):
            return "text"
        if name in _DUCKDB_EXACT:
            return "exact:" + name
        return None  # lists, structs, maps, intervals, unsigned 128 bits, ...

    def size_expr(self, column: str, kind: str) -> str | None:
        if kind == "text":
            return f"strlen(CAST({column} AS VARCHAR))"
        return f"octet_length({column})" if kind == "exact:BLOB" else None

    def stats_exprs(self, column: str, kind: str, type_name: str) -> list[str]:
        if kind == "text":  # binary order: the bytes
            return [f"count({column})", f"min(encode(CAST({column} AS VARCHAR)))",
                    f"max(encode(CAST({column} AS VARCHAR)))"]
        return [f"count({column})", f"min({column})", f"max({column})"]

    def slot(self, gold_kind: str, pred_kind: str, gold_type: str, pred_type: str) -> _Slot:
        kinds = {gold_kind, pred_kind}
        if kinds == {"int"}:
            return _Slot("CAST({0} AS HUGEINT)", "CAST({0} AS HUGEINT)")
        if kinds == {"float"}:
            return _Slot("CAST({0} AS DOUBLE)", "CAST({0} AS DOUBLE)")
        if kinds == {"int", "float"}:
            return _float_and_int(gold_kind == "int", "CAST({0} AS HUGEINT)", "CAST({0} AS DOUBLE)", "CAST({0} AS VARCHAR)")
        if kinds <= {"int", "decimal"}:
            shapes = [self._digits(t) for t in (gold_type, pred_type)]
            scale = max(s for _, s in shapes)
            if max(d for d, _ in shapes) + scale <= 38:
                value = f"CAST({{0}} AS DECIMAL(38, {scale}))"
                as_int = value.format("CAST({0} AS HUGEINT)")
                return _Slot(as_int if gold_kind == "int" else value, as_int if pred_kind == "int" else value)
        if kinds == {"text"}:
            return _Slot("CAST({0} AS VARCHAR)", "CAST({0} AS VARCHAR)", ' COLLATE "binary"', ' COLLATE "binary"')
        if gold_kind == pred_kind:  # one exact type
            return _Slot("{0}", "{0}")
        own = {"text": "CAST({0} AS VARCHAR)", "int": "CAST({0} AS HUGEINT)"}
        collate = {"text": ' COLLATE "binary"'}
        return _Slot(own.get(gold_kind, "{0}"), own.get(pred_kind, "{0}"), collate.get(gold_kind, ""),
                     collate.get(pred_kind, ""), split=True)

    @staticmethod
    def _digits(type_name: str) -> tuple[int, int]:
        """(integer digits, scale) of an integer or decimal type."""
        found = _DECIMAL.fullmatch(type_name.upper())
        if found:
            precision, scale = int(found.group(1)), int(found.group(2))
            return precision - scale, scale
        return _DUCKDB_INTS[type_name.upper()], 0

    def partition_expr(self, value: str, kind: str, parts: int) -> str:
        return f"hash({value}) % {parts}"


_PG_INTS = frozenset({"smallint", "integer", "bigint", "boolean"})
_PG_TEXTS = frozenset({"text", "character varying", "name"})
_PG_EXACT = frozenset({
    "date", "timestamp without time zone", "timestamp with time zone", "time without time zone", "uuid", "bytea",
})  # fmt: skip


class _Postgres(_Dialect):
    sqlglot_dialect = "postgres"
    partitions = False  # the server's grouping spills to disk past work_mem

    def types_sql(self, name: str, body: str, width: int) -> str:
        return _types_sql(name, body, width, "pg_typeof({0})::text")

    def classify(self, type_name: str) -> str | None:
        if type_name in _PG_INTS:
            return "int"
        if type_name == "numeric":
            return "decimal"
        if type_name in ("real", "double precision"):
            return "float"
        if type_name in _PG_TEXTS:
            return "text"
        if type_name in _PG_EXACT:
            return "exact:" + type_name
        return None  # char(n) pads, citext folds case, json has no equality, ...

    def size_expr(self, column: str, kind: str) -> str | None:
        if kind == "text":
            return f"octet_length(({column})::text)"
        if kind == "decimal":
            return f"octet_length(({column})::text)"  # a numeric may have 100,000 digits
        return f"octet_length({column})" if kind == "exact:bytea" else None

    def stats_exprs(self, column: str, kind: str, type_name: str) -> list[str]:
        if kind == "text" or type_name == "uuid":  # min(uuid) is PostgreSQL 16's
            value = f'({column})::text COLLATE "C"'
        elif type_name == "bytea":  # no min(bytea): hex text keeps the order of the bytes
            value = f"encode({column}, 'hex') COLLATE \"C\""
        else:
            value = f"({column})::int" if type_name == "boolean" else column
        return [f"count({column})", f"min({value})", f"max({value})"]

    def slot(self, gold_kind: str, pred_kind: str, gold_type: str, pred_type: str) -> _Slot:
        kinds = {gold_kind, pred_kind}
        if kinds == {"int"}:
            return _Slot(self._int(gold_type, "int8"), self._int(pred_type, "int8"))
        if kinds == {"int", "float"}:
            return _float_and_int(gold_kind == "int", self._int(gold_type if gold_kind == "int" else pred_type, "int8"),
                                  "({0})::float8", "({0})::text")
        if kinds <= {"int", "decimal"}:
            return _Slot(self._int(gold_type, "numeric"), self._int(pred_type, "numeric"))
        if kinds == {"float"}:
            return _Slot("({0})::float8", "({0})::float8")
        if kinds == {"text"}:
            return _Slot("({0})::text", "({0})::text", ' COLLATE "C"', ' COLLATE "C"')
        if gold_kind == pred_kind:
            return _Slot("{0}", "{0}")
        own = {"text": "({0})::text", "int": "({0})::int8"}
        collate = {"text": ' COLLATE "C"'}
        return _Slot(own.get(gold_kind, "{0}"), own.get(pred_kind, "{0}"), collate.get(gold_kind, ""),
                     collate.get(pred_kind, ""), split=True)

    @staticmethod
    def _int(type_name: str, target: str) -> str:
        return f"({{0}})::int::{target}" if type_name == "boolean" else f"({{0}})::{target}"


_MY_INTS = frozenset({1, 2, 3, 8, 9})  # protocol type codes: TINY, SHORT, LONG, LONGLONG, INT24
_MY_STRINGS = frozenset({15, 247, 248, 249, 250, 251, 252, 253, 254})  # VARCHAR, ENUM, SET, the BLOBs, (VAR_)STRING
_MY_UNSIGNED, _MY_BINARY, _MY_FLOATING = 32, 63, 31  # unsigned flag, the binary character set, "not fixed" decimals
_MY_TEXT = "CONVERT({0} USING utf8mb4)"
_MY_NOPAD = " COLLATE utf8mb4_nopad_bin"  # binary and NO PAD: utf8mb4_bin pads ('a' = 'a ')
_MY_DECIMAL = re.compile(r"DECIMAL\((\d+),(\d+)\)( UNSIGNED)?")


class _Mariadb(_Dialect):
    """MariaDB (10.2 on), through the MySQL engine's guarded stream.

    The types are those of the stream's column metadata (type code, flags, character set, length,
    decimals) from a `LIMIT 0` run of the wrapped query. Values reach Python as the engine's
    stream makes them (`plain_row`): decimals as int or float, dates and times as text. Text is
    grouped as utf8mb4 under `utf8mb4_nopad_bin` (every default collation folds case and accents
    and pads spaces, `utf8mb4_bin` too), binary strings as VARBINARY (a union of BINARY(n) would
    pad them again), integers and decimals as one DECIMAL(65, s) per column pair where they fit,
    doubles as themselves (their text on the wire is the shortest that reads back as the same
    double), integers against doubles as `_float_and_int`. FLOAT and doubles of fixed decimals
    (`ROUND(x, 2)`, `DOUBLE(10,3)`) are sent rounded (FLOAT to 6 digits) by rules that differ
    between a column and an expression, and a fixed-decimal double is even clipped to its display
    width once a CTE is materialised: no grouping is sure to agree with them, the case streams.
    DATETIME and TIMESTAMP group together only at one precision (a zero date reaches Python as
    text whose fraction digits are the type's). The grouping sorts (`SQL_BIG_RESULT`: a filesort
    spills to disk, where a temporary table's unique key is 5 to 10 times slower), and a sort and
    its group boundaries read only the first `max_sort_length` bytes of a value: longer text and
    blobs are grouped by their SHA-256 too."""

    sqlglot_dialect = "mysql"
    metadata_types = True
    partitions = False
    select_hint = "SQL_BIG_RESULT "
    session_exprs = ("@@max_sort_length",)

    @classmethod
    def accepts(cls, engine: Any) -> bool:
        # MySQL has no utf8mb4_nopad_bin and no max_statement_time; a connection in another
        # character set could turn distinct text into the same Python string
        server = getattr(getattr(engine, "spec", None), "server", None)
        charset = dict(getattr(server, "options", None) or ()).get("charset", "utf8mb4")
        return bool(getattr(engine, "is_mariadb", False)) and str(charset).lower() == "utf8mb4"

    def quote(self, name: str) -> str:
        return f"`{name}`"

    def type_name(self, field: Any) -> str:
        code, flags, charset, length, scale = field
        unsigned = " UNSIGNED" if flags & _MY_UNSIGNED else ""
        if code in _MY_INTS:
            return "INT" + unsigned
        if code == 13:
            return "YEAR"
        if code in (0, 246):  # length counts the digits, a point and a sign
            return f"DECIMAL({length - (scale > 0) - (not unsigned)},{scale}){unsigned}"
        if code == 5:
            return "DOUBLE" if scale == _MY_FLOATING else f"DOUBLE with {scale} decimals"
        if code in (7, 12):
            return f"{'TIMESTAMP' if code == 7 else 'DATETIME'}({scale})"
        if code in _MY_STRINGS:
            return "BLOB" if charset == _MY_BINARY else "TEXT"
        named = {4: "FLOAT", 6: "NULL", 10: "DATE", 14: "DATE", 11: f"TIME({scale})", 16: f"BIT({length})",
                 245: "JSON", 255: "GEOMETRY"}
        return named.get(code, f"type {code}")

    def classify(self, type_name: str) -> str | None:
        if type_name in ("INT", "INT UNSIGNED", "YEAR"):
            return "int"
        if _MY_DECIMAL.fullmatch(type_name):
            return "decimal"
        if type_name == "DOUBLE":
            return "float"
        if type_name == "TEXT":  # ENUM, SET, JSON (text in MariaDB), UUID, INET6 too
            return "text"
        if type_name in ("BLOB", "NULL"):  # NULL: a column of NULLs only
            return "exact:BLOB"
        if type_name.startswith("BIT("):  # bytes, as many as the type's: BIT(1) and BIT(9) never equal
            return f"exact:BLOB bit{(int(type_name[4:-1]) + 7) // 8}"
        if type_name == "DATE":
            return "exact:date"
        found = re.fullmatch(r"(TIME|DATETIME|TIMESTAMP)\(([0-6])\)", type_name)
        if found:
            return "exact:time" if found.group(1) == "TIME" else f"exact:datetime({found.group(2)})"
        return None  # FLOAT, fixed-decimal doubles, MySQL's JSON, geometry, ...

    def size_expr(self, column: str, kind: str) -> str | None:
        if kind == "text":
            return f"octet_length({_MY_TEXT.format(column)})"
        return f"octet_length({column})" if kind == "exact:BLOB" else None

    def stats_exprs(self, column: str, kind: str, type_name: str) -> list[str]:
        if kind == "text":
            value = _MY_TEXT.format(column) + _MY_NOPAD
        elif kind.startswith("exact:BLOB"):  # bytes in their order (BIT too)
            value = f"CAST({column} AS BINARY)"
        elif type_name.startswith("TIMESTAMP("):  # ordered as shown, not as instants
            value = f"CAST({column} AS DATETIME({type_name[10:-1]}))"
        else:
            value = column
        return [f"count({column})", f"min({value})", f"max({value})"]

    def hash_bytes(self, session: dict[str, Any]) -> int | None:
        # the sort key holds up to 3 bytes a character (utf8mb4_nopad_bin), at most max_sort_length
        return int(session.get("@@max_sort_length") or 0) // 4

    def hash_expr(self) -> str:
        return "sha2({v}, 256)"

    def _value(self, kind: str, type_name: str) -> str:
        if kind == "text":
            return _MY_TEXT
        if kind == "exact:BLOB":
            return "CAST({0} AS BINARY)"
        return "CAST({0} AS SIGNED)" if type_name == "YEAR" else "{0}"

    def slot(self, gold_kind: str, pred_kind: str, gold_type: str, pred_type: str) -> _Slot:
        kinds = {gold_kind, pred_kind}
        gold_value, pred_value = self._value(gold_kind, gold_type), self._value(pred_kind, pred_type)
        if kinds == {"int"} or kinds == {"float"}:  # a union of signed and unsigned is DECIMAL(20,0)
            return _Slot(gold_value, pred_value)
        if kinds == {"int", "float"}:
            int_value = gold_value if gold_kind == "int" else pred_value
            return _float_and_int(gold_kind == "int", int_value, "CAST({0} AS DOUBLE)", "CAST({0} AS CHAR)",
                                  "CONCAT('f', {0})")
        if kinds <= {"int", "decimal"}:
            shapes = [self._digits(t) for t in (gold_type, pred_type)]
            scale = max(s for _, s in shapes)
            if max(d for d, _ in shapes) + scale <= 65:
                exact = f"CAST({{0}} AS DECIMAL(65, {scale}))"
                return _Slot(exact.format(gold_value), exact.format(pred_value))
            if gold_type == pred_type:
                return _Slot("{0}", "{0}")
        elif kinds == {"text"}:
            return _Slot(_MY_TEXT, _MY_TEXT, _MY_NOPAD, _MY_NOPAD)
        elif gold_kind == pred_kind:  # one exact type (DATETIME and TIMESTAMP of one precision)
            return _Slot(gold_value, pred_value)
        collate = {"text": _MY_NOPAD}
        return _Slot(gold_value, pred_value, collate.get(gold_kind, ""), collate.get(pred_kind, ""), split=True)

    @staticmethod
    def _digits(type_name: str) -> tuple[int, int]:
        """(integer digits, scale) of an integer or decimal type."""
        found = _MY_DECIMAL.fullmatch(type_name)
        if found:
            precision, scale = int(found.group(1)), int(found.group(2))
            return precision - scale, scale
        return 20, 0


_DIALECTS: dict[str, type[_Dialect]] = {
    "SqliteEngine": _Sqlite, "DuckdbEngine": _Duckdb, "PostgresEngine": _Postgres, "MysqlEngine": _Mariadb,
}  # fmt: skip


def supported(engine: Any) -> bool:
    """Whether `engine` is one that `judge_in_engine` can compare inside."""
    dialect = _DIALECTS.get(type(engine).__name__)
    return dialect is not None and callable(getattr(engine, "stream", None)) and dialect.accepts(engine)


def _names(width: int) -> str:
    return ", ".join(f"c{i}" for i in range(width))


def _types_sql(name: str, body: str, width: int, typeof: str) -> str:
    """Each column's static type, read without running the query (a row of typed NULLs)."""
    types = ", ".join(typeof.format(f"s.c{i}") for i in range(width))
    return (f"WITH {name}({_names(width)}) AS (\n{body}\n) SELECT {types}"
            f" FROM (SELECT 1 AS one) AS d LEFT JOIN (SELECT * FROM {name} LIMIT 0) AS s ON 1 = 1")


def wrappable_body(sql: str, dialect: str) -> str:
    """`sql` ready to sit inside parentheses: trailing semicolons and comments cut. Raises
    `_Decline` unless it is one statement whose parentheses balance (its tokens as sqlglot reads
    them), so that no `)` of its own can close the wrapping."""
    try:
        tokens = sqlglot.tokenize(sql, read=dialect)
    except Exception as error:  # noqa: BLE001 - any tokenizer failure: the SQL runs as written instead
        raise _Decline(f"cannot read the query: {error}") from None
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if not tokens:
        raise _Decline("no SQL")
    depth = 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            raise _Decline("more than one statement")
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth < 0:
            raise _Decline("unbalanced parentheses")
    if depth:
        raise _Decline("unbalanced parentheses")
    end = tokens[-1].end + 1
    if not 0 < end <= len(sql):
        raise _Decline("token positions do not map onto the text")
    return sql[:end]


# ----------------------------------------------------------------------------- column profiles

@dataclass(frozen=True)
class _Profile:
    """What a column's statistics prove about its values under the rules."""

    nn: int
    kind: str | None  # every value is a "number", an "exact" text (equal only to itself), a
    # "blob", or an ISO "string:<type>" (dates, times, uuids); None: mixed or unknown
    has_blob: bool
    low: Any  # the extremes, normalised (when `kind` is known)
    high: Any


_DISJOINT = frozenset({frozenset({"number", "exact"}), frozenset({"number", "blob"}), frozenset({"exact", "blob"})})


def _profile(stats: _Stats, kind: str, options: CompareOptions, norm: Callable[[Any], Any]) -> _Profile:
    low, high = stats.low, stats.high
    numeric = (int, float)
    if kind in ("int", "float", "decimal") or (not kind and isinstance(low, numeric) and isinstance(high, numeric)):
        return _Profile(stats.nn, "number", False, norm(low), norm(high))
    if kind == "text" or (not kind and isinstance(low, str) and isinstance(high, str)):
        first = low[:1] if isinstance(low, (str, bytes)) else ""
        first_code = (first[0] if isinstance(first, bytes) else ord(first)) if first else 0
        # binary order: no text starts lower than the smallest; none could read as a number
        # (they start with + - . or a digit, all below ':'), and the rules keep case and spaces
        exact = options.case_sensitive and not options.strip_whitespace and first_code > ord("9")
        return _Profile(stats.nn, "exact" if exact else None, False, low, high)
    if kind in ("exact:BLOB", "exact:bytea") or kind.startswith("exact:BLOB ") or (not kind and isinstance(low, bytes)):
        return _Profile(stats.nn, "blob", stats.nn > 0, low, high)
    if kind.startswith("exact:"):
        return _Profile(stats.nn, "string:" + kind, False, norm(low), norm(high))
    return _Profile(stats.nn, None, isinstance(high, bytes), None, None)  # SQLite: blobs sort last


def _may_equal(a: _Profile, b: _Profile) -> bool:
    """False when the two columns' values provably differ as multisets under the rules."""
    if a.nn != b.nn:
        return False
    if not a.nn:
        return True
    if a.has_blob != b.has_blob:  # bytes equal only bytes; a column's blobs are known (see _profile)
        return False
    if a.kind is None or b.kind is None:
        return True
    if a.kind == b.kind:
        return (a.low, a.high) == (b.low, b.high)
    return frozenset({a.kind, b.kind}) not in _DISJOINT and not (
        a.kind.startswith("string:") and b.kind in ("number", "blob")
        or b.kind.startswith("string:") and a.kind in ("number", "blob"))


# ----------------------------------------------------------------------------- the comparison

@dataclass
class _Diff:
    """The rows that differ under one pairing, compared under the rules where possible."""

    missing: list[tuple[Any, ...]]
    extra: list[tuple[Any, ...]]
    missing_count: int
    extra_count: int
    certain: bool  # the verdict (match or not) is the rules' one
    note: str = ""  # the counts may overstate the difference

    @property
    def match(self) -> bool:
        return self.certain and not self.missing_count and not self.extra_count


class _InEngine:
    """One comparison: the queries it runs, and what it learns of the two sides."""

    def __init__(self, engine: Any, dialect: _Dialect, limits: Limits, options: CompareOptions) -> None:
        self.engine = engine
        self.dialect = dialect
        self.limits = limits
        self.options = options
        self.passes = 0
        self.pairing_steps = 0  # of the last `candidates` search
        # names of our CTEs, unguessable: SQLite lets a CTE read a later one, and the prediction
        # (which ran alone first) can name no table that does not exist
        token = uuid.uuid4().hex[:12]
        self.gold_name, self.pred_name, self.rows_name = (dialect.quote(f"nl2sql {t} {token}")
                                                          for t in ("gold", "pred", "rows"))
        self.side_name = dialect.quote("nl2sql side")
        self.session: dict[str, Any] = {}  # `_Dialect.session_exprs`, as last read
        cs, strip = options.case_sensitive, options.strip_whitespace
        self.norm: Callable[[Any], Any] = (normalise_value if cs and not strip
                                           else lambda v: normalise_value(v, cs, strip))

    # -- running ----------------------------------------------------------------------------------
    def read(self, sql: str, *, trusted: bool, limits: Limits | None = None) -> Iterator[list[tuple[Any, ...]]]:
        """The batches of a wrapped query; any failure but a lost connection declines."""
        self.passes += 1
        try:
            with self.engine.stream(sql, limits or self.limits, trusted=trusted) as stream:
                yield from stream
        except ConnectionLost:
            raise
        except EngineError as error:
            raise _Decline(f"the wrapped query failed: {error}") from error

    def one_row(self, sql: str, *, trusted: bool) -> tuple[Any, ...]:
        rows = [row for batch in self.read(sql, trusted=trusted) for row in batch]
        if len(rows) != 1:
            raise _Decline(f"expected one row, got {len(rows)}")
        return rows[0]

    def sample(self, sql: str, *, trusted: bool) -> _Side:
        """The side run as written: its columns and first rows (its errors propagate)."""
        self.passes += 1
        started = time.perf_counter()
        rows: list[tuple[Any, ...]] = []
        with self.engine.stream(sql, self.limits, trusted=trusted) as stream:
            columns = stream.columns
            for batch in stream:
                rows.extend(tuple(row) for row in batch[: SAMPLE_ROWS - len(rows)])
                if len(rows) >= SAMPLE_ROWS:
                    break
        return _Side(sql, tuple(columns), rows, time.perf_counter() - started)

    def describe(self, side: _Side, *, trusted: bool) -> None:
        """A side's types (typed engines), row count (stopped past `max_rows`) and longest value."""
        dialect = self.dialect
        side.body = wrappable_body(side.sql, dialect.sqlglot_dialect)
        width = side.width
        if dialect.typed:
            types = self.column_types(side, trusted=trusted)
            kinds = tuple(dialect.classify(t) for t in types)
            if len(types) != width or None in kinds:
                unknown = sorted({t for t, k in zip(types, kinds) if k is None})
                raise _Decline(f"column types the engine compares by other rules: {', '.join(unknown)}")
            side.types, side.kinds = types, tuple(k or "" for k in kinds)
        else:
            side.types = side.kinds = ("",) * width
        sizes = [(i, e) for i in range(width) if (e := dialect.size_expr(f"s.c{i}", side.kinds[i]))]
        settings = dialect.session_exprs
        # the sizes measured under the LIMIT, so that only they are kept where the engine
        # materialises a subquery with a LIMIT (MariaDB)
        inner = ", ".join(f"{e} AS n{i}" for i, e in sizes) or "1"
        row = self.one_row(
            f"WITH {self.pred_name}({_names(width)}) AS (\n{side.body}\n) SELECT count(*)"
            f"{''.join(f', max(m.n{i})' for i, _ in sizes)}{''.join(f', {e}' for e in settings)}"
            f" FROM (SELECT {inner} FROM {self.pred_name} AS s LIMIT {self.limits.max_rows + 1}) AS m",
            trusted=trusted)
        side.rows = int(row[0])
        measured = row[1 : 1 + len(sizes)]
        longest: list[int | None] = [None] * width
        for (i, _), size in zip(sizes, measured):
            longest[i] = None if size is None else int(size)
        side.longest = tuple(longest)
        self.session.update(zip(settings, row[1 + len(sizes) :]))
        if any(size is not None and size > self.limits.max_value_bytes for size in longest):
            raise _Decline("a value is longer than max_value_bytes (its stream says so)")

    def column_types(self, side: _Side, *, trusted: bool) -> tuple[str, ...]:
        """Each column's type as the dialect names it: from a row of typed NULLs (`types_sql`), or
        from the column metadata of the wrapped query's stream, run with `LIMIT 0`."""
        dialect, width = self.dialect, side.width
        if not dialect.metadata_types:
            return tuple(str(t) for t in self.one_row(dialect.types_sql(self.pred_name, side.body, width),
                                                      trusted=trusted))
        self.passes += 1
        sql = f"WITH {self.pred_name}({_names(width)}) AS (\n{side.body}\n) SELECT * FROM {self.pred_name} LIMIT 0"
        try:
            with self.engine.stream(sql, self.limits, trusted=trusted) as stream:
                fields = getattr(stream, "field_types", None)
                for _ in stream:
                    pass
        except ConnectionLost:
            raise
        except EngineError as error:
            raise _Decline(f"the wrapped query failed: {error}") from error
        if not fields or len(fields) != width:
            raise _Decline("the stream does not describe the columns' types")
        return tuple(dialect.type_name(field) for field in fields)

    def statistics(self, side: _Side, *, trusted: bool) -> None:
        """A side's `_Stats`, unless read already (`_Dialect.stats_up_front`)."""
        width = side.width
        if len(side.stats) == width:
            return
        exprs = [e for i in range(width) for e in self.dialect.stats_exprs(f"s.c{i}", side.kinds[i], side.types[i])]
        row = self.one_row(f"WITH {self.pred_name}({_names(width)}) AS (\n{side.body}\n) SELECT {', '.join(exprs)}"
                           f" FROM {self.pred_name} AS s", trusted=trusted)
        if len(row) != 3 * width:
            raise _Decline("unexpected statistics")
        side.stats = tuple(_Stats(int(row[3 * i] or 0), row[3 * i + 1], row[3 * i + 2]) for i in range(width))

    # -- pairing -----------------------------------------------------------------------------------
    def scores(self, gold: _Side, pred: _Side) -> list[list[int]]:
        """How alike gold column i and predicted column j look: same name, shared sample values."""
        width = gold.width
        norm = self.norm
        gold_values = [Counter(norm(row[i]) for row in gold.sample) for i in range(width)]
        pred_values = [Counter(norm(row[j]) for row in pred.sample) for j in range(width)]
        names = [c.strip().casefold() for c in pred.columns]
        return [
            [(2 * SAMPLE_ROWS if names[j] == gold.columns[i].strip().casefold() else 0)
             + (SAMPLE_ROWS if gold.kinds[i] == pred.kinds[j] else 0)
             + sum((gold_values[i] & pred_values[j]).values()) for j in range(width)]
            for i in range(width)
        ]

    def candidates(self, gold: _Side, pred: _Side, scores: list[list[int]]) -> list[tuple[int, ...]] | None:
        """The pairings under which no column pair provably differs, best first; None past
        `MAX_CANDIDATES` + 1. Columns the statistics cannot tell apart make many partial pairings
        (11 of them: 11! orders), so a column is paired only where the gold columns after it can
        still each get a column of their own (a bipartite matching): every branch taken ends in a
        pairing, and the search takes at most `PAIRING_STEPS` steps, else the case is streamed."""
        width = gold.width
        if width > _MAX_SEARCH_WIDTH:
            raise _Decline(f"more than {_MAX_SEARCH_WIDTH} columns to pair")
        opts, norm = self.options, self.norm
        gold_profiles = [_profile(s, k, opts, norm) for s, k in zip(gold.stats, gold.kinds)]
        pred_profiles = [_profile(s, k, opts, norm) for s, k in zip(pred.stats, pred.kinds)]
        allowed = [sorted((j for j in range(width) if _may_equal(gold_profiles[i], pred_profiles[j])),
                          key=lambda j, i=i: (-scores[i][j], j)) for i in range(width)]
        found: list[tuple[int, ...]] = []
        assignment: list[int] = []
        used = [False] * width
        self.pairing_steps = 0

        def completes(start: int) -> bool:
            """The gold columns from `start` on can each still be paired with an unused column."""
            free = [[j for j in allowed[i] if not used[j]] for i in range(start, width)]
            return bipartite_matching(free, width) is not None

        def extend(i: int) -> bool:  # False: enough found
            if i == width:
                found.append(tuple(assignment))
                return len(found) <= MAX_CANDIDATES + 1
            for j in allowed[i]:
                if used[j]:
                    continue
                self.pairing_steps += 1
                if self.pairing_steps > PAIRING_STEPS:
                    raise _Decline(f"the column pairing search took more than {PAIRING_STEPS} steps")
                used[j] = True
                going = True
                if completes(i + 1):
                    assignment.append(j)
                    going = extend(i + 1)
                    assignment.pop()
                used[j] = False
                if not going:
                    return False
            return True

        if not completes(0):
            return []  # no pairing keeps every column pair possibly equal: no pairing matches
        if not extend(0):
            return None
        return sorted(found, key=lambda p: -sum(scores[i][j] for i, j in enumerate(p)))

    # -- the difference ----------------------------------------------------------------------------
    def difference(self, gold: _Side, pred: _Side, pairing: Sequence[int]) -> _Diff:
        """The multiset difference of gold and prediction (columns paired by `pairing`), computed
        by the engine and compared again under the rules in Python (module docstring, 2 to 4)."""
        dialect = self.dialect
        slots = [dialect.slot(gold.kinds[i], pred.kinds[j], gold.types[i], pred.types[j])
                 for i, j in enumerate(pairing)]
        if dialect.stats_up_front:  # where neither side has a value of 1e15 or more, every row's flag is 0
            self.statistics(gold, trusted=True)
            self.statistics(pred, trusted=False)
            slots = [dataclasses.replace(slot, flag="")
                     if slot.flag and not (_may_be_big(gold.stats[i]) or _may_be_big(pred.stats[j])) else slot
                     for i, (j, slot) in enumerate(zip(pairing, slots))]
        exact_bytes = dialect.hash_bytes(self.session)
        if exact_bytes is not None:  # values too long to group by exactly: their hash too
            for i, j in enumerate(pairing):
                sizes = [size for size in (gold.longest[i], pred.longest[j]) if size is not None]
                if sizes and max(sizes) > exact_bytes:
                    slots[i] = dataclasses.replace(slots[i], extra=dialect.hash_expr())
        parts, split_on = 1, None
        if dialect.partitions:
            grouped = gold.rows * gold.row_bytes() + pred.rows * pred.row_bytes()
            parts = max(1, math.ceil(grouped / PARTITION_BYTES))
            split_on = self._split_column(gold, slots) if parts > 1 else None
            if split_on is None:
                parts = 1
        # the union holds at most gold + prediction rows, both within the row cap
        limits = dataclasses.replace(self.limits, max_rows=2 * self.limits.max_rows + 1)
        pairs = [slot.split or bool(slot.keys) for slot in slots]  # two union columns
        apart = [slot.split for slot in slots]  # never grouped across sides
        kept: list[tuple[tuple[Any, ...], int]] = []
        overflow = False
        missing_total = extra_total = loose_missing = loose_extra = 0
        for part in range(parts):
            sql = self.diff_sql(gold, pred, pairing, slots, split_on, part, parts)
            for batch in self.read(sql, trusted=False, limits=limits):
                for raw in batch:
                    row, net = _decode(raw, pairs)
                    loose = self._loose_row(row, apart)
                    if net > 0:
                        missing_total += net
                        loose_missing += net if loose else 0
                    else:
                        extra_total -= net
                        loose_extra -= net if loose else 0
                    if len(kept) < RECONCILE_CAP:
                        kept.append((row, net))
                    else:
                        overflow = True
        missing, extra, missing_count, extra_count = self._reconcile(kept)
        if not overflow:
            return _Diff(missing, extra, missing_count, extra_count, certain=True)
        if not loose_missing and not loose_extra:  # every differing row differs under the rules
            return _Diff(missing, extra, missing_total, extra_total, certain=True)
        certain = (missing_total != extra_total or missing_total - loose_missing > loose_extra
                   or extra_total - loose_extra > loose_missing)
        note = (f"; counted as the engine tells rows apart: {loose_missing + loose_extra} of them hold values"
                " the comparison might still call equal")
        return _Diff(missing, extra, missing_total, extra_total, certain=certain, note=note)

    @staticmethod
    def _split_column(gold: _Side, slots: list[_Slot]) -> int | None:
        """The gold column whose values split the union into parts: one grouped across sides, an
        integer or text column first (a float's -0.0 and 0.0 may fall in different parts),
        the most varied in the sample first."""
        best: tuple[tuple[int, int], int] | None = None
        for i, slot in enumerate(slots):
            if slot.split or slot.keys:
                continue
            kinds = {type(row[i]) for row in gold.sample} - {type(None)}
            steady = int(gold.kinds[i] in ("int", "text", "") and not kinds & {float})
            key = (steady, len({row[i] for row in gold.sample}))
            if best is None or key > best[0]:
                best = (key, i)
        return None if best is None else best[1]

    def diff_sql(self, gold: _Side, pred: _Side, pairing: Sequence[int], slots: list[_Slot], split_on: int | None,
                 part: int, parts: int) -> str:
        gold_items, pred_items, values, keys, flags, extras = [], [], [], [], [], []
        for i, (j, slot) in enumerate(zip(pairing, slots)):
            g, p = f"{self.gold_name}.c{i}", f"{self.pred_name}.c{j}"
            if slot.keys:  # grouped by the keys; each side's value shown as the group's min()
                for n, (gold_key, pred_key) in enumerate(slot.keys):
                    gold_items.append(f"{gold_key.format(g)} AS k{i}_{n}")
                    pred_items.append(pred_key.format(p))
                    keys.append(f"k{i}_{n}")
                gold_items += [f"{slot.gold_value.format(g)} AS vg{i}", f"NULL AS vp{i}"]
                pred_items += ["NULL", slot.pred_value.format(p)]
                values += [f"min(vg{i})", f"min(vp{i})"]
            elif slot.split:
                gold_items += [f"{slot.gold_value.format(g)} AS vg{i}", f"NULL AS vp{i}"]
                pred_items += ["NULL", slot.pred_value.format(p)]
                values += [f"vg{i}{slot.gold_collate}", f"vp{i}{slot.pred_collate}"]
                if slot.extra:
                    extras += [slot.extra.format(v=f"vg{i}"), slot.extra.format(v=f"vp{i}")]
            else:
                gold_items.append(f"{slot.gold_value.format(g)} AS v{i}")
                pred_items.append(slot.pred_value.format(p))
                values.append(f"v{i}{slot.gold_collate}")
                if slot.flag:
                    flags.append(slot.flag.format(v=f"v{i}"))
                if slot.extra:
                    extras.append(slot.extra.format(v=f"v{i}"))
        groups = [v for v in values if not v.startswith("min(")] + keys + extras
        for start in range(0, len(flags), _FLAGS_PER_TERM):  # one grouping term per 60 columns' flags
            chunk = flags[start : start + _FLAGS_PER_TERM]
            groups.append(" + ".join(f"{1 << k} * {flag}" for k, flag in enumerate(chunk)))
        where = ""
        if parts > 1 and split_on is not None:
            where = f" WHERE {self.dialect.partition_expr(f'v{split_on}', gold.kinds[split_on], parts)} = {part}"
        selected = ", ".join(f"{v} AS r{k}" for k, v in enumerate(values))
        side = self.side_name
        return (
            f"WITH {self.pred_name}({_names(pred.width)}) AS (\n{pred.body}\n),\n"
            f"{self.gold_name}({_names(gold.width)}) AS (\n{gold.body}\n),\n"
            f"{self.rows_name} AS (SELECT {', '.join(gold_items)}, 1 AS {side} FROM {self.gold_name}"
            f" UNION ALL SELECT {', '.join(pred_items)}, -1 FROM {self.pred_name})\n"
            f"SELECT {self.dialect.select_hint}{selected}, sum({side}) AS net FROM {self.rows_name}{where}"
            f" GROUP BY {', '.join(groups)} HAVING sum({side}) <> 0"
        )

    def _loose_row(self, row: tuple[Any, ...], split: list[bool]) -> bool:
        """Whether a differing row may equal, under the rules, a row the engine grouped apart."""
        for value, is_split in zip(row, split):
            if value is None:
                continue  # NULL groups with NULL, across sides too
            if is_split or self._loose(value):
                return True
        return False

    def _loose(self, value: Any) -> bool:
        """Whether a value may equal, under the rules, a value the engine groups apart from it."""
        kind = type(value)
        if kind is int or kind is bytes:
            return False
        if kind is not str:
            return True  # floats (15 digits), and whatever else
        if not self.options.case_sensitive:
            return True
        if not value:
            return False
        if value[0] in _NUMBER_START or "\\" in value:  # (bytes SQLite could not decode show as \\xNN)
            return True
        return self.options.strip_whitespace and not (" " < value[0] <= "~" and " " < value[-1] <= "~")

    def _reconcile(self, kept: list[tuple[tuple[Any, ...], int]]
                   ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int, int]:
        """Missing and extra rows under the rules, from the engine's differing groups."""
        totals: dict[tuple[Any, ...], int] = {}
        members: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], int]]] = {}
        norm = self.norm
        for row, net in kept:
            key = tuple(map(norm, row))
            totals[key] = totals.get(key, 0) + net
            members.setdefault(key, []).append((row, net))
        missing: list[tuple[Any, ...]] = []
        extra: list[tuple[Any, ...]] = []
        missing_count = extra_count = 0
        for key, total in totals.items():
            if not total:
                continue
            if total > 0:
                missing_count += total
            else:
                extra_count -= total
            shown = missing if total > 0 else extra
            left = abs(total)  # shown from this key's groups of the same sign, original values
            for row, net in members[key]:
                if left <= 0 or len(shown) >= DIFF_CAP:
                    break
                if (net > 0) == (total > 0):
                    take = min(left, abs(net), DIFF_CAP - len(shown))
                    shown.extend([row] * take)
                    left -= take
        return missing, extra, missing_count, extra_count


def _decode(raw: Sequence[Any], split: list[bool]) -> tuple[tuple[Any, ...], int]:
    """A row of `diff_sql` as (values in gold column order, gold count minus predicted count)."""
    net = int(raw[-1])
    values: list[Any] = []
    k = 0
    for is_split in split:
        if is_split:  # the value of the side whose rows are left over (the other's if NULL)
            ours, theirs = (raw[k], raw[k + 1]) if net > 0 else (raw[k + 1], raw[k])
            values.append(theirs if ours is None else ours)
            k += 2
        else:
            values.append(raw[k])
            k += 1
    return tuple(values), net


def _with_diff(base: Comparison, diff: _Diff, pairing: Sequence[int]) -> Comparison:
    detail = base.detail or ""
    if diff.missing_count or diff.extra_count:
        detail += f" ({diff.missing_count} gold rows missing, {diff.extra_count} unexpected rows{diff.note})"
    return Comparison(match=False, reason=base.reason, pairing=tuple(pairing), missing=tuple(diff.missing),
                      extra=tuple(diff.extra), missing_count=diff.missing_count, extra_count=diff.extra_count,
                      detail=detail)


def _mismatch(reason: Reason, detail: str) -> Comparison:
    return Comparison(match=False, reason=reason.value, detail=detail)


def _likeliest(scores: list[list[int]]) -> tuple[int, ...]:
    width = len(scores)
    return tuple(greedy_pairing(((-scores[i][j], i, j) for i in range(width) for j in range(width)), width))


def compare_in_engine(run: _InEngine, gold: _Side, pred: _Side) -> Comparison:
    """The verdict `large.compare_large` gives (exec mode, unordered), from the engine; raises
    `_Decline` where it cannot be sure of it. Row counts known (`_InEngine.describe`)."""
    gold_width, pred_width = gold.width, pred.width
    if not gold.rows and not pred.rows:
        if gold_width != pred_width:
            return _mismatch(Reason.COLUMN_COUNT, f"both results are empty, but with {gold_width} and {pred_width} columns")
        return Comparison(match=True)
    if gold.rows != pred.rows:
        base = _mismatch(Reason.ROW_COUNT, f"expected {gold.rows} rows, got {pred.rows}")
        if not gold.rows or not pred.rows:  # one side is empty: everything on the other differs
            return Comparison(match=False, reason=base.reason, missing=tuple(gold.sample[:DIFF_CAP]),
                              extra=tuple(pred.sample[:DIFF_CAP]), missing_count=gold.rows, extra_count=pred.rows,
                              detail=base.detail)
        if gold_width != pred_width:
            return base
        pairing = _likeliest(run.scores(gold, pred))
        return _with_diff(base, run.difference(gold, pred, pairing), pairing)
    if gold_width != pred_width:
        return _mismatch(Reason.COLUMN_COUNT, f"expected {gold_width} columns, got {pred_width}")
    scores = run.scores(gold, pred)
    likeliest = _likeliest(scores)
    diff = run.difference(gold, pred, likeliest)
    if diff.match:
        return Comparison(match=True, pairing=likeliest)
    if not diff.certain:
        raise _Decline("too many differing rows that the comparison might still call equal")
    if gold_width > 1:  # another pairing might match: the statistics rule out most
        run.statistics(gold, trusted=True)
        run.statistics(pred, trusted=False)
        others = run.candidates(gold, pred, scores)
        if others is None or len([p for p in others if p != likeliest]) > MAX_CANDIDATES:
            raise _Decline(f"more than {MAX_CANDIDATES} other column pairings to try")
        for pairing in others:
            if pairing == likeliest:
                continue
            other = run.difference(gold, pred, pairing)
            if other.match:
                return Comparison(match=True, pairing=pairing)
            if not other.certain:
                raise _Decline("too many differing rows that the comparison might still call equal")
    base = _mismatch(Reason.VALUES, "no column pairing makes the rows equal")
    return _with_diff(base, diff, likeliest)


# ----------------------------------------------------------------------------- judging

def judge_in_engine(predicted_sql: str, gold_sql: str, engine: Any, limits: Limits, *, order_matters: bool,
                    options: CompareOptions) -> "Judgement | None":
    """Judge a prediction against one gold query inside the engine (module docstring), as
    `large.judge_large` would by streaming; None when that is not possible here (the caller
    streams). A failing gold raises `GoldError`; a prediction that fails alone is its verdict; a
    lost connection propagates."""
    from pytest_nl2sql.judge.execute import Judgement, gold_error, prediction_failed  # execute.py imports large.py

    if order_matters or options.mode is not Mode.EXEC or options.has_tolerance or not supported(engine):
        return None
    run = _InEngine(engine, _DIALECTS[type(engine).__name__](), limits, options)
    try:
        gold = run.sample(gold_sql, trusted=True)
    except ConnectionLost:
        raise
    except EngineError as e:
        raise gold_error("gold query", e) from e
    try:
        pred = run.sample(predicted_sql, trusted=False)
    except ConnectionLost:
        raise
    except EngineError as e:
        return prediction_failed(e, predicted_sql)
    if not gold.width or not pred.width:
        return None
    cap = TooManyRows(f"the result has more than {limits.max_rows} rows (the row cap)")
    try:
        run.describe(gold, trusted=True)
        if gold.rows > limits.max_rows:
            raise gold_error("gold query", cap)
        run.describe(pred, trusted=False)
        if pred.rows > limits.max_rows:
            return prediction_failed(cap, predicted_sql)
        comparison = compare_in_engine(run, gold, pred)
    except _Decline:
        return None
    large = LargeComparison(comparison, gold.summary(), pred.summary(), run.passes)
    shown = QueryResult(pred.columns, list(pred.sample), pred.seconds)
    verdict = Verdict.PASS if comparison.match else Verdict.MISMATCH
    return Judgement(verdict, comparison.reason, large.comparison, 0, shown, None, predicted_sql)
