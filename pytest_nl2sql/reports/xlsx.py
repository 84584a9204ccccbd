"""The Excel report (`--nl2sql-report=xlsx[:PATH]`), written from the JSON report dict.

Sheets: **Overview** (a row per case, with the term-selection columns of spec `002` when the
report has a term-selection case), **Statistics** (execution accuracy overall and per hardness,
tag and database, exact match, Spider partial scores, "Data Query Metrics", and a bar chart of
accuracy per hardness, beside the tables), **Trend** (with `--nl2sql-history`: accuracy overall
and per hardness over the history's last MAX_TREND_RUNS runs, and a line chart of them),
**Failures** (every case that did not pass, with its row diff), and, with a baseline,
**Regressions and fixes**. Everything shown comes from the report dict, so the workbook always
agrees with the JSON report. Every sheet prints (and exports to PDF) landscape, one page wide, its
name over each page and the page number under it; a table's header row repeats on every page.

Cells hold untrusted text (predictions): text starting with `=` is stored as text, never as a
formula; control characters are dropped; a lone surrogate or U+FFFE/U+FFFF (which XML cannot hold,
and which would corrupt the workbook) is written as its escape `\\ud800`; a cell longer than
Excel's 32,767 characters is cut with a visible marker.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import copy
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from openpyxl import Workbook
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.chart import BarChart, LineChart, Reference
from openpyxl.chart.data_source import AxDataSource, StrRef
from openpyxl.chart.label import DataLabelList
from openpyxl.chart.marker import Marker
from openpyxl.chart.shapes import GraphicalProperties
from openpyxl.styles import Alignment, Border, Font, PatternFill, Side
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from pytest_nl2sql.files import atomic_open
from pytest_nl2sql.metrics.summary import accuracy_interval, accuracy_name
from pytest_nl2sql.metrics.termselection import details_text
from pytest_nl2sql.reports import ReportWriteError, register
from pytest_nl2sql.reports.md import Trend, trend
from pytest_nl2sql.vocab import BaselineStatus, Verdict, hardness_sort_key

OVERVIEW = "Overview"
STATISTICS = "Statistics"
TREND = "Trend"
FAILURES = "Failures"
CHANGES = "Regressions and fixes"

MAX_CELL_CHARS = 32_767  # Excel's limit per cell
MAX_DIFF_ROWS = 20  # rows of a diff shown per cell; the counts give the rest
MAX_VALUE_CHARS = 200  # characters of one value in a diff row
MAX_ROW_LINES = 20  # tallest row, in lines of text, so one huge cell cannot hide the sheet
LINE_HEIGHT = 15.0  # points per line of 11pt text
PRINT_MARGINS_IN = (0.4, 0.5, 0.3)  # inches: left and right, top and bottom, header and footer
MAX_FIT_WIDTH = 60  # a column that does not wrap grows to its longest value, up to this width
MAX_TREND_RUNS = 100  # rows of the Trend sheet (and points of its chart): the most recent runs

_HEADER_FILL = PatternFill("solid", fgColor="305496")
_FONT = "Calibri"  # named, so LibreOffice does not fall back to a serif face
_HEADER_FONT = Font(name=_FONT, bold=True, color="FFFFFF")
_TITLE_FONT = Font(name=_FONT, bold=True, size=13)
_BOLD = Font(name=_FONT, bold=True)
_THIN = Border(bottom=Side(style="thin", color="BFBFBF"))
_GOOD = (PatternFill("solid", fgColor="C6EFCE"), Font(name=_FONT, color="006100"))
_BAD = (PatternFill("solid", fgColor="FFC7CE"), Font(name=_FONT, color="9C0006"))
_WARN = (PatternFill("solid", fgColor="FFEB9C"), Font(name=_FONT, color="9C5700"))
_TOP_LEFT = Alignment(vertical="top", wrap_text=False)
_TOP_WRAP = Alignment(vertical="top", wrap_text=True)

PERCENT = "0.0%"
SCORE = "0.00"
SECONDS = "0.000"


# --------------------------------------------------------------------------- cell helpers


# characters XML 1.0 cannot hold that ILLEGAL_CHARACTERS_RE lets through: saved as they are, they
# make a workbook that neither Excel nor openpyxl can open
_XML_UNSAFE_RE = re.compile("[\ud800-\udfff\ufffe\uffff]")


def _plain(value: Any) -> Any:
    """An enum (a verdict, a baseline status) as its spelling."""
    return value.value if isinstance(value, Enum) else value


def _text(value: Any) -> str:
    """Any report value as cell text: lists joined by lines, mappings as JSON."""
    value = _plain(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "\n".join(str(_plain(v)) for v in value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _clean(value: Any) -> Any:
    """A value openpyxl can store: no control characters, nothing XML cannot hold, within
    Excel's cell size (cut with a visible marker)."""
    value = _plain(value)
    if value is None or isinstance(value, bool) or isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        return value
    text = _text(value)
    length = len(text)
    text = text[:MAX_CELL_CHARS]  # before any scan: a value can be megabytes
    text = ILLEGAL_CHARACTERS_RE.sub("", text)
    text = _XML_UNSAFE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if length > MAX_CELL_CHARS or len(text) > MAX_CELL_CHARS:
        marker = f"\n… [cut: {length:,} characters in all]"
        text = text[: MAX_CELL_CHARS - len(marker)] + marker
    return text


