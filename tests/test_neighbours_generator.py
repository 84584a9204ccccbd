"""Classes of data the neighbour generator makes so that wrong answers that one database hides
fail (issue 31), and counterexamples that keep a parent referenced by text ('4' against the key 4)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers import make_db
from pytest_nl2sql.neighbours.schema import open_source

# ----------------------------------------------------------------------------- counterexamples

def test_a_shrunk_counterexample_keeps_a_parent_referenced_by_text(tmp_path: Path) -> None:
    """player.team_id is TEXT, team.id INTEGER: '4' joins 4 (SQLite gives the text the key's
    affinity). Removing team 4 must remove the players pointing at it, and a kept player keeps its
    team: no shown row points at nothing."""
    from pytest_nl2sql.neighbours.shrink import _Shrinker

    path = make_db(tmp_path / "league.sqlite", """
        CREATE TABLE team(id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT, team_id TEXT REFERENCES team(id));
    """)
    reader = open_source(path, "sqlite")
    schema = reader.schema()
    reader.close()
    rows = {"team": [(i, f"team {i}") for i in range(1, 7)],
            "player": [(10 + i, f"p{i}", str(1 + i % 6)) for i in range(12)]}

    def differs(database: Path) -> bool:
        connection = sqlite3.connect(database)
        try:
            return connection.execute("SELECT count(*) FROM player WHERE name = 'p3'").fetchone()[0] == 1
        finally:
            connection.close()

    kept = set(_Shrinker(schema, rows, differs, tmp_path, budget=128).shrink())
    assert ("player", 3) in kept  # p3, of team '4'
    assert ("team", 3) in kept  # team 4
