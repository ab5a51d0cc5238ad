"""One live client session to an MCP server, shared by every env that uses its tools.

The SDK's client is an async context manager built on task groups, which must be entered
and left by the same task, while toolgym's shared resources are opened by whichever episode
asks first and closed by the runtime at shutdown. So a background task owns the session:
it enters the client, reports it ready, and waits to be told to close; requests from any
task go through the live session.

A server that exits, crashes or cannot be reached makes calls fail with `InfraError` (the
step is masked, not scored); the next call starts it again. The process's last stderr lines
are quoted, so a user sees why it died.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import mcp_types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolgym.log import get_logger
from toolgym.tools.mcp.server_spec import MCPServerSpec
from toolgym.tools.mcp.stdio import ProcessLog, stdio_transport
from toolgym.tools.tool import InfraError, ToolCallError

log = get_logger(__name__)

CLOSE_TIMEOUT_S = 10.0
_CALLER_ERRORS = (mcp_types.INVALID_PARAMS, mcp_types.METHOD_NOT_FOUND)


@dataclass
class _Session:
    """One start of the server: its client, the task that owns it, and how it ended."""

    client: Client | None = None
    owner: asyncio.Task[None] | None = None
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    dead: asyncio.Event = field(default_factory=asyncio.Event)
    log: ProcessLog = field(default_factory=ProcessLog)


class MCPConnection:
    """A session to `spec`'s server, started on first use and again after it dies."""

    def __init__(self, spec: MCPServerSpec) -> None:
        self.spec = spec
        self.starts = 0
        """How many times the server was started (a gauge for tests and logs)."""
        self._session: _Session | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def list_tools(self) -> list[mcp_types.Tool]:
        """Every tool the server offers (all pages of the listing)."""
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages without end
            session = await self._live()
            page = await self._request(session, session.client.list_tools(cursor=cursor))
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise InfraError(f"MCP server {self.spec.describe()} listed tools over 100 pages")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        """The server's result; ToolCallError for a call the server refused as malformed,
        InfraError when the server is gone. The caller bounds the time."""
        session = await self._live()
        return await self._request(session, session.client.call_tool(name, arguments))

    async def aclose(self) -> None:
        self._closed = True
        async with self._lock:
            await self._stop()

    # ----- the owner task ---------------------------------------------------------------
    async def _live(self) -> Any:
        if self._closed:
            raise InfraError(f"the connection to MCP server {self.spec.describe()} is closed")
        session = self._session
        if session is not None and not session.dead.is_set():
            return session
        async with self._lock:
            if self._session is None or self._session.dead.is_set():
                await self._stop()
                self._session = await self._start()
            return self._session

    async def _start(self) -> _Session:
        self.starts += 1
        session = _Session()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        session.owner = asyncio.create_task(self._own(session, ready))
        try:
            async with asyncio.timeout(self.spec.start_timeout_s):
                session.client = await asyncio.shield(ready)
        except TimeoutError:
            await _stop_session(session)
            raise InfraError(
                f"MCP server {self.spec.describe()} did not answer within "
                f"{self.spec.start_timeout_s:g} s{_why(session)}"
            ) from None
        except InfraError:
            await _stop_session(session)
            raise
        return session

    async def _own(self, session: _Session, ready: asyncio.Future[Client]) -> None:
        try:
            async with Client(self._transport(session), mode="auto", cache=None) as client:
                ready.set_result(client)
                await session.closing.wait()
        except BaseException as exc:
            reason = _reason(exc)
            session.log.ended = session.log.ended or reason
            if not ready.done():
                ready.set_exception(
                    InfraError(
                        f"MCP server {self.spec.describe()} could not be "
                        f"{'reached' if self.spec.url else 'started'}: {reason}"
                        f"{_why(session, reason)}"
                    )
                )
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            session.dead.set()

    def _transport(self, session: _Session) -> Any:
        if self.spec.url is not None:
            return streamable_http_client(self.spec.url)
        return stdio_transport(
            self.spec.command, dict(self.spec.env), self.spec.cwd, self.spec.max_frame_bytes,
            session.log, session.dead,
        )  # fmt: skip

    async def _stop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await _stop_session(session)

    async def _request(self, session: _Session, request: Any) -> Any:
        """Run one request, failing fast (InfraError) when the server dies meanwhile."""
        work = asyncio.ensure_future(request)
        dead = asyncio.ensure_future(session.dead.wait())
        try:
            await asyncio.wait({work, dead}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            dead.cancel()
            if not work.done():
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
        if work.cancelled():
            raise InfraError(f"MCP server {self.spec.describe()} is gone{_why(session)}")
        try:
            return work.result()
        except MCPError as exc:
            if exc.error.code in _CALLER_ERRORS:
                raise ToolCallError(exc.error.message) from None
            raise InfraError(
                f"MCP server {self.spec.describe()} failed: {exc.error.message}{_why(session)}"
            ) from None
        except Exception as exc:  # a broken pipe, a refused connection, a malformed result
            raise InfraError(
                f"MCP server {self.spec.describe()} failed: {_reason(exc)}{_why(session)}"
            ) from None


async def _stop_session(session: _Session) -> None:
    """Tell the owner to leave the client (which stops the server), bounded."""
    owner = session.owner
    if owner is None:
        return
    session.closing.set()
    if session.client is None:  # still starting: nothing to leave gracefully
        owner.cancel()
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await asyncio.shield(owner)
    except TimeoutError:
        owner.cancel()
        with contextlib.suppress(BaseException):
            await owner
    except BaseException:
        pass


def _why(session: _Session, already: str = "") -> str:
    """How the server's session ended and its last stderr, for an error message."""
    parts = []
    if session.log.ended and session.log.ended != already:
        parts.append(session.log.ended)
    tail = session.log.tail()
    if tail:
        parts.append(f"its stderr ends: {tail}")
    return f" ({'; '.join(parts)})" if parts else ""


def _reason(exc: BaseException) -> str:
    """One line for an exception (the first of an exception group's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
