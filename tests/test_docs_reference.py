"""The docs' reference pages (docs/reference/) name everything the code offers, and nothing it no
longer does: every option and ini option, case key, `compare:` and `source:` key, JSON report
field, CLI command and flag, hook, predictor attribute and public function. The pages are written
by hand; these tests read the code's own registries (the options table, the case parser's key sets,
the report's JSON Schema, the argparse parser, the hookspecs) and fail naming what is missing and
where to add it. The CI page's workflow listing is the one `nl2sql init` writes.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pytest_nl2sql
from pytest_nl2sql import cli
from pytest_nl2sql.cases.model import ALIASES, CASE_KEYS
from pytest_nl2sql.cases.sources import SOURCE_KEYS
from pytest_nl2sql.judge.compare import SOFT_SCORE_KEYS, TERM_SELECTION_KEYS, CompareOptions
from pytest_nl2sql.judge.predict import PredictionRequest
from pytest_nl2sql.plugin import hooks, hookspecs
from pytest_nl2sql.plugin.fixtures import NL2SQL
from pytest_nl2sql.plugin.settings import OPTIONS
from pytest_nl2sql.reports.schema import load_schema
from pytest_nl2sql.scaffold import workflow_yaml

DOCS = Path(__file__).resolve().parent.parent / "docs"
REFERENCE = DOCS / "reference"

# PredictionRequest methods the plugin uses to derive requests; not for the hook's author.
INTERNAL_REQUEST_METHODS = {"as_sample", "at_turn", "for_case"}


# --- reading the pages ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Section:
    level: int
    heading: str
    text: str

    @property
    def name(self) -> str | None:
        """The heading's first `code` span (`## \\`summary\\``: `summary`), else None."""
        found = re.search(r"`([^`]+)`", self.heading)
        return found.group(1) if found else None

    def rows(self) -> dict[str, list[str]]:
        """The section's table rows by their first cell's first `code` span (its cells as written)."""
        out: dict[str, list[str]] = {}
        for line in self.text.splitlines():
            if not line.startswith("|") or re.match(r"\|\s*-", line):
                continue
            cells = _cells(line)
            found = re.search(r"`([^`]+)`", cells[0])
            if found:
                out.setdefault(found.group(1), cells)
        return out


def _cells(row: str) -> list[str]:
    """A table row's cells: `|` separates them, but not inside a `code` span (as Python-Markdown reads it)."""
    cells, cell, code = [], "", False
    for char in row.strip().strip("|"):
        if char == "`":
            code = not code
        if char == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
    return [*cells, cell.strip()]


def sections(page: Path) -> list[Section]:
    """The page's sections (any heading level), each with its text up to the next heading."""
    found: list[Section] = []
    level, heading, lines = 0, "", []
    fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if re.match(r"\s*(```|~~~)", line):
            fence = not fence
        match = None if fence else re.match(r"(#{1,6}) (.*)", line)
        if match:
            found.append(Section(level, heading, "\n".join(lines)))
            level, heading, lines = len(match.group(1)), match.group(2), []
        else:
            lines.append(line)
    found.append(Section(level, heading, "\n".join(lines)))
    return found


def section(page: Path, heading: str) -> Section:
    """The section (below the page's title) whose heading is `heading`, else the first that contains
    it (case-insensitive; leading `#`s ignored)."""
    wanted = heading.lstrip("#").strip().lower()
    found = [s for s in sections(page) if s.level > 1]  # not the page's title
    matches = [s for s in found if s.heading.lower() == wanted] or [s for s in found if wanted in s.heading.lower()]
    assert matches, f"{page.relative_to(DOCS.parent)} has no heading containing {heading!r}"
    return matches[0]


def failed(problems: list[str]) -> str:
    return f"{len(problems)} problem(s) in the docs' reference:\n" + "\n".join(f"- {p}" for p in problems)


# --- options ----------------------------------------------------------------------------------

class _Recorder:
    """Stands in for pytest's parser: records the options and ini options the plugin declares."""

    def __init__(self) -> None:
        self.flags: list[str] = []
        self.inis: dict[str, Any] = {}

    def getgroup(self, *args: Any, **kwargs: Any) -> "_Recorder":
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.flags += [n for n in names if n.startswith("--")]

    def addini(self, name: str, help: str, type: Any = None, default: Any = None) -> None:  # noqa: A002 - pytest's name
        self.inis[name] = default


def declared() -> _Recorder:
    recorder = _Recorder()
    hooks.pytest_addoption(recorder)  # type: ignore[arg-type]
    return recorder


