"""The pytest face: hooks and options, items that call the pipeline, the controller that aggregates reports."""
