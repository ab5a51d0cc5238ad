"""A toolgym env served over OpenEnv's protocol (`toolgym serve env ENV_ID --protocol
openenv`), so openenv-core's clients (and trainers built on them, such as TRL's OpenEnv
rollouts) can play and train on it.

Each WebSocket session gets an env instance of its own (up to `max_sessions`; a session idle
for `idle_timeout_s` is closed). The action is the model's turn as it wrote it, in the env's
own format (Hermes `<tool_call>` blocks for a tool env); the observation carries the env's
messages and what its info says about the turn. OpenEnv has one `done`; toolgym's truncation
is the `truncated` field. The plain HTTP endpoints (POST /reset, /step) build a fresh env per
request, as openenv-core does for every env, so an episode is played over the WebSocket.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import uuid
from typing import Any

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import (
    Action,
    ConcurrencyConfig,
    EnvironmentMetadata,
    Observation,
    State,
)
from pydantic import Field

from toolgym.envs.core import Env
from toolgym.envs.registration import make
from toolgym.errors import ConfigError

MAX_TURN_CHARS = 1 << 20
"""The longest turn a client may send (a model's turn is far shorter)."""
CLOSE_TIMEOUT_S = 30.0


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


class ToolgymEnvironment(Environment[TurnAction, TurnObservation, State]):
    """One session's toolgym env, behind OpenEnv's Environment interface (asynchronous:
    toolgym envs are)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]) -> None:
        super().__init__()
        made = make(env_id, **env_kwargs)
        env = made.unwrapped
        if not isinstance(env, Env):
            raise ConfigError(f"{env_id} is not a toolgym env: it cannot be served")
        self.env_id = env_id
        self.env = env
        self._state = State(episode_id=None, step_count=0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Task[None] | None = None

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> TurnObservation:
        """A new episode: train task `seed` of the env, or the given `task` (its fields)."""
        self._loop = asyncio.get_running_loop()
        options = {"task": task} if task is not None else None
        messages, info = await self.env.areset(seed=seed, options=options)
        self._state = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        return TurnObservation(
            messages=messages, tools=list(info.get("tools") or []),
            state_key=str(info["state_key"]), reward=None, done=False,
        )  # fmt: skip

    async def step_async(
        self, action: TurnAction, timeout_s: float | None = None, **kwargs: Any
    ) -> TurnObservation:
        messages, reward, terminated, truncated, info = await self.env.astep(action.message)
        self._state.step_count += 1
        return TurnObservation(
            messages=messages, reward=float(reward), done=bool(terminated or truncated),
            truncated=bool(truncated and not terminated), valid_action=bool(info["valid_action"]),
            error=info.get("error"), infra_error=info.get("infra_error"),
            state_key=str(info["state_key"]),
        )  # fmt: skip

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError("a toolgym env is served asynchronously (reset_async)")

    def step(self, action: TurnAction, timeout_s: float | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError("a toolgym env is served asynchronously (step_async)")

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        module = sys.modules.get(type(self.env).__module__)
        doc = (getattr(module, "__doc__", None) or self.env_id).strip()
        return EnvironmentMetadata(
            name=self.env_id, description=doc.split("\n\n")[0][:2000], version="1.0.0"
        )

    def close(self) -> None:
        """Called by the server in a worker thread: the env's resources live on the server's
        event loop, so they are closed there."""
        loop, self._loop = self._loop, None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:  # an endpoint that made an env just to describe it
            self._closing = running.create_task(self.env.aclose())
        elif loop is None or loop.is_closed():
            self.env.close()  # never reset: nothing is bound to a loop yet
        else:
            future = asyncio.run_coroutine_threadsafe(self.env.aclose(), loop)
            future.result(timeout=CLOSE_TIMEOUT_S)


def openenv_app(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    max_sessions: int = 32,
    idle_timeout_s: float | None = 600.0,
) -> Any:
    """The FastAPI app that serves `env_id` (made with `env_kwargs`) over OpenEnv."""
    make(env_id, **dict(env_kwargs or {})).close()  # a bad id or argument fails here, in words
    factory = functools.partial(ToolgymEnvironment, env_id, dict(env_kwargs or {}))
    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s)
    return create_fastapi_app(factory, TurnAction, TurnObservation, concurrency_config=config)
