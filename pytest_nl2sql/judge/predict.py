"""Asking for a prediction: what the model is given (`PredictionRequest`) and where the answer
comes from (the predictor hook, a predictions file, the case itself).

The request is not the `Case`: a case is the parsed spec (gold, comparison options, where it was
read); a request is what a model may see (question, hint, schema, a few rows, the open database)
and nothing that would give the answer away.

A model behind an API fails now and then for reasons that are not the model's (a rate limit, a
timeout, a 503): such a failure is asked again (`RetryPolicy`), so that an outage of a minute does
not read as a model that got worse. With `--nl2sql-repeat=K` a case is asked K times; each answer
is one `sample` of the request.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.predictions import PredictedMalloy, PredictedResult, PredictionStore, prediction_key
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.judge.answer import AnswerRefused, is_transient, unpack_answer

DEFAULT_SAMPLE_ROWS = 3  # `case.sample_rows(table)`: the "schema plus three rows" prompt (Rajkumar et al. 2022)
MAX_SAMPLE_ROWS = 1000


@dataclass(frozen=True)
class SampleRows:
    """The first rows of a table, for a prompt. `str()` gives the usual block:

        /*
        3 example rows:
        SELECT * FROM singer LIMIT 3;
        singer_id	name	country
        1	Joe Sharp	Netherlands
        ...
        */
    """

    table: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    limit: int = DEFAULT_SAMPLE_ROWS

    def __iter__(self) -> Any:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __str__(self) -> str:
        shown = ["\t".join(_cell(v) for v in row) for row in self.rows]
        return "\n".join(["/*", f"{len(self.rows)} example rows:", f"SELECT * FROM {self.table} LIMIT {self.limit};",
                          "\t".join(self.columns), *shown, "*/"])


def _cell(value: Any) -> str:
    return "NULL" if value is None else " ".join(str(value).split())


@dataclass(frozen=True)
class PredictionRequest:
    """What the predictor hook receives as `case`: the question and everything a model may use."""

    id: str
    file: Path
    question: str | None
    hint: str | None  # BIRD's evidence
    dialect: str  # the sqlglot dialect the prediction should be written in
    database: str | None  # as the case names it (a db_id, a path or a URL)
    tags: tuple[str, ...]
    conversation: tuple[Mapping[str, Any], ...] | None  # term selection: up to the turn to answer
    engine: Any  # the open, read-only database (an `Engine`), to explore while predicting
    position: int  # the case's zero-based position in its file
    # reads `schema` (None for term-selection cases) when first asked: a run without a model never does
    schema_of: Callable[[], str | None] = dataclasses.field(repr=False, compare=False)
    # the case's (question, whole conversation), which `key` hashes with the schema (a turn keeps its case's)
    key_of: tuple[Any, ...] = dataclasses.field(repr=False, compare=False)
    # reads the first rows of a table (`sample_rows`); None where there is no database
    rows_of: Callable[[str, int], SampleRows] | None = dataclasses.field(default=None, repr=False, compare=False)
    sample: int = 0  # which of the case's `--nl2sql-repeat` answers this request asks for (0: the first)
    # the Malloy model a `{"malloy": …}` answer is compiled against (read when first asked)
    malloy_of: Callable[[], str] | None = dataclasses.field(default=None, repr=False, compare=False)

    @functools.cached_property
    def schema(self) -> str | None:
        """The database's DDL text (None for term-selection cases)."""
        return self.schema_of()

    @functools.cached_property
    def malloy_model(self) -> str:
        """The Malloy model the case's Malloy answers are compiled against: its `malloy_model` file,
        else the one generated from the schema (sources named as the tables; `nl2sql malloy-model`
        prints it). Reading it needs no Node."""
        if self.malloy_of is None:
            raise ValueError(f"case {self.id} has no database to write Malloy for")
        return self.malloy_of()

    @functools.cached_property
    def key(self) -> str:
        """What a recorded answer depends on (question, schema, whole conversation); hashed only
        when asked (a recording or a replay), not for every case."""
        question, conversation = self.key_of
        return prediction_key(question, self.schema, conversation)

    @property
    def tables(self) -> tuple[str, ...]:
        """The database's table names, in declaration order (for `sample_rows` of each)."""
        return tuple(self.engine.schema_columns()) if self.engine is not None else ()

    def sample_rows(self, table: str, n: int = DEFAULT_SAMPLE_ROWS) -> SampleRows:
        """The first `n` rows of `table` (as the database returns them, under the run's limits), with
        its column names; `str()` of the result is the prompt block. A table the database does not
        have is a ValueError naming the ones it has."""
        if self.rows_of is None:
            raise ValueError(f"case {self.id} has no database to read rows from")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_SAMPLE_ROWS:
            raise ValueError(f"sample_rows: n must be a whole number from 0 to {MAX_SAMPLE_ROWS}, not {n!r}")
        return self.rows_of(table, n)

    @classmethod
    def for_case(cls, case: Case, *, schema: Callable[[], str | None], engine: Any, dialect: str,
                 rows: Callable[[str, int], SampleRows] | None = None,
                 malloy: Callable[[], str] | None = None) -> "PredictionRequest":
        conversation = list(case.conversation) if case.conversation is not None else None
        return cls(
            id=case.id, file=case.file, question=case.question, hint=case.hint, dialect=dialect,
            database=case.database, tags=case.tags, conversation=case.conversation,
            engine=engine, position=case.position, schema_of=schema, key_of=(case.question, conversation),
            rows_of=rows, malloy_of=malloy,
        )

    def as_sample(self, index: int) -> "PredictionRequest":
        """The same request, asking for the case's answer number `index` (0-based)."""
        from dataclasses import replace

        return self if index == self.sample else replace(self, sample=index)

    def at_turn(self, conversation: tuple[Mapping[str, Any], ...]) -> "PredictionRequest":
        """The request for one targeted turn of a conversation (the question is that turn's)."""
        from dataclasses import replace

        return replace(self, conversation=conversation, question=conversation[-1].get("content"))


