"""The stdio transport to an MCP server process, with every way the process can misbehave
bounded: a line longer than `max_frame_bytes` is dropped as it streams in (never held whole),
and the request it answered gets an error result in its place, so a tool that floods its
output is the tool's outcome (the model reads why), never a dead connection that masks the
episode; a line that is not JSON-RPC is skipped (servers that print logs to stdout), and
stderr keeps only its last few kilobytes, which the error of a dead server quotes.

The MCP SDK's own stdio transport reads a line of any length into memory; this one differs
only in these bounds. The process runs in its own session so that closing ends its children
too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import anyio
import mcp_types
from anyio.abc import Process
from mcp.shared.message import SessionMessage

from toolgym.log import get_logger

log = get_logger(__name__)

STDERR_TAIL_BYTES = 4096
ENDLESS_FRAMES = 4
"""A line still without its end after this many times `max_frame_bytes` is no message: the
server is broken, and the connection ends (the next call starts it again)."""
HEAD_BYTES = 256
"""How much of a dropped line is kept, to find the id of the request it answered."""
_HEAD_ID = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")'
)
"""A response's id, where the SDKs write it: first, or right after "jsonrpc"."""
INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "VIRTUAL_ENV")
"""The variables a server process inherits (its own `env` adds to them): a tool server
gets no credentials or tokens that happen to be in the trainer's environment."""


class ProcessLog:
    """The last bytes a server wrote to stderr, and why its stdout ended."""

    def __init__(self) -> None:
        self.stderr = bytearray()
        self.ended: str | None = None

    def add(self, chunk: bytes) -> None:
        self.stderr += chunk
        del self.stderr[:-STDERR_TAIL_BYTES]

    def tail(self) -> str:
        text = self.stderr.decode("utf-8", "replace").strip()
        return text[-600:]


@asynccontextmanager
async def stdio_transport(
    command: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    max_frame_bytes: int,
    process_log: ProcessLog,
    dead: asyncio.Event,
) -> AsyncIterator[tuple[object, object]]:
    """Start `command` and yield the (read, write) streams the MCP client session uses;
    `dead` is set when the server's output ends (it exited, or broke a bound)."""
    environment = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    environment.update(env or {})
    process = await anyio.open_process(
        list(command), env=environment, cwd=cwd, start_new_session=True
    )
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        searched = 0  # bytes of `buffer` known to hold no newline: a long line is read once
        dropping: bytes | None = None  # the head of a line over the limit, being skipped
        skipped = 0
        async with to_session:
            try:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n", searched)) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[: end + 1]
                        searched = 0
                        if dropping is not None or len(line) > max_frame_bytes:
                            message = _dropped(dropping or line, max_frame_bytes)
                            dropping, skipped = None, 0
                        else:
                            message = _parse(line)
                        if message is not None:
                            await to_session.send(message)
                    searched = len(buffer)
                    if len(buffer) > max_frame_bytes:
                        dropping = dropping or bytes(buffer[:HEAD_BYTES])
                        skipped += len(buffer)
                        buffer.clear()
                        searched = 0
                        if skipped > ENDLESS_FRAMES * max_frame_bytes:  # no line at all
                            process_log.ended = (
                                f"the server wrote over {skipped} bytes with no end of line"
                            )
                            return
                process_log.ended = process_log.ended or "the server closed its output"
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            finally:
                dead.set()

    async def read_stderr() -> None:
        assert process.stderr is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in process.stderr:
                process_log.add(chunk)

    async def write_stdin() -> None:
        assert process.stdin is not None
        async with from_session:
            try:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await to_session.aclose()

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_stdout)
            tasks.start_soon(read_stderr)
            tasks.start_soon(write_stdin)
            try:
                yield read_stream, write_stream
            finally:
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)


def _dropped(head: bytes, limit: int) -> SessionMessage | None:
    """The answer standing in for a response over `limit` bytes: an error result for the
    request it answered (found by the id at its head), or None when its id cannot be read
    there (the request then runs into its own time limit)."""
    found = _HEAD_ID.match(head)
    if found is None:
        log.warning("dropped a message over %d bytes from an MCP server", limit)
        return None
    text = (
        f"the tool's answer was over {limit >> 20} MiB (the server's max_frame_bytes) and "
        "was dropped unread; ask for less"
    )
    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], is_error=True
    )
    response = mcp_types.JSONRPCResponse(
        jsonrpc="2.0", id=json.loads(found[1]),
        result=result.model_dump(by_alias=True, exclude_none=True, mode="json"),
    )  # fmt: skip
    return SessionMessage(response)


def _parse(line: bytes) -> SessionMessage | None:
    """A JSON-RPC message, or None for a line that is not one (logged, skipped)."""
    if not line.strip():
        return None
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError:
        log.debug("skipped a line from an MCP server that is not JSON-RPC: %r", line[:200])
        return None


async def _stop(process: Process) -> None:
    """Close stdin and give the server a moment to exit, then end its whole process group
    (what it started too)."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    with anyio.move_on_after(2):
        await process.wait()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        if process.returncode is None:
            with anyio.move_on_after(2):
                await process.wait()
    with anyio.move_on_after(2), contextlib.suppress(Exception):
        await process.aclose()
