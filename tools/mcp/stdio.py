"""The stdio transport to an MCP server process, with every way the process can misbehave
bounded: a line longer than `max_frame_bytes` (a flood with no newline) ends the connection
instead of growing a buffer without limit, a line that is not JSON-RPC is skipped (servers
that print logs to stdout), and stderr keeps only its last few kilobytes, which the error
of a dead server quotes.

The MCP SDK's own stdio transport reads a line of any length into memory; this one differs
only in these bounds. The process runs in its own session so that closing ends its children
too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
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
        async with to_session:
            try:
                async for chunk in process.stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n", searched)) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[: end + 1]
                        searched = 0
                        message = _parse(line)
                        if message is not None:
                            await to_session.send(message)
                    searched = len(buffer)
                    if len(buffer) > max_frame_bytes:
                        process_log.ended = (
                            f"the server wrote a message longer than {max_frame_bytes} bytes"
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
