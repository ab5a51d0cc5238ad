"""A frozen copy of the policy that plays the episodes scoring a self-play step's proposals
(`selfplay.scorer: snapshot`; R-Zero's fixed solver).

The solver groups a step trains on also score their proposers by default; then a task pays
its proposer less as soon as the solver learns it, and the proposer chases a moving target.
A snapshot holds still: it is the run's start weights, or (`selfplay.snapshot_every: N`) the
trained weights taken every N updates, R-Zero's alternation of a fixed solver and a trained
one. It is a second engine with weights of its own, built beside the policy's.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolgym.agents.collector import GroupRequest
from toolgym.agents.engines import PolicyEngine, TakesFullWeights
from toolgym.agents.trajectory import TrajectoryGroup
from toolgym.errors import ConfigError
from toolgym.log import get_logger
from toolgym.training.groups import Collect
from toolgym.training.player import Player
from toolgym.training.update.weight_sync import TrainedWeights

log = get_logger(__name__)


class SolverSnapshot:
    def __init__(self, player: Player, weights: TrainedWeights, every: int) -> None:
        """`player`: plays with the snapshot's engine; `weights`: the trained weights it takes
        every `every` updates (0: never)."""
        if every and not isinstance(player.engine, TakesFullWeights):
            raise ConfigError(f"selfplay.snapshot_every: {type(player.engine).__name__} "
                              "cannot take new weights")  # fmt: skip
        self.player, self.weights, self.every = player, weights, every
        self.taken = 0
        """The updates the snapshot's weights had (0: the run's start weights)."""

    @property
    def engine(self) -> PolicyEngine:
        return self.player.engine

    def collect_for(self, step: int) -> Collect:
        """How step `step`'s scoring episodes are played: by the snapshot, at the training
        temperature and the step's sampling seed, after it takes the trained weights if due
        (step `step` plays after `step` updates: a sync run's weights then hold still)."""

        async def collect(requests: Sequence[GroupRequest]) -> list[TrajectoryGroup]:
            if self.every and step // self.every > self.taken // self.every:
                assert isinstance(self.engine, TakesFullWeights)
                await self.engine.update_weights(self.weights.full_state_dict())
                log.info(
                    "step %d: the scoring snapshot takes the weights of %d updates", step, step
                )
                self.taken = step
            return await self.player.collect_for(step)(requests)

        return collect
