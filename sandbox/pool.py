"""Warm pools: sandboxes started ahead, each running a fork server, so a short call costs a
fork and a few frames instead of a sandbox and an interpreter start.

A pool keeps `size` sandboxes idle and ready, runs at most `concurrency` calls at once, and
retires a sandbox after `max_calls` calls, after any call that timed out or ran out of memory,
after one it could not clean, and whenever it stops answering; a replacement starts in the
background. A sandbox that dies while running a call is retried once on a fresh one: if that
one dies too, the code killed it (an error result); if no sandbox can be started at all, the
failure is the infrastructure's (`SandboxError`), never a result.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolgym.log import get_logger
from toolgym.sandbox.backends import DEFAULT_BACKEND, Backend, make_backend
from toolgym.sandbox.channel import Channel
from toolgym.sandbox.result import (
    Limits,
    RunResult,
    SandboxError,
    Status,
    b64,
    check_file_name,
    check_language,
)
from toolgym.sandbox.session import Session

log = get_logger(__name__)
GRACE_S = 3.0
"""How long past a call's own time limit the host waits before it kills the sandbox."""
RETIRE_AFTER = (Status.TIMEOUT, Status.MEMORY)
CLOSE_WAIT_S = 40.0
"""How long closing a pool waits for sandboxes still starting or stopping."""


@dataclass
class _Worker:
    channel: Channel
    calls: int = 0


