"""Baselines: the per-case verdicts of an accepted run, and how the current run compares.

A baseline lets a team gate CI on "no case got worse" while known failures stay visible. The file
is meant to be committed and reviewed, so it is deterministic (no timestamps, nothing that
differs between `-n 0` and `-n 2`), sorted, and holds one case per line:

    {
      "format": "pytest-nl2sql baseline",
      "version": 2,
      "cases": {
        "suites/shop.nl2sql.yaml": {
          "cheap": {"fingerprint": "3f1c…", "passed": false, "reason": "values", "verdict": "mismatch"},
          "count": {"fingerprint": "9a0b...", "passed": true, "reason": null, "verdict": "pass"}
        }
      }
    }

Cases are keyed by (file, id), `file` being the case file relative to the baseline file's folder,
so the keys do not depend on where pytest is started (version 1 keyed by the rootdir-relative
path; with the baseline in the rootdir, the usual layout, both are the same and version 1 files
read unchanged).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_nl2sql.cases.parse import load_json
from pytest_nl2sql.files import FileWriteError, atomic_write_text
from pytest_nl2sql.gate.stats import SIGNIFICANCE, is_significant, mcnemar_exact
from pytest_nl2sql.vocab import BaselineStatus, Verdict

FORMAT = "pytest-nl2sql baseline"
VERSION = 2
READABLE_VERSIONS = (1, 2)

_ASCII_DIGITS = frozenset("0123456789")

Key = tuple[str, str]  # (file relative to rootdir, case id)


class BaselineError(ValueError):
    """A baseline that cannot be used: missing or malformed. The message names the path."""


class BaselineWriteError(FileWriteError, BaselineError):
    """A baseline that cannot be written (a directory, a read-only file, a full disk): both a
    `BaselineError` and an `OSError`; the message names the path. The old file is left intact."""


@dataclass(frozen=True)
class BaselineEntry:
    verdict: str
    passed: bool
    fingerprint: str | None = None
    reason: str | None = None

    @property
    def is_error(self) -> bool:
        """The case was broken (gold_error) when the baseline was written: nothing to compare."""
        return self.verdict == Verdict.GOLD_ERROR.value

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "passed": self.passed,
            "reason": self.reason,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class Baseline:
    path: str
    entries: Mapping[Key, BaselineEntry] = field(default_factory=dict)

    def lookup(self, file: str, case_id: str) -> BaselineEntry | None:
        return self.entries.get((file, case_id))

    def key_of(self, case_file: str | os.PathLike[str]) -> str:
        """A case file's key: its path relative to the baseline file's folder (posix)."""
        return key_relative_to(Path(self.path).parent, case_file)

    def lookup_case(self, case_file: str | os.PathLike[str], case_id: str) -> BaselineEntry | None:
        """The entry of a case given its file's path (absolute, or relative to the current directory)."""
        return self.lookup(self.key_of(case_file), case_id)


def key_relative_to(folder: str | os.PathLike[str], case_file: str | os.PathLike[str]) -> str:
    return Path(os.path.relpath(Path(case_file).resolve(), Path(folder).resolve())).as_posix()


def _file_key(item: Mapping[str, Any], baseline_folder: Path | None, rootdir: Path | None) -> str:
    """An item's file (relative to the rootdir, as in the JSON report) as a baseline key."""
    if baseline_folder is None or rootdir is None:
        return item["file"]
    return key_relative_to(baseline_folder, rootdir / item["file"])


def classify(entry: BaselineEntry | None, passed_now: bool, *, unpredicted: bool = False) -> BaselineStatus | None:
    """The case's status against its baseline entry; None when it passed before and passes now.

    A baseline entry recorded as `gold_error` had no verdict to compare with, so the case counts
    as new. Do not classify a case that is a `gold_error` now: it is an error either way.
    `unpredicted`: the case is a `predictor_error` now (the model could not be asked): it is not
    compared (None), neither a regression of a case that passed before nor a known failure of one
    that failed: a predictor error is never excused by the baseline, and fails the run.
    """
    if entry is None or entry.is_error:
        return BaselineStatus.NEW
    if unpredicted:
        return None
    if entry.passed:
        return None if passed_now or unpredicted else BaselineStatus.REGRESSION
    return BaselineStatus.FIXED if passed_now else BaselineStatus.KNOWN_FAILURE


