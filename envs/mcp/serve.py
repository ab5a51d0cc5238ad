"""An env's tools served as an MCP server (`toolgym serve mcp ENV_ID`), so any MCP client
(an agent framework, a chat app, another trainer) can use toolgym's search, sandbox, SQL or
browser tools.

Each client session plays one episode of the env, on the task the operator chose (`seed`,
`task`), in an env of its own: tools that keep state (a browser page, a Python session) keep
it for that client alone. Each call is a turn (`ToolEnv.acall`): it counts against the env's
turn limit, and once the episode is over (the task ended, or its turns ran out) further calls
are refused, so the verdict a client reads is final.

- stdio: a client starts its own server process, whose one env is its session.
- HTTP: a client of the handshake protocol (2025-11-25 and before) is known by the session
  the SDK opened for it, as the gate (envs/mcp/gate.py) checked; one of the 2026-07-28
  protocol has no session, so each of its calls is a fresh episode, whatever session id it
  sends. Sessions and single calls share one cap (`max_sessions`) and one idle rule
  (`idle_timeout_s`), and all envs share the server's resources (envs/serving.py).

A call's result is the tool's text (images as image content); a call the tool refuses is an
`isError` result in the tool's words, and the env's verdict after the call (its reward, and
whether the episode ended) rides in the result's `_meta` under "toolgym".
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from toolgym.envs.core import Env
from toolgym.envs.mcp.gate import SessionGate, request_session
from toolgym.envs.mcp.stdio import stdio_streams
from toolgym.envs.serving import CapacityError, EnvHost, SessionEnded
from toolgym.envs.tool_env import EpisodeOverError, ToolEnv
from toolgym.errors import ConfigError, one_line
from toolgym.log import get_logger
from toolgym.tools.records import ToolCall, ToolResult
from toolgym.tools.text import clean_text

log = get_logger(__name__)

STDIO = "stdio"
_DATA_URL = re.compile(r"^data:(image/[\w.+-]+);base64,(.*)$", re.DOTALL)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class EnvToolServer:
    """The tools of `env_id` (built with `env_kwargs`), one episode per client session.

    Args:
        seed: the reset seed of each session's episode (train task `seed` of the env).
        task: a task to play instead (the env's task fields; the operator's, so trusted).
        max_sessions: the most envs alive at once over HTTP (sessions and single calls).
        idle_timeout_s: an HTTP session unused this long is closed (None: never).
        episode_per_call: every call is an episode of its own, in a fresh env, for a client
            that uses the tools as plain tools across many episodes of its own (a session's
            one episode would carry one episode's state and turns into the next).
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any] | None = None,
        seed: int = 0,
        task: dict[str, Any] | None = None,
        max_sessions: int = 32,
        idle_timeout_s: float | None = 600.0,
        episode_per_call: bool = False,
    ) -> None:
        self.env_id = env_id
        self.episode_per_call = episode_per_call
        self.seed = seed
        self.options = {"task": task} if task is not None else None
        self.host = EnvHost(env_id, env_kwargs, max_sessions, idle_timeout_s)
        self._tools: list[mcp_types.Tool] = []
        self._instructions = ""

    async def start(self) -> None:
        """Check the env and describe the server: its tools, its opening as instructions."""
        env = self.host.check()
        try:
            tool_env = _tool_env(env, self.env_id)
            await tool_env.areset(seed=self.seed, options=self.options)
            self._tools = [
                mcp_types.Tool(
                    name=s["function"]["name"],
                    description=s["function"].get("description", ""),
                    input_schema=s["function"].get("parameters") or {"type": "object"},
                )
                for s in tool_env.tool_schemas()
            ]
            self._instructions = "\n\n".join(
                str(m["content"]) for m in tool_env.transcript if isinstance(m["content"], str)
            )
        finally:
            await env.aclose()

    async def close(self) -> None:
        await self.host.aclose()

    def server(self) -> Server[Any]:
        @asynccontextmanager
        async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            yield {}

        return Server(
            f"toolgym {self.env_id}",
            instructions=self._instructions,
            lifespan=lifespan,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    async def serve_stdio(self) -> None:
        await self.host.open(STDIO)
        server = self.server()
        async with stdio_streams() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    def http_app(self, host: str) -> Any:
        """The streamable HTTP app (POST/GET/DELETE /mcp), behind the session gate."""
        from starlette.applications import Starlette
        from starlette.routing import Route

        security = None
        if host in LOOPBACK:  # as the SDK's own app: DNS rebinding protection on loopback
            security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
            )
        manager = StreamableHTTPSessionManager(
            app=self.server(), security_settings=security,
            session_idle_timeout=self.host.idle_timeout_s,
        )  # fmt: skip
        endpoint = SessionGate(StreamableHTTPASGIApp(manager), self.host)

        @asynccontextmanager
        async def lifespan(_: Any) -> AsyncIterator[None]:
            self.host.start()
            try:
                async with manager.run():
                    yield
            finally:
                await self.host.aclose()

        return Starlette(routes=[Route("/mcp", endpoint=endpoint)], lifespan=lifespan)

    async def serve_http(self, host: str, port: int) -> None:
        """Streamable HTTP at http://HOST:PORT/mcp until interrupted."""
        import uvicorn

        config = uvicorn.Config(self.http_app(host), host=host, port=port, log_level="warning")
        await uvicorn.Server(config).serve()

    # ----- the handlers -----------------------------------------------------------------
    async def _list_tools(self, ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=self._tools)

    async def _call_tool(
        self, ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        key = STDIO if ctx.request is None else request_session(ctx.request)
        call = ToolCall(params.name, dict(params.arguments or {}), id="mcp")
        try:
            if key is None or self.episode_per_call:  # one episode for this call alone
                async with self.host.single_use() as env:
                    return await self._play(env, call)
            session = self.host.get(key)
            async with session.lock:  # one call at a time per session: its env keeps state
                return await self._play(await self.host.env(session), call)
        except (CapacityError, SessionEnded) as exc:
            return _refusal(str(exc), "refused")
        except EpisodeOverError:
            return _refusal(
                "the episode is over (its task ended or its turns ran out): its verdict "
                "stands; start a new session to play again",
                "episode_over",
            )
        except Exception as exc:
            log.exception("a served env failed a call")
            return _refusal(f"the env failed: {one_line(exc)}", "env_failed")

    async def _play(self, env: Env, call: ToolCall) -> mcp_types.CallToolResult:
        tool_env = _tool_env(env, self.env_id)
        if tool_env.turn is None:  # the session's first call starts its one episode
            await tool_env.areset(seed=self.seed, options=self.options)
        result, reward, terminated, truncated = await tool_env.acall(call)
        return _result(result, reward, terminated, truncated, tool_env.turn)


def _tool_env(env: Env, env_id: str) -> ToolEnv:
    if not isinstance(env, ToolEnv):
        raise ConfigError(
            f"{env_id} is not a tool env (its actions are not tool calls): "
            "there are no tools to serve"
        )
    return env


def _result(
    result: ToolResult, reward: float, terminated: bool, truncated: bool, turn: int | None
) -> mcp_types.CallToolResult:
    content: list[Any] = [mcp_types.TextContent(type="text", text=clean_text(result.content))]
    for url in result.images:
        match = _DATA_URL.match(url)
        if match:
            content.append(mcp_types.ImageContent(type="image", data=match[2], mime_type=match[1]))
    verdict: dict[str, Any] = {"reward": reward, "terminated": terminated,
                               "truncated": truncated, "turn": turn}  # fmt: skip
    if result.error is not None:
        verdict["error"] = result.error.value
    return mcp_types.CallToolResult(
        content=content, is_error=result.error is not None, meta={"toolgym": verdict}
    )


def _refusal(text: str, why: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)],
        is_error=True,
        meta={"toolgym": {"error": why}},
    )
