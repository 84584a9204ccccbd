"""Suspect golds: the gold audit's findings on tiny databases (present where the data speaks
against the gold, absent for a sound one), a suspect never moving a verdict, and `nl2sql
audit-gold` over crafted reports of several models."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from helpers import make_db, read_report, write_suite
from pytest_nl2sql.cases.read import Case
from pytest_nl2sql.cli import main
from pytest_nl2sql.engines import open_engine
from pytest_nl2sql.engines.base import Limits, QueryError, QueryResult
from pytest_nl2sql.engines.url import EngineKind
from pytest_nl2sql.judge import gold_audit
from pytest_nl2sql.judge.equality import result_fingerprint
from pytest_nl2sql.judge.execute import run_gold
from pytest_nl2sql.judge.fragile_gold import SET_MERGE, TIE_CUT
from pytest_nl2sql.judge.gold_audit import MAX_PROBES, audit_gold, fragile_finding
from pytest_nl2sql.judge.on_neighbours import NeighbourCheck, NeighbourFailure, OtherDatabase
from pytest_nl2sql.judge.pipeline import CaseLabel, Pipeline, RunOptions
from pytest_nl2sql.metrics.summary import build_report, summarize
from pytest_nl2sql.neighbours import Neighbour
from pytest_nl2sql.neighbours.invariants import Invariant, InvariantKind
from pytest_nl2sql.reports.md import render_markdown
from pytest_nl2sql.vocab import FragileSide, GoldFinding, Verdict
from servers import mariadb_database, postgres_schema

AIRPORTS_SQL = """
CREATE TABLE airports(code TEXT PRIMARY KEY, city TEXT);
INSERT INTO airports VALUES ('APG', 'Aberdeen'), ('ATO', 'Athens'), ('CVO', 'Corvallis');
CREATE TABLE flights(no INTEGER, source TEXT, dest TEXT);
INSERT INTO flights VALUES (1, ' APG', ' ATO'), (2, ' ATO', ' CVO'), (3, ' CVO', ' APG');
CREATE TABLE language(country TEXT, name TEXT, official TEXT);
INSERT INTO language VALUES ('NL', 'Dutch', 'T'), ('GB', 'English', 'T'), ('BE', 'French', 'F');
CREATE TABLE teacher(name TEXT, town TEXT, age INTEGER);
INSERT INTO teacher VALUES ('Ann', 'Bath', 30), ('Bob', 'York', 41), ('Cy', 'Leeds', 19);
"""


@pytest.fixture
def airports(tmp_path: Path) -> Any:
    engine = open_engine(str(make_db(tmp_path / "flight.sqlite", AIRPORTS_SQL)))
    yield engine
    engine.close()


def findings_of(engine: Any, gold: str) -> list[tuple[str, str]]:
    outcome = run_gold([gold], engine, Limits(), dialect="sqlite")
    return [(f.kind.value, f.detail) for f in audit_gold([gold], "sqlite", engine, Limits(), outcome.results)]


def kinds_of(engine: Any, gold: str) -> list[str]:
    return [kind for kind, _ in findings_of(engine, gold)]


# --- literal_not_in_data ---------------------------------------------------------------------------


def test_a_literal_found_only_once_trimmed_is_named_with_the_value_in_the_data(airports: Any) -> None:
    found = findings_of(airports, 'SELECT no FROM flights WHERE source = "APG"')  # SQLite reads "APG" as a string here
    literal = [detail for kind, detail in found if kind == "literal_not_in_data"]
    assert literal == [("the gold asks flights.source = 'APG', but no value of it is 'APG' on the case's database; ' APG' is,"
                        " once spaces are trimmed")]


def test_a_literal_found_only_ignoring_case_is_named_and_each_literal_of_an_in_list_is_read(airports: Any) -> None:
    found = findings_of(airports, "SELECT country FROM language WHERE name IN ('english', 'Dutch') AND official = 't'")
    details = sorted(detail for kind, detail in found if kind == "literal_not_in_data")
    assert details == [("the gold asks language.name = 'english', but no value of it is 'english' on the case's database;"
                        " 'English' is, ignoring case"),
                       ("the gold asks language.official = 't', but no value of it is 't' on the case's database; 'T' is,"
                        " ignoring case")]


def test_a_value_the_gold_excludes_is_read_too_and_explains_no_emptiness(airports: Any) -> None:
    found = findings_of(airports, "SELECT name FROM teacher WHERE town != 'bath'")
    assert found == [("literal_not_in_data", ("the gold asks teacher.town != 'bath', but no value of it is 'bath' on the case's"
                                              " database; 'Bath' is, ignoring case"))]
    assert findings_of(airports, "SELECT name FROM teacher WHERE town != 'Paris' AND age > 90") == []


def test_a_sound_gold_has_no_finding(airports: Any) -> None:
    assert findings_of(airports, "SELECT country FROM language WHERE name = 'Dutch' AND official = 'T'") == []
    assert findings_of(airports, "SELECT count(*) FROM flights WHERE source = ' APG'") == []
    assert findings_of(airports, "SELECT city FROM airports WHERE code IN ('APG', 'ATO')") == []


def test_like_is_read_with_the_engines_own_rules_and_a_pattern_is_not_probed(airports: Any) -> None:
    assert findings_of(airports, "SELECT country FROM language WHERE name LIKE 'dutch'") == []  # SQLite's LIKE ignores case
    assert findings_of(airports, "SELECT no FROM flights WHERE source LIKE '%XYZ%'") == []  # a pattern: not an equality
    assert kinds_of(airports, "SELECT no FROM flights WHERE source LIKE 'APG'") == ["literal_not_in_data", "empty_result"]


def test_a_literal_that_matches_nothing_even_folded_is_no_literal_finding(airports: Any) -> None:
    """`'Kyle'` where nobody is called Kyle is not a typo of a value the data holds."""
    assert "literal_not_in_data" not in kinds_of(airports, "SELECT name FROM teacher WHERE name = 'Kyle'")


# --- empty_result ----------------------------------------------------------------------------------


def test_no_row_because_a_literal_is_not_in_the_data_is_an_empty_result(airports: Any) -> None:
    found = findings_of(airports, "SELECT town FROM teacher WHERE name = 'Kyle'")
    assert found == [("empty_result", ("the gold returns no row on its own database, which lacks what it looks for: "
                                       "no value of teacher.name equals 'Kyle'"))]


def test_zeros_and_nulls_count_only_when_what_the_gold_looks_for_is_absent(airports: Any) -> None:
    zeros = findings_of(airports, "SELECT count(*) FROM flights WHERE source = 'APG'")
    assert [kind for kind, _ in zeros] == ["literal_not_in_data", "empty_result"]
    assert "returns only zeros" in zeros[1][1]
    nulls = findings_of(airports, "SELECT max(age), avg(age) FROM teacher WHERE town = 'Paris'")
    assert [kind for kind, _ in nulls] == ["empty_result"] and "only NULLs" in nulls[0][1]
    # a count of 0 over rows that exist but fail a range is an answer, not a suspect
    assert findings_of(airports, "SELECT count(*) FROM teacher WHERE age > 60") == []
    # an empty answer whose literals are all in the data is a fact about the data
    assert findings_of(airports, "SELECT town FROM teacher GROUP BY town HAVING count(*) >= 2") == []
    assert findings_of(airports, "SELECT name FROM teacher WHERE town = 'Bath' AND age > 40") == []


def test_a_join_that_pairs_no_rows_is_an_empty_result_saying_how_the_keys_differ(airports: Any) -> None:
    gold = ("SELECT a.city FROM airports AS a JOIN flights AS f ON a.code = f.dest "
            "GROUP BY a.city ORDER BY count(*) DESC LIMIT 1")
    found = findings_of(airports, gold)
    assert [kind for kind, _ in found] == ["empty_result"]
    assert "no value of airports.code equals a value of flights.dest" in found[0][1]
    assert "once spaces are trimmed" in found[0][1]


def test_an_empty_result_of_a_sound_join_is_not_flagged(tmp_path: Path) -> None:
    engine = open_engine(str(make_db(tmp_path / "t.sqlite", AIRPORTS_SQL + "UPDATE flights SET dest = trim(dest);")))
    try:
        gold = "SELECT a.city FROM airports AS a JOIN flights AS f ON a.code = f.dest WHERE f.no > 5"
        assert findings_of(engine, gold) == []
    finally:
        engine.close()


class Counting:
    """An engine that records the audit's queries and schema reads (and refuses what `refuse` matches)."""

    def __init__(self, inner: Any, refuse: str | None = None) -> None:
        self.inner, self.refuse, self.queries, self.schema_reads = inner, refuse, [], 0
        self.dialect = inner.dialect

    def execute(self, sql: str, limits: Limits) -> QueryResult:
        self.queries.append(sql)
        if self.refuse and self.refuse in sql:
            raise QueryError("refused")
        return self.inner.execute(sql, limits)

    def schema_columns(self) -> dict[str, list[str]]:
        self.schema_reads += 1
        return self.inner.schema_columns()