def _put(ws: Worksheet, row: int, col: int, value: Any, number_format: str | None = None) -> Any:
    cell = ws.cell(row=row, column=col, value=_clean(value))
    if isinstance(cell.value, str) and cell.value.startswith("="):
        cell.data_type = "s"  # SQL or data, never a formula
    if number_format and isinstance(cell.value, (int, float)):
        cell.number_format = number_format
    return cell


def _colour(cell: Any, style: tuple[PatternFill, Font] | None) -> None:
    if style:
        cell.fill, cell.font = style


def _verdict_style(verdict: str | None, passed: bool | None) -> tuple[PatternFill, Font] | None:
    verdict = _plain(verdict)
    if verdict == Verdict.GOLD_ERROR.value:
        return _WARN
    if passed is True or verdict == Verdict.PASS.value:
        return _GOOD
    if verdict:
        return _BAD
    return None


_BASELINE_STYLES = {
    BaselineStatus.REGRESSION.value: _BAD,
    BaselineStatus.FIXED.value: _GOOD,
    BaselineStatus.KNOWN_FAILURE.value: _WARN,
}


def _baseline_style(item: Mapping[str, Any]) -> tuple[PatternFill, Font] | None:
    return _BASELINE_STYLES.get(_plain(item.get("baseline")))  # type: ignore[arg-type]


def _lines(text: str, width: float) -> int:
    chars = max(int(width * 1.1), 1)
    return sum(max(1, math.ceil(len(line) / chars)) for line in text.split("\n"))


def _print_layout(ws: Worksheet, *, header_row: bool) -> None:
    """Print (and PDF export): landscape, one page wide and as many tall as it takes, narrow
    margins, the sheet's name over every page and its number under it, and, for a table, its
    header row (and id column) repeated on every page, so a page of failures still says what
    each column is."""
    ws.page_setup.orientation = "landscape"
    ws.page_setup.fitToWidth = 1
    ws.page_setup.fitToHeight = 0  # no limit: a long table runs over as many pages as it needs
    ws.sheet_properties.pageSetUpPr.fitToPage = True
    side, edge, band = PRINT_MARGINS_IN
    ws.page_margins.left = ws.page_margins.right = side
    ws.page_margins.top = ws.page_margins.bottom = edge
    ws.page_margins.header = ws.page_margins.footer = band
    ws.oddHeader.center.text = "&A"  # the sheet's name
    ws.oddFooter.center.text = "page &P of &N"
    if header_row:
        ws.print_title_rows, ws.print_title_cols = "1:1", "A:A"


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class Column:
    """One column of a tabular sheet: header, width in characters, how to get its value."""

    header: str
    width: float
    value: Callable[[Mapping[str, Any]], Any]
    wrap: bool = False
    number_format: str | None = None
    style: Callable[[Mapping[str, Any]], tuple[PatternFill, Font] | None] | None = None
    centred: bool = False  # small counts, kept clear of the text of the next column
    term_selection: bool = False  # shown only when the report has a term-selection case
    shown_if: Callable[[Sequence[Mapping[str, Any]]], bool] | None = None  # shown only when the items have such a value


def _write_table(ws: Worksheet, columns: Sequence[Column], rows: Iterable[Mapping[str, Any]]) -> None:
    """Header row, data rows, frozen header and first column, filters, widths, row heights.

    A column that wraps keeps its width (its rows grow instead); one that does not grows to its
    longest value (up to MAX_FIT_WIDTH), so ids and node ids are never cut off in print.
    """
    widths = [column.width for column in columns]
    for c, column in enumerate(columns, start=1):
        cell = _put(ws, 1, c, column.header)  # a hardness label is data, never a formula
        cell.fill, cell.font = _HEADER_FILL, _HEADER_FONT
        cell.alignment = Alignment(vertical="center", wrap_text=True, horizontal="center" if column.centred else None)
    ws.row_dimensions[1].height = 2 * LINE_HEIGHT
    r = 1
    for r, row in enumerate(rows, start=2):
        tallest = 1
        for c, column in enumerate(columns, start=1):
            cell = _put(ws, r, c, column.value(row), column.number_format)
            if column.centred:
                cell.alignment = Alignment(vertical="top", horizontal="center")
            else:
                cell.alignment = _TOP_WRAP if column.wrap else _TOP_LEFT
            if column.style:
                _colour(cell, column.style(row))
            if column.wrap and isinstance(cell.value, str):
                tallest = max(tallest, _lines(cell.value, column.width))
            elif isinstance(cell.value, str):
                longest = max(len(line) for line in cell.value.split("\n"))
                widths[c - 1] = max(widths[c - 1], min(longest + 2, MAX_FIT_WIDTH))
        if tallest > 1:
            ws.row_dimensions[r].height = min(tallest, MAX_ROW_LINES) * LINE_HEIGHT
    for c, width in enumerate(widths, start=1):
        ws.column_dimensions[get_column_letter(c)].width = width
    ws.freeze_panes = "B2"
    ws.auto_filter.ref = f"A1:{get_column_letter(len(columns))}{max(r, 1)}"
    _print_layout(ws, header_row=True)


