"""The door of `toolgym serve mcp --transport http`: which client session a request belongs
to, decided once, in front of the MCP SDK's session manager, and handed to the tool handler
in the request's scope (`scope["state"]["toolgym_session"]`).

- A request of the sessionless protocol (2026-07-28 and later, by its protocol-version
  header, as the SDK routes it) belongs to no session, whatever `Mcp-Session-Id` it carries:
  each of its calls is a fresh episode.
- A handshake-era `initialize` (no session id yet) opens a session only while the server
  is under its cap; its slot is reserved before the SDK builds anything, so a burst of
  clients cannot pass the cap together.
- A request naming a session must name one the server holds: a session the idle rule ended
  gets 404 and the reason, one never opened gets 404, as the protocol asks, so a client
  starts a new one.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolgym.envs.serving import EnvHost, SessionEnded

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
SESSION_STATE = "toolgym_session"
"""The scope state key under which the handler finds the request's session (None: none)."""


class SessionGate:
    def __init__(self, app: ASGIApp, host: EnvHost) -> None:
        self.app = app
        self.host = host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v.decode("latin-1") for k, v in scope["headers"]}
        version = headers.get(VERSION_HEADER)
        session = headers.get(SESSION_HEADER)
        state = scope.setdefault("state", {})
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            state[SESSION_STATE] = None  # sessionless: no session id is honoured
            await self.app(scope, receive, send)
        elif session is None:
            await self._open(scope, receive, send)
        else:
            await self._within(session, scope, receive, send)

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request that may open a session (an initialize): admitted under the cap."""
        state = scope["state"]
        state[SESSION_STATE] = None
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        if not self.host.reserve():
            await _refuse(send, 503, -32000, self.host.capacity_message())
            return
        opened: list[str] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == SESSION_HEADER:
                        opened.append(value.decode("latin-1"))
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if opened:
                self.host.adopt(f"http:{opened[0]}")
            else:
                self.host.release()

    async def _within(self, session: str, scope: Scope, receive: Receive, send: Send) -> None:
        key = f"http:{session}"
        try:
            self.host.get(key)
        except SessionEnded as exc:
            await _refuse(send, 404, -32001, str(exc))
            return
        except KeyError:
            await _refuse(send, 404, -32001, "no such session: start a new one (initialize)")
            return
        scope["state"][SESSION_STATE] = key
        await self.app(scope, receive, send)
        if scope["method"] == "DELETE":
            await self.host.close(key, "its client ended it")


async def _refuse(send: Send, status: int, code: int, message: str) -> None:
    """A JSON-RPC error the client's SDK reads, with an HTTP status that says the same."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": body.encode()})


def request_session(request: Any) -> str | None:
    """The session a handler's request belongs to, as the gate decided (None: none)."""
    state = getattr(request, "scope", {}).get("state") or {}
    value = state.get(SESSION_STATE)
    return value if isinstance(value, str) else None
