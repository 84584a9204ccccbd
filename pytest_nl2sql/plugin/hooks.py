"""The `pytest11` entry point: options, hooks and collection wiring. No logic lives here."""

from __future__ import annotations

import fnmatch
import gc
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.plugin import hookspecs
from pytest_nl2sql.plugin import items as nodes
from pytest_nl2sql.plugin.controller import CONTROLLER_KEY, Controller, Selection
from pytest_nl2sql.plugin.fixtures import nl2sql  # noqa: F401  (registers the fixture)
from pytest_nl2sql.plugin.prefetch import Prefetcher
from pytest_nl2sql.plugin.settings import DEFAULT_FILES, OPTIONS, SettingsError, check_dsn, make_pipeline, read_settings


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nl2sql", "natural-language-to-SQL evaluation")
    for option in OPTIONS:
        if option.kind == "bool":
            group.addoption(option.flag, action="store_true", dest=option.dest, default=None, help=option.help)
            parser.addini(option.dest, option.ini_help, type="bool", default=False)
        elif option.kind == "append":
            group.addoption(option.flag, action="append", dest=option.dest, default=None, metavar=option.metavar, help=option.help)
            parser.addini(option.dest, option.ini_help, type="linelist", default=[])
        else:
            group.addoption(option.flag, action="store", dest=option.dest, default=None, metavar=option.metavar, help=option.help)
            parser.addini(option.dest, option.ini_help, default=None)
    parser.addini("nl2sql_files", "globs of case files to collect", type="args", default=DEFAULT_FILES.split())
    parser.addini("nl2sql_synonyms", "column-name synonyms for the soft scores: one `word = word` per line",
                  type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("help", False) or config.getoption("version", False):
        return  # `pytest --help` runs this too: a baseline not written yet is no reason to refuse help
    try:
        settings = read_settings(config)
        pipeline = make_pipeline(settings, config)  # a bad predictions or baseline file: one usage error
    except SettingsError as e:
        raise pytest.UsageError(str(e)) from None
    prefetcher = Prefetcher(pipeline, settings.concurrency) if settings.concurrency > 1 else None
    config.stash[nodes.STATE_KEY] = nodes.RunState(settings, pipeline, prefetcher=prefetcher)
    selection = Selection()  # how many of the collected cases run: in the process that collects them
    config.pluginmanager.register(selection, "nl2sql-selection")
    if not hasattr(config, "workerinput"):
        controller = Controller(settings, pipeline.baseline, selection)
        config.stash[CONTROLLER_KEY] = controller
        config.pluginmanager.register(controller, "nl2sql-controller")


# First, so that under xdist no worker is started for a run that cannot work; not in
# pytest_configure, which `pytest --help` also runs.
@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """A `--nl2sql-dsn` that cannot work (unknown scheme, missing driver, unreachable) is one usage
    error before any case runs; checked once, on the controller (xdist workers have `workerinput`)."""
    config = session.config
    state = config.stash.get(nodes.STATE_KEY, None)
    if hasattr(config, "workerinput") or state is None or not state.settings.dsn:
        return
    try:
        check_dsn(state.settings.dsn)
    except SettingsError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(nodes.STATE_KEY, None)
    if state is not None:
        if state.prefetcher is not None:
            state.prefetcher.close()
        state.pipeline.close()
    controller = config.stash.get(CONTROLLER_KEY, None)
    if controller is not None:
        config.pluginmanager.unregister(controller)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    patterns = parent.config.getini("nl2sql_files")
    named = file_path.suffix in (".yaml", ".yml", ".jsonl") and parent.session.isinitpath(file_path)
    if named or any(fnmatch.fnmatch(file_path.name, p) for p in patterns):
        return nodes.CaseFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    nodes.mark_unreadable(collector, report)
    return report


@pytest.hookimpl(tryfirst=True)  # before pytest's own, which stops a run whose collection failed
def pytest_runtestloop(session: pytest.Session) -> None:
    nodes.go_on_past_unreadable_files(session)


# Before -k / -m deselection: positions in the whole collection, so that the shards of one suite
# (merge-reports) sort as one run does.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    nodes.assign_positions(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    nodes.check_predictions(session)
    if nodes.has_cases(session):  # only in runs of nl2sql cases, not in every suite this plugin is installed for
        gc.freeze()  # the collected items live to the end: the collector need not walk them again and again


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    controller = session.config.stash.get(CONTROLLER_KEY, None)
    if nodes.has_cases(session) or (controller is not None and controller.results):  # (an xdist controller: no items)
        gc.freeze()  # nor the results, which live to the end too (this halves the time a Spider run spends exiting)
    nodes.forget_quiet_reports(session.config)  # (an xdist controller has no items, but the reports)


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Any:
    return nodes.serializable(report, (yield))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    nodes.adjust_report(item, report, call)
    return report


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    from pytest_nl2sql.plugin.fixtures import explain_result_comparison

    return explain_result_comparison(op, left, right)
