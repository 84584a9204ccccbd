"""Report writers: each turns the JSON report dict (`{"summary", "items"}`) into one format.

The formats are `vocab.REPORT_FORMATS`; the writer of format NAME lives in the module
`pytest_nl2sql.reports.NAME`, which registers itself when imported (as sqlglot's dialects do).
Modules are imported only when their format is asked for: openpyxl alone takes longer to import
than a small run takes to judge.

    from pytest_nl2sql.reports import write_report
    write_report("csv", report, Path("out/nl2sql-report.csv"))  # -> [the files written]

Every writer writes its files atomically (`pytest_nl2sql.files.atomic_open`): an interrupted or
failing writer leaves the previous report in place, and every failure is a `ReportWriteError`
(an `OSError`) whose message names the format and the path.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_nl2sql.files import FileWriteError
from pytest_nl2sql.vocab import REPORT_FORMATS

WriteFunction = Callable[[Mapping[str, Any], Path], "list[Path]"]


class ReportWriteError(FileWriteError):
    """A report that could not be written; the message names the format, the path and the cause."""


@dataclass(frozen=True)
class Writer:
    """One report format: its name (`--nl2sql-report=NAME`), file extension, and writer, which
    takes the report dict and a path and returns the files it wrote (the CSV writes two)."""

    name: str
    extension: str
    write: WriteFunction


_WRITERS: dict[str, Writer] = {}


def register(name: str, write: WriteFunction) -> Writer:
    """Register the writer of format `name` (one of `vocab.REPORT_FORMATS`); returns it."""
    if name not in REPORT_FORMATS:
        raise ValueError(f"report format {name!r} is not in vocab.REPORT_FORMATS")
    writer = Writer(name, REPORT_FORMATS[name], write)
    _WRITERS[name] = writer
    return writer


def writer_for(fmt: str) -> Writer:
    """The writer of format `fmt`, importing its module on first use; ValueError if unknown."""
    if fmt not in REPORT_FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (use one of {', '.join(REPORT_FORMATS)})")
    if fmt not in _WRITERS:
        importlib.import_module(f"{__name__}.{fmt}")  # registers itself
    return _WRITERS[fmt]


def default_path(fmt: str) -> Path:
    """`nl2sql-report.<extension>`, the path of a report named without one."""
    if fmt not in REPORT_FORMATS:
        raise ValueError(f"unknown report format {fmt!r} (use one of {', '.join(REPORT_FORMATS)})")
    return Path(f"nl2sql-report.{REPORT_FORMATS[fmt]}")


def write_report(fmt: str, report: Mapping[str, Any], path: str | os.PathLike[str]) -> list[Path]:
    """Write the report of format `fmt` at `path`; returns the files written.

    An unknown format is a ValueError (a usage error, caught when the options are read). Anything
    else that goes wrong, including a writer's own bug, is a `ReportWriteError` (an OSError) that
    names the path, so one failing report never costs the other reports or the thresholds.
    """
    if fmt not in REPORT_FORMATS:
        writer_for(fmt)  # raises the ValueError
    what = f"the {fmt} report"
    try:
        return list(writer_for(fmt).write(report, Path(path)))
    except ReportWriteError:
        raise
    except FileWriteError as e:
        raise ReportWriteError(e.message, e.filename, e.errno) from e
    except OSError as e:
        reason = e.strerror or str(e)
        raise ReportWriteError(f"cannot write {what} {os.fspath(path)}: {reason}", path, e.errno) from e
    except Exception as e:  # a writer's bug, on data it did not expect: said, not a traceback
        raise ReportWriteError(
            f"cannot write {what} {os.fspath(path)}: {type(e).__name__}: {e}", path
        ) from e
