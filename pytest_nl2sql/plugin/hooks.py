"""The `pytest11` entry point: options, hooks and collection wiring. No logic lives here."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest

from pytest_nl2sql.plugin import hookspecs
from pytest_nl2sql.plugin import items as nodes
from pytest_nl2sql.plugin.controller import CONTROLLER_KEY, Controller
from pytest_nl2sql.judge.pipeline import Runtime
from pytest_nl2sql.plugin.settings import DEFAULT_FILES, OPTIONS, SettingsError, read_settings
from pytest_nl2sql.plugin.fixtures import nl2sql  # noqa: F401  (registers the fixture)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("nl2sql", "natural-language-to-SQL evaluation")
    for option in OPTIONS:
        if option.kind == "bool":
            group.addoption(option.flag, action="store_true", dest=option.dest, default=None, help=option.help)
            parser.addini(option.dest, option.help, type="bool", default=False)
        elif option.kind == "append":
            group.addoption(option.flag, action="append", dest=option.dest, default=None, metavar=option.metavar, help=option.help)
            parser.addini(option.dest, option.help, type="linelist", default=[])
        else:
            group.addoption(option.flag, action="store", dest=option.dest, default=None, metavar=option.metavar, help=option.help)
            parser.addini(option.dest, option.help, default=None)
    parser.addini("nl2sql_files", "globs of case files to collect", type="args", default=DEFAULT_FILES.split())


def pytest_configure(config: pytest.Config) -> None:
    try:
        settings = read_settings(config)
    except SettingsError as e:
        raise pytest.UsageError(str(e)) from None
    rt = Runtime(settings=settings, predict_hook=config.hook.pytest_nl2sql_predict)
    try:
        rt.check_files()  # a bad predictions or baseline file is a usage error, not 1000 failures
    except (OSError, ValueError) as e:
        raise pytest.UsageError(f"nl2sql: {e}") from None
    config.stash[nodes.RUNTIME_KEY] = rt
    if not hasattr(config, "workerinput"):
        controller = Controller(settings, rt.baseline)
        config.stash[CONTROLLER_KEY] = controller
        config.pluginmanager.register(controller, "nl2sql-controller")


def pytest_unconfigure(config: pytest.Config) -> None:
    rt = config.stash.get(nodes.RUNTIME_KEY, None)
    if rt is not None:
        rt.close()
    controller = config.stash.get(CONTROLLER_KEY, None)
    if controller is not None:
        config.pluginmanager.unregister(controller)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    patterns = parent.config.getini("nl2sql_files")
    named = file_path.suffix in (".yaml", ".yml", ".jsonl") and parent.session.isinitpath(file_path)
    if named or any(fnmatch.fnmatch(file_path.name, p) for p in patterns):
        return nodes.CaseFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)  # after -k / -m deselection
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    nodes.assign_positions(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    nodes.check_aligned_predictions(session)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    nodes.adjust_report(report, call)
    return report


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    return nodes.explain_result_comparison(op, left, right)
