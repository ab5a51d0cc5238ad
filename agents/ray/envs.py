"""Env pools as Ray actors: an env's instances live in actor processes placed by Ray across
the cluster's nodes, and the run's episodes step them from the driver.

Each `EnvHost` actor keeps instances of one env and the shared resources they ask for
(sandbox pools, browsers, databases) for its whole life, and lends instances out by lease.
`RayEnvPool` is the driver's pool for that env: it spreads leases over its actors (the least
loaded first) and hands the episode runner a `RemoteEnv` whose `areset` and `astep` are calls
to the actor. Episodes run on the driver's loop, so the engine and the trainer see nothing
new.

An actor that dies (killed, its node lost) fails the calls in flight: their episodes end
ENV_FAILED and are masked, as any env failure is. Ray restarts the actor (`max_restarts`),
which builds its env afresh; while it restarts, new episodes go to the other actors. Ray is
optional (`pip install 'toolgym[dist]'`).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from toolgym.agents.ray.actor_load import ActorLoad
from toolgym.agents.ray.cluster import close_actors, connect, import_ray, restartable
from toolgym.agents.runtime import Runtime
from toolgym.envs.episode_env import EpisodeEnv
from toolgym.envs.pool import EnvPool, Pool
from toolgym.envs.ref import EnvRef
from toolgym.envs.registration import make
from toolgym.envs.resources import RunClock
from toolgym.envs.tasks import TaskSource
from toolgym.errors import EnvBuildError, one_line

RETRY_S = 0.5
"""How long to wait before asking actors that were all down again."""


class EnvHost:
    """Instances of one env in an actor process, lent by lease number."""

    def __init__(self, env_id: str, kwargs: Mapping[str, Any], name: str) -> None:
        arguments = dict(kwargs)
        self.pool = EnvPool(
            lambda: make(env_id, **arguments), name=name, env_id=env_id, kwargs=arguments
        )
        self.pool.prime()  # an env that cannot be built fails the actor's start, saying why
        self.leased: dict[str, EpisodeEnv] = {}
        """Lent instances by lease: random names, so a lease from before a restart never
        names an instance of the restarted actor."""

    async def acquire(self) -> str:
        lease = uuid.uuid4().hex
        self.leased[lease] = await self.pool.acquire()
        return lease

    async def reset(
        self, lease: str, seed: int | None, options: dict[str, Any] | None,
        clock: tuple[int, int] | None = None,
    ) -> Any:  # fmt: skip
        """Reset a lent instance, the actor's clock moved to the driver's run first."""
        if clock is not None:
            self.pool.resources.clock.at(*clock)
        return await self.leased[lease].areset(seed=seed, options=options)

    async def step(self, lease: str, action: str) -> Any:
        return await self.leased[lease].astep(action)

    def release(self, lease: str) -> None:
        env = self.leased.pop(lease, None)
        if env is not None:  # else lent before a restart: gone with it
            self.pool.release(env)

    async def retire(self, lease: str) -> None:
        env = self.leased.pop(lease, None)
        if env is not None:
            await self.pool.retire(env)

    def task_source(self) -> TaskSource:
        env = self.pool.idle[0] if self.pool.idle else next(iter(self.leased.values()))
        return env.unwrapped.task_source()  # a ToolEnv's; checked at its reset

    def built(self) -> int:
        return self.pool.built

    async def close(self) -> None:
        await self.pool.aclose()


class RemoteEnv:
    """An instance leased from an `EnvHost`, as the episode runner steps it."""

    def __init__(self, pool: RayEnvPool, host: int, lease: str) -> None:
        self.pool, self.host, self.lease = pool, host, lease

    @property
    def unwrapped(self) -> RemoteEnv:
        return self

    async def areset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset on the actor, whose resources' clock is set to the driver's first."""
        clock = self.pool.clock
        where = None if clock.steps is None else (clock.step, clock.steps)
        return await self.pool.hosts[self.host].reset.remote(self.lease, seed, options, where)

    async def astep(self, action: str) -> Any:
        result = await self.pool.hosts[self.host].step.remote(self.lease, action)
        self.pool.usage.count(self.host)
        return result

    def task_source(self) -> TaskSource:
        """The env's task source, from its actor (blocking: asked once, when a run starts)."""
        ray = import_ray()
        return ray.get(self.pool.hosts[self.host].task_source.remote(), timeout=self.pool.timeout_s)