def _question(item: Mapping[str, Any]) -> Any:
    extra = item.get("extra") or {}
    return item.get("question") or item.get("name") or extra.get("name")


def _selection_text(selection: Any) -> str:
    """A term selection in one short line per data set and dimension: `WEO / INDICATOR: GDP, LP`;
    with several targeted turns (a list of selections), one block per turn."""
    if isinstance(selection, list) and selection and all(isinstance(s, list) for s in selection):
        return "\n".join(f"turn {n}:\n{_selection_text(s)}" for n, s in enumerate(selection, start=1))
    lines = []
    for dataset in selection if isinstance(selection, list) else []:
        if not isinstance(dataset, Mapping):
            return _text(selection)
        for dim in dataset.get("dimensions") or []:
            ids = ", ".join(str(v.get("id")) for v in dim.get("values") or [] if isinstance(v, Mapping))
            lines.append(f"{dataset.get('dataset_id')} / {dim.get('dimension_name')}: {ids}")
    return "\n".join(lines)


def _predicted(item: Mapping[str, Any]) -> Any:
    predicted = item.get("predicted")
    if isinstance(predicted, list) and predicted and isinstance(predicted[0], (Mapping, list)):
        return _selection_text(predicted)  # a term selection, not SQL
    return predicted


def _malloy(item: Mapping[str, Any]) -> Any:
    return item.get("predicted_malloy")


def _has_malloy(items: Sequence[Mapping[str, Any]]) -> bool:
    return any(_malloy(item) is not None for item in items)


