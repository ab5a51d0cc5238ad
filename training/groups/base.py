"""Group builders: what makes a training step's groups.

A builder is asked for a step's groups with a `BuildContext`: the step, the policy's
version, how many groups the step trains on, and a way to play episodes with the current
policy. Today's trainer draws tasks from its envs' train splits (tasks.py); a self-play
builder proposes tasks, checks them and has them solved; a text-game builder may make the
games it plays. A builder mints its groups' ids, may hold state (a pool of tasks) that rides
in the checkpoint, and may hand back more or fewer groups than asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toolgym.agents.collector import GroupRequest
from toolgym.agents.trajectory import TrajectoryGroup

Collect = Callable[[Sequence[GroupRequest]], Awaitable[list[TrajectoryGroup]]]
"""Plays the requests' episodes with the current policy at the training temperature."""


@dataclass(frozen=True)
class BuildContext:
    step: int
    """The training step the groups are for."""
    policy_version: int
    """The version of the weights that will play them (weight updates so far)."""
    groups: int
    """How many groups the step trains on (`rollout.tasks_per_step`)."""
    collect: Collect


class GroupBuilder(Protocol):
    async def build(self, ctx: BuildContext) -> list[TrajectoryGroup]:
        """The step's groups (their ids unique in the run)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What it must remember across a resume (JSON-able)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class PlaysRequests(Protocol):
    """A builder whose groups are its requests played as they stand (no group depends on
    another): an asynchronous run starts each group by itself and trains on the first to
    finish, where any other builder's step is started and handed on whole."""

    def requests(self, step: int, groups: int) -> list[GroupRequest]:
        """Step `step`'s `groups` requests; the same arguments give the same requests."""
        ...


@runtime_checkable
class ReportsMetrics(Protocol):
    """A builder with figures of its own for each step (self-play's valid share per stage,
    solve rate, pool size), logged as `groups/NAME`."""

    last_metrics: dict[str, float]


def group_metrics(builder: GroupBuilder, groups: list[TrajectoryGroup]) -> dict[str, float]:
    """`groups/filtered`, the groups that give the update nothing (no unmasked member with
    steps), `groups/untrained`, those the builder played but kept out of the update, and the
    builder's own figures where it reports them."""
    filtered = sum(not any(not t.masked and t.steps for t in g.trajectories) for g in groups)
    untrained = sum(g.untrained is not None for g in groups)
    own = builder.last_metrics if isinstance(builder, ReportsMetrics) else {}
    return {"groups/filtered": float(filtered), "groups/untrained": float(untrained),
            **{f"groups/{k}": float(v) for k, v in own.items()}}  # fmt: skip
