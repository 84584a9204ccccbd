"""Soft scores (spec 004, Spider 2.0's evaluation): how close a predicted result came to the gold.

Column scores: precision / recall / F1 of the predicted column *names* against the gold's, after
normalising each name (`ColumnNamer`): lower case, trimmed, underscores to spaces, the stop words
of / the / a / an removed, and each word replaced by its synonym (`DEFAULT_SYNONYMS`, plus the ini
option `nl2sql_synonyms` and `compare: {synonyms: …}` of a suite or case; chains are followed, so
`cnt = count` and the default `count = number` make all three one word). Columns are paired one to
one by normalised name (a name used twice pairs twice at most).

A name that is an expression the engine named after its text (it contains a parenthesis, such as
SQLite's `count(*)` or `avg(T1.age)`) carries no chosen name: it is read with sqlglot and named by
its parts: column references by their column name (table qualifiers dropped), a function by its
name and then its arguments, `count(…)` by `count` alone whatever it counts (`count(*)`,
`count(id)`, DuckDB's `count_star()`; `count distinct` for `count(DISTINCT …)`), operators by their sqlglot names (`sub`,
`div`). So `COUNT(*)`, `count(T1.id)`, DuckDB's `count_star()` and PostgreSQL's `count` are all
`number`, and
`avg(T1.age)` is `average age`. A text sqlglot cannot read is normalised as any other name.

Row scores compare every column the result comparison pairs (`row_pairs`): columns of equal
normalised name first (among several of one name, the comparison's choice first), then, for each
gold column left, the predicted column the comparison paired it with (`Comparison.pairing`, by
position and values: the verdict's own pairing, or its best-effort one on a mismatch), if no name
took it. A gold column neither pairs is missing: rows are matched on the others (none paired: row
scores 0). So `max(price)` standing where the gold's `avg(price)` does is compared with it, and a
right answer with renamed or reordered columns matches every row. The rows of both results
projected onto those pairs are matched one to one, optimally (a maximum matching; Spider 2.0's greedy one can undercount),
with values compared as the case's comparison does: `normalise_value` with its `case_sensitive`
and `strip_whitespace`, numbers within `abs_tol` / `rel_tol`. Without a tolerance, rows match by
equal normalised tuples (a multiset intersection); with one, rows are grouped by their non-numeric
values and each group is matched by Hopcroft–Karp (a group above `MATCHING_CAP` pairs is matched
greedily in sorted order instead, which is optimal for one numeric column).

Precision = matched / predicted, recall = matched / gold, F1 their harmonic mean; a ratio over an
empty side is 1 when both sides are empty and 0 otherwise. With several golds, all six scores come
from the gold with the best row F1, then the best column F1.
"""

from __future__ import annotations

import math
import operator
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_nl2sql.judge.compare import CompareOptions, Comparison, compare_results
from pytest_nl2sql.judge.equality import normalise_value

STOP_WORDS = frozenset({"of", "the", "a", "an"})

# Spec 004's synonym map (its listed entries and its worked example, `id` -> `identifier`), and the
# abbreviations of the same kind that column names commonly use. Values are canonical words.
DEFAULT_SYNONYMS: Mapping[str, str] = {
    "unique": "distinct",
    "avg": "average",
    "mean": "average",
    "sum": "total",
    "count": "number",
    "num": "number",
    "cnt": "number",
    "qty": "quantity",
    "amt": "amount",
    "desc": "description",
    "id": "identifier",
    "max": "maximum",
    "min": "minimum",
    "yr": "year",
    "pct": "percent",
    "percentage": "percent",
    "addr": "address",
    "dept": "department",
    "dob": "birthdate",
}

# Functions some engine names a `count(*)` column after (DuckDB's `count_star()`); read as `count(*)`.
COUNT_STAR_NAMES = frozenset({"count_star"})

MATCHING_CAP = 4_000_000  # gold x predicted row pairs of one group matched exactly (with a tolerance)

SCORE_NAMES = ("column_precision", "column_recall", "column_f1", "row_precision", "row_recall", "row_f1")


# ----------------------------------------------------------------------------- synonyms

