"""Shared resources: what is expensive to make (a search engine and its model, a sandbox pool,
a database pool, a browser) is made once per key, shared by every env instance that asks for
it, and closed when its owner closes.

The owner is the runtime of a run (agents/runtime.py: one per process, closed at shutdown);
an env used on its own (`toolgym.make(...)`, then `reset`) gets a private set that its
`close` closes. An env asks through `await self.shared(key, open)`; the key says what makes
two requests the same resource, so two instances built with the same arguments share one.
Server processes (envs/server_process.py) and the TextWorld game host are resources like any
other: nothing of the kind lives in a module-level registry.

A set copied into a forked child (Gymnasium's async vector env forks its workers) is the
parent's: the child forgets what it holds, closing nothing, and makes its own on first use.

The run's clock (`Resources.clock`) is where training is: the runtime moves it before each
step plays, and what follows training's progress (a simulated search engine's noise
curriculum) reads it at reset, so no reset option carries the trainer's step.

Providers are how a higher layer hands a lower one a way to make something without an
import: the runtime (agents) provides "writer", which turns a model directory into a text
writer, so the simulated search engine (tools) reaches a generation engine by injection.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from toolgym.errors import ConfigError, did_you_mean
from toolgym.log import get_logger

log = get_logger(__name__)
T = TypeVar("T")

WRITER = "writer"
"""The provider that turns a model directory into a text writer (a `Writer`,
tools/search/engines/simulated.py): supplied by the runtime, which holds generation engines."""


@dataclass
class RunClock:
    """Where the run these resources serve is: step `step` of `steps`. Moved by the runtime
    (the trainer, before each step's episodes play); never by a task or a policy."""

    step: int = 0
    steps: int | None = None
    """None: no run moves it (an env used on its own, an evaluation)."""

    def at(self, step: int, steps: int) -> None:
        if steps < 1 or not 0 <= step <= steps:
            raise ValueError(f"the run's clock at step {step} of {steps}: give 0 <= step <= steps")
        self.step, self.steps = step, steps


class Resources:
    """Resources by key, made on first request, closed in reverse order by `aclose`.

    Args:
        providers: factories a higher layer supplies by name (see the module docstring).
        close_timeout_s: limit for closing each resource.
        loop: the event loop these resources live on, where an env that shares them runs its
            sync API (`reset`, `step`, `close`: handed to the loop from another thread while
            it runs), so sync and async users of one set share what it made; None: an env
            sharing them runs its sync API on a private loop.
    """

    def __init__(
        self,
        providers: Mapping[str, Callable[..., Any]] | None = None,
        close_timeout_s: float = 30,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.providers = dict(providers or {})
        self.close_timeout_s = close_timeout_s
        self._loop = loop
        self._made: dict[Hashable, asyncio.Future[Any]] = {}
        self.clock = RunClock()
        """Where the run is (see RunClock)."""
        self._pid = os.getpid()
        self.opened = 0
        """How many resources were made (a gauge for tests and logs)."""

    async def get(self, key: Hashable, open: Callable[[], T | Awaitable[T]]) -> T:
        """The resource under `key`, made by `open()` the first time; concurrent callers wait
        for that one. A failed `open` is not remembered: the next request tries again."""
        self._forget_if_forked()
        future = self._made.get(key)
        if future is None:
            future = self._made[key] = asyncio.get_running_loop().create_future()
            try:
                made = open()
                value = await made if inspect.isawaitable(made) else made
            except BaseException as exc:
                del self._made[key]
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
                    future.exception()  # retrieved: waiters get it, nobody else must log it
                raise
            self.opened += 1
            future.set_result(value)
        return await asyncio.shield(future)

    def made(self) -> dict[Hashable, Any]:
        """The resources made so far, by key (for logs and tests)."""
        self._forget_if_forked()
        return {
            key: future.result()
            for key, future in self._made.items()
            if future.done() and not future.cancelled() and future.exception() is None
        }

    def home_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop given at construction, while it is open (and not a forked parent's)."""
        self._forget_if_forked()
        loop = self._loop
        return loop if loop is not None and not loop.is_closed() else None

    def provider(self, name: str) -> Callable[..., Any]:
        if name not in self.providers:
            known = ", ".join(self.providers) or "none"
            raise ConfigError(
                f"no '{name}' provider here.{did_you_mean(name, self.providers)} Known: {known}. "
                "Run the env through toolgym's runtime (the trainer, `toolgym eval`), which "
                "provides it, or pass the ready-made object to the env instead."
            )
        return self.providers[name]

    async def aclose(self) -> None:
        """Close every resource made (newest first), each bounded; failures are logged."""
        self._forget_if_forked()
        made, self._made = self._made, {}
        for key, future in reversed(list(made.items())):
            if not future.done() or future.cancelled() or future.exception() is not None:
                continue
            await close_quietly(future.result(), f"resource {key!r}", self.close_timeout_s)

    def _forget_if_forked(self) -> None:
        """In a forked child, drop the parent's resources unclosed (their processes, ports and
        threads are the parent's, to use and to close) and its loop (whose file descriptors
        the two processes would share)."""
        if os.getpid() != self._pid:
            self._made, self._pid, self.opened, self._loop = {}, os.getpid(), 0, None


async def close_quietly(thing: Any, what: str, timeout_s: float) -> None:
    """`await thing.aclose()` (or `thing.close()`), bounded, logging instead of raising."""
    closer = getattr(thing, "aclose", None) or getattr(thing, "close", None)
    if closer is None:
        return
    try:
        async with asyncio.timeout(timeout_s):
            result = closer()
            if inspect.isawaitable(result):
                await result
    except Exception as exc:
        log.warning("closing %s failed: %s: %s", what, type(exc).__name__, exc)
