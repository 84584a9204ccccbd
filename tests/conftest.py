"""Shared fixtures of the project's own test suite."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers import SHOP_SQL


def _share_bytecode(prefix: Path) -> None:
    """Where bytecode is not written (PYTHONDONTWRITEBYTECODE, as on the machines this suite runs
    on), every Python process the suite starts (xdist workers, nested `-n 2` runs, subprocess runs,
    CLI calls; some hundred) compiled the plugin and assertion-rewrote Hypothesis from source again,
    ~0.5 s of CPU each. They share one bytecode cache instead, kept out of the source tree
    (PYTHONPYCACHEPREFIX, which pytest's rewritten modules honour too). Loaded before xdist starts
    its workers, so they inherit it."""
    if not sys.dont_write_bytecode:
        return
    prefix_text = os.environ.get("PYTHONPYCACHEPREFIX") or str(prefix)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix_text
    sys.pycache_prefix = prefix_text
    sys.dont_write_bytecode = False


_share_bytecode(Path(__file__).resolve().parents[1] / ".pytest_cache" / "pycache")

# Loaded once for the session: pytester's in-process runs restore sys.modules, and a second import
# of duckdb aborts the interpreter (server cases now make DuckDB neighbours), while a second import
# of psycopg leaves its C part raising the first import's exception classes (not caught as errors).
# The others are imported here only so that they are imported once: each in-process run drops what
# it imported, and the next run paid ~0.2 s to import Hypothesis again (its pytest plugin's summary
# imports it) and the plugin's lazily imported modules, in each of some 250 runs. The neighbour
# cache loads on first use (pytest_nl2sql.neighbours.__getattr__): first used inside a run, it was
# dropped after it, and a test patching `cache.NeighbourCache` patched another class than the one
# the package had already subclassed.
for _module in ("duckdb", "psycopg", "hypothesis", "hypothesis.strategies", "hypothesis.statistics", "gzip",
                "xdist.dsession", "xdist.remote", "xdist.scheduler", "jsonschema_rs",
                "pytest_nl2sql.engines.worker", "pytest_nl2sql.engines.sqlite", "pytest_nl2sql.metrics.exact",
                "pytest_nl2sql.neighbours.servers", "pytest_nl2sql.neighbours.cache", "pytest_nl2sql.neighbours.shrink",
                "pytest_nl2sql.reports.md"):
    try:
        __import__(_module)
    except ImportError:
        pass
from servers import Scratch, mariadb_database, postgres_schema

try:  # Hypothesis' per-example deadline (200 ms) is a timing assertion: on a loaded machine it fails tests
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("nl2sql", deadline=None)
    _hypothesis_settings.load_profile("nl2sql")
except ImportError:
    pass

SPIDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "spider"


@pytest.fixture(scope="session")
def spider_dir() -> Path:
    """The real Spider dev set beside the repo (CI has it; a fresh clone does not)."""
    if not (SPIDER / "dev.json").exists():
        pytest.skip(f"the Spider data is not at {SPIDER} (it ships beside the repo in CI only)")
    return SPIDER


@pytest.fixture(scope="session", autouse=True)
def shared_neighbour_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One neighbour cache for every run of this session (in-process pytester runs included), so
    that a database generated once is not generated again by the next test's run; never the
    developer's own cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NL2SQL_CACHE_DIR", str(tmp_path_factory.mktemp("nl2sql-cache")))
        yield


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's own `pytester`, its runs without Hypothesis' pytest plugin and without assertion
    rewriting: no suite a test writes uses Hypothesis, and every process such a run starts (its
    xdist workers, `runpytest_subprocess`) imported it, ~0.13 s of CPU each, some 50 in all; and
    rewriting made each of some 400 runs list every installed distribution's files to find the
    plugins to rewrite (38 -> 33 ms a run), for conftests whose asserts no test reads. Set after
    pytester's own set-up, which clears `PYTEST_ADDOPTS`; a test's own `PYTEST_ADDOPTS` replaces it."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest --assert=plain")
    return pytester


@pytest.fixture
def postgres_shop() -> Iterator[Scratch]:
    """The shop tables of `helpers.SHOP_SQL` in a throwaway PostgreSQL schema."""
    with postgres_schema("nl2sql", SHOP_SQL) as scratch:
        yield scratch


@pytest.fixture
def mariadb_shop() -> Iterator[Scratch]:
    """The shop tables of `helpers.SHOP_SQL` in a throwaway MariaDB database."""
    with mariadb_database("nl2sql", SHOP_SQL) as scratch:
        yield scratch


@pytest.fixture(autouse=True)
def json_reports_match_the_schema(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every JSON report a run writes in this process (pytester's in-process runs, merge-reports,
    evaluate_suite) is read back and checked against the package's report.schema.json, every field
    it holds described there (`closed`): a report that is not fails the test that wrote it (at
    teardown), so the schema cannot fall behind the code. Subprocess runs are not seen."""
    from pytest_nl2sql import api
    from pytest_nl2sql.gate import finish
    from pytest_nl2sql.reports.schema import report_errors

    problems: list[str] = []

    def checked(write: Callable[..., list[Path]]) -> Callable[..., list[Path]]:
        def write_report(fmt: str, report: object, path: object) -> list[Path]:
            written = write(fmt, report, path)
            for file in written if fmt == "json" else ():
                if Path(file).is_file():  # not /dev/null
                    try:
                        data = json.loads(Path(file).read_text(encoding="utf-8"))
                        problems.extend(f"{file}: {e}" for e in report_errors(data, closed=True))
                    except Exception as e:  # noqa: BLE001 - said at teardown, never a change to the run
                        problems.append(f"{file}: cannot be checked: {type(e).__name__}: {e}")
            return written
        return write_report

    for module in (finish, api):
        monkeypatch.setattr(module, "write_report", checked(module.write_report))
    yield
    assert not problems, ("JSON reports that do not match pytest_nl2sql/reports/report.schema.json (a new field is "
                          "described there, and in docs/reference/json-report.md):\n" + "\n".join(problems))
