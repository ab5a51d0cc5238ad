"""A toolgym env served over OpenEnv's protocol (`toolgym serve env ENV_ID --protocol
openenv`), so openenv-core's clients, and trainers built on them, can play and train on it.

The wire is OpenEnv's: its WebSocket messages (reset, step, state, close), observations and
errors, in openenv-core's own types, at /ws, with /health, /schema and /metadata beside it.
The endpoints are toolgym's own rather than openenv-core's `create_fastapi_app`, whose plain
HTTP /reset and /step build an env per request outside any cap, whose WebSocket ends a
session on a frame that is JSON but not an object, and whose idle reaper closes an env under
a live socket. Here (envs/serving.py) each WebSocket is one session with one env, counted by
`max_sessions` and closed, socket and all, after `idle_timeout_s` unused. Episodes are played
over the socket; the stateless HTTP endpoints answer 400 in words.

The action is the model's turn as it wrote it, in the env's own format (Hermes `<tool_call>`
blocks for a tool env); the observation carries the env's messages and what its info says
about the turn. OpenEnv has one `done`; toolgym's truncation is the `truncated` field. A
reset takes a `seed` and a `split` of the env's own tasks; a client's own `task` only when
the server allows it (`--allow-client-tasks`), checked by the env.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, WebSocket
from fastapi.responses import JSONResponse
from openenv.core.env_server.types import (
    EnvironmentMetadata,
    HealthResponse,
    SchemaResponse,
    State,
)

from toolgym.envs.openenv.socket import serve_socket
from toolgym.envs.openenv.wire import TurnAction, TurnObservation
from toolgym.envs.serving import EnvHost

STATELESS = (
    "episodes are played over the WebSocket at /ws (openenv-core's clients use it); a "
    "stateless /reset or /step would build an env per request and keep no episode"
)


def openenv_app(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    max_sessions: int = 32,
    idle_timeout_s: float | None = 600.0,
    allow_client_tasks: bool = False,
) -> FastAPI:
    """The app that serves `env_id` (made with `env_kwargs`) over OpenEnv."""
    host = EnvHost(env_id, env_kwargs, max_sessions, idle_timeout_s, allow_client_tasks)
    probe = host.check()  # a bad id or argument fails here, in words
    probe.close()
    module = sys.modules.get(type(probe).__module__)
    doc = (getattr(module, "__doc__", None) or env_id).strip()
    metadata = EnvironmentMetadata(name=env_id, description=doc.split("\n\n")[0][:2000],
                                   version="1.0.0")  # fmt: skip
    schemas = SchemaResponse(
        action=TurnAction.model_json_schema(),
        observation=TurnObservation.model_json_schema(),
        state=State.model_json_schema(),
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        host.start()
        try:
            yield
        finally:
            await host.aclose()

    app = FastAPI(title=f"toolgym {env_id} over OpenEnv", lifespan=lifespan)
    app.state.host = host

    @app.get("/health")
    async def health() -> HealthResponse:
        return HealthResponse()

    @app.get("/schema")
    async def schema() -> SchemaResponse:
        return schemas

    @app.get("/metadata")
    async def describe() -> EnvironmentMetadata:
        return metadata

    @app.api_route("/reset", methods=["POST"])
    @app.api_route("/step", methods=["POST"])
    @app.api_route("/state", methods=["GET"])
    async def stateless() -> JSONResponse:
        return JSONResponse({"detail": STATELESS}, status_code=400)

    @app.websocket("/ws")
    async def socket(websocket: WebSocket) -> None:
        await serve_socket(websocket, host)

    return app
