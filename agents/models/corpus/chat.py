"""Conversations rendered as the built-in models' chat template writes them, and the tool-call
text of the hermes format that toolgym's envs parse."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from toolgym.agents.models.corpus.strings import Strings

Message = dict[str, Any]


def render(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    from toolgym.agents.models.fresh import CHAT_TEMPLATE

    rendered = render_jinja_template(
        [messages], tools=list(tools) if tools else None, chat_template=CHAT_TEMPLATE
    )
    return str(rendered[0][0])


def tool_call(strings: Strings, name: str, arguments: dict[str, Any]) -> str:
    """A call as an env's hermes parser renders it (usually on its own lines)."""
    body = json.dumps({"name": name, "arguments": arguments})
    if strings.rng.random() < 0.8:
        return f"<tool_call>\n{body}\n</tool_call>"
    return f"<tool_call>{body}</tool_call>"


def schema(name: str, description: str, params: dict[str, str]) -> dict[str, Any]:
    """An OpenAI-style function schema with string parameters."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
                "required": list(params),
            },
        },
    }


def system_prompt(instructions: str, tools: list[dict[str, Any]]) -> str:
    """Instructions and a tool list as toolgym's envs write them into their system message."""
    listing = "\n".join(f"- {t['function']['name']}: {t['function']['description']}" for t in tools)
    return (
        f"{instructions}\n\nTools:\n{listing}\n\nCall a tool by writing "
        '<tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>.'
    )


def conversations(strings: Strings, chars: int, conversation: Callable[[Strings], str]) -> str:
    """Rendered conversations, one after another, until about `chars` characters."""
    parts: list[str] = []
    size = 0
    while size < chars or not parts:
        parts.append(conversation(strings))
        size += len(parts[-1])
    return "".join(parts)
