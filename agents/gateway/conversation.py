"""How the gateway tells that a call continues its session: each message reduced to what a
chat template renders of it (role, text, tool calls by name and arguments), so a harness
that echoes the reply back in its own way (content None or "", arguments re-serialised, call
ids of its own, whitespace trimmed) still continues the conversation, and one that changed
what the model reads does not."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

MessageKey = str
"""A message as the model reads it, as canonical JSON."""

_ROLES = {"developer": "system", "ipython": "tool"}


def message_key(message: dict[str, Any]) -> MessageKey:
    """`message` (in the form chat_request.template_messages gives: its text parts already
    joined) as the model reads it."""
    role = str(message.get("role"))
    calls = [
        [call["function"]["name"], call["function"]["arguments"]]
        for call in message.get("tool_calls") or []
    ]
    return json.dumps(
        [_ROLES.get(role, role), str(message.get("content") or "").strip(), calls],
        sort_keys=True, ensure_ascii=False, default=str,
    )  # fmt: skip


def reply_key(content: str | None, calls: Sequence[tuple[str, Any]]) -> MessageKey:
    """The key of the assistant message the gateway answered with (calls: name, arguments)."""
    message = {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"function": {"name": n, "arguments": a}} for n, a in calls],
    }
    return message_key(message)


def tools_key(tools: Sequence[dict[str, Any]]) -> str:
    return json.dumps(list(tools), sort_keys=True, ensure_ascii=False, default=str)


def state_key(history: Sequence[MessageKey], tools: str) -> str:
    """The conversation so far, hashed: copies of a task that reached the same conversation
    share a state (GiGPO's anchor), whatever their session."""
    digest = hashlib.sha256(tools.encode())
    for key in history:
        digest.update(b"\x00" + key.encode())
    return digest.hexdigest()[:16]
