"""The reward stage, between collection and advantages.

For each unmasked trajectory, every configured source gives one value per step; the step
keeps them by name in `Step.rewards`. Outcome sources' weighted sum is the per-step reward
the estimators' returns are made of; process sources' weighted sum is the per-step process
reward, which joins the advantage as a normalised step term (advantages/step_term.py). A
source that returns the wrong number of values, or a value that is not finite, stops the run
with a one-line error: training on garbage is worse than not training.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolgym.agents.trajectory import Trajectory
from toolgym.errors import ToolgymError
from toolgym.training.rewards.base import RewardSource


class RewardError(ToolgymError, ValueError):
    """A reward source gave something that cannot be trained on."""


ROLES = ("outcome", "process")


@dataclass(frozen=True)
class WeightedSource:
    name: str
    source: RewardSource
    weight: float
    role: str = "outcome"


class RewardStage:
    def __init__(self, sources: Sequence[WeightedSource]) -> None:
        self.sources = list(sources)
        unknown = [s.role for s in self.sources if s.role not in ROLES]
        if unknown:
            raise ValueError(f"reward roles {unknown}: choose among {ROLES}")

    @property
    def has_process(self) -> bool:
        return any(s.role == "process" for s in self.sources)

    def score(self, trajectory: Trajectory) -> tuple[np.ndarray, np.ndarray]:
        """Each step's combined outcome reward and combined process reward (zeros for a
        masked trajectory); every component is written into the steps."""
        totals = {role: np.zeros(len(trajectory.steps)) for role in ROLES}
        if trajectory.masked:
            return totals["outcome"], totals["process"]
        for entry in self.sources:
            try:
                values = list(entry.source(trajectory))
            except RewardError:
                raise
            except Exception as exc:
                raise RewardError(
                    f"reward '{entry.name}' raised {type(exc).__name__}: {exc} ({trajectory.id})"
                ) from exc
            if len(values) != len(trajectory.steps):
                raise RewardError(
                    f"reward '{entry.name}' gave {len(values)} values for a trajectory of "
                    f"{len(trajectory.steps)} steps ({trajectory.id})"
                )
            if not all(math.isfinite(v) for v in values):
                raise RewardError(
                    f"reward '{entry.name}' gave a non-finite value ({trajectory.id})"
                )
            for step, value in zip(trajectory.steps, values, strict=True):
                step.rewards[entry.name] = float(value)
            totals[entry.role] += entry.weight * np.asarray(values, dtype=np.float64)
        return totals["outcome"], totals["process"]

    def metrics(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """Mean per-trajectory sum of each component (unmasked trajectories)."""
        kept = [t for t in trajectories if not t.masked]
        n = max(len(kept), 1)
        return {
            f"reward/{e.name}": sum(s.rewards.get(e.name, 0.0) for t in kept for s in t.steps) / n
            for e in self.sources
        }
