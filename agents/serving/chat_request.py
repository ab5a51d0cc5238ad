"""A chat request's messages, tools and tool_choice, checked against the `openai` package's own
types (so the server accepts what the official client sends, and a gap cannot open between
the two) and then made ready for a chat template.

Where vLLM is more lenient than OpenAI's types, this follows vLLM: a tool message needs no
`tool_call_id` (Hermes-style templates do not use it) and Llama's `ipython` role is a tool
message. For the template, `developer` becomes `system`, a content of None becomes "", text
parts are joined, and each tool call's JSON `arguments` string becomes the object templates
expect to serialise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionDeveloperMessageParam,
    ChatCompletionFunctionMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionSystemMessageParam,
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from pydantic import TypeAdapter, ValidationError

from toolgym.agents.serving.protocol import ApiError

_MESSAGE: dict[str, TypeAdapter[Any]] = {
    "system": TypeAdapter(ChatCompletionSystemMessageParam),
    "developer": TypeAdapter(ChatCompletionDeveloperMessageParam),
    "user": TypeAdapter(ChatCompletionUserMessageParam),
    "assistant": TypeAdapter(ChatCompletionAssistantMessageParam),
    "tool": TypeAdapter(ChatCompletionToolMessageParam),
    "ipython": TypeAdapter(ChatCompletionToolMessageParam),
    "function": TypeAdapter(ChatCompletionFunctionMessageParam),
}
_TOOL: TypeAdapter[Any] = TypeAdapter(ChatCompletionFunctionToolParam)
_TOOL_CHOICE: TypeAdapter[Any] = TypeAdapter(ChatCompletionToolChoiceOptionParam)


@dataclass(frozen=True)
class ToolChoice:
    """What the reply must be: "none" (text only), "auto" (the model decides), "required"
    (some tool call) or "function" (a call of `name`)."""

    mode: str
    name: str | None = None


def template_messages(messages: list[Any], images: bool = False) -> list[dict[str, Any]]:
    """The messages, checked, in the form chat templates render. Raises ApiError (400).
    With `images` (a vision-language model), image_url parts stay in their message's list
    of parts; otherwise a message's parts must all be text, and are joined."""
    return [_message(m, f"messages[{i}]", images) for i, m in enumerate(messages)]


def template_tools(tools: list[Any] | None) -> list[dict[str, Any]]:
    for i, tool in enumerate(tools or []):
        _check(_TOOL, tool, f"tools[{i}]", "tools")
    return list(tools or [])


def tool_choice(value: Any, tools: list[dict[str, Any]]) -> ToolChoice:
    """The request's tool_choice; OpenAI's default is "auto" with tools, "none" without."""
    if value is None:
        return ToolChoice("auto" if tools else "none")
    choice = _check(_TOOL_CHOICE, value, "tool_choice", "tool_choice")
    if choice == "none":
        return ToolChoice("none")
    if not tools:
        raise ApiError(400, f"tool_choice {value!r} needs `tools`", param="tool_choice")
    if isinstance(choice, str):
        return ToolChoice(choice)
    if choice.get("type") != "function":
        raise ApiError(
            400, f"tool_choice of type {choice.get('type')!r} is not supported; "
            "name a function or use 'auto' or 'required'", param="tool_choice",
        )  # fmt: skip
    name = choice["function"]["name"]
    known = [t["function"]["name"] for t in tools]
    if name not in known:
        raise ApiError(
            400, f"tool_choice names {name!r}, which is not among the tools {known}",
            param="tool_choice",
        )  # fmt: skip
    return ToolChoice("function", name)


def _message(message: Any, where: str, images: bool) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise ApiError(
            400, f"{where}: a message must be an object, got {type(message).__name__}",
            param="messages",
        )  # fmt: skip
    role = message.get("role")
    if not isinstance(role, str) or role not in _MESSAGE:
        raise ApiError(
            400, f"{where}: message role {role!r} is not one of {sorted(_MESSAGE)}",
            param="messages",
        )  # fmt: skip
    checked = message
    if role in ("tool", "ipython") and "tool_call_id" not in message:
        checked = {**message, "tool_call_id": ""}
    _check(_MESSAGE[role], checked, where, "messages")
    out = dict(message)
    out["role"] = "system" if role == "developer" else role
    out["content"] = _content(message.get("content"), where, images)
    if message.get("tool_calls"):
        out["tool_calls"] = [
            _call(c, f"{where}.tool_calls[{k}]") for k, c in enumerate(message["tool_calls"])
        ]
    return out


def _content(content: Any, where: str, images: bool) -> str | list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return content or ""
    readable = ("text", "image_url") if images else ("text",)
    parts: list[dict[str, Any]] = []
    for k, part in enumerate(content):
        if part.get("type") not in readable:
            raise ApiError(
                400, f"{where}.content[{k}]: this server's model reads "
                f"{' and '.join(readable)} parts, not {part.get('type')!r}", param="messages",
            )  # fmt: skip
        if part["type"] == "text":
            parts.append({"type": "text", "text": part["text"]})
        else:
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]["url"]}})
    if any(p["type"] == "image_url" for p in parts):
        return parts
    return "\n".join(p["text"] for p in parts)


def _call(call: dict[str, Any], where: str) -> dict[str, Any]:
    if call.get("type") != "function":
        raise ApiError(400, f"{where}: only function tool calls are supported", param="messages")
    function = call["function"]
    try:
        arguments = json.loads(function["arguments"])
    except ValueError:  # not JSON, or a number too long to read
        arguments = function["arguments"]  # the model's own malformed call, kept as written
    return {**call, "function": {"name": function["name"], "arguments": arguments}}


def _check(adapter: TypeAdapter[Any], value: Any, where: str, param: str) -> Any:
    try:
        return _materialize(adapter.validate_python(value), ())
    except ValidationError as exc:
        first = exc.errors()[0]
        problem = _Invalid(first["loc"], first["msg"])
    except _Invalid as lazy:
        problem = lazy
    raise ApiError(400, f"{where}{problem.where()}: {problem.message}", param=param)


class _Invalid(Exception):
    def __init__(self, loc: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.loc, self.message = loc, message

    def where(self) -> str:
        """The field path, without pydantic's union-member tags (type names)."""
        parts = [p for p in self.loc if not (isinstance(p, str) and _is_tag(p))]
        return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _is_tag(part: str) -> bool:
    return part[:1].isupper() or part == "str" or "[" in part


def _materialize(value: Any, path: tuple[Any, ...]) -> Any:
    """pydantic checks `Iterable` fields (tool_calls, content parts) lazily, as they are read:
    read them all now, so an error is the request's 400, not a failure later."""
    if isinstance(value, dict):
        return {k: _materialize(v, (*path, k)) for k, v in value.items()}
    if isinstance(value, list | Iterator):
        items: list[Any] = []
        iterator = iter(value)
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                return items
            except ValidationError as exc:
                first = exc.errors()[0]
                raise _Invalid((*path, *first["loc"]), first["msg"]) from None
            items.append(_materialize(item, (*path, len(items))))
    return value
