"""What a reward source is: a named function from a trajectory to one value per step.

The reward stage (stage.py) asks every configured source for its values, keeps them as the
step's named components (`Step.rewards`) and weights them into the per-step reward the
advantage estimators read. The env's own reward is one source among others, so a format
term, a judge's score or a learned process reward plugs in beside it without touching the
env or the estimators.
"""

from __future__ import annotations

from typing import Protocol

from toolgym.agents.trajectory import Trajectory


class RewardSource(Protocol):
    def __call__(self, trajectory: Trajectory) -> list[float]:
        """One value per step of `trajectory` (masked trajectories are never scored)."""
        ...
