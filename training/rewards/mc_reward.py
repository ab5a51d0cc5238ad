"""Monte-Carlo step values as a reward source (`source: mc_values`, with `scores: process`).

Every training step, for each unmasked trajectory, the budget picks steps to branch from
(training/process/mc_values.py); from the state after each, restored by replaying the
trajectory's actions on a fresh reset of its env, the current policy plays `continuations`
episodes to the end, and their outcome returns (the run's outcome rewards, summed) are
averaged into the step's value. A step not branched takes the next known value; the last
step's is the trajectory's own return. The values are the process reward, normalised over
the group's steps into the step term.

The env must be deterministic given its seed and task (Maze, SQL, code tasks and the
self-hosted search engines are): a replay that answers differently is masked, and a step
whose continuations were all masked counts as not branched.

The `entropy:N` budget ranks steps by the policy's mean negative log-probability of its own
action tokens, an unbiased one-sample estimate of the entropy that needs nothing beyond what
the rollout recorded.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field, field_validator

from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.config import ConfigModel, validate
from toolgym.errors import ConfigError
from toolgym.training.process.mc_values import step_values, steps_to_branch
from toolgym.training.rewards.base import RunContext
from toolgym.training.rewards.prepared import PreparedScores
from toolgym.training.rewards.stage import RewardError


class MCSettings(ConfigModel):
    """The settings of `{source: mc_values, scores: process, kwargs: {...}}`, step values
    estimated by continuing each trajectory from its intermediate states
    (training/rewards/mc_reward.py)."""

    continuations: int = Field(4, ge=1)
    """Episodes played from each branched state (K)."""
    budget: str = "all"
    """Which steps to branch from: all (every step but the last), every:K (every K-th),
    entropy:N (the N steps where the policy was least sure), or alone (the steps whose
    anchor state no other turn of their group shares: where GiGPO compares nothing)."""

    @field_validator("budget")
    @classmethod
    def _known_budget(cls, budget: str) -> str:
        try:
            steps_to_branch(2, budget, [0.0, 0.0], [True, True])
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return budget


class MCValueReward(PreparedScores):
    source_name = "mc_values"
    Settings = MCSettings

    def __init__(self, context: RunContext, **settings: Any) -> None:
        super().__init__()
        self.settings = validate(self.Settings, settings)
        if context.continue_from is None:
            raise RewardError("mc_values needs a training run that can play continuations")
        self.continue_from = context.continue_from

    async def prepare(
        self, groups: Sequence[TrajectoryGroup], returns: Sequence[Sequence[float]] | None
    ) -> None:
        """Branch every unmasked trajectory of the step where the budget says, and keep each
        step's value."""
        if returns is None:
            raise RewardError("mc_values scores steps: give it `scores: process`")
        t0 = time.perf_counter()
        kept = [
            (t, r)
            for g, row in zip(groups, returns, strict=True)
            for t, r in zip(g.trajectories, row, strict=True)
            if not t.masked and t.steps
        ]
        alone = _alone(groups)
        budget = self.settings.budget
        requests = [
            (t, after + 1, self.settings.continuations)
            for t, _ in kept
            for after in steps_to_branch(len(t.steps), budget, _entropies(t), alone[t.id])
        ]
        outcomes = await self.continue_from(requests) if requests else []
        branched: dict[str, dict[int, list[float]]] = {}
        masked = 0
        for (t, steps, _), results in zip(requests, outcomes, strict=True):
            finished = [r.outcome for r in results if r.outcome is not None]
            masked += len(results) - len(finished)
            if finished:
                branched.setdefault(t.id, {})[steps - 1] = finished
        self.scores = {
            t.id: step_values(len(t.steps), branched.get(t.id, {}), r).tolist() for t, r in kept
        }
        self.last_metrics = {
            "branches": float(len(requests)),
            "continuations": float(sum(len(r) for r in outcomes)),
            "masked": float(masked),
            "env_steps": float(sum(r.env_steps for results in outcomes for r in results)),
            "seconds": time.perf_counter() - t0,
        }


def _alone(groups: Sequence[TrajectoryGroup]) -> dict[str, list[bool]]:
    """For each unmasked trajectory, whether each step's anchor state is the only one of its
    key among its group's unmasked turns (GiGPO's step groups of one)."""
    out: dict[str, list[bool]] = {}
    for g in groups:
        played = [t for t in g.trajectories if not t.masked]
        seen = Counter(s.state_key for t in played for s in t.steps)
        out |= {t.id: [seen[s.state_key] == 1 for s in t.steps] for t in played}
    return out


def _entropies(trajectory: Trajectory) -> list[float]:
    """Each step's mean negative log-probability of its own tokens (an entropy estimate)."""
    return [-float(np.mean(s.logprobs)) if s.logprobs else 0.0 for s in trajectory.steps]
