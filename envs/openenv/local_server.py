"""A toolgym env served over OpenEnv by a child process on a free local port: what
`toolgym/OpenEnv-v0` plays when it is given no URL. One process per env id for the whole
Python process: it holds no per-episode state (each client session gets its own env)."""

from __future__ import annotations

import sys

from toolgym.envs.server_process import ServerProcess, process_wide


async def local_server(env_id: str) -> str:
    """The URL of `env_id` served over OpenEnv by this process's child, started if needed."""
    command = [sys.executable, "-m", "toolgym", "serve", "env", env_id,
               "--protocol", "openenv", "--port", "{port}"]  # fmt: skip

    def make() -> ServerProcess:
        return ServerProcess(
            f"the OpenEnv server of {env_id}", command, "/health", lambda r: r.status_code == 200
        )

    server = await process_wide(("openenv", env_id), make)
    return server.url
