"""A server in a child process on a free local port (an env served over OpenEnv, a verifiers
toolset's MCP server): started in its own session, ready once its URL answers, its output
kept in a file whose tail explains a failed start, its process group ended on stop.

A server dies with the process that started it, even one killed with SIGKILL (no orphans
left with PPID 1). `process_wide` keeps one such server per key for the whole Python process,
stopped at exit (a forked child starts its own): for servers that hold no per-episode state,
so the many short-lived envs of a check or a test session do not each pay a start of several
seconds."""

from __future__ import annotations

import asyncio
import atexit
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
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by stop)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> ServerProcess:
        """Start it and wait until it answers; InfraError (with its output's tail) if it
        exits first or does not answer in time. Started again after it died, it keeps its
        port, so clients that hold its URL reach the new one."""
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
        return self._process is not None and self._process.poll() is None

    def tail(self) -> str:
        """The last bytes the server printed."""
        if self._log.closed:
            return "(no output kept)"
        self._log.seek(0, os.SEEK_END)
        self._log.seek(max(0, self._log.tell() - OUTPUT_TAIL))
        return self._log.read().decode(errors="replace").strip() or "(no output)"

    def stop(self) -> None:
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


_RUNNING: dict[Hashable, ServerProcess] = {}
_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


async def process_wide(key: Hashable, make: Callable[[], ServerProcess]) -> ServerProcess:
    """The running server under `key`: made by `make()` the first time, started again (on
    the same port) when it has died. Callers in one event loop wait for one start."""
    server = _RUNNING.get(key)
    if server is None:
        server = _RUNNING[key] = make()
    async with _start_lock(key):
        if not server.alive():
            await server.start()
    return server


def _start_lock(key: Hashable) -> asyncio.Lock:
    locks = _LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(key, asyncio.Lock())


def _forked() -> None:
    """A forked child (Gymnasium's async vector env) starts with none of its parent's
    servers: their handles are the parent's, so a restart would take the parent's port, where
    the parent's server, still running, would answer the child's readiness probe for a server
    that never bound; and the child's exit would stop what it does not own."""
    _RUNNING.clear()
    _LOCKS.clear()


os.register_at_fork(after_in_child=_forked)


@atexit.register
def _stop_all() -> None:
    for server in _RUNNING.values():
        server.stop()
    _RUNNING.clear()


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
