"""The policy handle: which version of the weights generates, and when new weights may land.

Generation holds the gate while it uses the weights (a turn, or a whole episode when an
episode must be played by one version); a weight sync waits until nobody holds it, keeps new
holders out while it runs, then moves the version. So a sync never lands mid-turn, and
whatever a holder generated carries exactly the version it read. A sync that is waiting goes
first: holders that come after it wait for it, so a stream of new episodes cannot starve it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

R = TypeVar("R")


class PolicyGate:
    def __init__(self, version: int = 0) -> None:
        self.version = version
        """Weight updates the generating weights have had."""
        self._holders = 0
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[int]:
        """Use the weights (yields their version); a sync waits until every holder is out."""
        while not self._open.is_set():
            await self._open.wait()
        self._holders += 1
        self._idle.clear()
        try:
            yield self.version
        finally:
            self._holders -= 1
            if self._holders == 0:
                self._idle.set()

    async def swap(self, update: Callable[[], Awaitable[R]]) -> R:
        """Run `update` (the weight sync) once nobody holds the gate, keeping new holders
        out meanwhile; the version moves by one when it succeeds."""
        self._open.clear()
        try:
            while self._holders:
                await self._idle.wait()
            result = await update()
            self.version += 1
            return result
        finally:
            self._open.set()
