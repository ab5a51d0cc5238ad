"""How a code env reaches its sandbox: one warm pool per process and configuration, shared by
every env instance that asks for the same one (a runtime resource, closed at shutdown), and
sandbox failures turned into infrastructure errors that training masks."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from toolgym.envs.core import Env
from toolgym.envs.needs import Need
from toolgym.sandbox import Limits, RunResult, SandboxError, SandboxPool, Session
from toolgym.tools.tool import InfraError


@dataclass(frozen=True)
class SandboxConfig:
    """The env arguments that choose the pool.

    Args:
        backend: "bubblewrap" (default), "docker", or "local" (unisolated; by name only).
        pool_size: warm sandboxes kept for grading.
        timeout_s: wall-clock limit of one run.
        memory_mb: memory limit of one run.
    """

    backend: str = "bubblewrap"
    pool_size: int = 2
    timeout_s: float = 10.0
    memory_mb: int = 1024

    @property
    def key(self) -> Hashable:
        return ("sandbox-pool", self.backend, self.pool_size, self.timeout_s, self.memory_mb)

    async def pool(self, env: Env) -> SandboxPool:
        """The shared pool, started on first use; a backend that cannot run is InfraError."""

        async def open_pool() -> SandboxPool:
            limits = Limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb)
            made = SandboxPool(self.backend, size=self.pool_size, limits=limits)
            return await made.start()

        try:
            return await env.shared(self.key, open_pool)
        except SandboxError as exc:
            raise InfraError(f"no sandbox: {exc}") from exc


class UsesSandbox:
    """A code env: its `backend` argument names the sandbox its episodes need."""

    @classmethod
    def system_needs(cls, kwargs: Mapping[str, Any]) -> set[Need]:
        backend = kwargs.get("backend", SandboxConfig.backend)
        if backend == "docker":
            return {"docker"}
        return {"bubblewrap"} if backend == "bubblewrap" else set()


async def run_in_pool(pool: SandboxPool, code: str, **options: Any) -> RunResult:
    try:
        return await pool.run(code, **options)
    except SandboxError as exc:
        raise InfraError(f"the sandbox failed: {exc}") from exc


class EpisodeSession:
    """An episode's Python session, opened from the env's shared pool on first use and
    ended with the episode (`end`), so variables never cross into the next one."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.session: Session | None = None

    async def run(self, env: Env, code: str) -> RunResult:
        if self.session is None:
            self.session = (await self.config.pool(env)).session()
        try:
            return await self.session.run(code)
        except SandboxError as exc:
            raise InfraError(f"the sandbox failed: {exc}") from exc

    async def end(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.aclose()
