"""Typed records for one tool call and its result, shared by parsers, tools and envs."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """A call the model asked for: a tool name and its JSON arguments. The env gives it an id
    that depends only on the turn and position, so replays of an episode are identical."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


class ToolErrorKind(enum.StrEnum):
    """Why a call failed. Only INFRA is not the policy's fault (masked from training)."""

    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGUMENTS = "invalid_arguments"
    TIMEOUT = "timeout"
    EXCEPTION = "exception"
    """The tool raised: a bug in the tool or env (reported, never the policy's fault)."""
    INFRA = "infra"
    NOT_RUN = "not_run"
    """A call after the one that ended the episode."""


@dataclass(frozen=True)
class ToolReply:
    """What a tool returns when it has pictures to show as well as text (an MCP server's
    image content): the env shows the images in a message after the tool's."""

    text: str
    images: tuple[str, ...] = ()
    """Data URLs (data:image/png;base64,...), already bounded by the tool."""


@dataclass
class ToolResult:
    """What a call produced: text for the model, plus how it went."""

    call: ToolCall
    content: str
    error: ToolErrorKind | None = None
    elapsed_s: float = 0.0
    images: tuple[str, ...] = ()
    """Data URLs of the pictures the tool returned (shown after the tool's message)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-format `tool` message that carries this result back to the model."""
        return {
            "role": "tool",
            "tool_call_id": self.call.id,
            "name": self.call.name,
            "content": self.content,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.call.to_dict(),
            "content": self.content,
            "error": self.error.value if self.error else None,
            "elapsed_s": round(self.elapsed_s, 6),
        }
