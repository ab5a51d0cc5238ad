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
import subprocess
import sys
import tempfile
import threading
from typing import Any

from toolgym.log import get_logger
from toolgym.tools.tool import InfraError

log = get_logger(__name__)

ANSWER_BYTES = 16 * 2**20
"""The longest answer line read from a worker (frames are clipped well below this)."""
HOST_START_S = 60.0


class GameError(Exception):
    """The worker ran the request and reports it failed (a game file it cannot load, a
    generator that found no quest): not the interpreter dying."""


class _Host:
    """This process's game host (started on first use, restarted if it died)."""

    lock = threading.Lock()
    process: subprocess.Popen[bytes] | None = None
    owner = 0
    folder = ""

    @classmethod
    def address(cls) -> str:
        with cls.lock:
            alive = cls.process is not None and cls.process.poll() is None
            if not alive or cls.owner != os.getpid():  # a fork does not inherit the host
                cls._start()
            return os.path.join(cls.folder, "host.sock")

    @classmethod
    def _start(cls) -> None:
        cls.folder = tempfile.mkdtemp(prefix="toolgym-tw-")
        cls.process = subprocess.Popen(
            [sys.executable, "-m", "toolgym.envs.textworld.host", os.path.join(cls.folder, "host.sock")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        cls.owner = os.getpid()
        assert cls.process.stdout is not None
        ready = cls.process.stdout.readline()  # TextWorld's import: about a second
        if ready.strip() != b"ready":
            cls.stop()
            raise InfraError("the game host did not start (is textworld installed?)")

    @classmethod
    def stop(cls) -> None:
        process, cls.process = cls.process, None
        if process is not None and cls.owner == os.getpid():
            process.kill()
            process.wait()
        if cls.folder:
            shutil.rmtree(cls.folder, ignore_errors=True)


atexit.register(_Host.stop)


class GameProcess:
    def __init__(self) -> None:
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.pid: int | None = None
        self.lock = asyncio.Lock()

    async def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The worker's answer; GameError for a failure it reported, InfraError when it died,
        hung or could not start."""
        async with self.lock:
            try:
                async with asyncio.timeout(timeout_s):
                    reader, writer = await self._started()
                    writer.write(json.dumps(payload).encode() + b"\n")
                    await writer.drain()
                    line = await reader.readline()
            except TimeoutError:
                await self.close()
                raise InfraError(
                    f"the game did not answer {payload['op']!r} within {timeout_s:g} s"
                ) from None
            except (OSError, ValueError) as exc:  # a broken pipe; a line over the limit
                await self.close()
                raise InfraError(f"the game worker failed: {exc}") from None
            if not line:
                self.pid = None  # it is gone (and its pid may be another's soon)
                await self.close()
                raise InfraError("the game interpreter died")
            try:
                answer = json.loads(line)
            except ValueError:
                await self.close()
                raise InfraError("the game worker answered something that is not JSON") from None
        if "error" in answer:
            log.debug("game worker: %s", answer.get("trace", answer["error"]))
            raise GameError(str(answer["error"]))
        return dict(answer)

    async def _started(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.reader is not None and self.writer is not None:
            return self.reader, self.writer
        address = await asyncio.to_thread(_Host.address)
        reader, writer = await asyncio.open_unix_connection(address, limit=ANSWER_BYTES)
        hello = json.loads(await reader.readline() or b"{}")
        if not isinstance(hello.get("pid"), int):
            writer.close()
            raise InfraError("the game host did not start a worker")
        self.reader, self.writer, self.pid = reader, writer, hello["pid"]
        return reader, writer

    async def close(self) -> None:
        """Stop the worker (killed: it holds nothing that needs saving)."""
        writer, pid = self.writer, self.pid
        self.reader, self.writer, self.pid = None, None, None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