def _word(text: Any, what: str) -> str:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a word, not {text!r}")
    words = text.strip().lower().replace("_", " ").split()
    if len(words) != 1:
        raise ValueError(f"{what} must be one word, not {text!r}")
    return words[0]


def synonyms_from(mapping: Any, where: str = "compare option 'synonyms'") -> dict[str, str]:
    """A `{word: word}` synonym map, checked (one word each side, lower-cased); ValueError says why."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{where} must be a mapping of word: word, not {mapping!r}")
    return {_word(k, f"{where}: a key"): _word(v, f"{where}: the synonym of {k!r}") for k, v in mapping.items()}


def parse_synonym_lines(lines: Iterable[str] | str) -> dict[str, str]:
    """The ini option `nl2sql_synonyms`: lines `word = word` (blank lines and `#` comments ignored)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    pairs: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        word, sep, synonym = text.partition("=")
        if not sep:
            raise ValueError(f"nl2sql_synonyms line {number}: expected `word = word`, not {text!r}")
        pairs[_word(word, f"nl2sql_synonyms line {number}")] = _word(synonym, f"nl2sql_synonyms line {number}")
    return pairs


def _resolved(synonyms: Mapping[str, str]) -> dict[str, str]:
    """Every word to the end of its chain (`cnt -> count -> number`); a cycle stops where it closes."""
    out = {}
    for word in synonyms:
        seen, current = {word}, synonyms[word]
        while current in synonyms and current not in seen:
            seen.add(current)
            current = synonyms[current]
        out[word] = current
    return out


# ----------------------------------------------------------------------------- column names

@dataclass
class ColumnNamer:
    """Normalises column names with one synonym map (memoised: a run sees few distinct names)."""

    synonyms: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SYNONYMS))
    _canonical: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _names: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._canonical = _resolved(self.synonyms)

    @classmethod
    def with_extra(cls, *maps: Mapping[str, str] | None) -> "ColumnNamer":
        """The default map with `maps` added (later ones win)."""
        merged = dict(DEFAULT_SYNONYMS)
        for extra in maps:
            merged.update(extra or {})
        return cls(merged)

    def normalise(self, name: Any) -> str:
        text = "" if name is None else str(name)
        known = self._names.get(text)
        if known is None:
            words = _expression_words(text) if "(" in text else None
            if words is None:
                words = _split(text)
            known = " ".join(self._canonical.get(w, w) for w in words if w not in STOP_WORDS)
            self._names[text] = known
        return known


def _split(text: str) -> list[str]:
    return text.strip().lower().replace("_", " ").split()


