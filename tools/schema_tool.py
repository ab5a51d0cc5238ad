"""Arguments checked against a published JSON schema, for tools that are described by a
schema instead of a Python signature (an MCP server's tools, an OpenEnv server's action).

A mistake comes back at once, in words the model can act on, before anything reaches the
other side. Needs `jsonschema` (in the extras that use it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from toolgym.log import get_logger
from toolgym.tools.tool import ToolCallError

log = get_logger(__name__)

MAX_ARGUMENT_ERRORS = 8

ArgumentCheck = Callable[[Mapping[str, Any]], None]


def schema_check(schema: dict[str, Any], name: str) -> ArgumentCheck:
    """A function that raises ToolCallError for arguments `schema` refuses. A schema that is
    not valid JSON Schema checks nothing (the other side then checks alone) and is logged."""
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except jsonschema.SchemaError as exc:
        log.warning("tool %r publishes an invalid input schema (%s)", name, exc.message)
        return lambda arguments: None

    def check(arguments: Mapping[str, Any]) -> None:
        errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
        if errors:
            raise ToolCallError(_explain(errors))

    return check


def _explain(errors: list[Any]) -> str:
    lines = ["invalid arguments:"]
    for error in errors[:MAX_ARGUMENT_ERRORS]:
        where = ".".join(str(p) for p in error.path) or "(arguments)"
        lines.append(f"- {where}: {error.message[:300]}")
    if len(errors) > MAX_ARGUMENT_ERRORS:
        lines.append(f"- ... and {len(errors) - MAX_ARGUMENT_ERRORS} more")
    return "\n".join(lines)
