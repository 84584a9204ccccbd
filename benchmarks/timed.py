"""One command timed in its own process, the way the benchmark scripts beside it measure a run:
wall time, and the CPU time of the process and the children it reaped (`os.wait4`: the engines'
worker processes included), its output kept in a temporary file (a pipe left unread could stall it).

Imported by the scripts run from the repo root (`python benchmarks/NAME.py`, which puts this
folder first on `sys.path`).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    returncode: int
    output: str  # stdout and stderr, interleaved


def measure(command: list[str], cwd: Path, env: dict[str, str]) -> Run:
    """Run `command` in its own process; wall and CPU time (it and its reaped children)."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        output = out.read().decode(errors="replace")
    return Run(wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status), output)
