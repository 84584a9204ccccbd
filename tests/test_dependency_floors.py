"""The declared dependency floors are true: the example suites run on the oldest pytest and
sqlglot that `pyproject.toml` admits (installed beside this environment's, ahead on the path)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _floors() -> dict[str, str]:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for spec in dependencies:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?>=([0-9.]+)", spec.split(";")[0].strip())  # extras dropped
        if match:
            floors[match.group(1).lower()] = match.group(2)
    return floors


def _home() -> Path:
    """Where the floors are installed: the user's cache (`$XDG_CACHE_HOME` or `~/.cache`), as pip
    keeps its downloads there, not the checkout's `.pytest_cache`: every fresh clone of a machine
    paid ~13 s of pip (resolving, unpacking) for the same pinned versions. `NL2SQL_TEST_CACHE`
    moves it."""
    chosen = os.environ.get("NL2SQL_TEST_CACHE")
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-nl2sql-tests"


def _installed(wanted: list[str], tmp_path: Path) -> Path:
    """A folder holding `wanted`, installed by pip; kept in the user's cache (`_home`), keyed by the
    versions and this Python, so that a later run does not fetch and install them again (the
    versions are still checked below). Built under a temporary name and renamed into place: never
    half a folder. Where the cache cannot be written, a folder of this test's own."""
    home = _home() / "dependency-floors"
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError:
        home = tmp_path
    key = hashlib.sha256(json.dumps([wanted, sys.version, sys.platform]).encode()).hexdigest()[:16]
    target = home / key
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=home))
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(staging), *wanted],
        capture_output=True, text=True, timeout=300,
    )
    if install.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.skip(f"cannot install {' '.join(wanted)} from the package index: {install.stderr.strip()[-300:]}")
    try:
        os.replace(staging, target)
    except OSError:  # another run put it there first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def test_the_example_suites_run_on_the_declared_minimum_pytest_and_sqlglot(tmp_path: Path) -> None:
    floors = _floors()
    wanted = [f"pytest=={floors['pytest']}", f"sqlglot=={floors['sqlglot']}"]
    target = _installed(wanted, tmp_path)
    suites = tmp_path / "example_suites"
    shutil.copytree(ROOT / "example_suites", suites)
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    versions = subprocess.run([sys.executable, "-c", "import pytest, sqlglot; print(pytest.__version__, sqlglot.__version__)"],
                              capture_output=True, text=True, env=env, timeout=60)
    installed = [tuple(int(n) for n in v.split(".")) for v in versions.stdout.split()]
    declared = [tuple(int(n) for n in floors[name].split(".")) for name in ("pytest", "sqlglot")]
    assert [v[: len(d)] for v, d in zip(installed, declared)] == declared and all(
        set(v[len(d):]) <= {0} for v, d in zip(installed, declared)), versions.stdout + versions.stderr
    # the example's runaway query times out either way (pred_timeout): half a second, not the ini's 2 s
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--nl2sql-timeout=0.5"], cwd=suites,
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert re.search(r"\d+ passed, \d+ xfailed", run.stdout), run.stdout[-2000:]
    assert "execution accuracy" in run.stdout