def test_every_option_is_in_the_options_reference() -> None:
    page = REFERENCE / "options.md"
    table = section(page, "Command-line options").rows()
    documented = {key.split("=")[0]: cells for key, cells in table.items()}
    problems = []
    for option in OPTIONS:
        default = None if option.default in (None, False) else str(option.default)
        row = f"| `{option.flag}{'=' + option.metavar if option.metavar else ''}` | `{option.dest}` | {f'`{default}`' if default else 'none'} | ... |"
        cells = documented.get(option.flag)
        if cells is None:
            problems.append(f"option {option.flag} (pytest_nl2sql/plugin/settings.py OPTIONS) is not in {page.relative_to(DOCS.parent)}:"
                            f" add the row {row} to the table under '## Command-line options'")
            continue
        if len(cells) < 4 or f"`{option.dest}`" not in cells[1]:
            problems.append(f"option {option.flag}: its row in {page.name} must give the ini name `{option.dest}` in its second cell: {row}")
        elif default is not None and f"`{default}`" not in cells[2]:
            problems.append(f"option {option.flag}: its row in {page.name} must give the default `{default}` in its third cell: {row}")
    flags = {o.flag for o in OPTIONS}
    problems += [f"{page.name} documents {flag}, which no longer exists (pytest_nl2sql/plugin/settings.py OPTIONS): remove its row"
                 for flag in documented if flag not in flags]
    assert set(declared().flags) == flags  # the plugin declares exactly the table's options
    assert not problems, failed(problems)


def test_every_ini_only_option_is_in_the_options_reference() -> None:
    page = REFERENCE / "options.md"
    documented = section(page, "Ini-only options").rows()
    ini_only = {name for name in declared().inis if name not in {o.dest for o in OPTIONS}}
    assert ini_only  # nl2sql_files, nl2sql_synonyms at least
    problems = [f"ini option {name} (parser.addini in pytest_nl2sql/plugin/hooks.py) is not in {page.relative_to(DOCS.parent)}:"
                f" add a row | `{name}` | default | meaning | to the table under '## Ini-only options'"
                for name in sorted(ini_only - set(documented))]
    problems += [f"{page.name} documents the ini option {name}, which the plugin does not declare: remove its row"
                 for name in sorted(set(documented) - ini_only)]
    assert not problems, failed(problems)


# --- case keys --------------------------------------------------------------------------------

def _keys_problems(page: Path, heading: str, keys: set[str], where: str) -> list[str]:
    documented = set(section(page, heading).rows())
    problems = [f"key `{key}` ({where}) is not in {page.relative_to(DOCS.parent)}:"
                f" add a row | `{key}` | meaning | to the table under the heading '{heading}'"
                for key in sorted(keys - documented)]
    problems += [f"{page.name} documents `{key}` under '{heading}', which the code does not accept ({where}): remove its row"
                 for key in sorted(documented - keys)]
    return problems


def test_every_case_key_is_in_the_case_keys_reference() -> None:
    page = REFERENCE / "case-keys.md"
    compare_keys = {f.name for f in dataclasses.fields(CompareOptions)} | TERM_SELECTION_KEYS | SOFT_SCORE_KEYS
    problems = [
        *_keys_problems(page, "## Case keys", set(CASE_KEYS), "CASE_KEYS in pytest_nl2sql/cases/model.py"),
        *_keys_problems(page, "## Aliases", set(ALIASES), "ALIASES in pytest_nl2sql/cases/model.py"),
        *_keys_problems(page, "## `compare:` options", compare_keys,
                        "CompareOptions, TERM_SELECTION_KEYS and SOFT_SCORE_KEYS in pytest_nl2sql/judge/compare.py"),
        *_keys_problems(page, "## `source:` keys", set(SOURCE_KEYS), "SOURCE_KEYS in pytest_nl2sql/cases/sources.py"),
    ]
    aliases = section(page, "## Aliases").rows()
    problems += [f"alias `{alias}` must name the key it stands for, `{target}`, in its row of {page.name}"
                 for alias, target in ALIASES.items() if alias in aliases and f"`{target}`" not in aliases[alias][1]]
    assert not problems, failed(problems)


# --- the JSON report --------------------------------------------------------------------------

def _alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return [s for s in schema[key] if s.get("type") != "null"]
    return [schema]


