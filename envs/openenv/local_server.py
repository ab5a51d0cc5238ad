"""A toolgym env served over OpenEnv by a child process on a free local port: what
`toolgym/OpenEnv-v0` plays when it is given no URL. One process per env id for the whole
Python process (it holds no per-episode state: each client session gets its own env), started
on first use and stopped at exit, so the many short-lived envs of a check or a test session
do not each pay the server's start (several seconds, most of it importing openenv-core)."""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import httpx

from toolgym.tools.tool import InfraError

START_TIMEOUT_S = 90.0
STDERR_TAIL = 4096


_RUNNING: dict[str, LocalOpenEnvServer] = {}


async def local_server(env_id: str) -> str:
    """The URL of `env_id` served over OpenEnv by this process's child, started if needed."""
    running = _RUNNING.get(env_id)
    if running is None or not running.alive():
        running = await LocalOpenEnvServer(env_id).start()
        previous = _RUNNING.setdefault(env_id, running)
        if previous is not running and previous.alive():  # another episode started one first
            running.stop()
            running = previous
        _RUNNING[env_id] = running
    return running.url


@atexit.register
def _stop_all() -> None:
    for server in _RUNNING.values():
        server.stop()
    _RUNNING.clear()


class LocalOpenEnvServer:
    def __init__(self, env_id: str) -> None:
        self.env_id = env_id
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115  (closed in aclose)

    async def start(self) -> LocalOpenEnvServer:
        port = _free_port()
        command = [sys.executable, "-m", "toolgym", "serve", "env", self.env_id,
                   "--protocol", "openenv", "--port", str(port)]  # fmt: skip
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            start_new_session=True,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self._process.poll() is not None:
                    said = self._tail()
                    self.stop()
                    raise InfraError(f"`{' '.join(command[1:])}` exited: {said}")
                try:
                    if (await client.get(f"{self.url}/health")).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)
        self.stop()
        raise InfraError(
            f"the OpenEnv server of {self.env_id} did not start in {START_TIMEOUT_S:g} s"
        )

    def _tail(self) -> str:
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - STDERR_TAIL))
        return self._log.read().decode(errors="replace").strip() or "(no output)"

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