# --- the file -------------------------------------------------------------------------------


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline file; a missing or malformed file is a `BaselineError` naming the path."""
    where = os.fspath(path)
    if Path(where).is_dir():
        example = Path(where) / "baseline.json"
        raise BaselineError(f"baseline path {where} is a directory; name a file, such as {example}")
    try:
        text = Path(where).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(
            f"baseline file {where} does not exist; write it first with "
            f"--nl2sql-update-baseline --nl2sql-baseline={where}"
        ) from None
    except UnicodeDecodeError as error:
        raise BaselineError(f"baseline file {where} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise BaselineError(f"cannot read baseline file {where}: {error.strerror or error}") from None
    try:
        data = load_json(text)
    except json.JSONDecodeError as error:
        raise BaselineError(
            f"baseline file {where} is not valid JSON (line {error.lineno}, column "
            f"{error.colno}: {error.msg}); rewrite it with --nl2sql-update-baseline"
        ) from None
    except ValueError as error:  # nested deeper than any baseline is
        raise BaselineError(f"baseline file {where}: {error}; rewrite it with --nl2sql-update-baseline") from None
    return Baseline(path=where, entries=_parse_entries(data, where))


def _parse_entries(data: Any, where: str) -> dict[Key, BaselineEntry]:
    def bad(what: str) -> BaselineError:
        return BaselineError(f"baseline file {where} is malformed: {what}")

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise bad(f'expected a JSON object with "format": "{FORMAT}"')
    if data.get("version") not in READABLE_VERSIONS:
        found = data.get("version")
        raise bad(f"unsupported version {found!r} (this plugin reads versions {', '.join(map(str, READABLE_VERSIONS))})")
    cases = data.get("cases")
    if not isinstance(cases, dict):
        raise bad('"cases" must be an object of files')
    entries: dict[Key, BaselineEntry] = {}
    for file, by_id in cases.items():
        if not isinstance(by_id, dict):
            raise bad(f"the cases of {file!r} must be an object keyed by case id")
        for case_id, raw in by_id.items():
            if not isinstance(raw, dict) or not isinstance(raw.get("verdict"), str):
                raise bad(f"case {file}::{case_id} needs a string \"verdict\"")
            passed = raw.get("passed", raw["verdict"] == Verdict.PASS.value)
            fingerprint = raw.get("fingerprint")
            reason = raw.get("reason")
            if not isinstance(passed, bool):
                raise bad(f'case {file}::{case_id}: "passed" must be true or false')
            if fingerprint is not None and not isinstance(fingerprint, str):
                raise bad(f'case {file}::{case_id}: "fingerprint" must be a string or null')
            if reason is not None and not isinstance(reason, str):
                raise bad(f'case {file}::{case_id}: "reason" must be a string or null')
            entries[(file, case_id)] = BaselineEntry(raw["verdict"], passed, fingerprint, reason)
    return entries


def entry_of(item: Mapping[str, Any]) -> BaselineEntry:
    """The baseline entry for one JSON report item."""
    return BaselineEntry(
        verdict=item["verdict"],
        passed=bool(item["passed"]),
        fingerprint=item.get("fingerprint"),
        reason=item.get("reason"),
    )


def write_baseline(
    path: str | os.PathLike[str],
    items: Iterable[Mapping[str, Any]],
    *,
    previous: Baseline | None = None,
    rootdir: str | os.PathLike[str] | None = None,
    replaced_files: Iterable[str] | None = None,
    unjudged: Iterable[tuple[str, str]] = (),
) -> int:
    """Write the items' verdicts as a baseline, deterministically (sorted, one case per line).

    With `previous`, its entries for cases that did not run now are kept, so that updating the
    baseline from a `-k` subset does not forget the rest of the suite; `replaced_files` (a full
    run of these files) forgets their entries that no item replaces. The file is replaced in
    one step (the old one stays whole if anything fails) and keeps its permissions; a failure is
    a `BaselineWriteError` naming the path. Returns how many earlier entries were kept as they were.
    `unjudged` (file, id) pairs, files as in items: cases that ran but could not be judged (their
    worker died); their earlier entries are kept even in a replaced file.
    """
    folder = Path(path).resolve().parent if rootdir is not None else None
    root = Path(rootdir) if rootdir is not None else None
    entries: dict[Key, BaselineEntry] = dict(previous.entries) if previous else {}
    if replaced_files is not None:  # a full run of these files: cases that no longer exist go
        gone = {_file_key({"file": f}, folder, root) for f in replaced_files}
        kept = {(_file_key({"file": f}, folder, root), case_id) for f, case_id in unjudged}
        entries = {key: entry for key, entry in entries.items() if key[0] not in gone or key in kept}
    untouched = set(entries)
    for item in items:
        key = (_file_key(item, folder, root), item["id"])
        entries[key] = entry_of(item)
        untouched.discard(key)
    _atomic_write(Path(path), render_baseline(entries))
    return len(untouched)


def render_baseline(entries: Mapping[Key, BaselineEntry]) -> str:
    """The file's text: pretty at the top, one compact sorted line per case, trailing newline."""
    by_file: dict[str, dict[str, BaselineEntry]] = {}
    for (file, case_id), entry in entries.items():
        by_file.setdefault(file, {})[case_id] = entry
    dump = lambda value: json.dumps(value, ensure_ascii=False, sort_keys=True)  # noqa: E731
    lines = ["{", f'  "format": {dump(FORMAT)},', f'  "version": {VERSION},']
    if not by_file:
        lines.append('  "cases": {}')
    else:
        lines.append('  "cases": {')
        files = sorted(by_file)
        for file_index, file in enumerate(files):
            lines.append(f"    {dump(file)}: {{")
            ids = sorted(by_file[file], key=natural_key)
            for id_index, case_id in enumerate(ids):
                comma = "," if id_index < len(ids) - 1 else ""
                entry = dump(by_file[file][case_id].to_json())
                lines.append(f"      {dump(case_id)}: {entry}{comma}")
            lines.append("    }" + ("," if file_index < len(files) - 1 else ""))
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def natural_key(text: str) -> tuple[tuple[tuple[int, int, str], ...], str]:
    """Sort `q2` before `q10` (Spider and BIRD ids are bare numbers); ties by the text itself."""
    runs = itertools.groupby(text, _ASCII_DIGITS.__contains__)
    parts = tuple(
        (0, int(run), "") if is_digits else (1, 0, run)
        for is_digits, run in ((digits, "".join(chars)) for digits, chars in runs)
    )
    return parts, text