def _usage(key: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda item: (item.get("usage") or {}).get(key)


def _attempts(item: Mapping[str, Any]) -> Any:
    return item.get("attempts") or None  # 0: the hook was not asked


def _retries(item: Mapping[str, Any]) -> Any:
    return (item.get("extra") or {}).get("retries")


def _has_model(items: Sequence[Mapping[str, Any]]) -> bool:
    """The hook was asked (or reported usage) for some case: the model's columns say what it cost."""
    return any(_attempts(item) or item.get("usage") for item in items)


def _macro(key: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda item: (item.get("term_selection") or {}).get(key)


def _soft(key: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda item: (item.get("soft_scores") or {}).get(key)


def _exact(item: Mapping[str, Any]) -> str | None:
    em = item.get("exact_match")
    return None if em is None else ("yes" if em else "no")


def _details(item: Mapping[str, Any]) -> str:
    return details_text(item.get("term_selection"))


def _reason(item: Mapping[str, Any]) -> Any:
    """The reason without a predictor error's traceback: it would fill the row (cut at
    MAX_ROW_LINES) and push the message out of sight; the JSON report keeps it whole."""
    reason = item.get("reason")
    if isinstance(reason, str) and "\nTraceback (most recent call last):" in reason:
        return reason.split("\nTraceback (most recent call last):", 1)[0].strip() + "\n(traceback in the JSON report)"
    return reason


def _verdict_cell_style(item: Mapping[str, Any]) -> tuple[PatternFill, Font] | None:
    return _verdict_style(item.get("verdict"), item.get("passed"))


OVERVIEW_COLUMNS = (
    Column("id", 24, lambda i: i.get("id")),
    Column("question", 42, _question, wrap=True),
    Column("database", 18, lambda i: i.get("database"), wrap=True),
    Column("hardness", 10, lambda i: i.get("hardness")),
    Column("tags", 16, lambda i: ", ".join(str(_plain(t)) for t in i.get("tags") or []), wrap=True),
    Column("verdict", 15, lambda i: i.get("verdict"), style=_verdict_cell_style),
    Column("reason", 30, _reason, wrap=True),
    Column("gold SQL", 48, lambda i: i.get("gold"), wrap=True),
    Column("predicted SQL", 48, _predicted, wrap=True),
    Column("predicted Malloy", 48, _malloy, wrap=True, shown_if=_has_malloy),
    Column("macro recall", 10, _macro("macro_recall"), number_format=SCORE, term_selection=True),
    Column("macro precision", 10, _macro("macro_precision"), number_format=SCORE, term_selection=True),
    Column("indicator selection details", 55, _details, wrap=True, term_selection=True),
    Column("exact match", 9, _exact),
    Column("near miss", 16, lambda i: i.get("near_miss"), wrap=True),
    Column("column F1", 9, _soft("column_f1"), number_format=SCORE),
    Column("row F1", 9, _soft("row_f1"), number_format=SCORE),
    Column("column precision", 10, _soft("column_precision"), number_format=SCORE),
    Column("column recall", 10, _soft("column_recall"), number_format=SCORE),
    Column("row precision", 10, _soft("row_precision"), number_format=SCORE),
    Column("row recall", 10, _soft("row_recall"), number_format=SCORE),
    Column("baseline", 14, lambda i: i.get("baseline"), style=_baseline_style),
    Column("latency (s)", 10, lambda i: i.get("latency"), number_format=SECONDS),
    Column("attempts", 9, _attempts, centred=True, shown_if=_has_model),
    Column("retries", 9, _retries, centred=True, shown_if=_has_model),
    Column("prompt tokens", 10, _usage("prompt_tokens"), shown_if=_has_model),
    Column("completion tokens", 10, _usage("completion_tokens"), shown_if=_has_model),
    Column("cost", 9, _usage("cost"), number_format="0.0000", shown_if=_has_model),
    Column("nodeid", 40, lambda i: i.get("nodeid")),
)


def _value_text(value: Any) -> str:
    """One value of a diff row, cut at MAX_VALUE_CHARS: a cell shows twenty rows, not one value."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:  # quotes tell the text '1' from the number 1
            return repr(value[:MAX_VALUE_CHARS]) + f"… [{len(value):,} characters]"
        return repr(value)
    text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + f"… [{len(text):,} characters]"


def _rows_text(rows: Any, count: Any) -> str:
    rows = rows if isinstance(rows, list) else []
    total = count if isinstance(count, int) else len(rows)
    lines = [
        "(" + ", ".join(_value_text(v) for v in row) + ")" if isinstance(row, (list, tuple)) else _value_text(row)
        for row in rows[:MAX_DIFF_ROWS]
    ]
    if total > len(lines):
        lines.append(f"… {total - len(lines)} more")
    return "\n".join(lines)


def _pairing_text(pairing: Any) -> str:
    """Which predicted column was paired with each gold column, as `gold→predicted` pairs."""
    if not isinstance(pairing, list) or not pairing:
        return _text(pairing) if pairing else ""
    if all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairing):
        return ", ".join(f"{g}→{p}" for g, p in pairing)
    if all(isinstance(p, int) or p is None for p in pairing):
        return ", ".join(f"{g}→{'-' if p is None else p}" for g, p in enumerate(pairing))
    return _text(pairing)


def _diff(key: str) -> Callable[[Mapping[str, Any]], Any]:
    def get(item: Mapping[str, Any]) -> Any:
        diff = item.get("diff") or {}
        if key == "pairing":
            return _pairing_text(diff.get("pairing"))
        return _rows_text(diff.get(key), diff.get(f"{key}_count"))

    return get


def _diff_count(key: str) -> Callable[[Mapping[str, Any]], Any]:
    def get(item: Mapping[str, Any]) -> Any:
        diff = item.get("diff")
        if not diff:
            return None
        count = diff.get(f"{key}_count")
        return count if isinstance(count, int) else len(diff.get(key) or [])

    return get


FAILURE_COLUMNS = (
    Column("id", 24, lambda i: i.get("id")),
    Column("database", 18, lambda i: i.get("database"), wrap=True),
    Column("hardness", 10, lambda i: i.get("hardness")),
    Column("verdict", 15, lambda i: i.get("verdict"), style=_verdict_cell_style),
    Column("baseline", 14, lambda i: i.get("baseline"), style=_baseline_style),
    Column("reason", 30, _reason, wrap=True),
    Column("near miss", 16, lambda i: i.get("near_miss"), wrap=True),
    Column("gold SQL", 42, lambda i: i.get("gold"), wrap=True),
    Column("predicted SQL", 42, _predicted, wrap=True),
    Column("predicted Malloy", 42, _malloy, wrap=True, shown_if=_has_malloy),
    Column("column pairing (gold→predicted)", 16, _diff("pairing"), wrap=True),
    Column("missing rows", 9, _diff_count("missing"), centred=True),
    Column("rows missing (in gold, not predicted)", 40, _diff("missing"), wrap=True),
    Column("extra rows", 9, _diff_count("extra"), centred=True),
    Column("rows extra (predicted, not in gold)", 40, _diff("extra"), wrap=True),
    Column("indicator selection details", 55, _details, wrap=True, term_selection=True),
)


CHANGE_COLUMNS = (
    Column("id", 24, lambda i: i.get("id")),
    Column("change", 12, lambda i: i.get("baseline"), style=_baseline_style),
    Column("verdict", 15, lambda i: i.get("verdict"), style=_verdict_cell_style),
    Column("reason", 30, _reason, wrap=True),
    Column("question", 42, _question, wrap=True),
    Column("database", 18, lambda i: i.get("database"), wrap=True),
    Column("predicted SQL", 48, _predicted, wrap=True),
    Column("nodeid", 40, lambda i: i.get("nodeid")),
)


# --------------------------------------------------------------------------- statistics


class _Cursor:
    """Writes the Statistics sheet top to bottom: titles, key/value lines, small tables."""

    def __init__(self, ws: Worksheet) -> None:
        self.ws = ws
        self.row = 1

    def title(self, text: str) -> None:
        if self.row > 1:
            self.row += 1
        _put(self.ws, self.row, 1, text).font = _TITLE_FONT
        self.row += 1

    def pair(self, label: str, value: Any, number_format: str | None = None) -> None:
        _put(self.ws, self.row, 1, label)
        _put(self.ws, self.row, 2, value if value is not None else "n/a", number_format)
        self.row += 1

    def note(self, text: str) -> None:
        _put(self.ws, self.row, 1, text).font = Font(name=_FONT, italic=True)
        self.row += 1

    def table(
        self, headers: Sequence[str], rows: Iterable[Sequence[Any]], formats: Sequence[str | None]
    ) -> tuple[int, int]:
        """Writes a header and rows; returns the first and last data row (last < first if none)."""
        for c, header in enumerate(headers, start=1):
            cell = _put(self.ws, self.row, c, header)
            cell.font, cell.border = _BOLD, _THIN
            if c > 1:  # over the numbers, which Excel aligns right
                cell.alignment = Alignment(horizontal="right")
        self.row += 1
        first = self.row
        for values in rows:
            for c, (value, fmt) in enumerate(zip(values, formats), start=1):
                cell = _put(self.ws, self.row, c, value, fmt)
                if c > 1 and isinstance(cell.value, str):  # "n/a" lines up with the numbers
                    cell.alignment = Alignment(horizontal="right")
            self.row += 1
        return first, self.row - 1


def _bucket_rows(buckets: Mapping[str, Mapping[str, Any]] | None, key: Callable[[str], Any] = str) -> list[list[Any]]:
    """label, total, passed, errors, accuracy and its 95% interval: the errors say why passed/total
    is not the accuracy."""
    return [
        [label, b.get("total"), b.get("passed"), b.get("errors") or 0,
         b.get("accuracy") if b.get("accuracy") is not None else "n/a", *_interval(b)]
        for label, b in sorted((buckets or {}).items(), key=lambda kv: key(kv[0]))
    ]


def _interval(bucket: Mapping[str, Any]) -> list[Any]:
    """The bucket's 95% Wilson interval as two cells (empty when the summary has none)."""
    bounds = accuracy_interval(bucket)
    return list(bounds) if bounds else [None, None]


def _write_statistics(ws: Worksheet, summary: Mapping[str, Any], run: Mapping[str, Any] | None = None) -> None:
    out = _Cursor(ws)
    if run:  # which model and run the figures describe (a spreadsheet travels without its command line)
        out.title("Run")
        out.pair("label (--nl2sql-label)", run.get("label") or "")
        out.pair("started", run.get("started"))
        out.pair("git commit", run.get("git_commit") or "")
        out.pair("engine", run.get("engine"))
        out.pair("complete", "yes" if run.get("complete", True) else "no (interrupted)")
    out.title("Execution accuracy")
    total, errors = summary.get("total"), summary.get("errors") or 0
    out.pair("cases", total)
    out.pair("passed", summary.get("passed"))
    out.pair("errors (gold_error, outside the accuracy)", errors)
    out.pair("judged cases", total - errors if isinstance(total, int) else None)
    out.pair(accuracy_name(summary), summary.get("accuracy"), PERCENT)
    if summary.get("reviewed") or summary.get("stale_reviews"):  # a reviewed figure never passes for a plain one
        out.pair("before reviews (--nl2sql-reviews; the figure above is after them)", summary.get("accuracy_before_reviews"), PERCENT)
        out.pair("decisions applied", ", ".join(f"{d} {n}" for d, n in (summary.get("reviewed") or {}).items()) or "none")
        out.pair("stale reviews (not applied)", summary.get("stale_reviews"))
    low, high = _interval(summary)
    out.pair("95% interval, low (Wilson)", low, PERCENT)
    out.pair("95% interval, high (Wilson)", high, PERCENT)
    out.pair("on the cases' own databases alone (no neighbour databases)", summary.get("single_db_accuracy"), PERCENT)
    out.pair("strict (fragile passes counted as failures)", summary.get("strict_accuracy"), PERCENT)
    out.pair("fragile passes", summary.get("fragile"))
    out.pair("cases with a nondeterministic gold", summary.get("gold_warnings"))
    out.pair("engine (--nl2sql-dsn)", summary.get("engine"))
    out.pair("exact match", summary.get("exact_match"), PERCENT)
    bucket_headers = ("total", "passed", "errors", "accuracy", "95% CI low", "95% CI high")
    formats = (None, None, None, None, PERCENT, PERCENT, PERCENT)

    hardness_rows = _bucket_rows(summary.get("by_hardness"), hardness_sort_key)
    out.title("Accuracy by hardness")
    first, last = out.table(("hardness", *bucket_headers), hardness_rows, formats)

    for key, label in (("by_tag", "tag"), ("by_database", "database")):
        out.title(f"Accuracy by {label}")
        out.table((label, *bucket_headers), _bucket_rows(summary.get(key)), formats)

    partial = summary.get("partial")
    if partial:
        out.title("Spider partial matching (per component)")
        counted = any("gold_count" in s or "pred_count" in s for s in partial.values())
        headers = ("component", "accuracy", "recall", "F1") + (("in gold", "in predictions") if counted else ())
        out.table(headers, _partial_rows(partial, counted), (None, SCORE, SCORE, SCORE, None, None))
        if any(_not_applicable(s) for s in partial.values()):
            out.note("n/a: no gold query and no prediction has the component")

    soft = summary.get("soft_scores")
    if soft:
        out.title("Soft scores (means over the judged SQL cases; a prediction that did not run counts 0)")
        out.table(("", "precision", "recall", "F1"),
                  [[kind, soft.get(f"{key}_precision"), soft.get(f"{key}_recall"), soft.get(f"{key}_f1")]
                   for kind, key in (("columns", "column"), ("rows", "row"))],
                  (None, SCORE, SCORE, SCORE))
    near = summary.get("near_miss")
    if near and any(near.values()):
        out.title("Near misses (failures of each kind)")
        out.table(("near miss", "cases"), [[name, count] for name, count in near.items()], (None, None))

    ts = summary.get("term_selection")
    out.title("Data Query Metrics")
    if ts:
        out.pair("macro precision", ts.get("macro_precision"), SCORE)
        out.pair("macro recall", ts.get("macro_recall"), SCORE)
        out.pair("term-selection cases", ts.get("total"))
        out.pair("passed", ts.get("passed"))
        out.row += 1
        out.table(
            ("dimension", "precision", "recall", "cases"),
            (
                [name, d.get("precision"), d.get("recall"), d.get("cases")]
                for name, d in (ts.get("by_dimension") or {}).items()
            ),
            (None, SCORE, SCORE, None),
        )
    else:
        out.pair("term-selection cases", 0)

    baseline = summary.get("baseline")
    if baseline:
        out.title("Baseline")
        out.pair("baseline file", baseline.get("path"))
        out.pair("accuracy before", baseline.get("accuracy_before"), PERCENT)
        out.pair("accuracy now", baseline.get("accuracy_now"), PERCENT)
        out.pair("regressions", len(baseline.get("regressions") or []))
        out.pair("fixed", len(baseline.get("fixed") or []))
        out.pair("p-value (McNemar)", baseline.get("p_value"), "0.0000")

    ws.column_dimensions["A"].width = 40
    for letter in "BCDEFG":
        ws.column_dimensions[letter].width = 13
    if hardness_rows:  # beside every table (the widest decides), level with the hardness table
        _hardness_chart(ws, first, last, f"{get_column_letter(ws.max_column + 2)}{first - 2}")
    _print_layout(ws, header_row=False)


def _partial_rows(partial: Mapping[str, Mapping[str, Any]], counted: bool) -> list[list[Any]]:
    """Official scores per component; one that no item has is "n/a" (the official aggregation
    gives 0 / 0 there and prints 0.000 0.000 1.000, which reads as a score)."""
    rows = []
    for name, s in partial.items():
        scores = ["n/a"] * 3 if _not_applicable(s) else [s.get("acc"), s.get("rec"), s.get("f1")]
        counts = [s.get("gold_count"), s.get("pred_count")] if counted else []
        rows.append([name, *scores, *counts])
    return rows


def _not_applicable(scores: Mapping[str, Any]) -> bool:
    """The counts say that no gold query and no prediction has the component."""
    return scores.get("pred_count") == 0 and scores.get("gold_count") == 0


def _hardness_chart(ws: Worksheet, first: int, last: int, anchor: str) -> None:
    chart = BarChart()
    chart.type = "col"
    chart.title = "Execution accuracy by hardness"
    chart.y_axis.title = "accuracy"
    chart.y_axis.scaling.min = 0
    chart.y_axis.scaling.max = 1
    chart.y_axis.numFmt = "0%"
    chart.x_axis.delete = False  # openpyxl hides axes by default in recent Excel versions
    chart.y_axis.delete = False
    chart.legend = None
    chart.dataLabels = DataLabelList()
    chart.dataLabels.showVal = True
    chart.dataLabels.showSerName = chart.dataLabels.showCatName = False
    chart.dataLabels.showLegendKey = chart.dataLabels.showPercent = False
    chart.add_data(Reference(ws, min_col=5, min_row=first - 1, max_row=last), titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=1, min_row=first, max_row=last))
    chart.height, chart.width = 7.5, 13
    ws.add_chart(chart, anchor)


# --------------------------------------------------------------------------- trend


def _trend_columns(shown: Trend) -> list[Column]:
    """run, started, label, commit, complete, accuracy, then one accuracy column per hardness level."""
    def bucket(name: str) -> Callable[[Mapping[str, Any]], Any]:
        return lambda r: r["run"].by_hardness.get(name)

    def complete(r: Mapping[str, Any]) -> str:
        return {True: "yes", False: "no"}.get(r["run"].complete, "?")

    return [
        Column("run", 6, lambda r: r["run"].number, centred=True),
        Column("started (UTC)", 17, lambda r: r["run"].started),
        Column("label", 16, lambda r: r["run"].label),
        Column("git commit", 11, lambda r: r["run"].commit),
        Column("complete", 10, complete, centred=True,
               style=lambda r: _WARN if r["run"].complete is False else None),
        Column("accuracy", 10, lambda r: r["run"].accuracy, number_format=PERCENT,
               style=lambda r: _WARN if r["run"].complete is False else None),
        *(Column(name, 10, bucket(name), number_format=PERCENT) for name in shown.hardness),
    ]


TREND_ACCURACY_COLUMN = 6  # the column of "accuracy" in the Trend sheet; the hardness columns follow
ACCURACY_COLOUR = "1F3864"
INCOMPLETE_COLOUR = "C00000"


def _write_trend(ws: Worksheet, shown: Trend) -> None:
    """The table (a run without a value has an empty cell, a gap in the chart), notes, and a line
    chart of accuracy and each hardness level over the runs."""
    columns = _trend_columns(shown)
    _write_table(ws, columns, ({"run": run} for run in shown.runs))
    last = len(shown.runs) + 1
    for run_row, run in enumerate(shown.runs, start=2):
        if run.current:  # the run this report is about, in bold
            for c in range(1, len(columns) + 1):
                font = copy(ws.cell(row=run_row, column=c).font)
                font.b = True
                ws.cell(row=run_row, column=c).font = font
    incomplete_col = None
    if any(run.complete is False for run in shown.runs):
        # a hidden column, the accuracy of the incomplete runs only: the chart's red diamonds
        # (a series of its own, since LibreOffice draws a data point's marker in the line's colour)
        incomplete_col = len(columns) + 1
        _put(ws, 1, incomplete_col, INCOMPLETE_SERIES)
        for run_row, run in enumerate(shown.runs, start=2):
            if run.complete is False:
                _put(ws, run_row, incomplete_col, run.accuracy, PERCENT)
        ws.column_dimensions[get_column_letter(incomplete_col)].hidden = True
    notes = []
    if shown.total > len(shown.runs):
        notes.append(f"The last {len(shown.runs)} of {shown.total} runs in the history.")
    if any(run.current for run in shown.runs):
        notes.append("In bold: this run.")
    if incomplete_col is not None:
        notes.append("complete = no: the run was interrupted (Ctrl-C, -x); its accuracy counts only the "
                     "cases judged before it stopped (a red diamond in the chart).")
    for n, text in enumerate(notes):
        _put(ws, last + 2 + n, 1, text).font = Font(name=_FONT, italic=True)
    _trend_chart(ws, shown, last, incomplete_col, f"{get_column_letter(len(columns) + 3)}2")


INCOMPLETE_SERIES = "incomplete run"


def _trend_chart(ws: Worksheet, shown: Trend, last: int, incomplete_col: int | None, anchor: str) -> None:
    chart = LineChart()
    chart.title = "Execution accuracy over runs"
    chart.y_axis.title = "accuracy"
    chart.y_axis.scaling.min = 0
    chart.y_axis.scaling.max = 1
    chart.y_axis.majorUnit = 0.2
    chart.y_axis.numFmt = "0%"
    # categories: the runs' labels when every run has one, else when they started
    labelled = all(run.label for run in shown.runs)
    chart.x_axis.title = "run (label)" if labelled else "run (started, UTC)"
    chart.x_axis.delete = False  # openpyxl hides axes by default in recent Excel versions
    chart.y_axis.delete = False
    chart.legend.position = "b"
    chart.visible_cells_only = False  # the incomplete runs' column is hidden
    last_col = TREND_ACCURACY_COLUMN + len(shown.hardness)
    chart.add_data(
        Reference(ws, min_col=TREND_ACCURACY_COLUMN, max_col=last_col, min_row=1, max_row=last),
        titles_from_data=True,
    )
    if incomplete_col is not None:
        chart.add_data(Reference(ws, min_col=incomplete_col, min_row=1, max_row=last), titles_from_data=True)
    categories = Reference(ws, min_col=3 if labelled else 2, min_row=2, max_row=last)
    for n, series in enumerate(chart.series):
        series.cat = AxDataSource(strRef=StrRef(f=str(categories)))  # text: set_categories says numRef
        series.smooth = False
        if n == 0:  # the overall accuracy: thick, dark blue
            series.marker = Marker(symbol="circle", size=7, spPr=_marker_fill(ACCURACY_COLOUR))
            series.graphicalProperties.line.width = 38100  # EMU: 3 pt
            series.graphicalProperties.line.solidFill = ACCURACY_COLOUR
        elif n <= len(shown.hardness):  # a hardness level: thin, dashed
            series.marker = Marker(symbol="circle", size=5)
            series.graphicalProperties.line.width = 15875  # 1.25 pt
            series.graphicalProperties.line.dashStyle = "dash"
        else:  # the incomplete runs: red diamonds over the accuracy line, no line
            series.marker = Marker(symbol="diamond", size=11, spPr=_marker_fill(INCOMPLETE_COLOUR))
            series.graphicalProperties.line.noFill = True
    chart.height = 12  # cm: room for the plot under rotated labels and the legend
    chart.width = max(18, min(40, 4 + 1.2 * len(shown.runs)))
    ws.add_chart(chart, anchor)


def _marker_fill(colour: str) -> GraphicalProperties:
    properties = GraphicalProperties(solidFill=colour)
    properties.line.solidFill = colour
    return properties


# --------------------------------------------------------------------------- workbook


def _changes(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Regressions then fixes: from the items' `baseline` field and the summary's lists, which name
    cases by node id (`file::id`) or by id; a case in both is listed once."""
    items = report.get("items") or []
    baseline = (report.get("summary") or {}).get("baseline") or {}
    by_key = {key: item for item in items for key in (item.get("id"), item.get("nodeid")) if key is not None}
    rows: list[dict[str, Any]] = []
    changes = (
        (BaselineStatus.REGRESSION.value, baseline.get("regressions")),
        (BaselineStatus.FIXED.value, baseline.get("fixed")),
    )
    for change, listed in changes:
        seen: set[Any] = set()
        for item in items:
            if _plain(item.get("baseline")) == change:
                rows.append(dict(item))
                seen.update((item.get("id"), item.get("nodeid")))
        for key in listed or []:
            if key not in seen:
                rows.append({**by_key.get(key, {"id": key}), "baseline": change})
                seen.add(key)
    return rows


def _has_term_selection(items: Sequence[Mapping[str, Any]]) -> bool:
    return any(_plain(item.get("kind")) == "term_selection" or item.get("term_selection") for item in items)


def _case_columns(columns: Sequence[Column], items: Sequence[Mapping[str, Any]]) -> list[Column]:
    """The columns a case sheet shows: no term-selection column (empty) in a suite without such a
    case, no Malloy column without a Malloy prediction, no model figures when no hook was asked."""
    keep = _has_term_selection(items)
    return [column for column in columns
            if (keep or not column.term_selection) and (column.shown_if is None or column.shown_if(items))]


def write_xlsx(report: Mapping[str, Any], path: Path) -> list[Path]:
    """Write the Excel report of `report` (the JSON report dict) to `path`."""
    summary = report.get("summary") or {}
    items = list(report.get("items") or [])
    wb = Workbook()
    overview = wb.active
    overview.title = OVERVIEW
    _write_table(overview, _case_columns(OVERVIEW_COLUMNS, items), items)
    _write_statistics(wb.create_sheet(STATISTICS), summary, report.get("run"))
    shown = trend(report, MAX_TREND_RUNS)
    if shown is not None:
        _write_trend(wb.create_sheet(TREND), shown)
    _write_table(wb.create_sheet(FAILURES), _case_columns(FAILURE_COLUMNS, items), [i for i in items if not i.get("passed")])
    changed = (BaselineStatus.REGRESSION.value, BaselineStatus.FIXED.value)
    if summary.get("baseline") or any(_plain(i.get("baseline")) in changed for i in items):
        _write_table(wb.create_sheet(CHANGES), CHANGE_COLUMNS, _changes(report))
    path = Path(path)
    with atomic_open(path, "wb", what="the xlsx report", error=ReportWriteError) as stream:
        wb.save(stream)
    return [path]


register("xlsx", write_xlsx)
