"""What the whole-step sources share (implicit PRM, Monte-Carlo values, judge): their values
are worked out for all of a step's trajectories in `prepare`, kept by trajectory, and read
back one trajectory at a time when the stage scores it."""

from __future__ import annotations

from toolgym.agents.trajectory import Trajectory
from toolgym.training.rewards.stage import RewardError


class PreparedScores:
    source_name = "source"
    """How errors name the source."""

    def __init__(self) -> None:
        self.scores: dict[str, list[float]] = {}
        """The step's values, by trajectory id."""
        self.last_metrics: dict[str, float] = {}

    def __call__(self, trajectory: Trajectory) -> list[float]:
        try:
            return self.scores[trajectory.id]
        except KeyError:
            raise RewardError(
                f"{self.source_name}: trajectory {trajectory.id} was not among the step's "
                "prepared groups"
            ) from None
