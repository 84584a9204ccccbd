"""Reading: the parsed case (Case) and its readers (YAML, JSONL, Spider/BIRD sources), predictions files."""
