"""EnvPool: live instances of one env, reused across episodes.

An episode takes an idle instance (or builds one) and gives it back when it ends, so the
next episode starts with `areset` on a live instance instead of building anew. An instance
that raised or hung is retired instead: closed (bounded) and dropped, and a fresh one is
built when needed. Every instance the pool builds shares the pool's `Resources`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from toolgym.envs.core import Env
from toolgym.envs.episode_env import EpisodeEnv
from toolgym.envs.ref import EnvRef
from toolgym.envs.resources import Resources, close_quietly
from toolgym.errors import EnvBuildError, ToolgymError


class Pool(Protocol):
    """What an episode runs on: live instances of one env, lent and given back. `EnvPool`
    keeps them in this process; a runtime may keep them elsewhere (agents/ray/envs.py)."""

    name: str
    env_id: str
    ref: EnvRef

    def prime(self) -> None: ...

    async def acquire(self) -> EpisodeEnv: ...

    def release(self, env: EpisodeEnv) -> None: ...

    async def retire(self, env: EpisodeEnv) -> None: ...

    async def aclose(self) -> None: ...


class EnvPool:
    """Instances of the env `factory` builds.

    Args:
        factory: builds one instance (e.g. `lambda: toolgym.make(id, **kwargs)`).
        resources: shared by every instance (the runtime's); None: the pool's own, closed
            with the pool.
        name: what trajectories and metrics call this env (a mixture's entry name).
        env_id: the registered id, recorded in trajectories.
        kwargs: the arguments the factory builds with (part of the pool's `ref`).
        close_timeout_s: limit for closing one instance.
    """

    def __init__(
        self,
        factory: Callable[[], EpisodeEnv],
        resources: Resources | None = None,
        *,
        name: str = "env",
        env_id: str = "",
        kwargs: Mapping[str, Any] | None = None,
        close_timeout_s: float = 10.0,
    ) -> None:
        self.factory, self.name, self.env_id = factory, name, env_id
        self.ref = EnvRef(name, env_id, dict(kwargs or {}))
        """The env by name, id and arguments: what requests for episodes on it carry."""
        self.owns_resources = resources is None
        self.resources = Resources() if resources is None else resources
        self.close_timeout_s = close_timeout_s
        self.idle: list[EpisodeEnv] = []
        self._all: dict[int, EpisodeEnv] = {}
        self.built = 0
        """Instances built so far (a reuse gauge: it stays small over many episodes)."""

    def prime(self) -> None:
        """Build one instance now (kept for the first episode), so an env that cannot be
        built stops a run at its start with the reason, not in every episode."""
        if not self.idle:
            self.idle.append(self._build())

    async def acquire(self) -> EpisodeEnv:
        return self.idle.pop() if self.idle else self._build()

    def release(self, env: EpisodeEnv) -> None:
        """Give a healthy instance back for the next episode."""
        self.idle.append(env)

    async def retire(self, env: EpisodeEnv) -> None:
        """Close and drop an instance that failed (it may be in any state)."""
        self._all.pop(id(env), None)
        await close_quietly(env, type(env).__name__, self.close_timeout_s)

    async def aclose(self) -> None:
        """Close every instance the pool still holds (and its own resources)."""
        envs, self._all, self.idle = list(self._all.values()), {}, []
        for env in envs:
            await close_quietly(env, type(env).__name__, self.close_timeout_s)
        if self.owns_resources:
            await self.resources.aclose()

    async def __aenter__(self) -> EnvPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _build(self) -> EpisodeEnv:
        try:
            env = self.factory()
        except ToolgymError:
            raise
        except Exception as exc:
            raise EnvBuildError(f"building the env raised {type(exc).__name__}: {exc}") from exc
        if isinstance(env, Env):  # anything else keeps to itself
            env.use_resources(self.resources)
        self.built += 1
        self._all[id(env)] = env
        return env
