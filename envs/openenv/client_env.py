"""toolgym/OpenEnv-v0: an OpenEnv environment server, played through openenv-core's own
client (a WebSocket session per env instance).

Observation: the server's observation as text: its `messages` when it sends chat messages (a
    toolgym env served over OpenEnv), else its one text field, else its fields as JSON;
    after a reset, the opening user message.
Tools: act(...), whose arguments are the server's action (its schema from GET /schema,
    less OpenEnv's `metadata`). With `text_field`, the model writes no call: its whole turn
    is the action's `text_field` (a text game's command, a served toolgym env's turn).
Reward: the server's reward for each step (none counts 0). Solved when the step that ends the
    episode pays at least 1 (OpenEnv says no more than that).
Reset: each episode opens a new session and sends the server `seed` (a seedless reset sends one
    drawn from the env's generator, so Gymnasium's seeding holds) with `reset_kwargs`.
Episode end: terminated when the server says done; truncated after `max_turns` turns.
state_key: a hash of the latest observation (the default).
Infrastructure: a server that cannot be reached, closes the session, times out, sends what is
    not an OpenEnv reply or fails a step is an infrastructure error (masked); the next reset
    opens a new session. An action the server refuses as invalid is the model's mistake.
Arguments: url (the server, http:// or ws://), serve (instead of a URL: a toolgym env id to
    serve locally with `toolgym serve env --protocol openenv`), text_field, instructions,
    reset_kwargs (sent with every reset, e.g. a task's settings), max_turns,
    connect_timeout_s, step_timeout_s, max_message_mb, plus ToolEnv's. With neither url nor
    serve it plays toolgym/Arithmetic-v0 served over OpenEnv, turns as text (a demo that needs
    nothing else, and what `toolgym check` runs).
Versions: v0, first release.
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import httpx
from openenv.core.generic_client import GenericEnvClient

from toolgym.envs.openenv.local_server import local_server
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError, one_line
from toolgym.tools.parsers import WholeTurnParser
from toolgym.tools.schema_tool import schema_check
from toolgym.tools.text import clip
from toolgym.tools.tool import (
    DEFAULT_MAX_OUTPUT_CHARS,
    AnyArguments,
    InfraError,
    Tool,
    ToolCallError,
)
from toolgym.tools.tool_source import Shared

ACT = "act"
DEMO_ENV = "toolgym/Arithmetic-v0"
MAX_SCHEMA_BYTES = 1 << 20
_REPLY_KEYS = ("reward", "done", "metadata")
"""Fields of an observation that are not its content."""


class OpenEnvEnv(ToolEnv):
    def __init__(
        self,
        url: str | None = None,
        serve: str | None = None,
        text_field: str | None = None,
        instructions: str = "",
        reset_kwargs: dict[str, Any] | None = None,
        max_turns: int = 20,
        connect_timeout_s: float = 10.0,
        step_timeout_s: float = 60.0,
        max_message_mb: float = 16.0,
        **kwargs: Any,
    ) -> None:
        if url is not None and serve is not None:
            raise ConfigError("give an OpenEnv server's url, or an env id to serve, not both")
        if url is None and serve is None:
            serve, text_field = DEMO_ENV, text_field or "message"
        if url is not None:
            _check_url(url)
        if text_field is not None:
            kwargs["parser"] = WholeTurnParser(ACT, text_field)
        super().__init__(max_turns=max_turns, tool_sources=[_ActionTool(self)], **kwargs)
        self.url = url
        self.serve = serve
        self.text_field = text_field
        self.instructions = instructions
        self.reset_kwargs = dict(reset_kwargs or {})
        self.connect_timeout_s = connect_timeout_s
        self.step_timeout_s = step_timeout_s
        self.max_message_mb = max_message_mb
        self.client: GenericEnvClient | None = None
        self._broken: GenericEnvClient | None = None
        """A session that failed mid-step, closed at the next reset."""
        self._outcome = Outcome()

    def system_prompt(self) -> str:
        if self.text_field is None:
            return super().system_prompt()
        parts = [self.instructions.strip(), self.parser.format_hint()]
        return "\n\n".join(p for p in parts if p)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """None to a chat template when the model writes text, not calls."""
        return [] if self.text_field is not None else super().tool_schemas()

    async def base_url(self) -> str:
        if self.url is not None:
            return self.url.rstrip("/")
        return await local_server(str(self.serve), self.shared)

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        await self._disconnect()  # one session per episode: nothing carries over
        client = GenericEnvClient(
            base_url=await self.base_url(), connect_timeout_s=self.connect_timeout_s,
            message_timeout_s=self.step_timeout_s, max_message_size_mb=self.max_message_mb,
        )  # fmt: skip
        self._outcome = Outcome()
        try:
            await client.connect()
            arguments = dict(self.reset_kwargs)
            arguments["seed"] = seed if seed is not None else int(self.np_random.integers(2**31))
            result = await client.reset(**arguments)
        except Exception as exc:
            await _quietly_disconnect(client)
            raise InfraError(
                f"the OpenEnv server could not start an episode: {_say(exc)}"
            ) from None
        self.client = client
        opening = observation_text(result.observation) or "(the environment shows nothing)"
        return [{"role": "user", "content": clip(opening, DEFAULT_MAX_OUTPUT_CHARS)}]

    async def act(self, action: dict[str, Any]) -> str:
        """Send one action; the observation's text back, the verdict kept for `outcome`."""
        client = self.client
        if client is None:
            raise InfraError("the session with the OpenEnv server was lost; the episode ends")
        try:
            result = await client.step(action)
        except RuntimeError as exc:
            if "VALIDATION_ERROR" in str(exc):  # the server's pydantic refused the action
                raise ToolCallError(f"the environment refused the action: {exc}") from None
            raise self._lost(exc) from None
        except Exception as exc:
            raise self._lost(exc) from None
        reward = result.reward
        if isinstance(reward, bool) or reward is None:
            reward = float(reward or 0)
        if not isinstance(reward, int | float) or not math.isfinite(reward):
            raise self._lost(ValueError(f"its reward {str(reward)[:40]!r} is not a number"))
        self._outcome = Outcome(float(reward), bool(result.done))
        text = observation_text(result.observation)
        if isinstance(result.observation, dict) and result.observation.get("valid_action") is False:
            raise ToolCallError(text)  # a served toolgym env could not use the turn
        return text

    def _lost(self, exc: BaseException) -> InfraError:
        self._broken, self.client = self.client, None
        return InfraError(f"the OpenEnv server failed the step: {_say(exc)}")

    def outcome(self) -> Outcome:
        outcome, self._outcome = self._outcome, Outcome()
        return outcome

    async def _disconnect(self) -> None:
        clients = (self.client, self._broken)
        self.client = self._broken = None
        for old in clients:
            if old is not None:
                await _quietly_disconnect(old)

    async def aclose(self) -> None:
        await self._disconnect()
        await super().aclose()


