"""The CI gate: baseline, thresholds, statistics, run metadata and history, the end of a run."""
