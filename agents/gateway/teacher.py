"""A teacher behind the gateway: your agent plays its episodes as it would against the policy,
but each call is answered by the teacher, and the reply is recorded in the policy's own
tokens, as its chat template writes that reply (ChatReplies.written). The episodes are then
demonstrations the policy can imitate token for token: the prompts are the ones your agent
will send it, the replies the ones it should write (toolgym warm-start).

The teacher is any OpenAI-compatible chat endpoint (a hosted model, `toolgym serve model` of
another local model) or a Python function `reply(messages, tools)` that returns the
assistant's text or a message (`{"content": ..., "tool_calls": [{"name", "arguments"}]}`):
a scripted solver written for your agent's own tools.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any, Protocol

from toolgym.agents.engines.base import Completion, SamplingParams
from toolgym.agents.render import ChatRenderer
from toolgym.agents.serving.chat_reply import ChatReplies
from toolgym.errors import ConfigError
from toolgym.imports import load_callable

Message = dict[str, Any]


class Replies(Protocol):
    """Where a teacher's replies come from."""

    name: str

    async def reply(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        """The assistant message for this conversation: `content` and `tool_calls` (each a
        name and its arguments)."""
        ...

    async def aclose(self) -> None: ...


class Teacher:
    """Answers the gateway's calls with `replies`, written in the policy's tokens."""

    def __init__(self, replies: Replies, renderer: ChatRenderer, tokenizer: Any) -> None:
        self.replies, self.renderer = replies, renderer
        self.chat = ChatReplies(renderer, tokenizer)

    async def write(
        self, messages: list[Message], tools: list[dict[str, Any]], forced_text: str,
        sampling: SamplingParams,
    ) -> Completion:  # fmt: skip
        """The teacher's reply as the policy's completion (log-probabilities 0: nobody
        sampled it), after a forced tool-call opening where the call has one, and cut at
        `sampling.max_tokens` as a sampled reply would be."""
        message = await self.replies.reply(messages, tools)
        text = self.chat.written(str(message.get("content") or ""), message["tool_calls"])
        text = text.removeprefix(forced_text) if forced_text else text
        ids = self.renderer.encode_plain(text) + self.renderer.closing_ids()
        finish = "stop"
        if len(ids) > sampling.max_tokens:
            ids, finish = ids[: sampling.max_tokens], "length"
            text = self.renderer.tokenizer.decode(ids, skip_special_tokens=True)
        return Completion(ids, [0.0] * len(ids), text, finish, prompt_tokens=0)

    async def aclose(self) -> None:
        await self.replies.aclose()


class EndpointReplies:
    """An OpenAI-compatible chat endpoint's replies, greedy unless told otherwise."""

    def __init__(
        self, base_url: str, model: str, api_key: str = "unused", temperature: float = 0.0
    ) -> None:
        from openai import AsyncOpenAI

        self.name, self.model, self.temperature = base_url, model, temperature
        self.client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=2)

    async def reply(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        answer = await self.client.chat.completions.create(
            model=self.model, messages=_sendable(messages), tools=tools or None,  # type: ignore[arg-type]
            temperature=self.temperature,
        )  # fmt: skip
        message = answer.choices[0].message
        calls = [
            {"name": c.function.name, "arguments": _arguments(c.function.arguments)}
            for c in message.tool_calls or []
            if c.type == "function"
        ]
        return {"content": message.content, "tool_calls": calls}

    async def aclose(self) -> None:
        await self.client.close()


class FunctionReplies:
    """`reply(messages, tools)`, plain or async: a string (the assistant's text) or a message."""

    def __init__(self, function: Callable[..., Any], name: str) -> None:
        self.function, self.name = function, name

    async def reply(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        if inspect.iscoroutinefunction(self.function):
            given = await self.function(messages, tools)
        else:
            given = await asyncio.to_thread(self.function, messages, tools)
        if isinstance(given, str):
            return {"content": given, "tool_calls": []}
        if not isinstance(given, dict):
            raise TypeError(
                f"the teacher {self.name} returned {type(given).__name__}; return the reply's "
                "text or a message {'content': ..., 'tool_calls': [{'name', 'arguments'}]}"
            )
        calls = given.get("tool_calls") or []
        if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
            raise TypeError(f"the teacher {self.name} returned tool calls without a name")
        return {"content": given.get("content"),
                "tool_calls": [{"name": c["name"], "arguments": c.get("arguments", {})}
                               for c in calls]}  # fmt: skip

    async def aclose(self) -> None:
        pass


def teacher_replies(spec: str, model: str = "teacher", api_key: str = "unused") -> Replies:
    """The teacher `spec` names: an endpoint's base URL (http://...: `model` at it) or a
    function (path/to/file.py:function or package.module:function)."""
    if spec.startswith(("http://", "https://")):
        return EndpointReplies(spec, model, api_key)
    if ":" not in spec or "://" in spec:
        raise ConfigError(
            f"--teacher {spec[:200]!r}: give an OpenAI-compatible endpoint's base URL "
            "(http://host:port/v1) or a function (path/to/file.py:function)"
        )
    return FunctionReplies(load_callable(spec, "--teacher"), spec)


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # the teacher's own malformed call, kept as it wrote it


def _sendable(messages: list[Message]) -> list[Message]:
    """The call's messages as a chat endpoint takes them back: tool calls' arguments as
    JSON text again (the gateway reads them into objects for the template)."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = [
                {**c, "function": {**c["function"], "arguments": _text(c["function"]["arguments"])}}
                for c in m["tool_calls"]
            ]
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


def _text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
