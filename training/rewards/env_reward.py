"""The env's own reward, step by step, as `astep` returned it."""

from __future__ import annotations

from toolgym.agents.trajectory import Trajectory


class EnvReward:
    def __call__(self, trajectory: Trajectory) -> list[float]:
        return [s.reward for s in trajectory.steps]