class SandboxPool:
    """Warm sandboxes of one backend.

    Args:
        backend: a backend name ("bubblewrap", "docker", "local") or a Backend.
        size: sandboxes kept started and idle.
        concurrency: calls running at once (default: `size`); more wait their turn.
        max_calls: a sandbox is replaced after this many calls.
        limits: per-call bounds; a call may lower the time and memory limits, never raise them.
        max_sessions: stateful sessions open at once (each holds a sandbox).
        health_interval_s: idle sandboxes are pinged this often; 0 turns it off.
        backend_options: passed to the backend's constructor when given by name.
    """

    def __init__(
        self,
        backend: str | Backend = DEFAULT_BACKEND,
        size: int = 2,
        concurrency: int | None = None,
        max_calls: int = 500,
        limits: Limits | None = None,
        max_sessions: int = 64,
        health_interval_s: float = 30.0,
        backend_options: Mapping[str, Any] | None = None,
    ) -> None:
        if size < 0 or (concurrency is not None and concurrency < 1) or max_calls < 1:
            raise SandboxError("a pool needs size >= 0, concurrency >= 1 and max_calls >= 1")
        self.backend = (
            make_backend(backend, **dict(backend_options or {}))
            if isinstance(backend, str)
            else backend
        )
        self.size = size
        self.concurrency = concurrency or max(size, 1)
        self.max_calls = max_calls
        self.limits = limits or Limits()
        self.health_interval_s = health_interval_s
        self._slots = asyncio.Semaphore(self.concurrency)
        self._session_slots = asyncio.Semaphore(max_sessions)
        self._idle: list[_Worker] = []
        self._busy = 0
        self._starting = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._health: asyncio.Future[None] | None = None
        self.counts = {"started": 0, "retired": 0, "calls": 0, "died": 0, "start_failures": 0}

    async def start(self) -> SandboxPool:
        """Start the warm sandboxes; raises SandboxError if the backend cannot start one."""
        if self.size:
            self._starting += self.size
            results = await asyncio.gather(
                *(self._open_worker(counted=True) for _ in range(self.size)),
                return_exceptions=True,
            )
            failures = [r for r in results if isinstance(r, BaseException)]
            self._idle += [r for r in results if isinstance(r, _Worker)]
            if failures and not self._idle:
                await self.aclose()
                raise failures[0]
        if self.health_interval_s > 0:
            self._health = asyncio.ensure_future(self._health_loop())
        return self

    async def __aenter__(self) -> SandboxPool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(
        self,
        code: str,
        language: str = "python",
        stdin: str | bytes = "",
        files: Mapping[str, str | bytes] | None = None,
        fetch_files: Sequence[str] = (),
        timeout_s: float | None = None,
        memory_mb: int | None = None,
    ) -> RunResult:
        """Run `code` in a fresh work dir of a warm sandbox (nothing of earlier calls is there).

        `files` are written into the work dir first (name -> text or bytes); `fetch_files`
        are read back after the run into `RunResult.files`.
        """
        limits = self.limits.override(timeout_s, memory_mb)
        for name in [*(files or {}), *fetch_files]:
            check_file_name(name)
        request = {
            "op": "run",
            "code": code,
            "language": check_language(language),
            "stdin": b64(stdin),
            "files": {name: b64(data) for name, data in (files or {}).items()},
            "fetch_files": list(fetch_files),
            "timeout": limits.timeout_s,
            "output_bytes": limits.output_bytes,
            "file_bytes": limits.fetch_bytes,
            "limits": self.backend.guest_limits(limits),
        }
        async with self._slots:
            self.counts["calls"] += 1
            for attempt in (1, 2):
                worker = await self._take()
                self._busy += 1
                try:
                    reply = await worker.channel.request(request, limits.timeout_s + GRACE_S)
                except TimeoutError:
                    self._retire(worker)
                    return RunResult(Status.TIMEOUT, None, "", "", limits.timeout_s)
                except SandboxError as exc:
                    self.counts["died"] += 1
                    self._retire(worker)
                    if attempt == 2:
                        return RunResult(
                            Status.ERROR, None, "", f"sandbox: the code's sandbox died ({exc})", 0.0
                        )
                    continue
                except BaseException:  # cancelled: the code must not run on unobserved
                    self._retire(worker)
                    raise
                finally:
                    self._busy -= 1
                result = RunResult.from_reply(reply)
                worker.calls += 1
                if (
                    not reply.get("clean", False)
                    or result.status in RETIRE_AFTER
                    or worker.calls >= self.max_calls
                ):
                    self._retire(worker)
                else:
                    self._idle.append(worker)
                return result
        raise AssertionError("unreachable")

    def session(self, timeout_s: float | None = None, memory_mb: int | None = None) -> Session:
        """A stateful Python session (variables survive between calls) in its own sandbox.
        Use as `async with pool.session() as s: await s.run("x = 1")`."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        return Session(
            self.backend, self.limits.override(timeout_s, memory_mb), self._session_slots
        )

    async def health(self) -> dict[str, Any]:
        """Ping every idle sandbox (replacing dead ones) and report the pool's state."""
        checked = list(self._idle)
        self._idle = [w for w in self._idle if w not in checked]
        alive = 0
        for worker in checked:
            try:
                await worker.channel.request({"op": "ping"}, 5.0)
            except (SandboxError, TimeoutError):
                self._retire(worker)
                continue
            alive += 1
            self._idle.append(worker)
        return {
            **self.backend.describe(),
            "ok": not self._closed and (alive > 0 or self._busy > 0 or self.size == 0),
            "idle": len(self._idle),
            "busy": self._busy,
            "starting": self._starting,
            "size": self.size,
            "concurrency": self.concurrency,
            **self.counts,
        }

    async def aclose(self) -> None:
        """Stop every sandbox and background task; safe to call twice."""
        self._closed = True
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(BaseException):
                await self._health
        # sandboxes being stopped or started finish (each bounded) rather than leak a process
        pending = list(self._tasks)
        if pending:
            _, late = await asyncio.wait(pending, timeout=CLOSE_WAIT_S)
            for task in late:
                task.cancel()
        for task in pending:
            with contextlib.suppress(BaseException):
                await task
        idle, self._idle = self._idle, []
        await asyncio.gather(*(w.channel.close() for w in idle), return_exceptions=True)
        await self.backend.aclose()

    # ----- internals ------------------------------------------------------------------------
    async def _take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.channel.alive:
                return worker
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        self._starting += 1
        return await self._open_worker(counted=True)

    async def _open_worker(self, counted: bool) -> _Worker:
        try:
            channel = await self.backend.open("fork", self.limits)
        except (SandboxError, TimeoutError) as exc:
            self.counts["start_failures"] += 1
            if isinstance(exc, TimeoutError):
                raise SandboxError(f"a {self.backend.name} sandbox did not start in time") from exc
            raise
        finally:
            if counted:
                self._starting -= 1
        self.counts["started"] += 1
        return _Worker(channel)

    def _retire(self, worker: _Worker) -> None:
        """Stop `worker` and start a replacement in the background."""
        self.counts["retired"] += 1
        self._spawn(worker.channel.close())
        if not self._closed and len(self._idle) + self._starting < self.size:
            self._starting += 1
            self._spawn(self._refill())

    async def _refill(self) -> None:
        try:
            worker = await self._open_worker(counted=True)
        except SandboxError as exc:
            log.warning("could not start a replacement sandbox: %s", exc)
            return
        if self._closed or len(self._idle) >= max(self.size, 1):
            await worker.channel.close()
        else:
            self._idle.append(worker)

    async def _health_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.health_interval_s)
            await self.health()
            missing = self.size - len(self._idle) - self._starting - self._busy
            for _ in range(max(missing, 0)):
                self._starting += 1
                self._spawn(self._refill())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def run(
    code: str,
    language: str = "python",
    stdin: str | bytes = "",
    files: Mapping[str, str | bytes] | None = None,
    fetch_files: Sequence[str] = (),
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    backend: str | Backend = DEFAULT_BACKEND,
) -> RunResult:
    """Run code once in a new sandbox (tens of milliseconds to start one); for many calls
    keep a `SandboxPool` open instead."""
    limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb)
    pool = SandboxPool(backend, size=0, concurrency=1, limits=limits, health_interval_s=0)
    try:
        return await pool.run(code, language, stdin, files, fetch_files)
    finally:
        await pool.aclose()
