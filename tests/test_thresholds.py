"""`--nl2sql-fail-under`: parsing and checking against the summary."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_nl2sql.gate.thresholds import Threshold, check_thresholds, parse_fail_under, parse_fail_unders


def bucket(passed: int, total: int, errors: int = 0) -> dict[str, Any]:
    judged = total - errors
    return {"total": total, "passed": passed, "errors": errors, "accuracy": passed / judged if judged else None}


SUMMARY = {
    **bucket(3, 5, errors=1),
    "by_hardness": {"easy": bucket(2, 2), "hard": bucket(1, 2), "challenging": bucket(0, 1)},
    "by_tag": {"joins": bucket(1, 3)},
    "by_database": {"shop": bucket(3, 4), "broken": bucket(0, 1, errors=1)},
}


@pytest.mark.parametrize(
    ("text", "bucket_name", "rate"),
    [
        ("0.8", None, 0.8),
        ("80%", None, 0.8),
        ("  1 ", None, 1.0),
        ("0", None, 0.0),
        ("hard=0.6", "hard", 0.6),
        ("challenging=12.5%", "challenging", 0.125),
        ("tag:joins=0.9", "tag:joins", 0.9),
        ("database:concert_singer=100%", "database:concert_singer", 1.0),
    ],
)
def test_parse(text: str, bucket_name: str | None, rate: float) -> None:
    assert parse_fail_under(text) == Threshold(bucket=bucket_name, rate=rate, spec=text.strip())


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("1.5", "between 0 and 1 (write 1.5% for a percentage)"),
        ("-0.1", "between 0 and 1"),
        ("101%", "between 0% and 100%"),
        ("abc", "not a rate"),
        ("hard=", "not a rate"),
        ("=0.5", "bucket before '=' is empty"),
        ("tags:joins=0.5", "unknown bucket 'tags:joins'"),
        ("tag:=0.5", "tag: needs a name"),
        ("nan", "not a rate"),
    ],
)
def test_parse_errors_say_what_is_wrong(text: str, complaint: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_fail_under(text)
    assert f"--nl2sql-fail-under={text}" in str(raised.value) and complaint in str(raised.value)


def test_ini_lines_may_hold_several() -> None:
    assert [t.spec for t in parse_fail_unders(["0.8 hard=0.6", "tag:joins=90%"])] == [
        "0.8", "hard=0.6", "tag:joins=90%",
    ]


def check(*specs: str) -> list[str]:
    return check_thresholds([parse_fail_under(spec) for spec in specs], SUMMARY)


def test_messages_name_the_bucket_the_rate_and_the_threshold() -> None:
    assert check("0.99") == ["nl2sql: execution accuracy 0.750 (3/4) is below --nl2sql-fail-under=0.99"]
    assert check("hard=0.6") == ["nl2sql: hard accuracy 0.500 (1/2) is below --nl2sql-fail-under=hard=0.6"]
    assert check("tag:joins=0.9") == [
        "nl2sql: tag 'joins' accuracy 0.333 (1/3) is below --nl2sql-fail-under=tag:joins=0.9"
    ]
    assert check("90%", "easy=1", "database:shop=0.8") == [
        "nl2sql: execution accuracy 0.750 (3/4) is below --nl2sql-fail-under=90%",
        "nl2sql: database 'shop' accuracy 0.750 (3/4) is below --nl2sql-fail-under=database:shop=0.8",
    ]


def test_met_thresholds_pass_exactly_at_the_boundary() -> None:
    assert check("0.75", "75%", "0.5", "easy=1", "hard=50%", "tag:joins=0.3333") == []


def test_more_decimals_when_three_would_look_equal() -> None:
    assert check("0.7501") == ["nl2sql: execution accuracy 0.7500 (3/4) is below --nl2sql-fail-under=0.7501"]


def test_unknown_or_unjudgeable_buckets_fail() -> None:
    assert check("tag:jions=0.9") == [
        "nl2sql: --nl2sql-fail-under=tag:jions=0.9: no case has tag 'jions' (there are: joins)"
    ]
    assert check("extra=0.1") == [
        "nl2sql: --nl2sql-fail-under=extra=0.1: no case has hardness 'extra' (there are: easy, hard, challenging)"  # in vocab order
    ]
    assert check("database:broken=0") == [
        "nl2sql: --nl2sql-fail-under=database:broken=0: no case with database 'broken' could be judged"
    ]
    assert check_thresholds([parse_fail_under("0")], bucket(0, 0)) != []


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 100))
def test_fails_iff_below(passed: int, failed: int, percent: int) -> None:
    judged = passed + failed
    summary = bucket(passed, judged)
    failures = check_thresholds([parse_fail_under(f"{percent}%")], summary)
    if judged == 0:
        assert failures
    else:
        assert bool(failures) == (Fraction(passed, judged) < Fraction(percent, 100))
