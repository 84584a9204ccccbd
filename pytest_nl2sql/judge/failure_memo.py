"""A failure on generated neighbours, remembered beside them as a pass is (`on_neighbours`'s
`verdicts/`): which databases failed or were fragile, the counterexample shrunk from the first
(with both results on it) and the fragile side. Deciding the side writes databases for each
restoration and shrinking replays its attempts, on every run where nothing remembers them: on a
warm run they were most of the neighbour work left.

A pure function of the neighbours (files a content-keyed cache folder never rewrites: the source
database's content, the golds, the count, the generator's and the engine's versions), the golds,
the prediction, the rules and limits, the gold's outcome on the case's own database (which says
what its author could see), whether a counterexample is shrunk, and the versions below. Nothing
is stored when the run met a time-out or a lost connection (its outcome is the machine's, not the
data's) or a value JSON cannot carry exactly (a DuckDB date, a Decimal); a file that cannot be
read is a miss. Written under a temporary name and renamed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_nl2sql import __version__
from pytest_nl2sql.engines.base import ConnectionLost, DatabaseMissing, QueryResult, QueryTimeout
from pytest_nl2sql.judge.compare import Comparison
from pytest_nl2sql.judge.execute import GoldOutcome, Judgement
from pytest_nl2sql.judge.gold_memo import _rows, _tuples, _Unstorable
from pytest_nl2sql.judge.ties import TieGroups
from pytest_nl2sql.vocab import FragileSide, Verdict

if TYPE_CHECKING:
    from pytest_nl2sql.judge.on_neighbours import NeighbourCheck, OtherDatabase

MEMO_VERSION = "1"  # bumped whenever judging on neighbours (shrinking, the fragile side) changes what a failure shows


def unsure(error: BaseException) -> bool:
    """An error whose cause is the machine, not the data: a run that met one is not remembered."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, (QueryTimeout, ConnectionLost, DatabaseMissing, OSError)):
            return True
        seen = seen.__cause__
    return False


def path_for(databases: Sequence[OtherDatabase], rules_key: str, own_gold: GoldOutcome | None, shrunk: bool) -> Path | None:
    """Where this failure is remembered: `failures/` in the neighbours' folder (None: not every
    database a generated neighbour of one folder, or the own gold's outcome not storable)."""
    folders = {database.path.parent for database in databases if database.generated is not None}
    if len(folders) != 1 or any(d.generated is None or d.rows is not None for d in databases):
        return None
    try:
        own = _gold_json(own_gold) if own_gold is not None else None
    except (_Unstorable, ValueError):
        return None
    engines = [sqlite3.sqlite_version]
    if any(d.kind.value == "duckdb" for d in databases):
        import duckdb

        engines.append(duckdb.__version__)
    from pytest_nl2sql.neighbours import GENERATOR_VERSION

    material = [MEMO_VERSION, __version__, GENERATOR_VERSION, engines, rules_key, shrunk, own,
                [d.path.name for d in databases]]
    key = hashlib.sha256(json.dumps(material).encode()).hexdigest()
    return folders.pop() / "failures" / f"{key[:40]}.json"


def recall(path: Path | None, databases: Sequence[OtherDatabase]) -> NeighbourCheck | None:
    from pytest_nl2sql.judge.on_neighbours import NeighbourCheck, NeighbourFailure

    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
        shown = data["failure"]
        failure = None
        if shown is not None:
            failure = NeighbourFailure(databases[int(shown["database"])], _judgement_back(shown["judgement"]),
                                       _gold_back(shown["gold"]),
                                       tuple((str(t), tuple(c), tuple(_tuples(r))) for t, c, r in shown["counterexample"]),
                                       bool(shown["shrunk"]), shown["breaks"])
        side = FragileSide(data["fragile_side"]) if data["fragile_side"] is not None else None
        return NeighbourCheck(int(data["checked"]), int(data["failed"]), failure, int(data["total"]), int(data["fragile"]), side)
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def remember(path: Path | None, check: NeighbourCheck, databases: Sequence[OtherDatabase]) -> None:
    """Nothing when a value cannot be stored exactly or the folder cannot be written."""
    if path is None:
        return
    try:
        failure = check.failure
        shown = None
        if failure is not None:
            shown = {"database": next(i for i, d in enumerate(databases) if d is failure.database),
                     "judgement": _judgement_json(failure.judgement), "gold": _gold_json(failure.gold),
                     "counterexample": [[t, list(c), _rows(r)] for t, c, r in failure.counterexample],
                     "shrunk": failure.shrunk, "breaks": failure.breaks}
        data = {"checked": check.checked, "failed": check.failed, "total": check.total, "fragile": check.fragile,
                "fragile_side": check.fragile_side.value if check.fragile_side is not None else None, "failure": shown}
        text = json.dumps(data, allow_nan=False)
        path.parent.mkdir(exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        staging.write_text(text)
        os.replace(staging, path)
    except (_Unstorable, StopIteration, OSError, ValueError, TypeError):
        pass


def _result_json(result: QueryResult | None) -> dict[str, Any] | None:
    # `seconds` is left out: a timing, which no report compares
    return None if result is None else {"columns": list(result.columns), "rows": _rows(result.rows)}


def _result_back(data: dict[str, Any] | None) -> QueryResult | None:
    return None if data is None else QueryResult(tuple(data["columns"]), _tuples(data["rows"]))


def _gold_json(gold: GoldOutcome) -> dict[str, Any]:
    if gold.large:
        raise _Unstorable("streamed")  # its results hold the first rows only
    return {"results": [_result_json(r) for r in gold.results], "queries": list(gold.queries),
            "order_matters": gold.order_matters,
            "ties": [None if t is None else {"sizes": list(t.sizes), "spare": [_rows(s) for s in t.spare]} for t in gold.ties],
            "warnings": list(gold.warnings)}


def _gold_back(data: dict[str, Any]) -> GoldOutcome:
    ties = tuple(None if t is None else TieGroups(tuple(t["sizes"]), tuple(tuple(_tuples(s)) for s in t["spare"]))
                 for t in data["ties"])
    return GoldOutcome(tuple(_result_back(r) for r in data["results"]), tuple(data["queries"]),  # type: ignore[misc]
                       bool(data["order_matters"]), ties, tuple(data["warnings"]))


def _judgement_json(judgement: Judgement) -> dict[str, Any]:
    if judgement.streamed:
        raise _Unstorable("streamed")
    c = judgement.comparison
    comparison = None if c is None else {
        "match": c.match, "reason": c.reason, "pairing": list(c.pairing) if c.pairing is not None else None,
        "missing": _rows(c.missing), "extra": _rows(c.extra), "missing_count": c.missing_count,
        "extra_count": c.extra_count, "first_order_difference": c.first_order_difference, "detail": c.detail}
    return {"verdict": judgement.verdict.value, "reason": judgement.reason, "comparison": comparison,
            "gold_index": judgement.gold_index, "result": _result_json(judgement.result),
            "fingerprint": judgement.fingerprint, "executed": judgement.executed}


def _judgement_back(data: dict[str, Any]) -> Judgement:
    c = data["comparison"]
    comparison = None if c is None else Comparison(
        bool(c["match"]), c["reason"], tuple(c["pairing"]) if c["pairing"] is not None else None,
        tuple(_tuples(c["missing"])), tuple(_tuples(c["extra"])), int(c["missing_count"]), int(c["extra_count"]),
        c["first_order_difference"], c["detail"])
    return Judgement(Verdict(data["verdict"]), data["reason"], comparison, int(data["gold_index"]),
                     _result_back(data["result"]), data["fingerprint"], data["executed"])