def audited(engine: Any, gold: str) -> list[tuple[str, str]]:
    outcome = run_gold([gold], engine, Limits(), dialect="sqlite")
    return [(f.kind.value, f.detail) for f in audit_gold([gold], "sqlite", engine, Limits(), outcome.results)]


def test_the_probes_are_bounded(airports: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    values = ", ".join(f"'X{n}'" for n in range(200))
    gold, empty = f"SELECT no FROM flights WHERE source IN ({values})", [QueryResult(("no",), [])]
    counting = Counting(airports)
    found = audit_gold([gold], "sqlite", counting, Limits(), empty)
    assert [f.kind for f in found] == [GoldFinding.EMPTY_RESULT]
    assert len(counting.queries) == 2  # the literals in one query, then the look-ups of those not found in one
    assert counting.queries[0].count("EXISTS") == MAX_PROBES
    monkeypatch.setattr(gold_audit, "_BATCHED", frozenset())  # (a dialect without SELECT EXISTS: one query a probe)
    alone = Counting(airports)
    assert audit_gold([gold], "sqlite", alone, Limits(), empty) == found
    assert len(alone.queries) == MAX_PROBES


def test_a_gold_s_literals_are_looked_for_in_one_query_and_up_in_another(airports: Any) -> None:
    gold = "SELECT country FROM language WHERE name IN ('english', 'Dutch', 'French') AND official = 'T' AND country != 'XX'"
    counting = Counting(airports)
    found = audited(counting, gold)
    assert [detail.split(",")[0] for _, detail in found] == ["the gold asks language.name = 'english'"]
    assert len(counting.queries) == 1 + 2  # (the gold itself, run by the test)
    assert counting.queries[1].count("EXISTS") == 5 and counting.queries[2].count("LOWER(TRIM(") == 2 * 2  # english, XX


def test_a_failing_query_of_several_probes_runs_each_alone(airports: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One probe's error (a PostgreSQL column compared with text of another type) must not silence the others."""
    gold = "SELECT country FROM language WHERE name IN ('english', 'Dutch') AND official = 't'"
    refusing = Counting(airports, refuse="EXISTS")
    assert audited(refusing, gold) == audited(airports, gold) != []
    assert sum("EXISTS" in sql for sql in refusing.queries) == 1 and len(refusing.queries) == 1 + 1 + 3 + 1


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
def test_a_gold_s_probes_run_together_on_the_servers_too(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`SELECT EXISTS (...), ...` and `SELECT (SELECT ... LIMIT 1), ...` as PostgreSQL and MariaDB
    read them: the same findings as one query a probe. (MariaDB's collation ignores case: 'york'
    is found there, ' Bath' only trimmed.)"""
    sql = ("CREATE TABLE teacher (name VARCHAR(10), town VARCHAR(10), age INTEGER);"
           "INSERT INTO teacher VALUES ('Ann', ' Bath', 30), ('Bob', 'York', 41), ('Cy', NULL, 19)")
    gold = "SELECT name FROM teacher WHERE town IN ('Bath', 'york', 'Leeds') OR age = 41"
    scratch = postgres_schema if server == "postgres" else mariadb_database
    with scratch("nl2sql_audit", sql) as made:
        engine = open_engine(made.url)
        try:
            counting = Counting(engine)
            result = [QueryResult(("name",), [("Bob",)])]
            found = [f.detail.split(";")[1] for f in audit_gold([gold], engine.dialect, counting, Limits(), result)]
            assert found == ([" ' Bath' is, once spaces are trimmed", " 'York' is, ignoring case"] if server == "postgres"
                             else [" ' Bath' is, once spaces are trimmed"])
            assert len(counting.queries) == 2
            monkeypatch.setattr(gold_audit, "_BATCHED", frozenset())
            alone = Counting(engine)
            assert [f.detail.split(";")[1] for f in audit_gold([gold], engine.dialect, alone, Limits(), result)] == found
            assert len(alone.queries) == 3 + (3 if server == "postgres" else 2)  # each literal; each not found, folded
        finally:
            engine.close()


def test_a_gold_with_a_result_and_no_text_literal_is_not_read(airports: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a text literal can be found trimmed or case-folded, and only an empty result is
    explained by what is absent: such a gold has nothing to find, and is neither parsed nor probed."""
    def unread(*args: Any) -> None:
        raise AssertionError("parsed")

    counting = Counting(airports)
    gold = "SELECT name FROM teacher WHERE age = 30 AND town IN (SELECT town FROM teacher)"
    outcome = run_gold([gold], airports, Limits(), dialect="sqlite")
    monkeypatch.setattr(gold_audit, "read_golds", unread)
    assert audit_gold([gold], "sqlite", counting, Limits(), outcome.results) == ()
    assert counting.queries == [] and counting.schema_reads == 0
    with pytest.raises(AssertionError, match="parsed"):  # an empty result is read, literals or not
        audit_gold([gold.replace("30", "31")], "sqlite", counting, Limits(), [QueryResult(("name",), [])])


def test_the_schema_is_read_once_per_engine_and_each_gold_parsed_once(airports: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    read = gold_audit.read_golds
    monkeypatch.setattr(gold_audit, "read_golds", lambda golds, *args: parsed.extend(golds) or read(golds, *args))
    counting = Counting(airports)
    for gold in ("SELECT name FROM teacher WHERE town = 'bath'", "SELECT count(*) FROM teacher WHERE name = 'Kyle'",
                 "SELECT name FROM teacher WHERE town = 'bath'"):
        audited(counting, gold)
    assert counting.schema_reads == 1
    assert parsed == ["SELECT name FROM teacher WHERE town = 'bath'", "SELECT count(*) FROM teacher WHERE name = 'Kyle'"]


def test_an_unreadable_gold_or_one_on_a_result_file_has_no_finding(airports: Any) -> None:
    assert audit_gold(["SELEC nothing FRM"], "sqlite", airports, Limits(), [None]) == ()
    assert audit_gold([], "sqlite", airports, Limits(), [QueryResult(("x",), [])]) == ()


# --- fragile_gold ----------------------------------------------------------------------------------


REPEATED = "the results differ only in repeated rows, which the gold never returns on the case's database"


def _fragile(side: FragileSide | None, broken: Invariant | None, why: str, *, fragile: int = 1) -> NeighbourCheck:
    """A fragile pass whose shown neighbour breaks `broken` (None: a plausible one, excused by `why`)."""
    database = OtherDatabase(Path("n/0.sqlite"), EngineKind.SQLITE, "neighbour 1 of 1",
                             Neighbour(Path("n/0.sqlite"), 0, "neighbour", broken, ()))
    failure = NeighbourFailure(database, None, None, breaks=why)  # type: ignore[arg-type]  # (the finding reads neither)
    return NeighbourCheck(1, 0, failure, 1, fragile, side)


NAME = Invariant(InvariantKind.UNIQUE, "singer", "name")


@pytest.mark.parametrize("side, broken, why, suspect", [
    (FragileSide.GOLD, NAME, "two rows of singer share name", True),  # a GROUP BY / INTERSECT / NOT IN on a name
    (FragileSide.GOLD, Invariant(InvariantKind.NOT_NULL, "pet", "age"), "pet.age holds a NULL", True),  # sorted first
    (FragileSide.GOLD, Invariant(InvariantKind.PARTICIPATION, "singer", "id", "song", "singer_id"),
     "a row of singer has no row in song", True),  # the gold's JOIN drops her, asked for with 0
    (FragileSide.GOLD, None, SET_MERGE.format("INTERSECT"), True),  # the gold's own SQL merges names
    (FragileSide.GOLD, None, TIE_CUT, True),
    (FragileSide.BOTH, NAME, "two rows of singer share name", False),  # as much against the prediction
    (FragileSide.PREDICTION, NAME, "two rows of singer share name", False),
    (None, NAME, "two rows of singer share name", False),
    (FragileSide.GOLD, Invariant(InvariantKind.SPELLING, "visit", "visitor_id"), ("visit.visitor_id holds one value in two"
     " spellings"), False),  # '5' and '5 ': the gold shows the reference as written
    (FragileSide.GOLD, Invariant(InvariantKind.ONCE, "country", "name", values=("Aruba",)),
     "several rows of country have name = 'Aruba'", False),  # every Aruba is what the question names
    (FragileSide.GOLD, Invariant(InvariantKind.UNIQUE, "has_pet", "stuid", together=("petid",)),
     "two rows of has_pet share (stuid, petid)", False),  # a repeated row, no two entities
    (FragileSide.GOLD, None, REPEATED, False),  # rows the gold's join repeats: what its author never saw
    (FragileSide.GOLD, None, ("the results differ only in rows holding NULL, which the gold never returns on the"
     " case's database"), False),  # min() over an empty table
])
def test_fragile_gold_only_where_the_gold_alone_gets_a_name_or_a_null_wrong(
        side: FragileSide | None, broken: Invariant | None, why: str, suspect: bool) -> None:
    finding = fragile_finding(_fragile(side, broken, why))
    assert (finding is not None) is suspect
    if finding is not None:
        assert finding.kind is GoldFinding.FRAGILE_GOLD and why in finding.detail and "the gold alone" in finding.detail
    assert fragile_finding(None) is None
    assert fragile_finding(_fragile(side, broken, why, fragile=0)) is None  # not a fragile pass


def test_a_name_the_gold_compares_with_a_literal_is_no_suspect(tmp_path: Path) -> None:
    """Two countries called Aruba: a gold asking for Aruba's languages takes both, as the question
    names them; a gold grouping by the name merges two countries the question keeps apart."""
    engine = open_engine(str(make_db(tmp_path / "w.sqlite", "CREATE TABLE country(code TEXT PRIMARY KEY, name TEXT);"
                                                            "CREATE TABLE lang(code TEXT, language TEXT);")))
    try:
        aruba = "SELECT count(*) FROM country AS c JOIN lang AS l ON l.code = c.code WHERE c.name = 'Aruba'"
        grouped = "SELECT c.name, count(*) FROM country AS c JOIN lang AS l ON l.code = c.code GROUP BY c.name"
        check = _fragile(FragileSide.GOLD, Invariant(InvariantKind.UNIQUE, "country", "name"), "two rows of country share name")
        assert fragile_finding(check, [aruba], "sqlite", engine) is None
        assert fragile_finding(check, [grouped], "sqlite", engine) is not None
        assert fragile_finding(check, [grouped.replace("GROUP BY", "WHERE l.language = 'Dutch' GROUP BY")], "sqlite", engine)
    finally:
        engine.close()


# --- in the pipeline: findings to read, never a verdict ----------------------------------------------


def _case(tmp_path: Path, gold: str, predicted: str) -> Case:
    db = make_db(tmp_path / "flight.sqlite", AIRPORTS_SQL)
    return Case(id="q", file=tmp_path / "flight.nl2sql.yaml", line=1, position=0, question="How many flights leave APG?",
                database="flight.sqlite", database_target=str(db), gold=(gold,), predicted=predicted)


LABEL = CaseLabel("flight.nl2sql.yaml::q", "flight.nl2sql.yaml", 0)


@pytest.mark.parametrize("predicted, verdict", [
    ("SELECT count(*) FROM flights WHERE source = 'APG'", Verdict.PASS),  # as wrong as the gold: passes, as before
    ("SELECT count(*) FROM flights WHERE trim(source) = 'APG'", Verdict.MISMATCH),  # right: fails, as before
])
def test_a_suspect_gold_changes_no_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, predicted: str, verdict: Verdict) -> None:
    case = _case(tmp_path, "SELECT count(*) FROM flights WHERE source = 'APG'", predicted)
    audited = Pipeline(RunOptions(neighbours=0)).evaluate(case, LABEL).result
    assert audited.gold_audit is not None and audited.gold_audit["suspect"] is True
    assert [f["kind"] for f in audited.gold_audit["findings"]] == ["literal_not_in_data", "empty_result"]
    monkeypatch.setattr(gold_audit, "audit_gold", lambda *args, **kwargs: ())
    plain = Pipeline(RunOptions(neighbours=0)).evaluate(case, LABEL).result
    assert plain.gold_audit == {"suspect": False, "findings": []}
    assert audited.verdict is plain.verdict is verdict
    unaudited = {"gold_audit": None, "latency": None, "database_hash": None}  # (the hash is computed once per process)
    assert dataclasses.replace(audited, **unaudited) == dataclasses.replace(plain, **unaudited)


def test_the_summary_counts_suspects_and_the_markdown_lists_them(tmp_path: Path) -> None:
    suspect = _case(tmp_path, "SELECT count(*) FROM flights WHERE source = 'APG'", "SELECT 0")
    sound = dataclasses.replace(suspect, id="r", gold=("SELECT count(*) FROM flights",), predicted="SELECT 3")
    pipeline = Pipeline(RunOptions(neighbours=0))
    results = [pipeline.evaluate(suspect, LABEL).result,
               pipeline.evaluate(sound, CaseLabel("flight.nl2sql.yaml::r", "flight.nl2sql.yaml", 1)).result]
    assert results[1].gold_audit == {"suspect": False, "findings": []}
    summary = summarize(results)
    assert summary["gold_suspects"] == 1
    text = render_markdown(build_report(results, summary))
    assert "1 suspect gold" in text and "Suspect golds (1)" in text
    assert "the gold asks flights.source = 'APG', but no value of it is 'APG' on the case's database; ' APG' is, once" in text


def test_a_mismatch_keeps_the_fingerprint_of_its_result_without_a_baseline(tmp_path: Path) -> None:
    case = _case(tmp_path, "SELECT count(*) FROM flights", "SELECT count(*) + 1 FROM flights")
    result = Pipeline(RunOptions(neighbours=0)).evaluate(case, LABEL).result
    assert result.verdict is Verdict.MISMATCH and isinstance(result.fingerprint, str)
    passed = Pipeline(RunOptions(neighbours=0)).evaluate(dataclasses.replace(case, predicted="SELECT 3"), LABEL).result
    assert passed.verdict is Verdict.PASS and passed.fingerprint is None  # only failures are compared across models


def test_a_run_writes_gold_audit_and_gold_suspects_and_lists_suspects(pytester: pytest.Pytester) -> None:
    make_db(pytester.path / "flight.sqlite", AIRPORTS_SQL)
    write_suite(pytester.path, [
        {"id": "apg", "question": "How many flights leave APG?", "gold": "SELECT count(*) FROM flights WHERE source = 'APG'",
         "predicted": "SELECT count(*) FROM flights WHERE source = 'APG'"},
        {"id": "all", "question": "How many flights?", "gold": "SELECT count(*) FROM flights",
         "predicted": "SELECT count(*) FROM flights AS f"},
    ], name="flight.nl2sql.yaml", database="flight.sqlite")
    result = pytester.runpytest("-p", "no:cacheprovider", "--nl2sql-report=json:r.json", "--nl2sql-report=html:r.html")
    result.assert_outcomes(passed=2)
    report = read_report(pytester.path / "r.json")
    audits = {item["id"]: item["gold_audit"] for item in report["items"]}
    assert audits["all"] == {"suspect": False, "findings": []}
    assert audits["apg"]["suspect"] is True and {f["kind"] for f in audits["apg"]["findings"]} == {"literal_not_in_data", "empty_result"}
    assert report["summary"]["gold_suspects"] == 1
    page = (pytester.path / "r.html").read_text()
    assert 'id="suspects"' in page and "Suspect golds (1)" in page and "&#x27; APG&#x27; is, once spaces are trimmed" in page


# --- nl2sql audit-gold ---------------------------------------------------------------------------


def item(case_id: str, verdict: str = "pass", *, fingerprint: str | None = None, reason: str | None = None,
         predicted: str = "SELECT 1", gold: str = "SELECT 1", **fields: Any) -> dict[str, Any]:
    return {"id": case_id, "nodeid": f"s.nl2sql.yaml::{case_id}", "file": "s.nl2sql.yaml", "question": f"question {case_id}?",
            "database": "db", "gold": gold, "predicted": predicted, "verdict": verdict, "passed": verdict == "pass",
            "reason": reason, "fingerprint": fingerprint, "kind": "sql", "position": 0, "gold_audit": None, **fields}


def counterexample(predicted: list[list[Any]]) -> dict[str, Any]:
    return {"checked": 3, "failed": 1, "fragile": 0,
            "counterexample": {"breaks": None, "tables": {"dogs": {"columns": ["name"], "rows": [["Rex"], ["Rex"]]}},
                               "gold": [["Rex"]], "predicted": predicted}}


def write_reports(tmp_path: Path, per_model: list[list[dict[str, Any]]]) -> list[str]:
    paths = []
    for number, items in enumerate(per_model, start=1):
        path = tmp_path / f"model{number}.json"
        path.write_text(json.dumps({"run": {"label": f"model {number}"}, "summary": {}, "items": items}))
        paths.append(str(path))
    return paths


def four_models(tmp_path: Path) -> list[str]:
    """Case `agree`: three models fail alike, one passes; `split`: three fail differently; `pair`:
    two agree, one differs, one errs; `dogs`: three fail alike on the same neighbour; `audited`: a
    report's own audit suspects its gold."""
    audited = {"suspect": True, "findings": [{"kind": "empty_result", "detail": "the gold returns no row"}]}
    models = []
    for n in range(4):
        models.append([
            item("agree", "pass") if n == 3 else item("agree", "mismatch", fingerprint="f-same", reason="values",
                                                          predicted=f"SELECT 2 -- model {n + 1}",
                                                          diff={"missing": [[1]], "extra": [[2]], "missing_count": 1, "extra_count": 1}),
            item("split", "mismatch", fingerprint=f"f-{n}", reason="values"),
            item("pair", "pred_error", reason="no such column") if n == 3 else
            item("pair", "mismatch", fingerprint="f-pair" if n < 2 else "f-other", reason="row count"),
            item("dogs", "pass") if n == 0 else item("dogs", "mismatch", reason="neighbour database", neighbours=counterexample([["Rex"], ["Rex"]])),
            item("audited", "pass", gold_audit=audited),
        ])
    return write_reports(tmp_path, models)


def audit_output(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main(["audit-gold", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if "--format" in args and code == 0 else captured.out, captured.err


def test_consensus_needs_k_failing_predictions_that_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = four_models(tmp_path)
    code, out, _ = audit_output(capsys, *paths, "--format", "json")
    assert code == 0 and out["min_agree"] == 3  # all but one of 4
    suspects = {s["id"]: s for s in out["cases_suspect"]}
    assert set(suspects) == {"agree", "dogs", "audited"}
    agree = suspects["agree"]
    assert [f["kind"] for f in agree["findings"]] == ["consensus"] and "3 of 4" in agree["findings"][0]["detail"]
    assert agree["agreeing"] == paths[:3] and agree["prediction"] == "SELECT 2 -- model 1"
    assert agree["evidence"]["missing"] == [[1]] and agree["evidence"]["extra"] == [[2]]
    assert "on a neighbour database" in suspects["dogs"]["findings"][0]["detail"]
    assert suspects["dogs"]["evidence"]["tables"] == {"dogs": {"columns": ["name"], "rows": [["Rex"], ["Rex"]]}}
    assert suspects["audited"]["findings"] == [{"kind": "empty_result", "detail": "the gold returns no row"}]
    assert suspects["audited"]["agreeing"] == []
    assert out["by_kind"]["consensus"] == 2 and out["by_kind"]["empty_result"] == 1 and out["suspects"] == 3
    assert out["reports"][0]["by_kind"]["consensus"] == 1 and out["reports"][3]["by_kind"]["consensus"] == 1  # agree; dogs
    code, out, _ = audit_output(capsys, *paths, "--format", "json", "--min-agree", "2")
    assert {s["id"] for s in out["cases_suspect"]} == {"agree", "dogs", "pair", "audited"}


def test_predictions_that_differ_on_the_neighbour_do_not_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = [[item("dogs", "mismatch", reason="neighbour database", neighbours=counterexample(rows))]
              for rows in ([["Rex"], ["Rex"]], [["Rex"], ["Rex"]], [["Rex"]], [])]
    code, out, _ = audit_output(capsys, *write_reports(tmp_path, models), "--format", "json")
    assert code == 0 and out["cases_suspect"] == []
    code, out, _ = audit_output(capsys, *write_reports(tmp_path, models), "--format", "json", "--min-agree", "2")
    assert [s["id"] for s in out["cases_suspect"]] == ["dogs"]


def test_predictions_that_agree_on_nothing_are_no_consensus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three models that write 'Dog' where the data holds 'dog' all count 0: their mistake, not the gold's."""
    zero = result_fingerprint([(0,)], False)
    models = [[item("dogs", "mismatch", fingerprint=zero, reason="values"),
               item("none", "mismatch", fingerprint=result_fingerprint([], True), reason="row count"),
               item("neighbour", "mismatch", reason="neighbour database", neighbours=counterexample([[None]])),
               item("some", "mismatch", fingerprint=result_fingerprint([(0,), (2,)], False), reason="values")]
              for _ in range(3)]
    code, out, _ = audit_output(capsys, *write_reports(tmp_path, models), "--format", "json")
    assert code == 0 and [s["id"] for s in out["cases_suspect"]] == ["some"]


def test_predictions_that_add_or_drop_copies_of_the_gold_s_rows_are_no_consensus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three models that leave out the gold's DISTINCT list a dog's dates once per treatment: the
    same rows, with copies (near miss `duplicates`). Their shared mistake, not the gold's; the same
    agreement with other rows is a consensus."""
    copies = result_fingerprint([("2017-06-18",), ("2017-06-18",)], False)
    models = [[item("dates", "mismatch", fingerprint=copies, reason="row count", near_miss="duplicates"),
               item("other", "mismatch", fingerprint=copies, reason="row count", near_miss=None)] for _ in range(3)]
    code, out, _ = audit_output(capsys, *write_reports(tmp_path, models), "--format", "json")
    assert code == 0 and [s["id"] for s in out["cases_suspect"]] == ["other"]


def test_the_markdown_output_shows_each_suspect_with_its_evidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = audit_output(capsys, *four_models(tmp_path))
    assert code == 0
    assert "### Suspect golds: 3 of 5 cases (60.0%)" in out
    assert "| model 1 | 2 | 0 | 1 | 0 | 1 |" in out  # its audit's `audited`, its agreeing `agree` (it passed `dogs`)
    assert "#### `s.nl2sql.yaml::agree`" in out and "agreeing prediction (model 1, model 2, model 3)" in out
    assert "gold rows the predictions miss (1)" in out and "table dogs" in out


def test_a_malformed_report_or_one_of_another_suite_is_exit_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = four_models(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text('{"items": [{"id": "agree", "verdict": 7}]}')
    code, _, err = audit_output(capsys, paths[0], str(broken))
    assert code == 2 and "broken.json" in err
    (tmp_path / "other").mkdir()
    other = write_reports(tmp_path / "other", [[item("agree"), item("elsewhere")]])
    code, _, err = audit_output(capsys, paths[0], other[0])
    assert code == 2 and "other/model1.json" in err and "not a report of the same suite" in err
    regolded = write_reports(tmp_path / "other", [[{**i, "gold": "SELECT 2"} if i["id"] == "split" else i
                                                   for i in json.loads(Path(paths[1]).read_text())["items"]]])
    code, _, err = audit_output(capsys, paths[0], regolded[0])
    assert code == 2 and "split" in err and "another gold" in err
    code, _, err = audit_output(capsys, paths[0], paths[0])
    assert code == 2 and "given twice" in err
    code, _, err = audit_output(capsys, *paths[:2], "--min-agree", "3")
    assert code == 2 and "--min-agree 3 with 2 report(s)" in err
