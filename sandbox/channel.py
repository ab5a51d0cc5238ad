"""The host's end of a sandbox: frames (4-byte length, JSON) to and from the guest program,
over whatever byte stream a backend opened (a process's pipes, a container's attach socket).

Everything read from a sandbox is hostile: a frame has a size limit and a read has a deadline,
and any breach is a `SandboxError` that ends this sandbox, never a hang of the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from toolgym.sandbox.result import SandboxError

MAX_REPLY_BYTES = 64 << 20
EXIT_GRACE_S = 1.0


class ByteReader(Protocol):
    async def readexactly(self, n: int) -> bytes: ...


class Channel:
    """One live sandbox: `request` sends a frame and waits for the reply.

    Args:
        reader: the guest's output stream.
        writer: the guest's input stream.
        kill: stops the sandbox for good (kills the process, removes the container).
        describe: text for errors (e.g. the guest's stderr), awaited only on failure.
    """

    def __init__(
        self,
        reader: ByteReader,
        writer: asyncio.StreamWriter,
        kill: Callable[[], Awaitable[None]],
        describe: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        self.reader, self.writer = reader, writer
        self._kill, self._describe = kill, describe
        self.alive = True
        self.exit_requested = False
        self.info: dict[str, Any] = {}

    async def handshake(self, timeout_s: float) -> None:
        """Wait for the guest's ready frame."""
        self.info = await self.receive(timeout_s)
        if not self.info.get("ready"):
            await self.fail(f"unexpected first frame {self.info!r}")

    async def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        if not self.alive:
            raise SandboxError("this sandbox was already stopped")
        data = json.dumps(message).encode()
        try:
            self.writer.write(struct.pack(">I", len(data)) + data)
            await asyncio.wait_for(self.writer.drain(), timeout_s)
        except (OSError, TimeoutError) as exc:
            await self.fail(f"could not send to the sandbox: {exc or type(exc).__name__}")
        return await self.receive(timeout_s)

    async def receive(self, timeout_s: float) -> dict[str, Any]:
        try:
            async with asyncio.timeout(timeout_s):
                (size,) = struct.unpack(">I", await self.reader.readexactly(4))
                if size > MAX_REPLY_BYTES:
                    await self.fail(f"a reply of {size} bytes is over the limit")
                reply = json.loads(await self.reader.readexactly(size))
        except TimeoutError:
            await self.kill()
            raise
        except (asyncio.IncompleteReadError, OSError, ValueError) as exc:
            await self.fail(f"the sandbox stopped answering ({type(exc).__name__})")
        if not isinstance(reply, dict):
            await self.fail("a reply that is not an object")
        return reply

    async def fail(self, why: str) -> Any:
        detail = ""
        if self._describe is not None:
            try:
                detail = (await asyncio.wait_for(self._describe(), 2)).strip()
            except Exception:
                detail = ""
        await self.kill()
        raise SandboxError(f"{why}{': ' + detail[-2000:] if detail else ''}")

    async def kill(self) -> None:
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(Exception):
            self.writer.close()
        await self._kill()

    async def close(self, timeout_s: float = 2.0) -> None:
        """Ask the guest to exit, then make sure it has."""
        if self.alive:
            self.exit_requested = True
            try:
                data = json.dumps({"op": "exit"}).encode()
                self.writer.write(struct.pack(">I", len(data)) + data)
                await asyncio.wait_for(self.writer.drain(), timeout_s)
            except Exception:
                pass
        await self.kill()


async def process_channel(
    argv: list[str],
    start_timeout_s: float,
    cleanup: Callable[[], None] | None = None,
    **popen: Any,
) -> Channel:
    """Start `argv` (a program that runs the guest) and shake hands with it; `cleanup` runs
    once the process is gone."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=1 << 20,
            **popen,
        )
    except OSError as exc:
        if cleanup is not None:
            cleanup()
        raise SandboxError(f"could not start {argv[0]}: {exc}") from exc
    assert process.stdin is not None and process.stdout is not None

    async def kill() -> None:
        # A guest asked to exit gets a moment to do so: killing a process that has just
        # exited lets Popen reap it behind asyncio's back (which then logs an unknown child).
        if channel.exit_requested and process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), EXIT_GRACE_S)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 5)
        if cleanup is not None:
            cleanup()

    async def describe() -> str:
        assert process.stderr is not None
        if process.returncode is None:
            await kill()
        return (await process.stderr.read(4000)).decode("utf-8", "replace")

    channel = Channel(process.stdout, process.stdin, kill, describe)
    try:
        await channel.handshake(start_timeout_s)
    except BaseException:
        await channel.kill()
        raise
    return channel
