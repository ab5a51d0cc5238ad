"""`toolgym serve mcp`: an env's tools as an MCP server."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated, Any

import typer

from toolgym.cli.options import EnvArgs
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


def serve_mcp(
    env_id: Annotated[str, typer.Argument(help="A tool env's id, e.g. toolgym/SQL-v0.")],
    transport: Annotated[
        str, typer.Option(help="stdio (a client starts this command) or http (at /mcp).")
    ] = "stdio",
    port: Annotated[int, typer.Option(help="Port to listen on (http).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind (http).")] = "127.0.0.1",
    seed: Annotated[
        int, typer.Option(min=0, help="Each session plays train task SEED of the env.")
    ] = 0,
    task: Annotated[
        str | None, typer.Option(help="A task to play instead, as JSON (the env's fields).")
    ] = None,
    max_sessions: Annotated[
        int, typer.Option(min=1, help="Most client sessions (envs) alive at once (http).")
    ] = 32,
    idle_timeout: Annotated[
        float,
        typer.Option(min=0, help="Close an http session idle this many seconds (0: never)."),
    ] = 600.0,
    episode_per_call: Annotated[
        bool,
        typer.Option(
            help="Play each call as an episode of its own, sessions or not: tools "
            "used as plain tools by many episodes (toolgym's calculator for MCP-v0)."
        ),
    ] = False,
    env_arg: EnvArgs = None,
) -> None:
    """Serve an env's tools as an MCP server, one episode per client session."""
    from toolgym.cli.train import env_kwargs

    kwargs = env_kwargs(env_arg or [])
    raise typer.Exit(
        serve_mcp_command(
            env_id=env_id,
            kwargs=kwargs,
            transport=transport,
            host=host,
            port=port,
            seed=seed,
            task=task,
            max_sessions=max_sessions,
            idle_timeout_s=idle_timeout,
            episode_per_call=episode_per_call,
        )
    )
