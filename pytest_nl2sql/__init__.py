"""pytest-nl2sql: natural-language-to-SQL suites as pytest items, judged by executing the SQL.

The plugin itself is `pytest_nl2sql.plugin` (loaded by pytest through the `pytest11` entry point).
The functions below work without pytest.
"""

from __future__ import annotations

# The one place the version is written: the build reads it from here (pyproject.toml's dynamic
# version), `nl2sql --version` prints it, and the release workflow checks the tag against it.
__version__ = "0.2.0"

from pytest_nl2sql.api import eval_exec_match, evaluate_predictions, evaluate_suite, to_dataframe
from pytest_nl2sql.judge.compare import compare_results
from pytest_nl2sql.metrics.hardness import hardness  # binds the function over the submodule of the same name

__all__ = ["__version__", "compare_results", "eval_exec_match", "evaluate_predictions", "evaluate_suite", "hardness", "to_dataframe"]
