"""What a served toolgym env sends and takes over OpenEnv: the action (the model's turn as
it wrote it) and the observation (the env's messages and its verdict on the turn), as
openenv-core's own Action and Observation types."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation
from pydantic import Field

MAX_TURN_CHARS = 1 << 20
"""The longest turn a client may send (a model's turn is far shorter)."""
MAX_FRAME_BYTES = 8 << 20
"""The longest WebSocket frame the server reads (a turn of MAX_TURN_CHARS, JSON-escaped)."""


class TurnAction(Action):
    message: str = Field(
        ...,
        max_length=MAX_TURN_CHARS,
        description="The model's turn as it wrote it: text with tool calls in the env's "
        "format (Hermes <tool_call> blocks by default).",
    )


class TurnObservation(Observation):
    messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The env's messages: the system and opening messages after a reset, tool "
        "results and feedback after a step.",
    )
    tools: list[dict[str, Any]] = Field(
        default_factory=list,
        description="OpenAI function schemas of the env's tools (after a reset), for a chat "
        "template's tools=.",
    )
    truncated: bool = Field(default=False, description="The episode hit its turn limit.")
    valid_action: bool = Field(default=True, description="The turn could be fully used.")
    error: str | None = Field(default=None, description="What was wrong with the turn.")
    infra_error: str | None = Field(
        default=None, description="The env's own failure this turn (a trainer masks it)."
    )
    state_key: str = Field(default="", description="The env's key of the state reached.")
