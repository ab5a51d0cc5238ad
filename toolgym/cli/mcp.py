"""`toolgym serve mcp`: an env's tools as an MCP server."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from toolgym.errors import ConfigError


def serve_mcp_command(
    env_id: str, kwargs: dict[str, Any], transport: str, host: str, port: int, seed: int,
    task: str | None, max_sessions: int, idle_timeout_s: float = 600.0,
    episode_per_call: bool = False,
) -> int:  # fmt: skip
    from toolgym.envs.mcp.serve import EnvToolServer

    if transport not in ("stdio", "http"):
        raise ConfigError(f"--transport is stdio or http, got {transport!r}")
    given = _task(task)
    server = EnvToolServer(
        env_id, kwargs, seed, given, max_sessions, idle_timeout_s or None, episode_per_call
    )

    async def main() -> None:
        await server.start()
        try:
            if transport == "stdio":
                await server.serve_stdio()
            else:
                print(f"serving the tools of {env_id} at http://{host}:{port}/mcp", file=sys.stderr)
                await server.serve_http(host, port)
        finally:
            await server.close()

    asyncio.run(main())
    return 0


def _task(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        task = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--task is not valid JSON: {exc}") from None
    if not isinstance(task, dict):
        raise ConfigError(
            f"--task is a JSON object of the task's fields, got {type(task).__name__}"
        )
    return task
