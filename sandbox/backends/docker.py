"""docker: each sandbox is a long-lived container of a locally built image (`toolgym sandbox
build-image`) with no network, a read-only root, tmpfs work dir and /tmp and a private
/dev/shm (each of the work size, emptied after every call), memory (the cgroup's, which also
counts what the tmpfs mounts hold), process and CPU limits, every capability dropped, no
privilege gain, Docker's own seccomp profile (no new namespaces), and a host user of its own
(users.py: a container at its process limit leaves the others theirs), not root. The
guest runs as the container's pid 1 (code cannot signal it) and speaks frames over the
container's attached stdin/stdout, so a call is a fork inside, not a `docker exec`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from typing import Any

from toolgym.sandbox.backends.base import START_TIMEOUT_S, Backend, Mode
from toolgym.sandbox.backends.users import USERS
from toolgym.sandbox.channel import Channel
from toolgym.sandbox.result import Limits, SandboxError

DEFAULT_IMAGE = "toolgym-sandbox:latest"
LABEL = "toolgym.sandbox"
GUEST_OVERHEAD_MB = 128
"""Container memory beyond the code's own limit: the guest interpreter and page cache."""
LOG_BYTES = "1m"
"""The most of a container's log (its stdout and stderr) kept on the host's disk: every
call's frames pass through it, and unbounded it grew by hundreds of MB a pooled container."""


class DockerBackend(Backend):
    """Args:
    image: the sandbox image (built by `toolgym sandbox build-image`).
    cpus: CPU share of each container.
    python: the interpreter inside the image.
    """

    name = "docker"

    def __init__(self, image: str = DEFAULT_IMAGE, cpus: float = 1.0, python: str = "python3"):
        self.image, self.cpus, self.python = image, cpus, python
        self._client: Any = None

    def check(self) -> None:
        try:
            import docker
        except ImportError as exc:
            raise SandboxError("the docker backend needs the `docker` package") from exc
        try:
            self._client = docker.from_env(timeout=60)
            self._client.ping()
        except Exception as exc:
            raise SandboxError(
                f"cannot reach the Docker engine ({exc}); start dockerd (or set DOCKER_HOST)"
            ) from exc
        try:
            self._client.images.get(self.image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(
                f"the sandbox image {self.image} is not here: build it with "
                "`toolgym sandbox build-image`"
            ) from exc

    async def open(self, mode: Mode, limits: Limits) -> Channel:
        user = USERS.acquire()
        try:
            container = await asyncio.to_thread(self._create, mode, limits, user.uid)
        except BaseException:
            user.release()
            raise

        async def remove() -> None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.remove, force=True)
            user.release()

        async def describe() -> str:
            try:
                logs = await asyncio.to_thread(container.logs, stdout=False, stderr=True, tail=20)
                return bytes(logs).decode("utf-8", "replace")
            except Exception:
                return ""

        try:
            raw = await asyncio.to_thread(self._attach, container)
            reader, writer = await asyncio.open_connection(sock=raw)
            await asyncio.to_thread(container.start)
        except Exception as exc:
            await remove()
            raise SandboxError(f"could not start a sandbox container: {exc}") from exc
        channel = Channel(DemuxReader(reader), writer, remove, describe)
        try:
            await channel.handshake(START_TIMEOUT_S)
        except BaseException:
            await channel.kill()
            raise
        return channel

    def _create(self, mode: Mode, limits: Limits, user: int) -> Any:
        tmpfs = f"size={limits.work_mb}m,mode=1777,exec,nosuid,nodev"
        environment = {"TOOLGYM_WORK": "/work", "TOOLGYM_SHM": "/dev/shm"}
        if mode == "repl":
            environment["TOOLGYM_LIMITS"] = json.dumps(self.guest_limits(limits))
        memory = f"{limits.memory_mb + GUEST_OVERHEAD_MB}m"
        return self._client.containers.create(
            self.image,
            command=self.guest_argv(self.python, mode),
            stdin_open=True,
            tty=False,
            network_mode="none",
            read_only=True,
            tmpfs={"/work": tmpfs, "/tmp": tmpfs},
            mem_limit=memory,
            memswap_limit=memory,
            pids_limit=limits.processes + 8,
            nano_cpus=int(self.cpus * 1e9),
            user=f"{user}:{user}",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            ipc_mode="private",
            shm_size=f"{limits.work_mb}m",
            environment=environment,
            working_dir="/work",
            hostname="sandbox",
            labels={LABEL: mode},
            # the guest's frames and the code's output pass through the container's log:
            # bounded on the host's disk, with room for the stderr tail a failure quotes
            log_config={"type": "json-file", "config": {"max-size": LOG_BYTES, "max-file": "1"}},
            auto_remove=True,  # if this process dies, stdin closes, the guest exits, it goes
        )

    def _attach(self, container: Any) -> socket.socket:
        params = {"stdin": 1, "stdout": 1, "stream": 1}
        wrapped = self._client.api.attach_socket(container.id, params=params)
        raw = getattr(wrapped, "_sock", wrapped)
        raw.setblocking(False)
        return raw

    async def aclose(self) -> None:
        if self._client is not None:
            await asyncio.to_thread(self._client.close)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "image": self.image}


class DemuxReader:
    """The stdout frames of Docker's multiplexed attach stream (8-byte headers: stream id,
    three zero bytes, payload size), as one byte stream."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.buffer = bytearray()

    async def readexactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            kind, _, _, _, size = struct.unpack(">BBBBI", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(size)
            if kind == 1:
                self.buffer += payload
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data