class _ActionTool:
    """The `act` tool, made from the server's action schema before the first episode."""

    def __init__(self, env: OpenEnvEnv) -> None:
        self.env = env

    async def load(self, shared: Shared) -> list[Tool]:
        env = self.env
        base = await env.base_url()
        try:
            async with httpx.AsyncClient(timeout=env.connect_timeout_s) as http:
                schema = await _get_json(http, f"{base}/schema")
                about = await _get_json(http, f"{base}/metadata")
        except (httpx.HTTPError, ValueError) as exc:
            raise InfraError(
                f"the OpenEnv server at {base} did not describe itself: {_say(exc)}"
            ) from None
        action = action_schema(schema)
        fields = action.get("properties", {})
        if env.text_field is not None and env.text_field not in fields:
            raise ConfigError(
                f"the OpenEnv server's action has no field {env.text_field!r} "
                f"(it has {', '.join(fields) or 'none'}); pass text_field= one of them"
            )
        check = schema_check(action, ACT)

        async def run(**arguments: Any) -> str:
            check(arguments)
            return await env.act(arguments)

        description = str(about.get("description") or about.get("name") or "")[:2000]
        timeout_s = env.step_timeout_s + env.connect_timeout_s
        text = f"Act in the environment. {description}".strip()
        return [Tool(run, ACT, text, AnyArguments, action, timeout_s=timeout_s)]


def _check_url(url: Any) -> None:
    try:
        scheme = httpx.URL(url).scheme
    except (httpx.InvalidURL, TypeError) as exc:
        raise ConfigError(f"url {str(url)[:200]!r} is not a URL: {one_line(exc)}") from None
    if scheme not in ("http", "https", "ws", "wss"):
        raise ConfigError(f"url {str(url)[:200]!r}: an OpenEnv server is at http(s):// or ws(s)://")


def action_schema(schema: Any) -> dict[str, Any]:
    """The action's JSON schema from GET /schema, without OpenEnv's own `metadata` field."""
    action = schema.get("action") if isinstance(schema, dict) else None
    if not isinstance(action, dict):
        raise InfraError("the OpenEnv server's /schema has no action schema")
    action = dict(action)
    properties = dict(action.get("properties") or {})
    properties.pop("metadata", None)
    action["properties"] = properties
    if isinstance(action.get("required"), list):
        action["required"] = [r for r in action["required"] if r != "metadata"]
    action.pop("title", None)
    return action


def observation_text(observation: Any) -> str:
    """What the model reads of an observation: chat messages' contents, the one text field,
    or the content fields as JSON."""
    if not isinstance(observation, dict):
        return json.dumps(observation, ensure_ascii=False, default=str)
    fields = {k: v for k, v in observation.items() if k not in _REPLY_KEYS}
    messages = fields.get("messages")
    if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
        return "\n\n".join(_content_text(m.get("content")) for m in messages)
    texts = [v for v in fields.values() if isinstance(v, str)]
    if len(fields) == 1 and len(texts) == 1:
        return texts[0]
    return json.dumps(fields, ensure_ascii=False, default=str)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "[image]") if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(str(p) for p in parts)
    return json.dumps(content, ensure_ascii=False, default=str)


async def _get_json(http: httpx.AsyncClient, url: str) -> Any:
    async with http.stream("GET", url) as response:
        response.raise_for_status()
        body = b""
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_SCHEMA_BYTES:
                raise ValueError(f"{url} sent over {MAX_SCHEMA_BYTES >> 20} MiB")
    return json.loads(body)


async def _quietly_disconnect(client: GenericEnvClient) -> None:
    with contextlib.suppress(Exception):  # the session is gone either way
        await client.disconnect()


def _say(exc: BaseException) -> str:
    text = one_line(exc, 500)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
