"""An env's tools served as an MCP server (`toolgym serve mcp ENV_ID`), so any MCP client
(an agent framework, a chat app, another trainer) can use toolgym's search, sandbox, SQL or
browser tools.

Each client session gets an env instance of its own, reset on the chosen task: tools that
keep state (a browser page, a Python session) keep it for that client alone. Over stdio a
client starts its own server process, so the process's one env is its session. Over HTTP a
client of the handshake protocol (2025-11-25 and before) is known by its `Mcp-Session-Id`;
one of the 2026-07-28 protocol has no session at all, so each of its calls gets a fresh
episode on the same task. Live sessions are capped (the oldest is closed first).

A call's result is the tool's text (images as image content); a call the tool refuses is an
`isError` result in the tool's words, and the env's verdict after the call (its reward and
whether the episode ended) rides in the result's `_meta` under "toolgym".
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from toolgym.envs.core import Env
from toolgym.envs.registration import make
from toolgym.envs.tool_env import ToolEnv
from toolgym.errors import ConfigError
from toolgym.log import get_logger
from toolgym.tools.records import ToolCall
from toolgym.tools.text import clean_text

log = get_logger(__name__)

SESSION_HEADER = "mcp-session-id"
_DATA_URL = re.compile(r"^data:(image/[\w.+-]+);base64,(.*)$", re.DOTALL)


class EnvToolServer:
    """The tools of `env_id` (built with `env_kwargs`), one env per client session.

    Args:
        seed: the reset seed of each session's episode (train task `seed` of the env).
        task: a task to play instead (the env's task fields).
        max_sessions: the most envs alive at once over HTTP.
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any] | None = None,
        seed: int = 0,
        task: dict[str, Any] | None = None,
        max_sessions: int = 32,
    ) -> None:
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.seed = seed
        self.options = {"task": task} if task is not None else None
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, ToolEnv] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._tools: list[mcp_types.Tool] = []
        self._instructions = ""

    async def _new_env(self) -> ToolEnv:
        env = make(self.env_id, **self.env_kwargs)
        if not isinstance(env.unwrapped, ToolEnv):
            if isinstance(env.unwrapped, Env):
                await env.unwrapped.aclose()
            raise ConfigError(
                f"{self.env_id} is not a tool env (its actions are not tool calls): "
                "there are no tools to serve"
            )
        await env.unwrapped.areset(seed=self.seed, options=self.options)
        return env.unwrapped

    async def start(self) -> None:
        """Make the first env: its tools are the server's, its opening the instructions."""
        env = await self._new_env()
        self._tools = [
            mcp_types.Tool(
                name=s["function"]["name"],
                description=s["function"].get("description", ""),
                input_schema=s["function"].get("parameters") or {"type": "object"},
            )
            for s in env.tool_schemas()
        ]
        self._instructions = "\n\n".join(
            str(m["content"]) for m in env.transcript if isinstance(m["content"], str)
        )
        self._sessions["stdio"] = env

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, OrderedDict()
        for env in sessions.values():
            await env.aclose()

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

    async def _list_tools(self, ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=self._tools)

    async def _call_tool(
        self, ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        key = _session_key(ctx)
        if key is None:  # a sessionless (2026-07-28) HTTP client: one episode per call
            env = await self._new_env()
            try:
                return await _run(env, params)
            finally:
                await env.aclose()
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one call at a time per session: its env keeps state
            live = self._sessions.get(key)
            if live is None:
                live = self._sessions[key] = await self._new_env()
                while len(self._sessions) > self.max_sessions:
                    oldest, evicted = self._sessions.popitem(last=False)
                    self._locks.pop(oldest, None)
                    await evicted.aclose()
            self._sessions.move_to_end(key)
            return await _run(live, params)

    async def serve_stdio(self) -> None:
        server = self.server()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    async def serve_http(self, host: str, port: int) -> None:
        """Streamable HTTP at http://HOST:PORT/mcp until interrupted."""
        import uvicorn

        app = self.server().streamable_http_app(streamable_http_path="/mcp", host=host)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning")
        await uvicorn.Server(config).serve()


def _session_key(ctx: Any) -> str | None:
    """ "stdio" for the process's one client; the HTTP session id; None for none."""
    request = getattr(ctx, "request", None)
    if request is None:
        return "stdio"
    headers = getattr(request, "headers", None) or {}
    value = headers.get(SESSION_HEADER)
    return f"http:{value}" if value else None


async def _run(env: ToolEnv, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
    call = ToolCall(params.name, dict(params.arguments or {}), id="mcp")
    result = await env.toolset.call(call, env.injections())
    outcome = env.outcome()
    content: list[Any] = [mcp_types.TextContent(type="text", text=clean_text(result.content))]
    for url in result.images:
        match = _DATA_URL.match(url)
        if match:
            content.append(mcp_types.ImageContent(type="image", data=match[2], mime_type=match[1]))
    verdict: dict[str, Any] = {"reward": outcome.reward, "terminated": outcome.terminated}
    if result.error is not None:
        verdict["error"] = result.error.value
    return mcp_types.CallToolResult(
        content=content, is_error=result.error is not None, meta={"toolgym": verdict}
    )
