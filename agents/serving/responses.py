"""The Responses API (`POST /v1/responses`) read as the chat request it amounts to, and a chat
answer written back as a response: what lets a client built on it (the OpenAI Agents SDK's
default model) talk to a server that samples chats.

A request's `instructions` become a system message, its message items chat messages, each
`function_call` item a tool call of the assistant message before it (or of a new one) and
each `function_call_output` item a tool message, so a client that sends the conversation back
as it was given continues it. Function tools and `tool_choice` become their chat forms.
Reasoning items are skipped (nothing here writes them). What this cannot honour is refused in
words: another kind of item or tool, images and files, and `previous_response_id` or
`conversation` (nothing is stored: a client sends the whole input, as the Agents SDK does
unless told otherwise).
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolgym.agents.serving.protocol import ApiError, ChatRequest


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    input: str | list[Any]
    instructions: str | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    stream: bool = False
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    conversation: Any = None
    user: str | None = Field(default=None, max_length=256)

    def chat(self) -> ChatRequest:
        """The chat request this one amounts to (ApiError 400 for what it cannot honour)."""
        if self.previous_response_id or self.conversation:
            asked = "previous_response_id" if self.previous_response_id else "conversation"
            raise ApiError(
                400, f"{asked}: this server stores no responses; send the whole conversation "
                "as `input`", param=asked,
            )  # fmt: skip
        messages = [{"role": "system", "content": self.instructions}] if self.instructions else []
        items = (
            [{"role": "user", "content": self.input}] if isinstance(self.input, str) else self.input
        )
        for index, item in enumerate(items):
            _add_item(messages, item, f"input[{index}]")
        if not messages:
            raise ApiError(400, "input: the request has nothing to answer", param="input")
        tools = [_chat_tool(t, f"tools[{i}]") for i, t in enumerate(self.tools or [])]
        return ChatRequest(
            model=self.model, messages=messages, tools=tools or None,
            tool_choice=_chat_tool_choice(self.tool_choice), temperature=self.temperature,
            top_p=self.top_p, max_completion_tokens=self.max_output_tokens, user=self.user,
        )  # fmt: skip


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str
    text: str | None = None
    refusal: str | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[_Part]


class _FunctionCall(BaseModel):
    model_config = ConfigDict(extra="ignore")

    call_id: str = Field(max_length=256)
    name: str = Field(max_length=256)
    arguments: str


class _FunctionOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")

    call_id: str = Field(max_length=256)
    output: str | list[_Part]


_TEXT_PARTS = ("input_text", "output_text", "refusal")


def _add_item(messages: list[dict[str, Any]], item: Any, where: str) -> None:
    if not isinstance(item, dict):
        raise ApiError(400, f"{where}: an input item must be an object", param="input")
    kind = item.get("type", "message")
    if kind == "message":
        message = _read(_Message, item, where)
        messages.append({"role": message.role, "content": _text(message.content, where)})
    elif kind == "function_call":
        call = _read(_FunctionCall, item, where)
        tool_call = {"id": call.call_id, "type": "function",
                     "function": {"name": call.name, "arguments": call.arguments}}  # fmt: skip
        last = messages[-1] if messages else None
        if last is None or last["role"] != "assistant":
            last = {"role": "assistant", "content": None}
            messages.append(last)
        last["tool_calls"] = [*last.get("tool_calls", []), tool_call]
    elif kind == "function_call_output":
        output = _read(_FunctionOutput, item, where)
        messages.append({"role": "tool", "tool_call_id": output.call_id,
                         "content": _text(output.output, f"{where}.output")})  # fmt: skip
    elif kind != "reasoning":
        raise ApiError(
            400, f"{where}: input items of type {str(kind)[:64]!r} are not served here; this "
            "server reads message, function_call and function_call_output items", param="input",
        )  # fmt: skip


def _text(content: str | list[_Part], where: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for k, part in enumerate(content):
        if part.type not in _TEXT_PARTS:
            raise ApiError(
                400, f"{where}.content[{k}]: this server's model reads text parts, not "
                f"{part.type[:64]!r}", param="input",
            )  # fmt: skip
        texts.append(part.text if part.type != "refusal" else part.refusal)
    return "\n".join(t or "" for t in texts)


def _read(model: type[Any], item: dict[str, Any], where: str) -> Any:
    try:
        return model.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ApiError(400, f"{where}.{field}: {first['msg']}", param="input") from None


def _chat_tool(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else type(tool).__name__
        raise ApiError(
            400, f"{where}: only function tools are served here, not {str(kind)[:64]!r}",
            param="tools",
        )  # fmt: skip
    function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
    return {"type": "function", "function": function}


def _chat_tool_choice(choice: Any) -> Any:
    if choice is None or isinstance(choice, str):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    kind = choice.get("type") if isinstance(choice, dict) else type(choice).__name__
    raise ApiError(
        400, f"tool_choice of type {str(kind)[:64]!r} is not served here; name a function or "
        "use 'auto', 'none' or 'required'", param="tool_choice",
    )  # fmt: skip


def response_object(
    body: ResponsesRequest, message: dict[str, Any], finish: str, prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:  # fmt: skip
    """A chat answer (`message`, its finish reason, its token counts) as a response: its text
    as a message item, each tool call a function_call item, a reply cut at its token limit
    "incomplete" (as OpenAI answers one)."""
    output: list[dict[str, Any]] = []
    calls = message.get("tool_calls") or []
    if message.get("content") or not calls:
        part: dict[str, Any] = {"type": "output_text", "text": message.get("content") or "", "annotations": [],
                "logprobs": []}  # fmt: skip
        output.append({"type": "message", "id": f"msg_{uuid.uuid4().hex}", "status": "completed",
                       "role": "assistant", "content": [part]})  # fmt: skip
    for call in calls:
        output.append({
            "type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": call["id"],
            "name": call["function"]["name"], "arguments": call["function"]["arguments"],
            "status": "completed",
        })  # fmt: skip
    cut = finish == "length"
    return {
        "id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed", "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "model": body.model, "output": output, "instructions": body.instructions,
        "tools": body.tools or [], "tool_choice": body.tool_choice or "auto",
        "parallel_tool_calls": body.parallel_tool_calls, "temperature": body.temperature,
        "top_p": body.top_p, "max_output_tokens": body.max_output_tokens, "metadata": {},
        "usage": {
            "input_tokens": prompt_tokens, "output_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }  # fmt: skip


def response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole response as the server-sent events a streaming client reads: created, each
    output item added, its text or arguments, done, then completed (or incomplete)."""
    events: list[dict[str, Any]] = []
    opening = {**response, "status": "in_progress", "output": [], "incomplete_details": None}
    events += [{"type": "response.created", "response": opening},
               {"type": "response.in_progress", "response": opening}]  # fmt: skip
    for index, item in enumerate(response["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            part = item["content"][0]
            empty = {**part, "text": ""}
            events += [
                {"type": "response.output_item.added", "output_index": index,
                 "item": {**item, "status": "in_progress", "content": []}},
                {"type": "response.content_part.added", **at, "content_index": 0, "part": empty},
                {"type": "response.output_text.delta", **at, "content_index": 0,
                 "delta": part["text"], "logprobs": []},
                {"type": "response.output_text.done", **at, "content_index": 0,
                 "text": part["text"], "logprobs": []},
                {"type": "response.content_part.done", **at, "content_index": 0, "part": part},
            ]  # fmt: skip
        else:
            events += [
                {"type": "response.output_item.added", "output_index": index,
                 "item": {**item, "status": "in_progress", "arguments": ""}},
                {"type": "response.function_call_arguments.delta", **at,
                 "delta": item["arguments"]},
                {"type": "response.function_call_arguments.done", **at, "name": item["name"],
                 "arguments": item["arguments"]},
            ]  # fmt: skip
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    last = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    events.append({"type": last, "response": response})
    return [{**event, "sequence_number": k} for k, event in enumerate(events)]
