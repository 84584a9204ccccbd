"""The result fingerprint follows the comparison's notion of "the same result"."""

from __future__ import annotations

import datetime
import decimal
import random
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_nl2sql.judge.compare import compare_results
from pytest_nl2sql.judge.equality import DIGEST_CHARS, canonical_value, result_fingerprint

values = st.one_of(
    st.none(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=4),
)


@st.composite
def tables(draw: st.DrawFn) -> list[tuple[object, ...]]:
    width = draw(st.integers(1, 4))
    return draw(st.lists(st.tuples(*[values] * width), max_size=6))


def permute_columns(table: list[tuple[object, ...]], order: list[int]) -> list[tuple[object, ...]]:
    return [tuple(row[i] for i in order) for row in table]


@given(tables(), st.randoms(use_true_random=False), st.booleans())
def test_column_order_never_matters(table, rng: random.Random, ordered: bool) -> None:
    order = list(range(len(table[0]))) if table else []
    rng.shuffle(order)
    assert result_fingerprint(permute_columns(table, order), ordered) == result_fingerprint(table, ordered)


@given(tables(), st.randoms(use_true_random=False))
def test_row_order_does_not_matter_when_unordered(table, rng: random.Random) -> None:
    shuffled = list(table)
    rng.shuffle(shuffled)
    order = list(range(len(table[0]))) if table else []
    rng.shuffle(order)
    assert result_fingerprint(permute_columns(shuffled, order), False) == result_fingerprint(table, False)


def test_row_order_matters_when_ordered() -> None:
    rows = [("pen", 1.5), ("ink", 3.0)]
    assert result_fingerprint(rows, True) != result_fingerprint(rows[::-1], True)
    assert result_fingerprint(rows, False) == result_fingerprint(rows[::-1], False)


@pytest.mark.parametrize("same", [1, 1.0, "1", True, decimal.Decimal("1.00"), "1.0"])
def test_numbers_are_equal_across_types(same: object) -> None:
    assert result_fingerprint([(same, "a")], False) == result_fingerprint([(1, "a")], False)


@pytest.mark.parametrize("other", [None, 0, 2, "one", " 1", "1_0", "nan", 1.5, "01x"])
def test_different_values_differ(other: object) -> None:
    assert result_fingerprint([(other,)], False) != result_fingerprint([(1,)], False)


def test_floats_agree_across_engines_up_to_rounding_noise() -> None:
    assert canonical_value(0.1 + 0.2) == canonical_value(0.3) == canonical_value(decimal.Decimal("0.3"))
    assert canonical_value(2.9999999999999996) == canonical_value(3)
    assert canonical_value(0.30001) != canonical_value(0.3)


def test_rows_keep_their_values_together() -> None:
    # Same values per column, paired differently: a different result.
    assert result_fingerprint([(1, "a"), (2, "b")], False) != result_fingerprint([(1, "b"), (2, "a")], False)
    # Columns with equal contents that may be swapped, paired differently.
    assert result_fingerprint([(1, 2), (2, 1)], False) != result_fingerprint([(1, 1), (2, 2)], False)


def test_duplicates_count() -> None:
    assert result_fingerprint([(1,), (1,), (2,)], False) != result_fingerprint([(1,), (2,), (2,)], False)
    assert result_fingerprint([(1,), (1,)], False) != result_fingerprint([(1,)], False)


def test_many_interchangeable_columns_stay_invariant() -> None:
    # Seven columns with equal contents: too many orders to try, the fallback must still be invariant.
    rng = random.Random(7)
    table = [tuple(rng.sample(range(7), 7)) for _ in range(5)]
    reference = result_fingerprint(table, False)
    for _ in range(20):
        order = list(range(7))
        rng.shuffle(order)
        rows = permute_columns(table, order)
        rng.shuffle(rows)
        assert result_fingerprint(rows, False) == reference


def test_other_types_and_shape() -> None:
    day = datetime.date(2024, 5, 1)
    assert result_fingerprint([(day,)], False) == result_fingerprint([("2024-05-01",)], False)
    assert result_fingerprint([(b"\xff\x00",)], False) != result_fingerprint([("\xff\x00",)], False)
    digest = result_fingerprint([], False)
    assert len(digest) == DIGEST_CHARS and int(digest, 16) >= 0
    assert result_fingerprint([], False) != result_fingerprint([()], False)


def test_the_hash_is_pinned() -> None:
    """Committed baselines hold these hashes: changing the algorithm invalidates them all."""
    assert result_fingerprint([("pen", 1.5), ("ink", 3)], False) == "a015ff3d8db7d65e"


def test_sqlite_and_duckdb_give_the_same_fingerprint() -> None:
    duckdb = pytest.importorskip("duckdb")
    setup = [
        "CREATE TABLE item(id INTEGER, name TEXT, price DOUBLE)",
        "INSERT INTO item VALUES (1,'pen',1.5),(2,'ink',3.0),(3,'pad',2.0),(4,'cap',0.5)",
    ]
    query = "SELECT name, avg(price) * 2, count(*) FROM item GROUP BY name"
    lite = sqlite3.connect(":memory:")
    duck = duckdb.connect(":memory:")
    for statement in setup:
        lite.execute(statement)
        duck.execute(statement)
    lite_rows = lite.execute(query).fetchall()
    duck_rows = duck.execute(query).fetchall()
    assert result_fingerprint(lite_rows, False) == result_fingerprint(duck_rows, False)


VALUES = [None, 0, 1, 1.0, 1.0000000000001, 1.000000000000001, "1", "1.0", " 1", True, False, b"abc", "abc", "ABC",
          b"1", decimal.Decimal("1.00"), decimal.Decimal("0.1"), 0.1, float("nan"), float("inf"), "", "2024-01-02",
          datetime.date(2024, 1, 2), 10**30, float(10**30)]


@pytest.mark.parametrize("a", VALUES, ids=repr)
def test_fingerprint_agrees_with_the_comparison(a: object) -> None:
    """One rule for equal values: two values hash alike exactly when the comparison calls them equal
    (it once said b'abc' == 'abc' and 1.0000000000001 != 1.0 where the comparison said the opposite)."""
    for b in VALUES:
        same_hash = result_fingerprint([(a,)], False) == result_fingerprint([(b,)], False)
        assert same_hash == bool(compare_results([(a,)], [(b,)])), (a, b)


def test_each_distinct_value_is_tokenized_once_and_as_it_would_be_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # a fingerprint is kept for every failing result (the gold audit): a result repeats its values
    from pytest_nl2sql.judge import equality

    tricky = [None, 0, -0.0, 0.0, 1, 1.0, True, "1", "1.0", b"1", float("nan"), float("nan"), decimal.Decimal("1.50"),
              1.5, "é", datetime.date(2020, 1, 2), 2**60, 2.0**60]
    rows = [(v, "x") for v in tricky] * 3
    assert equality._tokens(rows) == [tuple(canonical_value(v) for v in row) for row in rows]
    seen: list[object] = []
    real = equality.canonical_value
    monkeypatch.setattr(equality, "canonical_value", lambda value: seen.append(value) or real(value))
    many = [(i % 3, "same", None) for i in range(1000)]
    digest = result_fingerprint(many, order_matters=False)
    assert len(seen) == 5  # 0, 1, 2, "same", None
    monkeypatch.undo()
    assert digest == result_fingerprint([(0, "same", None)] * 334 + [(1, "same", None)] * 333 + [(2, "same", None)] * 333, False)
