"""A toolgym episode as a verifiers Trace, so the task's own rewards, metrics and stops read
what they would read after a verifiers rollout: the messages (the model's turns marked as
sampled, their tool calls parsed), the tools, the task."""

from __future__ import annotations

import json
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.graph import MessageNode
from verifiers.v1.state import state_cls
from verifiers.v1.trace import AgentInfo, TraceTask
from verifiers.v1.types import (
    AssistantMessage,
    ImageUrlContentPart,
    ImageUrlSource,
    SystemMessage,
    TextContentPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from toolgym.envs.core import Message
from toolgym.tools.parsers import ActionParser
from toolgym.tools.parsers.base import parse_safely


def episode_trace(
    task: vf.Task, transcript: list[Message], schemas: list[dict[str, Any]], parser: ActionParser
) -> vf.Trace:
    nodes, turn = [], 0
    for i, m in enumerate(transcript):
        turn += m["role"] == "assistant"
        message = _message(m, turn, parser)
        nodes.append(
            MessageNode(
                parent=i - 1 if i else None, message=message, sampled=m["role"] == "assistant"
            )
        )
    tools = [vf.Tool.model_validate(s["function"]) for s in schemas]
    return vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=AgentInfo(config=vf.AgentConfig()), nodes=nodes, tools=tools,
        state=state_cls(type(task))(), is_completed=True, ok=True,
    )  # fmt: skip


def _message(message: Message, turn: int, parser: ActionParser) -> Any:
    """As a verifiers message; an assistant turn's calls get the ids the env gave them."""
    role, content = message["role"], message.get("content")
    if role == "assistant":
        text = content if isinstance(content, str) else ""
        calls = [
            ToolCall(id=f"call_{turn}_{n}", name=c.name, arguments=json.dumps(c.arguments))
            for n, c in enumerate(parse_safely(parser, text).calls)
        ]
        return AssistantMessage(content=text, tool_calls=calls or None)
    parts = _content(content)
    if role == "tool":
        return ToolMessage(
            tool_call_id=str(message.get("tool_call_id", "")), content=parts,
            name=message.get("name"),
        )  # fmt: skip
    if role == "system":
        return SystemMessage(content=parts)
    return UserMessage(content=parts)


def _content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[Any] = []
    for part in content or []:
        if part.get("type") == "image_url":
            parts.append(
                ImageUrlContentPart(image_url=ImageUrlSource(url=part["image_url"]["url"]))
            )
        else:
            parts.append(TextContentPart(text=str(part.get("text", ""))))
    return parts
