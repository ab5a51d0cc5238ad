"""The env's handle on its game worker (worker.py, forked by host.py): requests with a time
limit each. A worker that dies, hangs past its limit or answers garbage is killed and
reported as InfraError (the episode is masked); the next request gets a fresh one."""

from __future__ import annotations

import asyncio
import atexit
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


class _Host:
    """This process's game host (started on first use, restarted if it died)."""

    lock = threading.Lock()
    process: subprocess.Popen[bytes] | None = None
    folder = ""

    @classmethod
    def address(cls) -> str:
        with cls.lock:
            if cls.process is None or cls.process.poll() is not None:
                cls._start()
            return os.path.join(cls.folder, "host.sock")

    @classmethod
    def _start(cls) -> None:
        cls.folder = tempfile.mkdtemp(prefix="toolgym-tw-")
        cls.process = subprocess.Popen(
            [sys.executable, "-m", "toolgym.envs.textworld.host", os.path.join(cls.folder, "host.sock")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert cls.process.stdout is not None
        ready = cls.process.stdout.readline()  # TextWorld's import: about a second
        if ready.strip() != b"ready":
            cls.stop()
            raise InfraError("the game host did not start (is textworld installed?)")

    @classmethod
    def stop(cls) -> None:
        process, cls.process = cls.process, None
        if process is not None:
            process.kill()
            process.wait()
        if cls.folder:
            shutil.rmtree(cls.folder, ignore_errors=True)


atexit.register(_Host.stop)


def _waiter_pool() -> ThreadPoolExecutor:
    """Threads that wait on workers' answers: one per game in flight. asyncio's default pool
    has a few per core, and a game being generated for minutes would hold one of those that
    every other episode's steps queue for."""
    return ThreadPoolExecutor(max_workers=256, thread_name_prefix="textworld")


_waiters = _waiter_pool()


def _forked() -> None:
    """A forked child (Gymnasium's async vector env) starts with nothing of its parent's: the
    host, its folder and the waiter threads are the parent's (a copied pool would queue work
    for threads the child lacks), and a lock another thread held would never be released."""
    global _waiters
    _waiters = _waiter_pool()
    _Host.lock, _Host.process, _Host.folder = threading.Lock(), None, ""


os.register_at_fork(after_in_child=_forked)


class GameProcess:
    """One worker, used from any event loop (a blocking socket, driven from a thread): envs
    made by `toolgym.make` or reset under successive `asyncio.run`s keep their game."""

    def __init__(self) -> None:
        self.socket: socket.socket | None = None
        self.answers: Any = None
        self.pid: int | None = None
        self.busy = threading.Lock()  # one request at a time
        self.held = threading.Lock()  # guards the fields above

    async def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The worker's answer; GameError for a failure it reported, InfraError when it died,
        hung or could not start."""
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(_waiters, self._request, payload, timeout_s)
        if "error" in answer:
            log.debug("game worker: %s", answer.get("trace", answer["error"]))
            raise GameError(str(answer["error"]), refused=bool(answer.get("refused")))
        return answer

    def _request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        with self.busy:
            try:
                connection, answers = self._started(timeout_s)
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

    def _started(self, timeout_s: float) -> tuple[socket.socket, Any]:
        with self.held:
            if self.socket is not None:
                return self.socket, self.answers
        address = _Host.address()
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
