"""The JSON Schema of the JSON report (`report.schema.json` beside this module, draft 2020-12),
shipped in the package so that a consumer of `--nl2sql-report=json` can validate what it reads:

    import json
    from pytest_nl2sql.reports.schema import report_errors
    problems = report_errors(json.load(open("nl2sql-report.json")))  # [] when it is valid

Validation needs `jsonschema` (or `jsonschema-rs`, much faster on large reports), which the plugin
itself does not (the dev extra installs both); `load_schema()` and the file alone need nothing.

Objects in the schema accept fields it does not list (a reader that validates with an older schema
is not broken by a newer plugin's additions), but it lists every field the plugin writes: with
`closed=True` a field it does not list is an error too. The project's own test suite checks every
JSON report it writes that way, so the schema cannot fall behind the code. An object whose keys
are data (buckets by tag, counts by verdict, the run's options) says what its values are, and is
never closed.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

SCHEMA_NAME = "report.schema.json"


def load_schema() -> dict[str, Any]:
    """The schema as a dict (a fresh copy each call)."""
    return json.loads(resources.files(__package__).joinpath(SCHEMA_NAME).read_text(encoding="utf-8"))


# keywords whose value is a subschema, a list of them, or a mapping of names to them
_ONE = ("additionalProperties", "items", "contains", "propertyNames", "not", "if", "then", "else",
        "unevaluatedItems", "unevaluatedProperties")
_MANY = ("prefixItems", "allOf", "anyOf", "oneOf")
_NAMED = ("properties", "patternProperties", "$defs", "dependentSchemas")


def closed_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with every object that lists its `properties` and says nothing of others
    (`additionalProperties` absent) refusing others: an unlisted field becomes an error."""
    result = copy.deepcopy(dict(schema))
    _close(result)
    return result


def _close(node: Any) -> None:
    if not isinstance(node, dict):
        return
    if "properties" in node and "additionalProperties" not in node:
        node["additionalProperties"] = False
    for key in _ONE:
        _close(node.get(key))
    for key in _MANY:
        for sub in node.get(key) or ():
            _close(sub)
    for key in _NAMED:
        for sub in (node.get(key) or {}).values():
            _close(sub)


VALIDATORS = ("jsonschema_rs", "jsonschema")  # the first installed is used unless one is named


@functools.lru_cache(maxsize=4)
def _validator(name: str, is_closed: bool) -> Any:
    schema = load_schema()
    if is_closed:
        schema = closed_schema(schema)
    if name == "jsonschema_rs":  # compiled (Rust): a Spider-sized report in milliseconds, not seconds
        import jsonschema_rs

        return jsonschema_rs.validator_for(schema)
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)  # formats are annotations (the default): the patterns check what matters


def installed_validator() -> str:
    """The first of `VALIDATORS` that is installed; ImportError naming them when none is."""
    for name in VALIDATORS:
        if importlib.util.find_spec(name) is not None:
            return name
    raise ImportError("validating a report needs jsonschema (pip install jsonschema) or jsonschema-rs")


def report_errors(report: Any, *, closed: bool = False, limit: int = 20, validator: str | None = None) -> list[str]:
    """What is wrong with `report` (a JSON report as read back from its file), one line per error
    naming where (`items/3/passed: 'yes' is not of type 'boolean'`); [] when it is valid. At most
    `limit` errors. `closed`: a field the schema does not list is an error too. `validator`: one of
    `VALIDATORS` (default: the first installed); the messages differ, the errors do not."""
    name = validator or installed_validator()
    if name not in VALIDATORS:
        raise ValueError(f"unknown validator {name!r} (use one of {', '.join(VALIDATORS)})")
    errors = []
    for error in _validator(name, closed).iter_errors(report):
        path = error.instance_path if name == "jsonschema_rs" else error.absolute_path
        where = "/".join(str(p) for p in path) or "(the report)"
        message = error.message if len(error.message) <= 300 else error.message[:299] + "…"  # it quotes the value
        errors.append(f"{where}: {message}")
        if len(errors) >= limit:
            break
    return errors
