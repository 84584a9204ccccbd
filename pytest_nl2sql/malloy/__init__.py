"""Malloy predictions: a Malloy query compiled to SQL for the case's engine, then judged as SQL.

    compiler = MalloyCompiler()                  # one Node child, started on the first compile
    compiled = compiler.compile("run: singer -> { aggregate: n is count() }",
                                tables=open_source(spec).tables(), dialect="sqlite")
    compiled.sql, compiled.dialect               # DuckDB SQL for a SQLite case (Malloy has no SQLite)
    compiler.close()

- `model.py`: the model generated from a schema when a suite gives none (`nl2sql malloy-model`).
- `compiler.py`: the Node child, its JSON-lines protocol and its bounds (source size, memory, time);
  `MalloyCompileError` with the line, `MalloyTimeout`, `MalloyCrashed` (not the query's fault).
- `home.py`: where the compiler is installed, and `nl2sql malloy-setup`, which installs it.
- `names.py`: dialects, Malloy's reserved words and backquotes, table paths.
- `node/`: the pinned npm package (`package.json`, `package-lock.json`) and the server script.

Only this package needs Node, and only when a Malloy prediction is compiled: importing it does not.
"""

from pytest_nl2sql.malloy.compiler import Compiled, MalloyCompileError, MalloyCompiler, MalloyCrashed, MalloyTimeout
from pytest_nl2sql.malloy.home import MalloyUnavailable, compiler_home, pinned_version, setup_compiler
from pytest_nl2sql.malloy.model import generated_model
from pytest_nl2sql.malloy.names import malloy_dialect, sql_dialect

__all__ = [
    "Compiled", "MalloyCompileError", "MalloyCompiler", "MalloyCrashed", "MalloyTimeout", "MalloyUnavailable", "compiler_home",
    "generated_model",
    "malloy_dialect", "pinned_version", "setup_compiler", "sql_dialect",
]
