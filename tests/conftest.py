"""Shared fixtures of the project's own test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

SPIDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "spider"


@pytest.fixture(scope="session")
def spider_dir() -> Path:
    """The real Spider dev set beside the repo (CI has it; a fresh clone does not)."""
    if not (SPIDER / "dev.json").exists():
        pytest.skip(f"the Spider data is not at {SPIDER} (it ships beside the repo in CI only)")
    return SPIDER
