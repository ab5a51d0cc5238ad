"""`toolgym serve env`: an env served over another stack's protocol (OpenEnv)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from toolgym.errors import ConfigError

PROTOCOLS = ("openenv",)


def serve_env_command(
    env_id: str, kwargs: dict[str, Any], protocol: str, host: str, port: int, max_sessions: int,
    idle_timeout_s: float, allow_client_tasks: bool = False,
) -> int:  # fmt: skip
    if protocol not in PROTOCOLS:
        raise ConfigError(
            f"--protocol is one of {', '.join(PROTOCOLS)}, got {protocol!r} "
            "(an env's tools over MCP: toolgym serve mcp)"
        )
    import uvicorn

    with without_gradio():
        from toolgym.envs.openenv.serve import openenv_app
        from toolgym.envs.openenv.wire import MAX_FRAME_BYTES

    app = openenv_app(env_id, kwargs, max_sessions, idle_timeout_s or None, allow_client_tasks)
    print(f"serving {env_id} over OpenEnv at http://{host}:{port} (WebSocket /ws)", file=sys.stderr)
    uvicorn.run(app, host=host, port=port, log_level="warning", ws_max_size=MAX_FRAME_BYTES)
    return 0


@contextmanager
def without_gradio() -> Iterator[None]:
    """openenv-core imports Gradio (about 5 s of a server's start) for a web UI this server
    never mounts, and does without it when Gradio is not installed: while openenv-core is
    imported here, Gradio reads as not installed; afterwards the served env may import it."""
    if "gradio" in sys.modules:
        yield
        return
    sys.modules["gradio"] = None  # type: ignore[assignment]  # import raises ModuleNotFoundError
    try:
        yield
    finally:
        if sys.modules.get("gradio", False) is None:
            del sys.modules["gradio"]
