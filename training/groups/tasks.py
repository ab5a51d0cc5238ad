"""The default group builder: each step's groups are tasks drawn from the envs' train
splits, shared among a mixture's envs by weight (training/groups/allotment.py), each played
`rollouts_per_task` times. Slot g of a step draws task g of its env's train split, so step k
always trains on the same tasks and a resume needs no state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolgym.agents.collector import GroupRequest
from toolgym.agents.trajectory import TrajectoryGroup
from toolgym.envs.tasks import TaskSource
from toolgym.training.config import EnvSection
from toolgym.training.groups.allotment import allot, step_slots
from toolgym.training.groups.base import BuildContext


class TaskGroups:
    def __init__(
        self,
        mixture: Sequence[EnvSection],
        tasks: Mapping[str, TaskSource],
        run_seed: int,
        rollouts_per_task: int,
        tasks_per_step: int,
    ) -> None:
        """`tasks_per_step`: the most groups a step asks for (its slots are reserved, so a
        step asked for fewer, as a share of a builder mixture, draws no other step's)."""
        self.mixture, self.tasks = list(mixture), tasks
        self.run_seed, self.rollouts_per_task = run_seed, rollouts_per_task
        self.tasks_per_step = tasks_per_step

    def requests(self, step: int, groups: int) -> list[GroupRequest]:
        """The step's `groups` requests (group ids `env:train:index`, never drawn twice)."""
        if groups > self.tasks_per_step:
            raise ValueError(
                f"asked for {groups} groups; a step has {self.tasks_per_step} task slots"
            )
        slots = step_slots(self.run_seed, step, self.tasks_per_step)[:groups]
        which = allot([e.weight for e in self.mixture], step, len(slots))
        return [
            GroupRequest(self.mixture[i].ref, self.tasks[self.mixture[i].label].draw("train", g),
                         self.rollouts_per_task, self.mixture[i].role)
            for g, i in zip(slots, which, strict=True)
        ]  # fmt: skip

    async def build(self, ctx: BuildContext) -> list[TrajectoryGroup]:
        return await ctx.collect(self.requests(ctx.step, ctx.groups))

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
