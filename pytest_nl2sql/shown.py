"""Text from cases, predictions and databases made safe to show: in a terminal, a CI log, a junit
file or a Markdown comment, a prediction must not move the cursor, recolour the log, reorder what
a reader sees, or print a line the CI system obeys (`::error …`, `##[…]`).

    escaped(text)      control characters (but newline and tab) and bidi overrides as \\xNN / \\uNNNN
    safe_lines(text)   `escaped`, and every line that a CI system would read as a command made inert
"""

from __future__ import annotations

# Unicode bidirectional overrides and isolates: they reorder how a line reads ("Trojan Source")
_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))
# Lines these CI systems obey: GitHub Actions (`::error file=…::…`), Azure Pipelines (`##vso[…]`, `##[…]`)
_COMMANDS = ("::", "##[", "##vso[")


def escaped(text: str) -> str:
    """`text` with every control character but newline and tab, and every bidi override, written
    as an escape (`\\x1b`, `\\u202e`): visible, and inert."""
    if text.isprintable() and not any(ord(ch) in _BIDI for ch in text):
        return text  # the common case, checked in C
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