def _atomic_write(path: Path, text: str) -> None:
    """Replace the file in one step, so an interrupted run never leaves half a baseline. A lone
    surrogate in a reason is written as its JSON escape (it reads back as the same string)."""
    atomic_write_text(
        path, text, errors="backslashreplace", newline="\n", what="the baseline", error=BaselineWriteError
    )


# --- the comparison ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineComparison:
    """The current run against a baseline, for the summary's `baseline` section.

    `accuracy_before` and `accuracy_now` are over the *paired* cases: those judged both in the
    baseline and now (neither side a `gold_error`). That is what McNemar's test compares, and it
    keeps a grown or shrunk suite from passing for a change in the model. Case lists hold
    `file::id` labels (the nodeid), in collection order; `missing` in baseline order.

    A case whose verdict now is `predictor_error` (the model could not be asked) is listed in
    `unpredicted` only: it says nothing of the model's answers, so it is neither a regression nor
    a known failure here, nor in McNemar's pairs (the item still fails the run, as it fails).
    A quarantined case (its `quarantine` reason set) is listed in `quarantined` only, whatever its
    verdict: its failure is expected and fails nothing, so it is no regression either.
    """

    path: str
    paired: int
    passed_before: int
    passed_now: int
    regressions: tuple[str, ...]
    fixed: tuple[str, ...]
    known_failures: tuple[str, ...]
    changed_failures: tuple[str, ...]  # known failures whose verdict or result changed
    new: tuple[str, ...]
    missing: tuple[str, ...]  # in the baseline, not run now
    statuses: Mapping[Key, BaselineStatus | None]
    unpredicted: tuple[str, ...] = ()  # predictor_error now: not judged on an answer
    quarantined: tuple[str, ...] = ()  # quarantined cases: not compared

    @property
    def accuracy_before(self) -> float | None:
        return self.passed_before / self.paired if self.paired else None

    @property
    def accuracy_now(self) -> float | None:
        return self.passed_now / self.paired if self.paired else None

    @property
    def b(self) -> int:
        """Discordant pairs that passed before and fail now (the regressions)."""
        return len(self.regressions)

    @property
    def c(self) -> int:
        """Discordant pairs that failed before and pass now (the fixes)."""
        return len(self.fixed)

    @functools.cached_property
    def p_value(self) -> float:
        """Computed once: the summary, the terminal lines and the reports all read it."""
        return mcnemar_exact(self.b, self.c)

    @property
    def significant(self) -> bool:
        return is_significant(self.p_value)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "paired": self.paired,
            "accuracy_before": self.accuracy_before,
            "accuracy_now": self.accuracy_now,
            "passed_before": self.passed_before,
            "passed_now": self.passed_now,
            "regressions": list(self.regressions),
            "fixed": list(self.fixed),
            "known_failures": len(self.known_failures),
            "changed_failures": list(self.changed_failures),
            "new": list(self.new),
            "missing": list(self.missing),
            "unpredicted": list(self.unpredicted),
            "quarantined": list(self.quarantined),
            "mcnemar": {"b": self.b, "c": self.c},
            "p_value": self.p_value,
            "significant": self.significant,
        }

    def render_lines(self) -> list[str]:
        """The terminal summary's baseline lines; regressions and fixes listed by nodeid."""
        lines = [f"baseline {self.path}: {self.paired} cases judged in both runs"]
        if self.new and len(self.missing) > self.paired:
            lines.append(
                f"{len(self.missing)} of {self.paired + len(self.missing)} baseline cases matched no case of this run: "
                f"its keys are case files relative to the baseline file's folder (it has {self.missing[0]}, "
                f"this run has {self.new[0]}); was the suite moved, or the baseline written for another one?"
            )
        if self.paired:
            lines.append(
                f"cases passing (SQL and term selection, judged in both runs): then "
                f"{_ratio(self.passed_before, self.paired)}, now {_ratio(self.passed_now, self.paired)}"
            )
        if self.unpredicted:
            lines.append(f"{_plural(len(self.unpredicted), 'case')} could not be predicted (predictor_error: the predictor "
                         "raised, transient errors retried): not wrong answers, so neither regressions nor known "
                         "failures here, and never excused by the baseline: they fail the run until they are answered:")
            lines += [f"  {label}" for label in self.unpredicted]
        if self.quarantined:
            lines.append(f"{_plural(len(self.quarantined), 'quarantined case')} not compared with the baseline "
                         "(their verdicts are still written to it)")
        lines += _listed("regression", "regressions", self.regressions)
        lines += _listed("fixed case", "fixed cases", self.fixed)
        if self.known_failures:
            lines.append(f"{_plural(len(self.known_failures), 'known failure')} (xfailed)")
        lines += _listed(
            "known failure fails differently now", "known failures fail differently now",
            self.changed_failures,
        )
        lines += _listed("new case not in the baseline", "new cases not in the baseline", self.new)
        if self.missing:
            lines.append(f"{_plural(len(self.missing), 'baseline case')} did not run")
        if self.fixed or self.new:
            lines.append(
                f"{len(self.fixed)} fixed, {len(self.new)} new: update the baseline with "
                f"--nl2sql-update-baseline --nl2sql-baseline={self.path}"
            )
        if self.b + self.c == 0:
            lines.append("McNemar exact p = 1: no case changed its verdict")
        else:
            verdict = "distinguishable" if self.significant else "not distinguishable"
            lines.append(
                f"McNemar exact p = {format_p(self.p_value)} ({self.b} worse, {self.c} better): "
                f"the change is {verdict} from noise at the {SIGNIFICANCE:g} level"
            )
        return lines


