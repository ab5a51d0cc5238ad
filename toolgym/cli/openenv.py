"""`toolgym serve env`: an env served over another stack's protocol (OpenEnv)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from toolgym.cli.options import EnvArgs
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


def serve_env(
    env_id: Annotated[str, typer.Argument(help="An env's id, e.g. toolgym/Arithmetic-v0.")],
    protocol: Annotated[str, typer.Option(help="The protocol to serve: openenv.")] = "openenv",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    max_sessions: Annotated[
        int, typer.Option(min=1, help="Most client sessions (envs) alive at once.")
    ] = 32,
    idle_timeout: Annotated[
        float, typer.Option(min=0, help="Close a session idle this many seconds (0: never).")
    ] = 600.0,
    allow_client_tasks: Annotated[
        bool,
        typer.Option(
            help="Let a client reset to a task of its own (checked by the env: plain data, "
            "never code, a file or a loopback address); by default clients play the env's "
            "own tasks by seed and split."
        ),
    ] = False,
    env_arg: EnvArgs = None,
) -> None:
    """Serve an env to another stack's clients (OpenEnv's), one env per session."""
    from toolgym.cli.train import env_kwargs

    kwargs = env_kwargs(env_arg or [])
    raise typer.Exit(
        serve_env_command(
            env_id=env_id,
            kwargs=kwargs,
            protocol=protocol,
            host=host,
            port=port,
            max_sessions=max_sessions,
            idle_timeout_s=idle_timeout,
            allow_client_tasks=allow_client_tasks,
        )
    )
