"""The env's handle on its game worker (worker.py, forked by host.py, whose process is a
shared resource of the env's owner): requests with a time limit each. A worker that dies, hangs past its limit or answers garbage is killed and
reported as InfraError (the episode is masked); the next request gets a fresh one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolgym.log import get_logger
from toolgym.tools.tool import InfraError
from toolgym.tools.tool_source import Shared

log = get_logger(__name__)

ANSWER_BYTES = 16 * 2**20
"""The longest answer line read from a worker (frames are clipped well below this)."""
HOST_START_S = 60.0


class GameError(Exception):
    """The worker ran the request and reports it failed (a game file it cannot load, a
    generator that found no quest, a spec refused): not the interpreter dying."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class GameHost:
    """The process game workers are forked from (host.py): started on first use, started
    again if it died, stopped by `close`. A shared resource (envs/resources.py): one per
    runtime, or a lone env's own; `toolgym textworld generate` holds one for the command.
    Its waiter threads wait on workers' answers, one per game in flight (asyncio's default
    pool has a few per core, and a game being generated for minutes would hold one of those
    that every other episode's steps queue for)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.folder = ""
        self.waiters = ThreadPoolExecutor(max_workers=256, thread_name_prefix="textworld")
        self._owner = os.getpid()

    def address(self) -> str:
        """The host's socket, the host started first if it is not running."""
        self._forget_if_forked()
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self._start()
            return os.path.join(self.folder, "host.sock")

    def _start(self) -> None:
        self._stop()
        self.folder = tempfile.mkdtemp(prefix="toolgym-tw-")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "toolgym.envs.textworld.host", os.path.join(self.folder, "host.sock")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()  # TextWorld's import: about a second
        if ready.strip() != b"ready":
            self._stop()
            raise InfraError("the game host did not start (is textworld installed?)")

    def _stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.wait()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = ""

    def close(self) -> None:
        """Stop the host (its workers die with it) and let its waiter threads go."""
        self._forget_if_forked()
        with self.lock:
            self._stop()
        self.waiters.shutdown(wait=False, cancel_futures=True)

    def _forget_if_forked(self) -> None:
        """A forked child (Gymnasium's async vector env) holds nothing of its parent's host:
        the process, its folder and the waiter threads are the parent's (a copied pool would
        queue work for threads the child lacks), and a lock another thread held would never
        be released."""
        if os.getpid() != self._owner:
            self._reset()


HOST = "textworld game host"
"""The key of the game host among the shared resources."""


class GameProcess:
    """One worker of the game host in `shared` (the env's shared resources: the runtime's,
    or the env's own), used from any event loop (a blocking socket, driven from a thread):
    envs made by `toolgym.make` or reset under successive `asyncio.run`s keep their game."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.socket: socket.socket | None = None
        self.answers: Any = None
        self.pid: int | None = None
        self.busy = threading.Lock()  # one request at a time
        self.held = threading.Lock()  # guards the fields above

    async def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The worker's answer; GameError for a failure it reported, InfraError when it died,
        hung or could not start."""
        host: GameHost = await self.shared(HOST, GameHost)
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(host.waiters, self._request, host, payload, timeout_s)
        if "error" in answer:
            log.debug("game worker: %s", answer.get("trace", answer["error"]))
            raise GameError(str(answer["error"]), refused=bool(answer.get("refused")))
        return answer

    def _request(self, host: GameHost, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        with self.busy:
            try:
                connection, answers = self._started(host, timeout_s)
                connection.settimeout(timeout_s)
                connection.sendall(json.dumps(payload).encode() + b"\n")
                line = answers.readline(ANSWER_BYTES)
            except TimeoutError:
                self.close_now()
                raise InfraError(
                    f"the game did not answer {payload['op']!r} within {timeout_s:g} s"
                ) from None
            except OSError as exc:
                self.close_now()
                raise InfraError(f"the game worker failed: {exc}") from None
            if not line.endswith(b"\n"):
                self.close_now()
                if not line:
                    raise InfraError("the game interpreter died")
                raise InfraError("the game worker's answer was cut off")
            try:
                answer = json.loads(line)
            except ValueError:
                answer = None
            if not isinstance(answer, dict):
                self.close_now()
                raise InfraError("the game worker answered something that is not a JSON object")
            return answer

    def _started(self, host: GameHost, timeout_s: float) -> tuple[socket.socket, Any]:
        with self.held:
            if self.socket is not None:
                return self.socket, self.answers
        address = host.address()
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(timeout_s)
        connection.connect(address)
        answers = connection.makefile("rb")
        hello = json.loads(answers.readline(ANSWER_BYTES) or b"{}")
        if not isinstance(hello.get("pid"), int):
            connection.close()
            raise InfraError("the game host did not start a worker")
        with self.held:
            self.socket, self.answers, self.pid = connection, answers, hello["pid"]
        return connection, answers

    def close_now(self) -> None:
        """Stop the worker (killed: it holds nothing that needs saving); safe to call twice
        and while a request waits on it (that request then fails)."""
        with self.held:
            connection, answers, pid = self.socket, self.answers, self.pid
            self.socket, self.answers, self.pid = None, None, None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if answers is not None:
            answers.close()
        if connection is not None:
            connection.close()

    async def close(self) -> None:
        self.close_now()