def compare_with_baseline(
    baseline: Baseline, items: Iterable[Mapping[str, Any]], rootdir: str | os.PathLike[str] | None = None
) -> BaselineComparison:
    """Count the items (JSON report items, in collection order) by the baseline status the
    pipeline gave each one (the status is decided once, where the case ran; an item without one
    is classified here, for callers that compare a report written without a baseline)."""
    statuses: dict[Key, BaselineStatus | None] = {}
    regressions: list[str] = []
    fixed: list[str] = []
    known: list[str] = []
    changed: list[str] = []
    new: list[str] = []
    unpredicted: list[str] = []
    quarantined: list[str] = []
    paired = passed_before = passed_now = 0
    seen: set[Key] = set()
    folder = Path(baseline.path).resolve().parent if rootdir is not None else None
    root = Path(rootdir) if rootdir is not None else None
    for item in items:
        key = (_file_key(item, folder, root), item["id"])
        seen.add(key)
        label = item.get("nodeid") or f"{key[0]}::{key[1]}"
        if item.get("quarantine"):
            statuses[key] = None  # expected to fail, fails nothing: not compared
            quarantined.append(label)
            continue
        if item["verdict"] == Verdict.GOLD_ERROR.value:
            statuses[key] = None  # an error now is an error, whatever the baseline says
            continue
        if item["verdict"] == Verdict.PREDICTOR_ERROR.value:
            statuses[key] = BaselineStatus(item["baseline"]) if item.get("baseline") else None
            unpredicted.append(label)  # no answer to compare: neither a regression nor a pair for McNemar
            continue
        entry = baseline.lookup(*key)
        status = BaselineStatus(item["baseline"]) if item.get("baseline") else classify(entry, bool(item["passed"]))
        statuses[key] = status
        if status is BaselineStatus.NEW:
            new.append(label)
            continue
        assert entry is not None
        paired += 1
        passed_before += entry.passed
        passed_now += bool(item["passed"])
        if status is BaselineStatus.REGRESSION:
            regressions.append(label)
        elif status is BaselineStatus.FIXED:
            fixed.append(label)
        elif status is BaselineStatus.KNOWN_FAILURE:
            known.append(label)
            if (entry.verdict, entry.fingerprint) != (item["verdict"], item.get("fingerprint")):
                changed.append(label)
    missing = [
        f"{file}::{case_id}"
        for file, case_id in sorted(baseline.entries, key=lambda k: (k[0], natural_key(k[1])))
        if (file, case_id) not in seen
    ]
    return BaselineComparison(
        path=baseline.path,
        paired=paired,
        passed_before=passed_before,
        passed_now=passed_now,
        regressions=tuple(regressions),
        fixed=tuple(fixed),
        known_failures=tuple(known),
        changed_failures=tuple(changed),
        new=tuple(new),
        missing=tuple(missing),
        statuses=statuses,
        unpredicted=tuple(unpredicted),
        quarantined=tuple(quarantined),
    )


def format_p(p_value: float) -> str:
    """Three significant digits; tiny values in scientific notation rather than 0.000."""
    return f"{p_value:.3g}"


def _ratio(passed: int, total: int) -> str:
    return f"{passed}/{total} = {100 * passed / total:.1f}%"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _listed(singular: str, plural: str, labels: tuple[str, ...]) -> list[str]:
    if not labels:
        return []
    head = f"{len(labels)} {singular if len(labels) == 1 else plural}:"
    return [head] + [f"  {label}" for label in labels]
