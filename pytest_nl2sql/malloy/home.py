"""Where the Malloy compiler is installed, and `nl2sql malloy-setup`, which installs it.

The compiler is `@malloydata/malloy` from the npm registry, pinned with its whole dependency tree
by the `package.json` and `package-lock.json` shipped in `node/` (`antlr4ts` is held at
`0.5.0-alpha.4` by an npm override: its range also takes a broken `0.5.0-dev`). `npm ci` installs
exactly that tree into the compiler home: `$NL2SQL_MALLOY_HOME`, else
`~/.cache/pytest-nl2sql/malloy/<version>` (`$XDG_CACHE_HOME` for `~/.cache`). The home holds
`node_modules` only; the server script (`node/compile.mjs`) runs from the plugin itself, so that
it always matches the Python side that talks to it.

An install is done beside the home and moved in when complete, and `.nl2sql-ready` (the version)
is written last: a home that a stopped set-up left half-filled reads as not set up.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

NODE_DIR = Path(__file__).parent / "node"
SERVER = NODE_DIR / "compile.mjs"
READY = ".nl2sql-ready"
NODE_MAJOR = 20  # @malloydata/malloy's `engines`


class MalloyUnavailable(Exception):
    """Malloy cannot be compiled here (no Node, or no compiler in its home); says what to run."""


def pinned_version() -> str:
    """The `@malloydata/malloy` version the shipped package.json pins."""
    return json.loads((NODE_DIR / "package.json").read_text(encoding="utf-8"))["dependencies"]["@malloydata/malloy"]


def compiler_home() -> Path:
    """`$NL2SQL_MALLOY_HOME`, else `malloy/<version>` in the user's cache folder (as
    `judge.pipeline.default_cache_dir` finds it, but not moved by `$NL2SQL_CACHE_DIR`: that one is
    where a run keeps its neighbours, often a folder of its own, and the compiler is set up once)."""
    explicit = os.environ.get("NL2SQL_MALLOY_HOME")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-nl2sql" / "malloy" / pinned_version()


def find_node() -> str:
    """The `node` executable, at least version 20; else `MalloyUnavailable` saying so."""
    node = shutil.which("node")
    if node is None:
        raise MalloyUnavailable(f"Malloy predictions need Node.js {NODE_MAJOR} or later, and `node` is not on PATH: "
                                f"install Node {NODE_MAJOR} (with npm), then run `nl2sql malloy-setup`")
    try:
        found = os.stat(node)
        version = _node_version(node, found.st_ino, found.st_size, found.st_mtime_ns)
        major = int(version.lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.SubprocessError):
        raise MalloyUnavailable(f"`{node} --version` does not say which Node.js it is: Malloy needs Node {NODE_MAJOR} or later") from None
    if major < NODE_MAJOR:
        raise MalloyUnavailable(f"Malloy needs Node.js {NODE_MAJOR} or later; `{node}` is {version}")
    return node


@functools.lru_cache(maxsize=8)
def _node_version(node: str, inode: int, size: int, mtime_ns: int) -> str:
    """What `node --version` prints, asked once per executable file (keyed by what changes when it is
    replaced): each compiler start asked again, ~0.2 s of wall time, ~45 times in this project's tests."""
    return subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()


def installed(home: Path) -> bool:
    """Whether a completed set-up of the pinned compiler is in `home`."""
    try:
        return (home / READY).read_text(encoding="utf-8").strip() == pinned_version()
    except OSError:
        return False


def require_compiler(home: Path | None = None) -> tuple[str, Path]:
    """(node, home) ready to compile, else `MalloyUnavailable` naming what to run."""
    node = find_node()
    home = home or compiler_home()
    if not installed(home):
        raise MalloyUnavailable(f"the Malloy compiler ({pinned_version()}) is not set up in {home}: run `nl2sql malloy-setup`"
                                + ("" if os.environ.get("NL2SQL_MALLOY_HOME") else " (or set NL2SQL_MALLOY_HOME to where it is)"))
    return node, home


def setup_compiler(home: Path | None = None, *, say: Callable[[str], None] = print) -> Path:
    """Install the pinned compiler into `home` (default `compiler_home()`) with `npm ci`; the home."""
    find_node()
    npm = shutil.which("npm")
    if npm is None:
        raise MalloyUnavailable("`npm` is not on PATH: install Node.js with npm, then run `nl2sql malloy-setup` again")
    home = Path(home or compiler_home())
    if installed(home):
        say(f"the Malloy compiler {pinned_version()} is already set up in {home}")
        return home
    home.mkdir(parents=True, exist_ok=True)
    work = home / f".install-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(NODE_DIR / name, work / name)
        say(f"installing the Malloy compiler {pinned_version()} into {home} (npm ci)...")
        done = subprocess.run([npm, "ci", "--omit=dev", "--no-audit", "--no-fund", "--loglevel=error"], cwd=work,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise MalloyUnavailable(f"`npm ci` failed in {work} (exit {done.returncode}):\n{(done.stderr or done.stdout).strip()[-2000:]}")
        (home / READY).unlink(missing_ok=True)
        old = home / f".old-{os.getpid()}"
        if (home / "node_modules").exists():
            (home / "node_modules").rename(old)
        (work / "node_modules").rename(home / "node_modules")
        for name in ("package.json", "package-lock.json"):
            (work / name).replace(home / name)
        shutil.rmtree(old, ignore_errors=True)
        (home / READY).write_text(pinned_version() + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return home