class PredictionSource:
    """Where a prediction came from; the spelling is stored in reports and recordings."""

    HOOK = "hook"
    FILE = "file"
    CASE = "case"
    NONE = "none"


@dataclass(frozen=True)
class PredictionOutcome:
    """A prediction, where it came from, and how long the predictor took."""

    value: Any
    source: str  # a PredictionSource
    latency: float | None = None
    error: str | None = None  # a predictor exception, one line: "RuntimeError: model down"
    traceback: str | None = None  # its traceback, from the user's hook down (for the failure text)
    stale: bool = False  # a recorded prediction whose question or schema has changed
    key: str | None = None
    hook_silent: bool = False  # the hook answered nothing (recorded, so a replay does not ask again)
    dialect: str | None = None  # the hook's answers (live or replayed) are in the request's dialect; None: the case's
    attempts: int = 0  # calls of the hook (retries included); 0 when the hook was not asked
    usage: dict[str, int | float] | None = None  # tokens and cost, as the hook reported them
    samples: tuple["PredictionOutcome", ...] = ()  # --nl2sql-repeat: the case's other answers, in order
    retries: int = 0  # calls of the hook after a transient failure (`attempts` less the first tries)
    failed_after: int = 0  # the attempts of a request that still failed after retries (0: none did)

    def report_fields(self) -> dict[str, Any]:
        """What a case result keeps of its prediction's provenance (`--nl2sql-record` reads it), and
        the hook's retries over all the case's answers (`retries`), with the attempts of a first
        answer that still failed after them (`failed_after`)."""
        extra: dict[str, Any] = {"prediction_source": self.source}
        if (self.source == PredictionSource.HOOK or self.hook_silent) and self.key:
            extra["key"] = self.key
        if self.hook_silent:
            extra["hook_answered"] = False
        if self.error is not None:
            extra["error"] = self.error
            if self.traceback:
                extra["traceback"] = self.traceback
        retries = self.retries + sum(answer.retries for answer in self.samples)
        if retries:
            extra["retries"] = retries
        if self.failed_after:
            extra["failed_after"] = self.failed_after
        return extra


