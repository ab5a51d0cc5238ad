"""`@tool`: a typed function becomes a Tool with an OpenAI function schema.

The schema comes from the signature: type hints give the JSON types, the docstring gives the
description (first paragraph) and per-argument help (a Google-style `Args:` section).
Arguments annotated `Injected[T]` are filled in by the caller (env state, a sandbox handle)
and never appear in the schema, so the model can neither see nor forge them.

A call never raises for the model's mistakes: bad arguments, exceptions and timeouts come back
as a `ToolResult` whose text tells the model what went wrong.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import time
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from toolgym.errors import ToolDefinitionError, ToolgymError
from toolgym.tools.records import ToolCall, ToolErrorKind, ToolReply, ToolResult
from toolgym.tools.text import echo

T = TypeVar("T")


class _InjectedMarker:
    def __repr__(self) -> str:
        return "INJECTED"


INJECTED = _InjectedMarker()
Injected = Annotated[T, INJECTED]
"""`state: Injected[MazeState]` marks an argument the caller supplies, hidden from the model."""


class InfraError(ToolgymError, RuntimeError):
    """Raise from a tool when the failure is the infrastructure's, not the model's (a search
    server down, a dead sandbox): the step is flagged `infra_error` and masked from training."""


class ToolCallError(ToolgymError, ValueError):
    """Raise from a tool when the call itself is wrong in a way its schema cannot say (an
    expression that does not parse, a file that does not exist): the message goes back to the
    model and the turn counts as the policy's mistake. Any other exception is the tool's own
    bug: reported as `exception`, counted in `rollout/tool_exceptions`, flagged by `toolgym
    check`."""


class AnyArguments(BaseModel):
    """The arguments model of a tool described by a JSON schema instead of a signature (an
    MCP server's): every argument passes through, and the tool checks them itself."""

    model_config = ConfigDict(extra="allow")


DEFAULT_TIMEOUT_S = 30.0
MAX_ARGUMENT_ERRORS = 8
DEFAULT_MAX_OUTPUT_CHARS = 16_000


@dataclass(frozen=True)
class Tool:
    """A callable the model can use. Build one with `@tool`; call it with `await t.call(...)`."""

    fn: Callable[..., Any]
    name: str
    description: str
    args_model: type[BaseModel]
    parameters_schema: dict[str, Any] = field(compare=False, repr=False)
    hidden: tuple[str, ...] = ()
    takes_self: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    bound_to: Any = field(default=None, compare=False)

    # Used as a method in an env class, `self.move` is the tool bound to that env.
    def __get__(self, instance: Any, owner: type | None = None) -> Tool:
        if instance is None or not self.takes_self:
            return self
        return replace(self, bound_to=instance)

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the visible arguments (a fresh copy)."""
        return copy.deepcopy(self.parameters_schema)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema of this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    async def call(self, call: ToolCall, injected: Mapping[str, Any] | None = None) -> ToolResult:
        """Validate `call.arguments`, run the function with a timeout, and report the outcome."""
        start = time.perf_counter()
        try:
            kwargs = self._validate(call.arguments)
        except ValidationError as exc:
            return ToolResult(call, self._explain(exc), ToolErrorKind.INVALID_ARGUMENTS)
        kwargs.update(self._injections(injected or {}))
        try:
            async with asyncio.timeout(self.timeout_s):
                value = await self._run(kwargs)
        except TimeoutError:
            text = f"Error: tool '{self.name}' timed out after {self.timeout_s:g} s."
            return ToolResult(call, text, ToolErrorKind.TIMEOUT, time.perf_counter() - start)
        except InfraError as exc:
            text = f"Error: tool '{self.name}' is unavailable: {exc}"
            return ToolResult(call, text, ToolErrorKind.INFRA, time.perf_counter() - start)
        except ToolCallError as exc:
            text = self._clip(f"Error: tool '{self.name}': {exc}")
            return ToolResult(
                call, text, ToolErrorKind.INVALID_ARGUMENTS, time.perf_counter() - start
            )
        except Exception as exc:
            text = f"Error: tool '{self.name}' failed: {type(exc).__name__}: {exc}"
            return ToolResult(
                call, self._clip(text), ToolErrorKind.EXCEPTION, time.perf_counter() - start
            )
        elapsed = time.perf_counter() - start
        if isinstance(value, ToolReply):
            return ToolResult(call, self._clip(value.text), None, elapsed, value.images)
        return ToolResult(call, self._clip(_to_text(value)), None, elapsed)

    def _validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        model = self.args_model.model_validate(dict(arguments))
        fields = {name: getattr(model, name) for name in type(model).model_fields}
        return {**fields, **(model.model_extra or {})}

    def _injections(self, injected: Mapping[str, Any]) -> dict[str, Any]:
        missing = [name for name in self.hidden if name not in injected]
        if missing:
            raise ToolDefinitionError(
                f"tool '{self.name}' needs injected argument(s) {missing}; pass them in `injected=`"
            )
        return {name: injected[name] for name in self.hidden}

    async def _run(self, kwargs: dict[str, Any]) -> Any:
        args = (self.bound_to,) if self.takes_self else ()
        if self.takes_self and self.bound_to is None:
            raise ToolDefinitionError(
                f"tool '{self.name}' is a method; call it through an instance"
            )
        result = self.fn(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    def _clip(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        extra = len(text) - self.max_output_chars
        return f"{text[: self.max_output_chars]}\n[output truncated: {extra} more characters]"

    def _explain(self, exc: ValidationError) -> str:
        props = self.parameters_schema.get("properties", {})
        lines = [f"Error: invalid arguments for tool '{self.name}':"]
        for err in exc.errors()[:MAX_ARGUMENT_ERRORS]:
            arg = echo(".".join(str(p) for p in err["loc"]), 64) or "(arguments)"
            expected = _expectation(props.get(str(err["loc"][0]) if err["loc"] else "", {}))
            if err["type"] == "missing":
                lines.append(f"- missing required argument '{arg}' (expected {expected})")
            elif err["type"] == "extra_forbidden":
                allowed = ", ".join(props) or "none"
                lines.append(f"- unexpected argument '{arg}' (allowed: {allowed})")
            else:
                got = echo(json.dumps(err.get("input"), default=str), 120)
                lines.append(f"- argument '{arg}': expected {expected}, got {got} ({err['msg']})")
        if len(exc.errors()) > MAX_ARGUMENT_ERRORS:
            lines.append(f"- ... and {len(exc.errors()) - MAX_ARGUMENT_ERRORS} more")
        return "\n".join(lines)


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
) -> Any:
    """Turn a typed function (async preferred) into a `Tool`. Usable bare or with options:

    @tool
    async def search(query: str, k: int = 3) -> str:
        '''Search the corpus.

        Args:
            query: what to look for.
            k: how many documents to return.
        '''
    """

    def build(f: Callable[..., Any]) -> Tool:
        return _build_tool(f, name or f.__name__, timeout_s, max_output_chars)

    return build(fn) if fn is not None else build


def _build_tool(fn: Callable[..., Any], name: str, timeout_s: float, max_output_chars: int) -> Tool:
    where = f"tool '{name}'"
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"{where}: cannot read its type hints ({exc})") from None
    summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    if not summary:
        raise ToolDefinitionError(
            f"{where}: has no docstring; the model reads it to know what the tool does"
        )
    params = list(inspect.signature(fn).parameters.values())
    takes_self = bool(params) and params[0].name in ("self", "cls")
    fields: dict[str, Any] = {}
    hidden: list[str] = []
    for p in params[1:] if takes_self else params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"{where}: *{p.name} / **{p.name} cannot be described to the model; list the arguments"
            )
        if p.name not in hints:
            raise ToolDefinitionError(
                f"{where}: argument '{p.name}' has no type hint; the JSON schema the model sees is "
                f"built from type hints (write e.g. `{p.name}: str`)"
            )
        hint = hints[p.name]
        if _is_injected(hint):
            hidden.append(p.name)
            continue
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (hint, Field(default, description=arg_docs.get(p.name)))
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    try:
        model = create_model(f"{name}_arguments", __config__=config, **fields)
        schema = _clean_schema(model.model_json_schema())
    except Exception as exc:
        raise ToolDefinitionError(
            f"{where}: its argument types cannot be turned into a JSON schema ({exc})"
        ) from None
    return Tool(
        fn, name, summary, model, schema, tuple(hidden), takes_self, timeout_s, max_output_chars
    )


def _is_injected(hint: Any) -> bool:
    return typing.get_origin(hint) is Annotated and any(m is INJECTED for m in hint.__metadata__)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and `Args:` entries."""
    description: list[str] = []
    args: dict[str, str] = {}
    section = "description"
    current = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.rstrip(":") in ("Args", "Arguments", "Parameters") and stripped.endswith(":"):
            section = "args"
            continue
        if stripped.endswith(":") and stripped[:-1] in ("Returns", "Raises", "Yields", "Examples"):
            section = "other"
            continue
        if section == "description":
            description.append(line)
        elif section == "args" and stripped:
            head, sep, text = stripped.partition(":")
            key = head.split("(")[0].strip()
            if (
                sep
                and key.isidentifier()
                and line.startswith((" ", "\t"))
                and not line.startswith("        ")
            ):
                current = key
                args[current] = text.strip()
            elif current:
                args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(description).strip(), args


def _clean_schema(schema: Any) -> Any:
    """Drop pydantic's cosmetic `title` keys, which only lengthen the prompt."""
    if isinstance(schema, dict):
        return {
            k: _clean_schema(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)
        }
    if isinstance(schema, list):
        return [_clean_schema(v) for v in schema]
    return schema


def _expectation(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_expectation(p) for p in prop["anyOf"])
    kind = prop.get("type", "a value")
    if kind == "array" and "items" in prop:
        return f"array of {_expectation(prop['items'])}"
    return str(kind)


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