def _expression_words(text: str) -> list[str] | None:
    """The words of a column named after its expression (`count(*)`), read with sqlglot; None when
    sqlglot cannot read it."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        node = sqlglot.parse_one(text)
    except (SqlglotError, RecursionError, ValueError, TypeError):
        return None
    if node is None or isinstance(node, (exp.Alias, exp.Select, exp.Command)):
        return None

    def words(n: exp.Expression) -> list[str]:
        if isinstance(n, (exp.Column, exp.Identifier)):
            return _split(n.name)
        if isinstance(n, exp.Star):
            return []
        if isinstance(n, exp.Literal):
            return _split(str(n.this))
        if isinstance(n, exp.Count):
            return ["count"] + (["distinct"] if n.find(exp.Distinct) else [])
        if isinstance(n, exp.Binary):
            return words(n.left) + [n.key] + words(n.right)
        out: list[str] = []
        if isinstance(n, exp.Anonymous):
            if str(n.name).lower() in COUNT_STAR_NAMES and not n.expressions:
                return ["count"]
            out += _split(str(n.name))
        elif isinstance(n, exp.Func):
            out += _split(n.sql_name())
        elif isinstance(n, exp.Distinct):
            out.append("distinct")
        for child in n.iter_expressions():
            out += words(child)
        return out

    return words(node)


def column_pairs(gold_names: Sequence[str], pred_names: Sequence[str]) -> list[tuple[int, int]]:
    """(gold index, predicted index) for columns of equal normalised name, one to one, in gold order
    (the k-th gold column of a name pairs with the k-th predicted column of that name)."""
    free: dict[str, deque[int]] = {}
    for j, name in enumerate(pred_names):
        free.setdefault(name, deque()).append(j)
    pairs = []
    for i, name in enumerate(gold_names):
        slots = free.get(name)
        if slots:
            pairs.append((i, slots.popleft()))
    return pairs


def row_pairs(gold_names: Sequence[str], pred_names: Sequence[str], pairing: Sequence[int] | None) -> list[tuple[int, int]]:
    """(gold index, predicted index) of the columns the row scores compare, in gold order: equal
    normalised names first (as many pairs per name as `column_pairs` makes, the comparison's
    `pairing` choosing among columns of one name), then `pairing[i]` for a gold column i left, if
    its predicted column is still free. A gold column left after both is missing."""
    given = {i: j for i, j in enumerate(pairing or ()) if 0 <= j < len(pred_names)}
    pairs: dict[int, int] = {}
    used: set[int] = set()

    def take(i: int, j: int) -> None:
        pairs[i] = j
        used.add(j)

    for i, name in enumerate(gold_names):  # a name the comparison agrees with
        j = given.get(i)
        if j is not None and j not in used and pred_names[j] == name:
            take(i, j)
    free: dict[str, deque[int]] = {}
    for j, name in enumerate(pred_names):
        if j not in used:
            free.setdefault(name, deque()).append(j)
    for i, name in enumerate(gold_names):  # the other names, in order
        slots = free.get(name)
        if i not in pairs and slots:
            take(i, slots.popleft())
    for i in range(len(gold_names)):  # the comparison's pairing for the columns no name paired
        j = given.get(i)
        if i not in pairs and j is not None and j not in used:
            take(i, j)
    return sorted(pairs.items())


def comparison_pairing(comparison: Comparison | None, gold_width: int, pred_width: int) -> tuple[int, ...] | None:
    """The column pairing of a comparison: its `pairing`, or column by column for a match that
    needed none (both results empty, of one width)."""
    if comparison is None:
        return None
    if comparison.pairing is not None:
        return comparison.pairing
    return tuple(range(gold_width)) if comparison.match and gold_width == pred_width else None


# ----------------------------------------------------------------------------- scores

@dataclass(frozen=True)
class SoftScores:
    column_precision: float
    column_recall: float
    column_f1: float
    row_precision: float
    row_recall: float
    row_f1: float

    def to_json(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in SCORE_NAMES}

    @classmethod
    def from_counts(cls, columns: tuple[int, int, int], rows: tuple[int, int, int]) -> "SoftScores":
        """From (matched, gold, predicted) counts of columns and of rows."""
        return cls(*_prf(*columns), *_prf(*rows))


def _ratio(matched: int, total: int, other: int) -> float:
    if total:
        return matched / total
    return 1.0 if other == 0 else 0.0


def _prf(matched: int, gold: int, predicted: int) -> tuple[float, float, float]:
    precision = _ratio(matched, predicted, gold)
    recall = _ratio(matched, gold, predicted)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


@dataclass(frozen=True)
class ValueRule:
    """How two values are equal for the row scores: the case's comparison options."""

    case_sensitive: bool = True
    strip_whitespace: bool = False
    abs_tol: float = 0.0
    rel_tol: float = 0.0

    @classmethod
    def of(cls, options: Any) -> "ValueRule":
        """From a `CompareOptions` (its mode is not used: soft scores compare as the default mode does)."""
        if options is None:
            return cls()
        return cls(options.case_sensitive, options.strip_whitespace, options.abs_tol, options.rel_tol)

    @property
    def tolerant(self) -> bool:
        return self.abs_tol > 0 or self.rel_tol > 0

    def close(self, a: Any, b: Any) -> bool:
        return math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=self.abs_tol)

    def options(self) -> CompareOptions:
        """The default comparison with these options (to pair columns when no verdict did)."""
        return CompareOptions(abs_tol=self.abs_tol, rel_tol=self.rel_tol, case_sensitive=self.case_sensitive,
                              strip_whitespace=self.strip_whitespace)


