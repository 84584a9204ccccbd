"""`values.FreshValues`, the generator's fresh keys over a growing set of taken values, gives what
`values.fresh_value` gives over the same set: the same neighbours, byte for byte (issue 32)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_nl2sql.neighbours.schema import BLOB, DATE, INT, OTHER, REAL, TEXT, TIMESTAMP, Column
from pytest_nl2sql.neighbours.values import FreshValues, fresh_value

COLUMNS = [Column(f"c{i}", declared, value_class, affinity, False) for i, (declared, value_class, affinity) in enumerate([
    ("INTEGER", INT, "INTEGER"), ("REAL", REAL, "REAL"), ("TEXT", TEXT, "TEXT"), ("NUMERIC", REAL, "NUMERIC"),
    ("DATE", DATE, "NUMERIC"), ("DATETIME", TIMESTAMP, "NUMERIC"), ("BLOB", OTHER, "BLOB"), ("", OTHER, "BLOB"),
    ("VARCHAR", TEXT, ""), ("DATE", DATE, ""), ("BLOB", BLOB, ""), ("BOOLEAN", OTHER, ""),
])]

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 30), st.integers(-2**70, 2**70),
    st.floats(allow_nan=False, width=32), st.sampled_from([0.0, -0.0, 1.0, 2.5, float("inf"), float("-inf")]),
    st.sampled_from(["ann", "Ann", "ann 3", "bob 2 7", "", " x", "v", "zed 12"]), st.text(max_size=6),
    st.binary(max_size=3),
)


@given(column=st.sampled_from(COLUMNS), start=st.lists(VALUES, max_size=12),
       steps=st.lists(st.tuples(VALUES, st.integers(0, 2000), VALUES), min_size=1, max_size=12))
def test_fresh_values_as_the_growing_set_gives_them(column: Column, start: list[Any],
                                                    steps: list[tuple[Any, int, Any]]) -> None:
    """Each step: a fresh value beside `extra`, as `fresh_value` over the set with `extra` added,
    then a value added to the set (as a made row joins the rows a later one is keyed against)."""
    taken = set(start)
    fresh = FreshValues(column, taken)
    for extra, counter, added in steps:
        expected: Any
        try:
            expected = fresh_value(column, taken | {extra}, counter)
        except OverflowError:  # int(inf): the generator meets it as the same error
            expected = OverflowError
        try:
            got: Any = fresh.fresh(extra, counter)
        except OverflowError:
            got = OverflowError
        assert got == expected and type(got) is type(expected), (taken, extra, counter)
        taken.add(added)
        fresh.add(added)
    assert fresh.taken == taken


def test_a_nan_among_the_numbers_is_left_to_fresh_value() -> None:
    column = COLUMNS[0]
    fresh = FreshValues(column, {1, 7})
    assert fresh.fresh(None, 3) == 11
    fresh.add(float("nan"))
    assert not fresh.exact
    assert fresh.fresh(None, 3) == fresh_value(column, fresh.taken | {None}, 3) == 11
    # a NaN hashes by identity, so where it sits in a set differs from one NaN to the next: the
    # greatest number was max() over the set's order, NaN when it came first (then int(NaN) raised)
    nans = [float("nan") for _ in range(64)]  # kept alive: each its own identity, hash and place
    for nan in nans:
        assert fresh_value(column, {nan, 1, 7, None}, 3) == 11
