"""A mixture of group builders: each step's groups are shared among builders by weight (the
same low-discrepancy allotment as a mixture of envs, training/groups/allotment.py), each builder
asked for its share, all of them at once. Its state is its builders' states, by name.

A self-play step beside plain tasks is a mixture of a proposer-solver builder and the
default TaskGroups, for example.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toolgym.agents.trajectory import TrajectoryGroup
from toolgym.training.groups.allotment import allot
from toolgym.training.groups.base import BuildContext, GroupBuilder


class BuilderMixture:
    def __init__(self, builders: Sequence[tuple[str, GroupBuilder, float]]) -> None:
        """`builders`: (name, builder, weight); names key their states in the checkpoint."""
        names = [name for name, _, _ in builders]
        if not builders or len(set(names)) != len(names):
            raise ValueError(f"a builder mixture needs builders with distinct names, got {names}")
        if any(weight <= 0 for _, _, weight in builders):
            raise ValueError("every builder's weight must be above 0")
        self.builders = list(builders)

    def shares(self, step: int, groups: int) -> list[int]:
        """How many of the step's `groups` each builder makes."""
        which = allot([weight for _, _, weight in self.builders], step, groups)
        return [which.count(i) for i in range(len(self.builders))]

    async def build(self, ctx: BuildContext) -> list[TrajectoryGroup]:
        asked = [
            builder.build(replace(ctx, groups=share))
            for (_, builder, _), share in zip(
                self.builders, self.shares(ctx.step, ctx.groups), strict=True
            )
            if share
        ]
        return [g for made in await asyncio.gather(*asked) for g in made]

    def state_dict(self) -> dict[str, Any]:
        return {name: builder.state_dict() for name, builder, _ in self.builders}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, builder, _ in self.builders:
            builder.load_state_dict(state.get(name, {}))