def soft_scores(
    gold_names: Sequence[str], gold_rows: Sequence[Sequence[Any]],
    pred_names: Sequence[str], pred_rows: Sequence[Sequence[Any]],
    *, namer: ColumnNamer | None = None, rule: ValueRule | None = None,
    comparison: Comparison | None = None,
) -> SoftScores:
    """The six soft scores of one predicted result against one gold result. `comparison`: the
    verdict's comparison of the two (its column pairing); without one, they are compared here as
    the default comparison does, with the rule's options, rows unordered."""
    namer = namer or ColumnNamer()
    rule = rule or ValueRule()
    gold_norm = [namer.normalise(n) for n in gold_names]
    pred_norm = [namer.normalise(n) for n in pred_names]
    columns = (len(column_pairs(gold_norm, pred_norm)), len(gold_norm), len(pred_norm))
    if comparison is None:
        comparison = compare_results(gold_rows, pred_rows, options=rule.options(), gold_columns=len(gold_names),
                                     pred_columns=len(pred_names))
    pairs = row_pairs(gold_norm, pred_norm, comparison_pairing(comparison, len(gold_names), len(pred_names)))
    if not pairs:
        return SoftScores(*_prf(*columns), 0.0, 0.0, 0.0)
    matched = matched_rows(gold_rows, pred_rows, pairs, rule)
    return SoftScores.from_counts(columns, (matched, len(gold_rows), len(pred_rows)))


def best_soft_scores(golds: Sequence[tuple[Sequence[str], Sequence[Sequence[Any]]]],
                     pred_names: Sequence[str], pred_rows: Sequence[Sequence[Any]], *,
                     namer: ColumnNamer | None = None, rule: ValueRule | None = None,
                     comparison_of: Callable[[int], Comparison | None] | None = None) -> SoftScores | None:
    """The scores against the gold with the best row F1, then column F1 (the first on a tie).
    `comparison_of(i)`: the verdict's comparison against gold i (None: compared here)."""
    best: SoftScores | None = None
    for index, (names, rows) in enumerate(golds):
        if best is not None and (best.row_f1, best.column_f1) == (1.0, 1.0):
            break  # no later gold can do better
        comparison = comparison_of(index) if comparison_of is not None else None
        scores = soft_scores(names, rows, pred_names, pred_rows, namer=namer, rule=rule, comparison=comparison)
        if best is None or (scores.row_f1, scores.column_f1) > (best.row_f1, best.column_f1):
            best = scores
    return best


def matched_rows(gold_rows: Sequence[Sequence[Any]], pred_rows: Sequence[Sequence[Any]],
                 pairs: Sequence[tuple[int, int]], rule: ValueRule) -> int:
    """The size of a maximum one-to-one matching of gold to predicted rows on the paired columns."""
    if (all(g == p for g, p in pairs) and len(gold_rows) == len(pred_rows)
            and all(map(operator.eq, gold_rows, pred_rows))):
        return len(gold_rows)  # the same rows, column for column (often the gold's own text): each matches itself
    def project(rows: Sequence[Sequence[Any]], side: int) -> list[tuple]:
        cols = [p[side] for p in pairs]
        return [tuple(normalise_value(row[c], rule.case_sensitive, rule.strip_whitespace) for c in cols) for row in rows]

    if rule.case_sensitive and not rule.strip_whitespace:
        # Python equality is finer than the comparison's (1 == 1.0, but NaN != NaN, 1 != "1"), so
        # the raw matching is a lower bound: when it is as large as can be, it is the answer
        raw = _raw_matched(gold_rows, pred_rows, pairs)
        if raw is not None and raw == min(len(gold_rows), len(pred_rows)):
            return raw
    gold, pred = project(gold_rows, 0), project(pred_rows, 1)
    if not rule.tolerant:
        return sum((Counter(gold) & Counter(pred)).values())
    # rows can only match within a group of equal non-numeric values
    groups: dict[tuple, tuple[list[tuple], list[tuple]]] = {}
    for side, rows in ((0, gold), (1, pred)):
        for row in rows:
            key = tuple(None if _is_number(v) else (v,) for v in row)
            groups.setdefault(key, ([], []))[side].append(tuple(v for v in row if _is_number(v)))
    total = 0
    for g, p in groups.values():
        if g and p:
            total += _match_numbers(g, p, rule)
    return total


