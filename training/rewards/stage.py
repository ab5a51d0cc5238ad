"""The reward stage, between collection and advantages.

For each unmasked trajectory, every configured source gives one value per step; the step
keeps them by name in `Step.rewards`. Outcome sources' weighted sum is the per-step reward
the estimators' returns are made of; process sources' weighted sum is the per-step process
reward, which joins the advantage as a normalised step term (advantages/step_term.py). A
source that returns the wrong number of values, or a value that is not finite, stops the run
with a one-line error: training on garbage is worse than not training.

A source may also see the whole step first and report metrics of its own
(`PreparesScores`), keep state across steps (`KeepsState`, saved in the run's checkpoint),
and hold resources the stage closes (`HoldsResources`): protocols in base.py, declared by
the source's methods. Sources key what they prepare by trajectory id, so the step's ids
must be unique.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.errors import ToolgymError
from toolgym.training.rewards.agreement import agreement_metrics
from toolgym.training.rewards.base import (
    HoldsResources,
    KeepsState,
    PreparesScores,
    RewardSource,
)


class RewardError(ToolgymError, ValueError):
    """A reward source gave something that cannot be trained on."""


SCORES = ("outcome", "process")


@dataclass(frozen=True)
class WeightedSource:
    name: str
    source: RewardSource
    weight: float
    scores: str = "outcome"
    """What it scores: the episode's outcome, or its steps (a process reward)."""
    proxy: bool = False
    """It is not the verified outcome (a PRM, a judge, what an agent reported): the step's
    metrics say how far it agrees with that outcome (agreement.py)."""


class RewardStage:
    def __init__(self, sources: Sequence[WeightedSource]) -> None:
        self.sources = list(sources)
        unknown = [s.scores for s in self.sources if s.scores not in SCORES]
        if unknown:
            raise ValueError(f"rewards scoring {unknown}: choose among {SCORES}")

    @property
    def has_process(self) -> bool:
        return any(s.scores == "process" for s in self.sources)

    async def aclose(self) -> None:
        """Close what sources hold open (a judge's connections or model)."""
        for entry in self.sources:
            if isinstance(entry.source, HoldsResources):
                await entry.source.aclose()

    def state_dict(self) -> dict[str, Any]:
        """The state of every source that keeps one, by component name."""
        return {
            e.name: e.source.state_dict() for e in self.sources if isinstance(e.source, KeepsState)
        }

    def load_state_dict(self, states: dict[str, Any]) -> None:
        for entry in self.sources:
            if not isinstance(entry.source, KeepsState):
                continue
            if entry.name not in states:
                raise RewardError(
                    f"reward '{entry.name}' keeps state, but the checkpoint has none for it "
                    "(was the run started without it?)"
                )
            entry.source.load_state_dict(states[entry.name])

    async def score(
        self, groups: Sequence[TrajectoryGroup]
    ) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Each trajectory's per-step combined outcome and process rewards (zeros for a masked
        trajectory), group by group; every component is written into the steps.

        Outcome sources score first. A source that works on a whole step at once
        (`prepare(groups, returns)`) is then shown the groups: an outcome source with
        `returns` None, a process source with each trajectory's outcome return (the sum of
        its combined outcome rewards), which is what the implicit PRM prefers by."""
        ids = [t.id for g in groups for t in g.trajectories]
        if len(set(ids)) != len(ids):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise RewardError(f"trajectory ids must be unique in a step; twice: {twice[:3]}")
        outcome = await self._outcomes(groups)
        returns = [[float(o.sum()) for o in row] for row in outcome]
        await self._prepare("process", groups, returns)
        return [
            [(o, self._combine(t, "process")) for t, o in zip(g.trajectories, row, strict=True)]
            for g, row in zip(groups, outcome, strict=True)
        ]

    async def outcome_returns(self, groups: Sequence[TrajectoryGroup]) -> list[list[float]]:
        """Each trajectory's outcome return (its combined outcome rewards summed), group by
        group: what a continuation of it scores (Monte-Carlo step values)."""
        return [[float(o.sum()) for o in row] for row in await self._outcomes(groups)]

    async def _outcomes(self, groups: Sequence[TrajectoryGroup]) -> list[list[np.ndarray]]:
        await self._prepare("outcome", groups, None)
        return [[self._combine(t, "outcome") for t in g.trajectories] for g in groups]

    async def _prepare(
        self, scores: str, groups: Sequence[TrajectoryGroup], returns: list[list[float]] | None
    ) -> None:
        for entry in self.sources:
            if entry.scores == scores and isinstance(entry.source, PreparesScores):
                await entry.source.prepare(groups, returns)

    def _combine(self, trajectory: Trajectory, scores: str) -> np.ndarray:
        """The weighted sum of the values of the sources that score `scores`, for each step."""
        total = np.zeros(len(trajectory.steps))
        if trajectory.masked:
            return total
        for entry in self.sources:
            if entry.scores != scores:
                continue
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
            total += entry.weight * np.asarray(values, dtype=np.float64)
        return total

    def metrics(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """Mean per-trajectory sum of each component (unmasked trajectories), each source's
        own metrics under its name (NAME/KEY), and each proxy's agreement with the verified
        outcome (proxy/NAME/...)."""
        kept = [t for t in trajectories if not t.masked]
        n = max(len(kept), 1)
        out = {
            f"reward/{e.name}": sum(s.rewards.get(e.name, 0.0) for t in kept for s in t.steps) / n
            for e in self.sources
        }
        for entry in self.sources:
            if isinstance(entry.source, PreparesScores):
                own = entry.source.last_metrics
                out |= {f"{entry.name}/{key}": value for key, value in own.items()}
        proxies = {e.name: e.scores for e in self.sources if e.proxy}
        return out | agreement_metrics(kept, proxies)
