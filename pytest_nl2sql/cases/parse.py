"""YAML and JSON parsing with limits, so that no case file can stop the run.

Two attacks (or accidents) are refused before they can cost much:

- **Alias expansion** ("billion laughs"): YAML anchors and aliases let a few hundred bytes stand for
  a structure of 10**9 values. PyYAML shares the aliased objects, so loading is cheap, but anything
  that walks the data (`str()` of an id, an error message, `json.dumps` into a report) expands it and
  exhausts memory. Aliases stay allowed — `compare: *strict` or `<<: *defaults` are useful — but the
  composer counts the nodes every alias stands for (its whole subtree, aliases inside expanded) and
  refuses a document once that count passes `MAX_ALIAS_NODES` for the file. An alias to a
  collection that contains it (a recursive structure) is refused outright.
- **Nesting**: PyYAML's composer and constructor and Python's `json` recurse once per level, so
  `[[[[…]]]]` 50,000 deep raises RecursionError. Nesting deeper than `MAX_DEPTH` is refused
  while composing YAML (before construction); `json.loads` stops by itself at Python's recursion
  limit (caught), and a JSON document it builds is walked and refused past `MAX_DEPTH` (a
  question file of a `source:` block is walked per question, for the keys a case keeps).

A refusal is a `yaml.YAMLError` / `ValueError` with the line where it happened, which the loader
turns into the file's error (a collection error of that file; a JSONL line: one broken entry):
the rest of the run goes on.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.parser import ParserError

MAX_DEPTH = 100  # nesting levels; the deepest real case (a term-selection target) has about 10
MAX_ALIAS_NODES = 100_000  # values that aliases may stand for, per file


class _LimitedLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` with a nesting limit and an alias-expansion budget (see the module)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._open: set[str] = set()  # anchors of the collections being composed
        self._sizes: dict[int, tuple[yaml.Node, int]] = {}  # id(node) -> (node, expanded size)
        self._expanded = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is not None:  # an undefined alias is reported by PyYAML itself
                if event.anchor in self._open:
                    raise ComposerError(None, None, f"alias *{event.anchor} refers to a collection that contains it "
                                        "(a recursive structure)", event.start_mark)
                self._expanded += self._size(node)
                if self._expanded > MAX_ALIAS_NODES:
                    raise ComposerError(None, None, f"aliases expand to more than {MAX_ALIAS_NODES} values "
                                        "(a \"billion laughs\" file?)", event.start_mark)
            return super().compose_node(parent, index)
        if self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        anchor = event.anchor if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)) else None
        self._depth += 1
        if anchor is not None:
            self._open.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open.discard(anchor)

    def _size(self, node: yaml.Node) -> int:
        """How many nodes `node` stands for, aliases expanded (memoised: shared nodes are cheap)."""
        known = self._sizes.get(id(node))
        if known is not None:
            return known[1]
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._size(k) + self._size(v) for k, v in node.value)
        else:
            size = 1
        self._sizes[id(node)] = (node, size)  # the node is kept alive, so its id stays its own
        return size


class NestingError(ValueError):
    """A JSON text nested deeper than `MAX_DEPTH`."""


def yaml_documents(text: str) -> Iterator[tuple[yaml.Node, Any]]:
    """Each YAML document as (node, data): the node keeps line numbers for error messages.
    Raises `yaml.YAMLError` (with a mark) for a syntax error or a refused file."""
    loader = _LimitedLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            yield node, loader.construct_document(node)
    except RecursionError:  # a last resort: the depth limit should have refused it first
        mark = getattr(loader, "get_mark", lambda: None)()
        raise ComposerError(None, None, "nested too deeply", mark) from None
    finally:
        loader.dispose()


def yaml_error(error: yaml.YAMLError, text: str) -> tuple[int | None, str]:
    """(line, message) of a YAML error: the line where the problem starts.

    That is the offending token's line (PyYAML's problem mark), except for a quote that is never
    closed where it should be, whose line is where it opens: PyYAML notices such a runaway quote
    only at the end of the file or the document (its context mark is the quote), or, when a later
    quote closes it, at the token after that one (which no mark points back from: see
    `_runaway_quote`). Otherwise, a problem found only at the end of the file is placed where the
    unfinished construct starts."""
    problem_mark = getattr(error, "problem_mark", None)
    context_mark = getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    if context == "while scanning a quoted scalar" and context_mark is not None and problem in _NEVER_CLOSED:
        ends = "the file ends first" if problem == _NEVER_CLOSED[0] else f"the document ends first (`---` on line {problem_mark.line + 1})"
        return context_mark.line + 1, f"invalid YAML: a quoted value opens on line {context_mark.line + 1} and is never closed: {ends}"
    if isinstance(error, ParserError) and problem_mark is not None:
        opened = _runaway_quote(text, problem_mark)
        if opened is not None:
            return opened + 1, (f"invalid YAML: a quoted value opens on line {opened + 1} and runs on to the quote "
                                f"that closes it on line {problem_mark.line + 1}, where {problem}: "
                                f"is a closing quote missing on line {opened + 1}?")
    at_end = problem_mark is None or problem_mark.index >= len(text.rstrip())
    mark = context_mark if at_end and context_mark is not None else problem_mark
    message = f"invalid YAML: {problem}"
    if context and context_mark is not None:
        message += f" ({context} that starts on line {context_mark.line + 1})"
    return (mark.line + 1 if mark is not None else None), message


# What PyYAML's scanner finds when a quoted value runs to the end of the file or the document.
_NEVER_CLOSED = ("found unexpected end of stream", "found unexpected document separator")


def _runaway_quote(text: str, problem: yaml.Mark) -> int | None:
    """The zero-based line where a runaway quote opens, when the token right before the parser's
    problem is a quoted value that spans lines and ends on the problem's line: the text after its
    closing quote is what the parser could not take, so that closing quote was really the opening
    quote of a later value (`gold: "SELECT 2` ... `gold: "SELECT 3"` reads `SELECT 3"` as stray
    text). A quoted value that spans lines legitimately ends before the problem's line."""
    scanner = yaml.SafeLoader(text)
    previous = None
    try:
        while scanner.check_token():
            token = scanner.get_token()
            if token.start_mark.index >= problem.index:
                break
            previous = token
    except yaml.YAMLError:
        pass
    finally:
        scanner.dispose()
    if (isinstance(previous, yaml.ScalarToken) and previous.style in ('"', "'")
            and previous.start_mark.line < previous.end_mark.line == problem.line):
        return previous.start_mark.line
    return None


def load_json(text: str, *, walked: bool = True) -> Any:
    """`json.loads`, refusing nesting deeper than `MAX_DEPTH` (a `NestingError`, a ValueError).
    `walked=False`: only what Python's recursion limit refuses; the caller checks the parts it
    keeps with `nested_too_deep` (Spider's dev.json holds a parse tree per question, which no
    case keeps and which costs more to walk than to load)."""
    try:
        with _collector_paused():
            data = json.loads(text)
    except RecursionError:  # deeper than Python's recursion limit: json stops there by itself
        raise NestingError(f"nested deeper than {MAX_DEPTH} levels") from None
    if walked and nested_too_deep(data):
        raise NestingError(f"nested deeper than {MAX_DEPTH} levels")
    return data


def nested_too_deep(data: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and dicts nest deeper than `limit` in a loaded JSON document (a walk without
    recursion; four times faster than scanning the text for brackets outside strings)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if type(node) is dict else node if type(node) is list else ()
        for child in children:
            if type(child) is dict or type(child) is list:
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


@contextmanager
def _collector_paused() -> Iterator[None]:
    """`json.loads` makes no reference cycles, so the cyclic garbage collector would only walk the
    new objects again and again while a large document is built (Spider's dev.json: 20 ms)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