def _raw_matched(gold_rows: Sequence[Sequence[Any]], pred_rows: Sequence[Sequence[Any]],
                 pairs: Sequence[tuple[int, int]]) -> int | None:
    gold_cols, pred_cols = [p[0] for p in pairs], [p[1] for p in pairs]
    try:
        gold = Counter(tuple(row[c] for c in gold_cols) for row in gold_rows)
        pred = Counter(tuple(row[c] for c in pred_cols) for row in pred_rows)
        return sum((gold & pred).values())
    except TypeError:  # an unhashable value
        return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _match_numbers(gold: list[tuple], pred: list[tuple], rule: ValueRule) -> int:
    """A maximum matching of numeric tuples, two tuples matching when every number is close."""
    exact = sum((Counter(gold) & Counter(pred)).values())
    if exact == min(len(gold), len(pred)):
        return exact
    if len(gold[0]) == 1 or len(gold) * len(pred) > MATCHING_CAP:
        return _sorted_greedy(gold, pred, rule)
    adjacency = [[j for j, q in enumerate(pred) if all(rule.close(a, b) for a, b in zip(row, q))] for row in gold]
    return hopcroft_karp(adjacency, len(pred))


def _sorted_greedy(gold: list[tuple], pred: list[tuple], rule: ValueRule) -> int:
    """Two pointers over both sides sorted: a maximum matching when closeness is an interval of
    the sorted order (one numeric column); a good one otherwise."""
    g, p = sorted(gold), sorted(pred)
    i = j = matched = 0
    while i < len(g) and j < len(p):
        if all(rule.close(a, b) for a, b in zip(g[i], p[j])):
            matched, i, j = matched + 1, i + 1, j + 1
        elif g[i] < p[j]:
            i += 1
        else:
            j += 1
    return matched


def hopcroft_karp(adjacency: Sequence[Sequence[int]], right_size: int) -> int:
    """The size of a maximum matching of a bipartite graph (left i adjacent to `adjacency[i]`)."""
    INF = float("inf")
    left_size = len(adjacency)
    match_left = [-1] * left_size
    match_right = [-1] * right_size
    dist = [0.0] * left_size

    def bfs() -> bool:
        queue = deque()
        for u in range(left_size):
            if match_left[u] == -1:
                dist[u] = 0
                queue.append(u)
            else:
                dist[u] = INF
        found = False
        while queue:
            u = queue.popleft()
            for v in adjacency[u]:
                w = match_right[v]
                if w == -1:
                    found = True
                elif dist[w] == INF:
                    dist[w] = dist[u] + 1
                    queue.append(w)
        return found

    def dfs(root: int) -> bool:
        # iterative depth-first search along the BFS layers (results can be long)
        stack = [(root, iter(adjacency[root]))]
        path: list[tuple[int, int]] = []
        while stack:
            u, edges = stack[-1]
            advanced = False
            for v in edges:
                w = match_right[v]
                if w == -1:
                    path.append((u, v))
                    for a, b in path:
                        match_left[a], match_right[b] = b, a
                    return True
                if dist[w] == dist[u] + 1:
                    path.append((u, v))
                    stack.append((w, iter(adjacency[w])))
                    advanced = True
                    break
            if not advanced:
                dist[u] = INF
                stack.pop()
                if path:
                    path.pop()
        return False

    matching = 0
    while bfs():
        for u in range(left_size):
            if match_left[u] == -1 and dfs(u):
                matching += 1
    return matching


def mean_scores(scores: Iterable[Mapping[str, float] | None]) -> dict[str, float] | None:
    """The summary's `soft_scores`: means over the given cases, a case without scores counting 0."""
    items = list(scores)
    if not items:
        return None
    return {name: sum((s or {}).get(name, 0.0) for s in items) / len(items) for name in SCORE_NAMES}
