"""Scoring: Spider hardness, exact and partial match, soft scores, term selection, efficiency, and the summary."""
