"""Text from cases, predictions and databases made safe to show: in a terminal, a CI log, a junit
file or a Markdown comment, a prediction must not move the cursor, recolour the log, reorder what
a reader sees, or print a line the CI system obeys (`::error …`, `##[…]`).

    escaped(text)      control characters (but newline and tab) and bidi overrides as \\xNN / \\uNNNN
    one_line(text)     `safe_lines` on one line (newline and tab escaped too): a name stays in its table row
    safe_lines(text)   `escaped`, and every line that a CI system would read as a command made inert
    ShownWarning       a warning mixin whose message is `safe_lines` (pytest prints warnings as they are)
    shown_path(p, root) a path relative to the rootdir when it lies inside it (a CI runner's /home/runner/work/…
                        says nothing to a reader and differs on every machine)
"""

from __future__ import annotations

import os
from pathlib import Path

# Unicode bidirectional overrides and isolates: they reorder how a line reads ("Trojan Source")
_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))
_BIDI_CHARS = tuple(chr(code) for code in sorted(_BIDI))
# Lines these CI systems obey: GitHub Actions (`::error file=…::…`), Azure Pipelines (`##vso[…]`, `##[…]`)
_COMMANDS = ("::", "##[", "##vso[")
_LAYOUT = str.maketrans("", "", "\n\t")  # deletes newline and tab, which are kept as they are


def escaped(text: str) -> str:
    """`text` with every control character but newline and tab, and every bidi override, written
    as an escape (`\\x1b`, `\\u202e`): visible, and inert."""
    if (text.isprintable() or text.translate(_LAYOUT).isprintable()) and not any(ch in text for ch in _BIDI_CHARS):
        return text  # the common case, lines of it too, checked in C (a reason of 10 MB: milliseconds, not seconds)
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "\n\t":
            out.append(ch)
        elif code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
            out.append(f"\\x{code:02x}")
        elif code in _BIDI or 0xD800 <= code < 0xE000:  # a lone surrogate cannot even be encoded
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def safe_lines(text: str) -> str:
    """`escaped(text)`, with a backslash before every line that starts (after spaces) like a CI
    workflow command, so no line a prediction prints is obeyed."""
    lines = escaped(text).split("\n")
    return "\n".join("\\" + line if line.lstrip().startswith(_COMMANDS) else line for line in lines)


def one_line(text: str) -> str:
    """`escaped(text)` with newline and tab written as `\\n` and `\\t` too, and a backslash
    before it if it starts like a CI workflow command: a tag, a database name or a path shown at
    the start of a table's row cannot break the row, start a line of its own, or be obeyed."""
    line = escaped(text).replace("\n", "\\n").replace("\t", "\\t")
    return "\\" + line if line.lstrip().startswith(_COMMANDS) else line


class ShownWarning(Warning):
    """A mixin for warnings that quote the data (a database's name, an error from it): pytest's
    warnings summary prints a message as it is, so the message is made `safe_lines` here."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(safe_lines(str(message)), *args)


def shown_path(path: str | os.PathLike[str], rootdir: str | os.PathLike[str]) -> str:
    """`path` as a message or a report's header shows it: relative to `rootdir` (pytest's
    rootdir) when it lies inside it, else as it is (a relative path is said as given)."""
    if not os.path.isabs(path):
        return os.fspath(path)
    for resolve in (os.path.abspath, os.path.realpath):  # a symlinked temp or work folder: either spelling
        try:
            return str(Path(resolve(path)).relative_to(resolve(rootdir))) or "."
        except ValueError:
            continue
    return os.fspath(path)
