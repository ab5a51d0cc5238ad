"""The stdio wire of `toolgym serve mcp`: JSON-RPC lines on this process's stdin and stdout,
every line answered.

The MCP SDK's own stdio server reads a line of any length, and drops a line its validator
refuses without a word, so a client that sent arguments nested 200 deep, or holding a lone
surrogate, waited for ever. Here a line over `max_line_bytes` is skipped, and any line that is
not a valid message gets a JSON-RPC error with its id (when it has one) saying why. As in
the SDK, the process's own fd 1 points at stderr while serving, so a stray print from a
tool cannot tear the wire.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, BinaryIO

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from toolgym.errors import one_line
from toolgym.tools.text import nesting

MAX_LINE_BYTES = 16 << 20
CHUNK = 1 << 16


@asynccontextmanager
async def stdio_streams(max_line_bytes: int = MAX_LINE_BYTES) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams a lowlevel `Server.run` takes, over fds 0 and 1."""
    wire_out_fd = os.dup(1)
    os.dup2(2, 1)  # stray output goes to stderr
    wire_in = os.fdopen(os.dup(0), "rb", buffering=0)
    wire_out = os.fdopen(wire_out_fd, "wb", buffering=0)
    to_server, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    lock = anyio.Lock()

    async def emit(message: mcp_types.JSONRPCMessage) -> None:
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        async with lock:
            await anyio.to_thread.run_sync(wire_out.write, data)

    async def read() -> None:
        async with to_server:
            async for line, overflow in _lines(wire_in, max_line_bytes):
                if overflow:
                    await emit(_error(None, mcp_types.INVALID_REQUEST,
                                      f"a message over {max_line_bytes} bytes was dropped"))  # fmt: skip
                    continue
                if not line.strip():
                    continue
                try:
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except ValueError as exc:
                    answer = _refusal(line, exc)
                    if answer is not None:
                        await emit(answer)
                    continue
                await to_server.send(SessionMessage(message))

    async def write() -> None:
        async with from_server:
            async for session_message in from_server:
                await emit(session_message.message)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read)
            tasks.start_soon(write)
            try:
                yield read_stream, write_stream
            finally:
                tasks.cancel_scope.cancel()
    finally:
        os.dup2(wire_out_fd, 1)
        with suppress(OSError):
            wire_in.close()
            wire_out.close()


async def _lines(wire: BinaryIO, limit: int) -> AsyncIterator[tuple[bytes, bool]]:
    """Each line (without its newline), and whether it ran over `limit` (then dropped)."""
    buffer = bytearray()
    overflow = False
    while True:
        chunk = await anyio.to_thread.run_sync(wire.read, CHUNK, abandon_on_cancel=True)
        if not chunk:
            return
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            yield (b"", True) if overflow or len(line) > limit else (line, False)
            overflow = False
        if len(buffer) > limit:
            overflow = True
            buffer.clear()


def _refusal(line: bytes, exc: Exception) -> mcp_types.JSONRPCMessage | None:
    """The error answering a line that is not a valid message (None for a notification,
    which the protocol never answers)."""
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):
        return _error(None, mcp_types.PARSE_ERROR, "the message is not JSON")
    message_id = raw.get("id") if isinstance(raw, dict) else None
    if isinstance(message_id, bool) or not isinstance(message_id, str | int):
        message_id = None
    if isinstance(raw, dict) and "method" in raw and "id" not in raw:
        return None
    try:
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        why = "the message holds a lone surrogate: not valid Unicode"
    else:
        why = (
            f"the message nests {nesting(raw)} levels deep"
            if nesting(raw) > 64
            else f"not a valid MCP message: {one_line(exc, 300)}"
        )
    return _error(message_id, mcp_types.INVALID_PARAMS, why)


def _error(message_id: Any, code: int, text: str) -> mcp_types.JSONRPCMessage:
    return mcp_types.JSONRPCError(
        jsonrpc="2.0", id=message_id, error=mcp_types.ErrorData(code=code, message=text)
    )
