"""The runtime: what lives as long as a run, and who closes it.

One event loop for the run's whole life (every phase runs on it, so loop-bound things such
as HTTP sessions and engine futures survive between phases); one env pool per env name,
whose instances are reused across episodes; the shared resources those instances ask for
(envs/resources.py), with the providers only this layer can supply (a "writer" over a
generation engine, for simulated search). `close` closes the pools, then the resources,
then the loop; a closed runtime opens afresh on its next use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from toolgym.agents.writer import EngineWriter
from toolgym.envs.pool import EnvPool, Pool
from toolgym.envs.ref import EnvRef
from toolgym.envs.registration import make
from toolgym.envs.resources import WRITER, Resources

R = TypeVar("R")


async def _awaited(awaitable: Awaitable[R]) -> R:
    return await awaitable


class Runtime:
    """Args:
    providers: extra or replacement providers for the shared resources, by name.
    """

    def __init__(self, providers: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.providers: dict[str, Callable[..., Any]] = {WRITER: EngineWriter.load}
        self.providers.update(providers or {})
        self._loop: asyncio.AbstractEventLoop | None = None
        self.resources = Resources(self.providers)
        self.pools: dict[str, Pool] = {}

    def at_step(self, step: int, steps: int) -> None:
        """Move the run's clock (`Resources.clock`) to training step `step` of `steps`: what
        the envs' shared resources read where they follow training's progress."""
        self.resources.clock.at(step, steps)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def run(self, coro: Awaitable[R]) -> R:
        """Run `coro` to completion on the runtime's loop. From another thread while the loop
        runs (an asynchronous trainer's update and reward stage), it is handed to the loop
        and waited for; on the loop's own thread while it runs, it is refused (it would
        deadlock)."""
        loop = self.loop
        if not loop.is_running():
            return loop.run_until_complete(coro)
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if current is loop:
            raise RuntimeError("Runtime.run called by a coroutine on the run's loop: await it")
        return asyncio.run_coroutine_threadsafe(_awaited(coro), loop).result()

    def pool_for(self, env: EnvRef) -> Pool:
        """The pool of the env `env` names (built by `make(env.env_id, **env.kwargs)`), made
        on first use; a name already taken by another env is refused."""
        pool = self.pools.get(env.name)
        if pool is None:
            pool = self.make_pool(env)
            pool.prime()  # an env that cannot be built stops the run here, saying why
            self.pools[env.name] = pool
        elif pool.ref != env:
            raise ValueError(f"env name '{env.name}' is taken by {pool.ref}; asked for {env}")
        return pool

    def make_pool(self, env: EnvRef) -> Pool:
        """A pool of the env in this process, its instances sharing the runtime's resources."""
        arguments = dict(env.kwargs)
        return EnvPool(
            lambda: make(env.env_id, **arguments), self.resources, name=env.name,
            env_id=env.env_id, kwargs=arguments,
        )  # fmt: skip

    def close(self) -> None:
        """Close the pools, the shared resources and the loop (safe to call twice)."""
        if self._loop is None:
            return
        pools, self.pools = list(self.pools.values()), {}
        resources, self.resources = self.resources, Resources(self.providers)
        loop, self._loop = self._loop, None

        async def shutdown() -> None:
            for pool in pools:
                await pool.aclose()
            await resources.aclose()

        try:
            loop.run_until_complete(shutdown())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
