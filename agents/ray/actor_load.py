"""What a pool of Ray actors did since it was last asked: each actor's throughput, the
requests it held at most at once (its queue), and the share of the time it held none (idle).
The trainer logs it with each step (`ray/...`)."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Protocol, runtime_checkable


@runtime_checkable
class ReportsActors(Protocol):
    """A part whose work runs on Ray actors (an env pool, the engines)."""

    def actor_metrics(self) -> dict[str, float]:
        """Figures since the previous call, named `ray/...`."""
        ...


class ActorLoad:
    """Requests in flight on each of `actors` actors, and what they did since `window()`."""

    def __init__(self, actors: int, name: str, unit: str) -> None:
        self.name, self.unit = name, unit
        self.in_flight = [0] * actors
        """Requests each actor holds now."""
        self._done = [0.0] * actors
        self._busy_s = [0.0] * actors
        self._peak = [0] * actors
        self._since = [time.monotonic()] * actors
        """When each actor's in-flight count last changed."""
        self._window_start = time.monotonic()

    def least_loaded(self, avoid: Collection[int] = ()) -> int:
        """The actor holding the fewest requests, passing over those in `avoid` (which
        just failed) while there are others."""
        chosen = [a for a in range(len(self.in_flight)) if a not in avoid] or range(
            len(self.in_flight)
        )
        return min(chosen, key=self.in_flight.__getitem__)

    def start(self, actor: int) -> None:
        self._settle(actor)
        self.in_flight[actor] += 1
        self._peak[actor] = max(self._peak[actor], self.in_flight[actor])

    def end(self, actor: int) -> None:
        self._settle(actor)
        self.in_flight[actor] -= 1

    def count(self, actor: int, units: float = 1.0) -> None:
        """Work the actor finished (a step, a completion's tokens)."""
        self._done[actor] += units

    def _settle(self, actor: int) -> None:
        now = time.monotonic()
        if self.in_flight[actor] > 0:
            self._busy_s[actor] += now - self._since[actor]
        self._since[actor] = now

    def window(self) -> dict[str, float]:
        """Per actor since the last call: UNIT_per_s, queue_peak (most requests held at
        once) and idle (the share of the time it held none); then start a new window."""
        now = time.monotonic()
        span = max(now - self._window_start, 1e-9)
        figures: dict[str, float] = {}
        for actor in range(len(self.in_flight)):
            self._settle(actor)
            prefix = f"ray/{self.name}/{actor}"
            figures[f"{prefix}/{self.unit}_per_s"] = self._done[actor] / span
            figures[f"{prefix}/queue_peak"] = float(self._peak[actor])
            figures[f"{prefix}/idle"] = max(0.0, 1.0 - self._busy_s[actor] / span)
            self._done[actor], self._busy_s[actor] = 0.0, 0.0
            self._peak[actor] = self.in_flight[actor]
        self._window_start = now
        return figures
