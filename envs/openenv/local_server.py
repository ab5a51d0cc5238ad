"""A toolgym env served over OpenEnv by a child process on a free local port: what
`toolgym/OpenEnv-v0` plays when it is given no URL. One process per env id in the owner's
shared resources (the run's runtime, a check's, or a lone env's own): it holds no
per-episode state (each client session gets its own env)."""

from __future__ import annotations

import sys

from toolgym.envs.server_process import ServerProcess, shared_server
from toolgym.tools.tool_source import Shared


async def local_server(env_id: str, shared: Shared) -> str:
    """The URL of `env_id` served over OpenEnv by a child process, started if needed."""
    command = [sys.executable, "-m", "toolgym", "serve", "env", env_id,
               "--protocol", "openenv", "--port", "{port}"]  # fmt: skip

    def make() -> ServerProcess:
        return ServerProcess(
            f"the OpenEnv server of {env_id}", command, "/health", lambda r: r.status_code == 200
        )

    server = await shared_server(shared, ("openenv", env_id), make)
    return server.url