Hook = Callable[[PredictionRequest], Any]
NO_PREDICTOR: Any = type("NoPredictor", (), {"__repr__": lambda self: "NO_PREDICTOR"})()  # a hook with no implementation

DEFAULT_RETRIES = 2
DEFAULT_RETRY_WAIT = 1.0
MAX_RETRIES = 20  # --nl2sql-retries: more is an outage, not a hiccup
MAX_RETRY_WAIT = 600.0  # --nl2sql-retry-wait, in seconds
MAX_BACKOFF = 60.0  # each wait doubles up to this (or up to the first wait, when that is longer)


@dataclass(frozen=True)
class RetryPolicy:
    """How a hook that fails transiently (`answer.is_transient`: a timeout, a dropped connection,
    HTTP 429 or 5xx) is asked again: up to `retries` more times, waiting `wait`, then twice that,
    and so on (exponential backoff), each wait at most `MAX_BACKOFF` seconds (or `wait` when longer).
    `sleep` is injectable, so that tests never wait."""

    retries: int = DEFAULT_RETRIES
    wait: float = DEFAULT_RETRY_WAIT
    sleep: Callable[[float], None] = dataclasses.field(default=time.sleep, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.check(self.retries, self.wait)

    @staticmethod
    def check(retries: Any, wait: Any, names: tuple[str, str] = ("retries", "retry_wait")) -> None:
        """A ValueError naming the option (`names`: how the caller spells the two) that is out of
        bounds: `retries` a whole number from 0 to MAX_RETRIES, `wait` seconds from 0 to MAX_RETRY_WAIT."""
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
            raise ValueError(f"{names[0]} must be 0 (never ask again) or more, up to {MAX_RETRIES}, not {retries!r}")
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= MAX_RETRY_WAIT:
            raise ValueError(f"{names[1]} must be a number of seconds from 0 to {MAX_RETRY_WAIT:g}, not {wait!r}")

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        return min(self.wait * 2.0 ** min(attempt - 1, 64), max(self.wait, MAX_BACKOFF))


@dataclass(frozen=True)
class Predictor:
    """The first prediction that applies: a recorded replay, the hook, the predictions file, the case.

    A prediction recorded by `--nl2sql-record` for this very request key is a replay and is used
    without calling the hook (so CI can re-score without the model); a recording with another key
    is stale: the hook is asked again, and without a hook the case has no prediction.
    """

    hook: Hook | None = None
    store: PredictionStore | None = None
    retry: RetryPolicy = RetryPolicy()

    def predict(self, case: Case, request: PredictionRequest, file_names: tuple[str, ...]) -> PredictionOutcome:
        """The answer to `request` (its `sample`-th: a recording of several answers replays that one;
        a predictions file or the case gives the same answer every time)."""
        stored = self.store.lookup(case.id, case.position, file_names) if self.store else None
        if stored is not None and request.sample:
            stored = stored.sample(request.sample)
        replay = stored is not None and stored.key is not None and stored.key == request.key
        if replay and not stored.no_answer:  # the hook's own answer to this very request, recorded
            return PredictionOutcome(stored.value, PredictionSource.FILE, error=stored.error, dialect=request.dialect,
                                     usage=stored.usage)
        silent = replay  # recorded: the hook answered nothing to this very request; it is not asked again
        if self.hook is not None and not replay:
            outcome = self.ask(request)
            if outcome.value is not None and outcome.value is not NO_PREDICTOR or outcome.error is not None:
                return outcome
            silent = outcome.value is not NO_PREDICTOR and stored is None  # a file answer is not the hook's silence
        fallback = self._fallback(case, None if replay else stored)
        return dataclasses.replace(fallback, hook_silent=True, key=request.key) if silent else fallback

    @staticmethod
    def _fallback(case: Case, stored: Any) -> PredictionOutcome:
        """Where a prediction comes from when the hook gives none: the file, then the case."""
        if stored is not None:
            stale = stored.key is not None
            return PredictionOutcome(stored.value, PredictionSource.FILE, stale=stale, usage=None if stale else stored.usage)
        if case.predicted is not None:
            return PredictionOutcome(case.predicted, PredictionSource.CASE)
        if case.predicted_result is not None:
            return PredictionOutcome(PredictedResult(case.predicted_result), PredictionSource.CASE)
        if case.predicted_malloy is not None:
            return PredictionOutcome(PredictedMalloy.of(case.predicted_malloy), PredictionSource.CASE)
        return PredictionOutcome(None, PredictionSource.NONE)

    def ask(self, request: PredictionRequest) -> PredictionOutcome:
        """Call the hook; its exception is the model's failure (a verdict), never a crash of the run.
        A transient failure is asked again (`retry`); `latency` is the answering call's."""
        assert self.hook is not None
        attempts = 0
        while True:
            attempts += 1
            started = time.perf_counter()
            try:
                value = self._call(request)
                break
            except KeyboardInterrupt:  # the user stopping the run; a model's sys.exit() is the model's failure
                raise
            except BaseException as e:  # noqa: BLE001 - SystemExit, and pytest.fail() in a hook (an OutcomeException)
                if attempts <= self.retry.retries and is_transient(e):
                    self.retry.sleep(self.retry.delay(attempts))
                    continue
                tried = f" (after {attempts} attempts)" if attempts > 1 else ""
                return PredictionOutcome(None, PredictionSource.HOOK, time.perf_counter() - started, error=_one_line(e) + tried,
                                         traceback=_user_traceback(e), key=request.key, attempts=attempts,
                                         retries=attempts - 1, failed_after=attempts if attempts > 1 else 0)
        latency = time.perf_counter() - started
        if value is NO_PREDICTOR:  # no model to record: the request's key is not worth hashing
            return PredictionOutcome(value, PredictionSource.HOOK, latency, dialect=request.dialect)
        try:
            answer = unpack_answer(value)  # an answer too long is refused here, before anything copies it
        except Exception as e:  # noqa: BLE001 - a usage object whose attributes raise: the hook's failure, not ours
            reason = str(e) if isinstance(e, AnswerRefused) else f"malformed answer: {e if isinstance(e, ValueError) else _one_line(e)}"
            return PredictionOutcome(None, PredictionSource.HOOK, latency, error=reason, key=request.key,
                                     attempts=attempts, retries=attempts - 1)
        finally:
            del value  # the hook's answer: a refused one is not held while the case is judged
        return PredictionOutcome(answer.value, PredictionSource.HOOK, latency, key=request.key, dialect=request.dialect,
                                 attempts=attempts, usage=answer.usage, retries=attempts - 1)

    def _call(self, request: PredictionRequest) -> Any:
        value = self.hook(request)  # type: ignore[misc]
        if inspect.isawaitable(value):  # an `async def` hook: awaited here (in a worker thread
            import asyncio  # with --nl2sql-concurrency, so N run at once); imported only then (30 ms)

            value = asyncio.run(_awaited(value))
        return value


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _one_line(error: BaseException) -> str:
    """`RuntimeError: model down`: the verdict's reason, stable across machines (no paths)."""
    text = "".join(traceback.format_exception_only(error)).strip().splitlines()
    return text[-1] if text else type(error).__name__


def _user_traceback(error: BaseException) -> str:
    """The predictor's traceback without pluggy's frames and ours: it starts in the user's hook."""
    formatted = traceback.TracebackException.from_exception(error)
    internal = (os.sep + "pluggy" + os.sep, __file__)
    formatted.stack = traceback.StackSummary.from_list(
        [frame for frame in formatted.stack if not any(part in frame.filename for part in internal)]
    )
    return "".join(formatted.format())
