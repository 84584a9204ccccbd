"""A failure on neighbours remembered beside them (`judge/failure_memo.py`): a warm run reads it
and shows exactly what the run that computed it showed; anything it depends on changed is a miss."""

from __future__ import annotations

import decimal
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import SHOP_SQL, make_shop, read_report, without_timings, write_suite
from pytest_nl2sql.engines.base import Limits, QueryResult, QueryTimeout
from pytest_nl2sql.engines.url import EngineKind
from pytest_nl2sql.judge import failure_memo
from pytest_nl2sql.judge.execute import GoldError, GoldOutcome
from pytest_nl2sql.judge.on_neighbours import JudgingRules, OtherDatabase, _rules_key

# the shop's names are all distinct and no price sits on 2.5: fragile passes (a DISTINCT over
# names dropped: the gold's fragility; added: the prediction's, which --nl2sql-fragile=fail fails)
# and a failure only on a neighbour (`>` for `>=`), each with a counterexample
CASES = [
    {"id": "distinct", "gold": "SELECT DISTINCT name FROM item", "predicted": "SELECT name FROM item"},
    {"id": "boundary", "gold": "SELECT name FROM item WHERE price >= 2.5", "predicted": "SELECT name FROM item WHERE price > 2.5"},
    {"id": "merges", "gold": "SELECT name FROM item", "predicted": "SELECT DISTINCT name FROM item"},
    {"id": "right", "gold": "SELECT name FROM item WHERE price >= 2.5", "predicted": "SELECT name FROM item WHERE NOT price < 2.5"},
]


