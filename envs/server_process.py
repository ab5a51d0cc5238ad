"""A server in a child process on a free local port (an env served over OpenEnv, a verifiers
toolset's MCP server): started in its own session, ready once its URL answers, its output
kept in a file whose tail explains a failed start, its process group ended on stop.

A server is a shared resource (envs/resources.py): `shared_server` makes one per key in its
owner's set (the run's runtime, a check's, or a lone env's own), starts it on first use and
again, on its port, after it died; the owner's close stops it. It dies with the process that
started it, even one killed with SIGKILL (no orphans left with PPID 1); a forked child's copy
of the handle is the parent's, which the child neither uses nor stops."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Hashable, Mapping

import httpx

from toolgym.tools.tool import InfraError
from toolgym.tools.tool_source import Shared

OUTPUT_TAIL = 4096
PR_SET_PDEATHSIG = 1


class ServerProcess:
    """Args:
    command: the server's command; `{port}` in any argument is replaced by the port.
    probe: the path polled until it answers (e.g. "/health"), with `probe_method`.
    ready: which answer means ready (any HTTP answer by default).
    env: variables added to this process's environment (`{port}` replaced too).
    """

    def __init__(
        self,
        name: str,
        command: list[str],
        probe: str,
        ready: Callable[[httpx.Response], bool] = lambda response: True,
        env: Mapping[str, str] | None = None,
        start_timeout_s: float = 90.0,
        probe_method: str = "GET",
    ) -> None:
        self.name = name
        self.command = command
        self.probe = probe
        self.ready = ready
        self.env = dict(env or {})
        self.start_timeout_s = start_timeout_s
        self.probe_method = probe_method
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop)
        self._starting: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def running(self) -> ServerProcess:
        """This server, started if it is not running (callers on one loop wait for one
        start)."""
        self._forget_if_forked()
        lock = self._starting.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            if not self.alive():
                await self.start()
        return self

    async def start(self) -> ServerProcess:
        """Start it and wait until it answers; InfraError (with its output's tail) if it
        exits first or does not answer in time. Started again after it died, it keeps its
        port, so clients that hold its URL reach the new one."""
        self._forget_if_forked()
        self.port = self.port or free_port()
        if self._log.closed:
            self._log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop)
        port = str(self.port)
        command = [part.replace("{port}", port) for part in self.command]
        env = {**os.environ, **{k: v.replace("{port}", port) for k, v in self.env.items()}}
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env,
            start_new_session=True, preexec_fn=functools.partial(_die_with, os.getpid()),
        )  # fmt: skip
        deadline = time.monotonic() + self.start_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    said = self.tail()
                    self.stop()
                    raise InfraError(f"{self.name} exited as it started: {said}")
                try:
                    answer = await client.request(self.probe_method, self.url + self.probe)
                    if self.ready(answer):
                        return self
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)
        said = self.tail()
        self.stop()
        raise InfraError(f"{self.name} did not answer in {self.start_timeout_s:g} s: {said}")

    def alive(self) -> bool:
        self._forget_if_forked()
        return self._process is not None and self._process.poll() is None

    def _forget_if_forked(self) -> None:
        """In a forked child, the parent's server and port: not this process's to restart
        (the parent's server would answer the probe of one that never bound) or to stop."""
        if os.getpid() != self._owner:
            self._process, self.port, self._owner = None, 0, os.getpid()
            self._starting = weakref.WeakKeyDictionary()
            self._log.close()  # the child's copy of the parent's log
            self._log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop)

    def tail(self) -> str:
        """The last bytes the server printed."""
        if self._log.closed:
            return "(no output kept)"
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - OUTPUT_TAIL))
        return self._log.read().decode(errors="replace").strip() or "(no output)"

    def stop(self) -> None:
        self._forget_if_forked()
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._log.close()

    async def aclose(self) -> None:
        """Stop it (as a shared resource of the runtime)."""
        await asyncio.to_thread(self.stop)


async def shared_server(
    shared: Shared, key: Hashable, make: Callable[[], ServerProcess]
) -> ServerProcess:
    """The server under `key` in the owner's shared resources (`env.shared`): made by
    `make()` the first time, running when returned (started again, on its port, if it
    died)."""
    server: ServerProcess = await shared(key, make)
    return await server.running()


def _die_with(parent: int) -> None:
    """In the child, before it runs the server: have the kernel send SIGTERM when the
    parent dies, even by SIGKILL, which no atexit hook outlives (Linux; the signal follows
    the thread that started the child, the event loop's, which lives as long as its run).
    A parent already gone by now takes the child with it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
