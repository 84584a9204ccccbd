"""The project's vocabularies, each defined once and read everywhere: verdicts, mismatch reasons,
case kinds, baseline statuses, hardness labels (Spider and BIRD, in their order) and report formats.

The spellings are part of the user-facing contract (JSON fields, baseline files, `-k` keywords).
"""

from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    """What happened to a case; the spelling is part of the user-facing contract."""

    PASS = "pass"
    MISMATCH = "mismatch"
    PRED_ERROR = "pred_error"
    PRED_TIMEOUT = "pred_timeout"
    TOO_MANY_ROWS = "too_many_rows"
    NO_PREDICTION = "no_prediction"
    PREDICTOR_ERROR = "predictor_error"
    GOLD_ERROR = "gold_error"

    @property
    def passed(self) -> bool:
        return self is Verdict.PASS

    @property
    def is_error(self) -> bool:
        """A broken case (not the prediction's fault): a pytest ERROR, outside the accuracy."""
        return self is Verdict.GOLD_ERROR


class Reason(str, Enum):
    """Why a `mismatch` happened: the first rule of the comparison that failed."""

    ROW_COUNT = "row count"
    COLUMN_COUNT = "column count"
    VALUES = "values"
    ORDER = "order"
    NEIGHBOUR = "neighbour database"  # right on the case's database, wrong on a neighbour database
    FRAGILE = "neighbour database (fragile)"  # differs only on data the case's database never shows (--nl2sql-fragile=fail)


# The reasons of a prediction right on the case's own database and wrong on a neighbour of it: a
# failure a reader may dispute (reviews, the gold audit, the summary's neighbour count).
NEIGHBOUR_REASONS = (Reason.NEIGHBOUR.value, Reason.FRAGILE.value)


class NearMiss(str, Enum):
    """What kind of near miss a `mismatch` was (the JSON item's `near_miss`), in the contract's
    order: where several fit, the first one is named."""

    ORDER_ONLY = "order_only"  # right rows in another order
    DUPLICATES = "duplicates"  # the same rows with duplicates lost or added
    EXTRA_COLUMNS = "extra_columns"  # every gold column present, plus others
    MISSING_COLUMNS = "missing_columns"  # some gold columns absent, the rest right
    FLOAT_TOLERANCE = "float_tolerance"  # numbers within 1e-4 relative
    NULL_VS_ZERO_OR_EMPTY = "null_vs_zero_or_empty"  # NULL against 0 or ''
    CASE_OR_WHITESPACE = "case_or_whitespace"  # strings differing in case or outer whitespace only
    LIMIT_PREFIX = "limit_prefix"  # one result a prefix of the other, under an ordered gold


NEAR_MISSES = tuple(n.value for n in NearMiss)


class FragilePolicy(str, Enum):
    """`--nl2sql-fragile`: what a prediction that differs from the gold only on stress neighbours gets."""

    PASS = "pass"  # passes, marked fragile (the default: leaderboard accuracy stays comparable)
    FAIL = "fail"  # fails with reason `neighbour database (fragile)` (test-suite strictness)


class FragileSide(str, Enum):
    """Which query a fragile pass is fragile by (JSON item `neighbours.fragile_side`): whose result
    on the stress neighbour shows what the broken invariant caused (judge/fragile_side.py)."""

    PREDICTION = "prediction"  # the prediction's does (a NOT IN that a NULL empties): strict counts it
    GOLD = "gold"  # the gold's does (it merges two namesakes, counts a NULL as a value): strict does not
    BOTH = "both"  # both do, or it cannot be told: strict counts it

    @property
    def counts_against_prediction(self) -> bool:
        """Strict accuracy and `--nl2sql-fragile=fail` hold it against the prediction."""
        return self is not FragileSide.GOLD


class Kind(str, Enum):
    SQL = "sql"
    TERM_SELECTION = "term_selection"


class BaselineStatus(str, Enum):
    """How a case compares with the baseline; the spelling is the JSON report's `baseline` field."""

    REGRESSION = "regression"  # passed in the baseline, fails now: fails the run
    KNOWN_FAILURE = "known_failure"  # failed in both: reported as xfailed
    FIXED = "fixed"  # failed in the baseline, passes now: the baseline wants an update
    NEW = "new"  # not in the baseline: judged on its own


# Hardness labels, easiest first: Spider's four buckets, then BIRD's three difficulty levels.
SPIDER_HARDNESS = ("easy", "medium", "hard", "extra")
BIRD_HARDNESS = ("simple", "moderate", "challenging")
HARDNESS_ORDER = SPIDER_HARDNESS + BIRD_HARDNESS


def hardness_sort_key(label: str | None) -> tuple[int, str]:
    """Known labels in their order (Spider's, then BIRD's), any other label after them by name."""
    if label in HARDNESS_ORDER:
        return HARDNESS_ORDER.index(label), ""
    return len(HARDNESS_ORDER), str(label)


# Report formats (`--nl2sql-report=FORMAT[:PATH]`) and their file extensions; the writers register
# themselves by these names in `pytest_nl2sql.reports`.
REPORT_FORMATS = {"xlsx": "xlsx", "json": "json", "csv": "csv", "md": "md", "html": "html"}


class ReviewDecision(str, Enum):
    """What a person decided about a disputed case (`--nl2sql-reviews`, `nl2sql review`)."""

    PREDICTION_WRONG = "prediction-wrong"  # the verdict stands
    GOLD_WRONG = "gold-wrong"  # the case passes, reason `reviewed: gold-wrong`
    BOTH_RIGHT = "both-right"  # the case passes, reason `reviewed: both-right`

    @property
    def passes(self) -> bool:
        return self is not ReviewDecision.PREDICTION_WRONG


class Dispute(str, Enum):
    """Why a case's verdict is open to argument, so a person (or the review hook) may decide it."""

    NEIGHBOUR_FAILURE = "neighbour-only failure"  # right on the case's database, wrong on a neighbour
    FRAGILE_PASS = "fragile pass"  # passed, but differs from the gold on a stress neighbour
    SUSPECT_GOLD = "suspect gold"  # the gold audit found something wrong with the gold


REVIEWED_REASON = "reviewed: "  # a reviewed case's reason: this, then the decision (`reviewed: gold-wrong`)


class GoldFinding(str, Enum):
    """What the gold audit found against a case's gold (JSON item `gold_audit.findings[].kind`):
    something to read, never a change of verdict (judge/gold_audit.py, `nl2sql audit-gold`)."""

    LITERAL_NOT_IN_DATA = "literal_not_in_data"  # a literal matches no value of its column, but does trimmed or case-folded
    EMPTY_RESULT = "empty_result"  # no row (only NULLs or zeros) because what the gold looks for is not in the data
    FRAGILE_GOLD = "fragile_gold"  # a fragile pass whose side is the gold alone, on what a gold gets wrong (a name, a NULL, a tie it leaves)
    CONSENSUS = "consensus"  # several models' failing predictions agree with one another against the gold