@pytest.fixture(params=["sqlite", "duckdb"])
def shop(request: pytest.FixtureRequest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    if request.param == "duckdb":  # DuckDB neighbours: the side's restorations and the shrink's attempts are DuckDB's
        duckdb = pytest.importorskip("duckdb")
        connection = duckdb.connect(str(pytester.path / "shop.duckdb"))
        connection.execute(SHOP_SQL)
        connection.close()
    else:
        make_shop(pytester.path)
    write_suite(pytester.path, CASES, database=f"shop.{request.param}")
    pytester.path.joinpath("engine").write_text(request.param)
    monkeypatch.setenv("NL2SQL_CACHE_DIR", str(pytester.path / "cache"))
    return pytester


def _run(shop: pytest.Pytester, *args: str) -> tuple[dict, list[str]]:
    result = shop.runpytest("--nl2sql-fragile=fail", "--nl2sql-report=json:r.json", *args)
    # the failures as shown (the counterexample, both results there), without pytest's timing line
    lines = [line for line in result.outlines if not re.search(r"\d+(\.\d+)?s\b", line)]
    return read_report(shop.path / "r.json"), lines


def _memos(shop: pytest.Pytester) -> list[Path]:
    return sorted((shop.path / "cache").glob("**/failures/*.json"))


def test_a_warm_run_reads_the_failures_and_shows_the_same(shop: pytest.Pytester) -> None:
    first, shown = _run(shop)
    items = {i["id"]: i for i in first["items"]}
    assert items["boundary"]["reason"] == "neighbour database" and items["boundary"]["neighbours"]["counterexample"]
    side = items["distinct"]["neighbours"]["fragile_side"]
    assert items["distinct"]["neighbours"]["fragile"] and side == "gold"  # the gold's DISTINCT merges namesakes
    assert items["merges"]["reason"] == "neighbour database (fragile)" and items["merges"]["neighbours"]["fragile_side"] == "prediction"
    assert items["right"]["verdict"] == "pass"
    memos = _memos(shop)
    assert len(memos) == 3  # the failure and the fragile passes; the pass is remembered apart (`verdicts/`)
    again, shown_again = _run(shop)
    assert without_timings(again) == without_timings(first)
    assert shown_again == shown
    assert _memos(shop) == memos
    # ... and it was read, not computed again: what a memo says is what the run shows
    for memo in memos:
        data = json.loads(memo.read_text())
        if data["fragile_side"] == "gold":
            data["fragile_side"] = "prediction"
            memo.write_text(json.dumps(data))
    tampered, _ = _run(shop)
    assert {i["id"]: i for i in tampered["items"]}["distinct"]["neighbours"]["fragile_side"] == "prediction"
    # a file that cannot be read is a miss: computed again, and the same as the first run
    for memo in memos:
        memo.write_text("{not json")
    recomputed, shown_recomputed = _run(shop)
    assert without_timings(recomputed) == without_timings(first) and shown_recomputed == shown
    assert all(json.loads(memo.read_text()) for memo in memos)  # and written again


def test_a_changed_prediction_or_rule_is_a_miss(shop: pytest.Pytester) -> None:
    _run(shop)
    before = set(_memos(shop))
    changed = [dict(CASES[1], predicted="SELECT name FROM item WHERE price > 2.5 ORDER BY name")]
    database = f"shop.{shop.path.joinpath('engine').read_text()}"
    write_suite(shop.path, changed, database=database)
    report, _ = _run(shop)
    assert report["items"][0]["reason"] == "neighbour database"
    assert len(set(_memos(shop)) - before) == 1  # another prediction: another memo
    write_suite(shop.path, [dict(CASES[1], compare={"case_sensitive": False})], database=database)
    _run(shop)
    assert len(set(_memos(shop)) - before) == 2  # another comparison rule: another memo


DEFAULT_LIMITS = Limits()


def _databases(folder: Path, kind: EngineKind = EngineKind.SQLITE) -> tuple[OtherDatabase, ...]:
    paths = [folder / f"n{i}.sqlite" for i in range(3)]
    return tuple(OtherDatabase(p, kind, f"neighbour {i + 1} of 3", generated=SimpleNamespace(path=p, breaks=None))
                 for i, p in enumerate(paths))


def test_the_key_holds_the_golds_the_prediction_the_rules_and_the_own_gold(tmp_path: Path) -> None:
    databases = _databases(tmp_path)
    rules = JudgingRules(("SELECT a FROM t",), "sqlite", "auto")
    own = GoldOutcome((QueryResult(("a",), [(1,), (2.5,)]),), ("SELECT a FROM t",), False)

    def path(rules: JudgingRules = rules, predicted: str = "SELECT b FROM t", own: GoldOutcome | None = own,
             shrunk: bool = True, limits: Limits = DEFAULT_LIMITS, databases: tuple[OtherDatabase, ...] = databases) -> Path | None:
        return failure_memo.path_for(databases, _rules_key(rules, predicted, limits), own, shrunk)

    base = path()
    assert base is not None and base.parent == tmp_path / "failures" and path() == base
    others = [path(predicted="SELECT c FROM t"),
              path(JudgingRules(("SELECT a FROM t", "SELECT a FROM u"), "sqlite", "auto")),
              path(JudgingRules(("SELECT a FROM t",), "sqlite", "auto", {"mode": "subset"})),
              path(JudgingRules(("SELECT a FROM t",), "sqlite", "ordered")),
              path(JudgingRules(("SELECT a FROM t",), "sqlite", "auto", spider_compat=True)),
              path(own=GoldOutcome((QueryResult(("a",), [(1,)]),), ("SELECT a FROM t",), False)),
              path(shrunk=False), path(limits=Limits(max_rows=10)), path(databases=databases[:2])]
    assert None not in others and len({base, *others}) == len(others) + 1
    # not generated neighbours of one folder, or an own gold JSON cannot carry exactly: nothing remembered
    assert path(databases=(OtherDatabase(tmp_path / "x.sqlite", EngineKind.SQLITE, "x.sqlite"),)) is None
    assert path(own=GoldOutcome((QueryResult(("a",), [(decimal.Decimal("1.5"),)]),), ("SELECT a FROM t",), False)) is None


def test_a_time_out_is_not_remembered() -> None:
    assert failure_memo.unsure(QueryTimeout("slow"))
    try:
        try:
            raise QueryTimeout("slow")
        except QueryTimeout as e:
            raise GoldError("gold query timed out") from e
    except GoldError as gold:
        assert failure_memo.unsure(gold)
    assert not failure_memo.unsure(GoldError("gold query failed: no such column"))
