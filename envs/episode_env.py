"""The env seam: what an episode runs on, wherever the env lives (this process or a Ray actor).
`make` returns one, pools lend them, and the rollout steps them; a toolgym `Env` is one, and so
is agents/ray/envs.py's `RemoteEnv`. What they return is the env's to get right and the
rollout's to check (rollout.py bounds every observation, reward and info)."""

from __future__ import annotations

from typing import Any, Protocol

from toolgym.envs.tasks import TaskSource


class HoldsTasks(Protocol):
    def task_source(self) -> TaskSource:
        """The env's tasks in splits (train, eval, test)."""
        ...


class EpisodeEnv(Protocol):
    @property
    def unwrapped(self) -> HoldsTasks:
        """The env itself, under any wrapper: where its task source is asked for."""
        ...

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> Any:
        """(messages, info) of a new episode on the task and seed given."""
        ...

    async def astep(self, action: str) -> Any:
        """(messages, reward, terminated, truncated, info) after the model's turn."""
        ...