def remote(env: EpisodeEnv) -> RemoteEnv:
    """An instance a `RayEnvPool` lent (another pool's is refused)."""
    if not isinstance(env, RemoteEnv):
        raise TypeError(f"a Ray env pool lends RemoteEnv instances; given a {type(env).__name__}")
    return env


class RayEnvPool:
    """The driver's pool of one env whose instances live in `actors` Ray actors of `cpus`
    CPUs each (a fraction shares a core)."""

    def __init__(
        self, ref: EnvRef, actors: int, cpus: float, timeout_s: float = 60.0,
        clock: RunClock | None = None,
    ) -> None:  # fmt: skip
        self.ref, self.name, self.env_id = ref, ref.name, ref.env_id
        self.clock = clock or RunClock()
        """The driver's run clock, sent to the actor with each reset."""
        self.timeout_s = timeout_s
        host = restartable(EnvHost, cpus)
        self.hosts = [host.remote(ref.env_id, dict(ref.kwargs), ref.name) for _ in range(actors)]
        self.usage = ActorLoad(actors, f"env_{ref.name}", "steps")
        """Instances each actor has lent and not had back (`in_flight`), and its steps."""
        self.lent = 0
        """Instances lent so far, over all actors."""

    def prime(self) -> None:
        """Wait until every actor has built its first instance; an env that cannot be built
        stops the run here with the actor's reason."""
        ray = import_ray()
        try:
            ray.get([h.built.remote() for h in self.hosts], timeout=self.timeout_s)
        except Exception as exc:
            cause = one_line(exc, 400)
            raise EnvBuildError(f"env '{self.env_id}' on Ray actors: {cause}") from None

    async def acquire(self) -> RemoteEnv:
        """An instance from the least-loaded actor. An actor that is down (killed, being
        restarted) is passed over for the others; when all are down, asked again until
        `timeout_s`. Nothing has run on an instance yet, so trying elsewhere loses nothing."""
        ray = import_ray()
        down = (ray.exceptions.ActorUnavailableError, ray.exceptions.RayActorError)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        failed: set[int] = set()
        while True:
            host = self.usage.least_loaded(avoid=failed)
            self.usage.start(host)
            try:
                lease = await asyncio.wait_for(
                    self.hosts[host].acquire.remote(), max(deadline - loop.time(), 0.1)
                )  # fmt: skip
            except down:
                self.usage.end(host)
                failed.add(host)
                if len(failed) < len(self.hosts):
                    continue
                if loop.time() >= deadline:
                    raise
                failed.clear()
                await asyncio.sleep(RETRY_S)
                continue
            except BaseException:
                self.usage.end(host)
                raise
            self.lent += 1
            return RemoteEnv(self, host, lease)

    def release(self, env: EpisodeEnv) -> None:
        env = remote(env)
        self.usage.end(env.host)
        self.hosts[env.host].release.remote(env.lease)

    async def retire(self, env: EpisodeEnv) -> None:
        """Drop a failed instance; its actor may be dead or restarted, so a failure to reach
        it only means there is nothing left to close."""
        env = remote(env)
        self.usage.end(env.host)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.hosts[env.host].retire.remote(env.lease), self.timeout_s)

    def actor_metrics(self) -> dict[str, float]:
        """Each actor's steps/s, most instances lent at once, and idle share (none lent)."""
        return self.usage.window()

    async def aclose(self) -> None:
        await close_actors(self.hosts, self.timeout_s)


class RayRuntime(Runtime):
    """A runtime whose env pools are Ray actors (`env_actors` per env, `env_cpus` CPUs
    each), on the cluster at `address` (`auto`: the one `ray start` runs on this machine;
    `local`: start one in this process). The loop, the engine and the reward stage stay in
    the driver."""

    def __init__(
        self,
        address: str,
        env_actors: int = 2,
        env_cpus: float = 0.5,
        providers: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        super().__init__(providers)
        connect(address)
        self.env_actors, self.env_cpus = env_actors, env_cpus

    def make_pool(self, env: EnvRef) -> Pool:
        return RayEnvPool(env, self.env_actors, self.env_cpus, clock=self.resources.clock)
