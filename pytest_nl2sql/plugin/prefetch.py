"""`--nl2sql-concurrency=N`: predictions asked up to N at once, ahead of the items that judge them.

A real model answers in about a second; asked one case at a time, 1000 cases take 17 minutes.
The prefetcher keeps up to 2N cases ahead of the running item submitted to a pool of N threads
(an `async def` hook is awaited in each thread, so N coroutines run at once). Judging stays in
pytest's thread and order, so verdicts and reports are those of N=1. Only the hook runs in the
threads: each request's database, schema and sample rows (three of each table) are read in
pytest's thread first (database connections are not shared across threads), which is also why a
predictor should not query `case.engine`, nor ask `case.sample_rows` for other than 3 rows, when N > 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline
from pytest_nl2sql.judge.predict import PredictionOutcome


class Prefetcher:
    """Predictions of upcoming cases, asked in a thread pool; one per pytest process."""

    def __init__(self, pipeline: Pipeline, concurrency: int) -> None:
        self.pipeline = pipeline
        self.ahead = 2 * concurrency
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="nl2sql-predict")
        self.futures: dict[str, Future[PredictionOutcome]] = {}

    def submit(self, items: Iterable[Any]) -> None:
        """Ask for the predictions of `items` not asked yet (valid cases only)."""
        from pytest_nl2sql.cases.read import Case

        for item in items:
            case = getattr(item, "entry", None)
            if not isinstance(case, Case) or item.nodeid in self.futures:
                continue
            if not self.pipeline.read_ahead(case):  # its schema and sample rows, here in pytest's thread
                continue  # a broken case: prepare reports it and nothing is predicted
            label: CaseLabel = item.label
            self.futures[item.nodeid] = self.pool.submit(self.pipeline.predict, case, label)

    def take(self, item: Any) -> PredictionOutcome | None:
        """The item's prediction, waiting for it if it is still being asked; None if never asked."""
        future = self.futures.pop(item.nodeid, None)
        return future.result() if future is not None else None

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def upcoming(item: Any, session: pytest.Session, ahead: int) -> Sequence[Any]:
    """The items this process will run next, `item` first. Without xdist that is the collection
    order; on an xdist worker it is the worker's queue of scheduled items (read from the worker's
    interactor, whose queue is the only place that knows it), else just the next item."""
    config = session.config
    if not hasattr(config, "workerinput"):
        index = item.collection_index if hasattr(item, "collection_index") else 0
        return session.items[index: index + ahead]
    queued = _xdist_queue(config)
    if queued is None:
        return [item]
    return [item, *(session.items[i] for i in queued[: ahead - 1] if isinstance(i, int) and i < len(session.items))]


def _xdist_queue(config: pytest.Config) -> list[Any] | None:
    for plugin in config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is not None and hasattr(queue, "lock"):
            try:
                with queue.lock() as pending:
                    return list(pending)
            except Exception:  # noqa: BLE001 - xdist internals changed: fall back to one at a time
                return None
    return None
