"""A stateful Python session: one interpreter in its own sandbox for an episode, so variables
defined by one call are there for the next (as in a notebook).

A cell past its time limit is interrupted and the session goes on. One that cannot be
interrupted, or that ends the interpreter itself, costs the session: its sandbox is stopped,
the result says so, and the next call starts a fresh one. Only a sandbox that cannot be
started at all is an infrastructure failure (`SandboxError`).

The reply comes from the sandbox's guest, which reads each cell's output itself; the
interpreter that runs the code has no way to write to this channel (sandbox/guest.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from toolgym.sandbox.backends.base import Backend
from toolgym.sandbox.channel import Channel
from toolgym.sandbox.result import Limits, RunResult, SandboxError, Status, b64

GRACE_S = 3.0
LOST = "[the session was restarted: variables from earlier calls are gone]"


class Session:
    """Made by `SandboxPool.session()`. `run` a cell, `reset` to start over, `aclose` at the end."""

    def __init__(self, backend: Backend, limits: Limits, slots: asyncio.Semaphore) -> None:
        self.backend, self.limits, self._slots = backend, limits, slots
        self._channel: Channel | None = None
        self._holding = False
        self._lock = asyncio.Lock()
        self.restarts = 0
        self.closed = False

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(
        self,
        code: str,
        timeout_s: float | None = None,
        files: Mapping[str, str | bytes] | None = None,
        fetch_files: Sequence[str] = (),
    ) -> RunResult:
        """Run a cell; a last bare expression is shown as a REPL would show it."""
        if self.closed:
            raise SandboxError("this session is closed")
        timeout = min(timeout_s or self.limits.timeout_s, self.limits.timeout_s)
        request = {
            "op": "exec",
            "code": code,
            "timeout": timeout,
            "output_bytes": self.limits.output_bytes,
            "file_bytes": self.limits.fetch_bytes,
            "files": {n: b64(d) for n, d in (files or {}).items()},
            "fetch_files": list(fetch_files),
        }
        async with self._lock:
            channel = await self._open()
            try:
                reply = await channel.request(request, timeout + GRACE_S)
            except TimeoutError:
                await self._lose()
                return RunResult(Status.TIMEOUT, None, "", LOST, timeout)
            except SandboxError:
                await self._lose()
                return RunResult(
                    Status.ERROR, None, "", f"the interpreter ended during this call. {LOST}", 0.0
                )
            except BaseException:  # cancelled: stop the cell rather than let it run unobserved
                await asyncio.shield(self._lose())
                raise
            result = RunResult.from_reply(reply)
            if reply.get("lost"):
                await self._lose()
                ended = "" if result.status is Status.TIMEOUT else "the interpreter ended. "
                result.stderr = f"{result.stderr.rstrip()}\n{ended}{LOST}".lstrip()
            return result

    async def reset(self) -> None:
        """Forget every variable: the next call starts a fresh interpreter."""
        async with self._lock:
            if self._channel is not None:
                await self._channel.close()
                self._channel = None

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self.reset()
        if self._holding:
            self._holding = False
            self._slots.release()

    async def _open(self) -> Channel:
        if self._channel is not None and self._channel.alive:
            return self._channel
        if not self._holding:
            await self._slots.acquire()
            self._holding = True
        self._channel = await self.backend.open("repl", self.limits)
        return self._channel

    async def _lose(self) -> None:
        self.restarts += 1
        if self._channel is not None:
            await self._channel.kill()
            self._channel = None
