"""A length term: `per_token` for every generated token of a turn past `budget` tokens
(negative to discourage rambling turns)."""

from __future__ import annotations

from toolgym.agents.trajectory import Trajectory


class LengthReward:
    def __init__(self, per_token: float = -0.001, budget: int = 0) -> None:
        self.per_token, self.budget = float(per_token), int(budget)

    def __call__(self, trajectory: Trajectory) -> list[float]:
        return [
            self.per_token * max(0, s.response_end - s.response_start - self.budget)
            for s in trajectory.steps
        ]