def _fields(schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted field names of an object schema; an object of its own (a `$ref`) is not entered
    (it has a section of its own), a map's values are `*.`, a list's elements `[].`."""
    for alternative in _alternatives(schema):
        if "$ref" in alternative:
            continue
        for name, sub in (alternative.get("properties") or {}).items():
            yield prefix + name
            for inner in _alternatives(sub):
                if "$ref" in inner:
                    continue
                yield from _fields(inner, f"{prefix}{name}.")
                values = inner.get("additionalProperties")
                if isinstance(values, dict) and "$ref" not in values:
                    yield from _fields(values, f"{prefix}{name}.*.")
                items = inner.get("items")
                if isinstance(items, dict) and "$ref" not in items:
                    yield from _fields(items, f"{prefix}{name}[].")
        values = alternative.get("additionalProperties")
        if not prefix and not alternative.get("properties") and isinstance(values, dict) and "$ref" not in values:
            yield from _fields(values, "*.")


@functools.cache
def report_objects() -> dict[str, list[str]]:
    """Each object of the report's schema that has fields (`run`, `summary`, `item`, `bucket`, ...)
    -> its fields."""
    schema = load_schema()
    assert set(schema["properties"]) == {"run", "summary", "items"}
    objects = {name: list(_fields(sub)) for name, sub in schema["$defs"].items()}
    return {name: fields for name, fields in objects.items() if fields}


def test_every_json_report_field_is_in_the_json_reference() -> None:
    page = REFERENCE / "json-report.md"
    by_name = {s.name: s for s in sections(page) if s.name}
    problems = []
    for name, fields in report_objects().items():
        found = by_name.get(name)
        if found is None:
            problems.append(f"the JSON report's object `{name}` (pytest_nl2sql/reports/report.schema.json, $defs/{name}) has no "
                            f"section in {page.relative_to(DOCS.parent)}: add a heading '### `{name}`: ...' with a table "
                            f"| field | meaning | of its fields: {', '.join(fields)}")
            continue
        documented = set(found.rows())
        problems += [f"JSON field `{field}` of `{name}` (report.schema.json, $defs/{name}) is not in {page.relative_to(DOCS.parent)}:"
                     f" add a row | `{field}` | meaning | to the table under '{'#' * found.level} {found.heading}'"
                     for field in fields if field not in documented]
        problems += [f"{page.name} documents `{field}` under '{'#' * found.level} {found.heading}', which the schema's $defs/{name} does not have:"
                     f" remove its row (or add the field to the schema)" for field in sorted(documented - set(fields))]
    assert not problems, failed(problems)


def test_the_json_reference_names_the_three_parts_of_a_report() -> None:
    names = {s.name for s in sections(REFERENCE / "json-report.md")}
    assert {"run", "summary", "item"} <= names


# --- the CLI ----------------------------------------------------------------------------------

def commands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(found) == 1
    return dict(found[0].choices)


def test_every_cli_command_and_flag_is_in_the_cli_reference() -> None:
    page = REFERENCE / "cli.md"
    by_command = {s.name.split()[1]: s for s in sections(page) if s.name and s.name.startswith("nl2sql ")
                  and s.level == 2 and len(s.name.split()) == 2}
    problems = []
    known = commands()
    for name, parser in known.items():
        found = by_command.get(name)
        if found is None:
            problems.append(f"the command `nl2sql {name}` (pytest_nl2sql/cli.py build_parser, or malloy/commands.py) is not in "
                            f"{page.relative_to(DOCS.parent)}: add a section '## `nl2sql {name}`' with its usage, a table "
                            "| argument | meaning | of its flags, and its exit codes")
            continue
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = list(action.option_strings) or [action.metavar or action.dest]
            problems += [f"`nl2sql {name}`'s argument `{spelling}` is not in {page.name}: add a row | `{spelling}` | meaning | "
                         f"to the table under '## `nl2sql {name}`'" for spelling in names if f"`{spelling}`" not in found.text]
    problems += [f"{page.name} documents `nl2sql {name}`, which is no command (pytest_nl2sql/cli.py): remove its section"
                 for name in by_command if name not in known]
    if "nl2sql --version" not in page.read_text(encoding="utf-8"):
        problems.append(f"{page.name} must say that `nl2sql --version` prints the version")
    assert not problems, failed(problems)


# --- hooks and the Python API -----------------------------------------------------------------

def request_attributes() -> set[str]:
    """What the hook's author may read on `case`: the shown dataclass fields, the properties, the
    public methods but those the plugin derives requests with."""
    names = {f.name for f in dataclasses.fields(PredictionRequest) if f.repr}
    for name, value in vars(PredictionRequest).items():
        if name.startswith("_") or name in INTERNAL_REQUEST_METHODS:
            continue
        if isinstance(value, (property, functools.cached_property)) or callable(value):
            names.add(name)
    return names


def test_every_hook_and_predictor_attribute_is_in_the_hooks_reference() -> None:
    page = REFERENCE / "hooks.md"
    headings = {s.name for s in sections(page)}
    problems = [f"the hook `{name}` (pytest_nl2sql/plugin/hookspecs.py) is not in {page.relative_to(DOCS.parent)}: "
                f"add a section '## `{name}`'" for name in dir(hookspecs) if name.startswith("pytest_") and name not in headings]
    documented = {key.split("(")[0] for key in section(page, "What it receives").rows()}
    problems += [f"the predictor's `case.{name}` (PredictionRequest in pytest_nl2sql/judge/predict.py) is not in {page.name}: "
                 f"add a row | `{name}` | meaning | to the table under '### What it receives: `case`' (or, if only the plugin "
                 f"uses it, add it to INTERNAL_REQUEST_METHODS in {Path(__file__).name})"
                 for name in sorted(request_attributes() - documented)]
    problems += [f"{page.name} documents `case.{name}`, which PredictionRequest does not have: remove its row"
                 for name in sorted(documented - request_attributes())]
    assert not problems, failed(problems)


def test_every_public_function_and_fixture_method_is_in_the_python_api_reference() -> None:
    page = REFERENCE / "python-api.md"
    functions = set(section(page, "Signatures").rows())
    public = {name for name in pytest_nl2sql.__all__ if not name.startswith("__")}
    problems = [f"`pytest_nl2sql.{name}` (pytest_nl2sql/__init__.py __all__) is not in {page.relative_to(DOCS.parent)}: "
                f"add a row | `{name}` | `{name}(...)` → what it returns | to the table under '### Signatures'"
                for name in sorted(public - functions)]
    methods = {key.split("(")[0] for key in section(page, "The `nl2sql` fixture").rows()}
    fixture = {name for name, value in vars(NL2SQL).items() if not name.startswith("_") and callable(value)}
    problems += [f"the fixture's `nl2sql.{name}` (NL2SQL in pytest_nl2sql/plugin/fixtures.py) is not in {page.name}: add a row "
                 f"| `{name}(...)` | what it returns | to the table under '## The `nl2sql` fixture'"
                 for name in sorted(fixture - methods)]
    assert not problems, failed(problems)


# --- the CI page ------------------------------------------------------------------------------

def test_the_ci_page_shows_the_workflow_nl2sql_init_writes() -> None:
    """docs/how-to/ci.md explains the workflow step by step: its listing is the scaffold's, unpinned."""
    page = (DOCS / "how-to" / "ci.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", page, flags=re.S)
    assert blocks, "docs/how-to/ci.md has no ```yaml block"
    assert blocks[0] == workflow_yaml(None), (
        "the workflow listed in docs/how-to/ci.md is not the one `nl2sql init` writes (pytest_nl2sql/scaffold.py WORKFLOW): "
        "paste workflow_yaml(None) into its first ```yaml block and explain the steps that changed")


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_every_page_is_in_the_site_navigation(page: str) -> None:
    nav = (DOCS.parent / "mkdocs.yml").read_text(encoding="utf-8")
    assert f": {page}\n" in nav, f"docs/{page} is not in mkdocs.yml's nav: add it where it belongs"


def test_the_readmes_links_into_the_docs_lead_to_pages() -> None:
    """The README is the front door: its relative links (docs/…, which work on GitHub) name pages that exist."""
    readme = DOCS.parent / "README.md"
    links = re.findall(r"\]\(((?!https?:|#)[^)#\s]+)", readme.read_text(encoding="utf-8"))
    assert any(link.startswith("docs/") for link in links)
    missing = [link for link in links if not (DOCS.parent / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {', '.join(missing)}"


def test_the_readmes_quick_start_is_the_example_suites_then_the_test_suite_ci_runs() -> None:
    """The README's quick start, the first code block under its heading, is two commands: one runs
    the example suites, one the test suite, which `.ci/run` runs verbatim (a user-facing install
    from PyPI put first there once, and a fresh clone's quick start then failed)."""
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^## Quick start\n.*?^```bash\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    assert block, "README.md has no ```bash block under '## Quick start'"
    commands = [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(commands) == 2, commands
    assert "pytest example_suites/" in commands[0]
    ci = (DOCS.parent / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci, f".ci/run does not run the README's test command {commands[1]!r} verbatim"
