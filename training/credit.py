"""Credit: a step's trained groups scored by the reward stage, then their advantages, one
value per turn. Each turn keeps what it was given (`Step.advantage`) and the anchor state it
was compared in (`Step.anchor`: its state key, or under anchor_similarity the alike earlier
state it joined), so the step's kept rollouts show which turn earned the credit."""

from __future__ import annotations

import numpy as np

from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.training.advantages import (
    GroupRewards,
    batch_scaled,
    compute_advantages,
    turns_centred,
)
from toolgym.training.config import AdvantageSection
from toolgym.training.rewards import RewardStage


async def assign_credit(
    groups: list[TrajectoryGroup], rewards: RewardStage, setting: AdvantageSection
) -> tuple[list[Trajectory], list[np.ndarray]]:
    """The trained episodes (unmasked, with turns, of groups the builder trains) and each
    one's per-turn advantages (with `advantage.centre_turns`, less the mean of every
    group's turns; under `advantage.scale: batch`, divided once every group's are in)."""
    trajectories, advantages = [], []
    estimator, options = setting.estimator, setting.options()
    alpha, combine = setting.step_alpha, setting.step_combine
    for g in groups:  # the kept rollouts say why these were played but not learned from
        for t in g.trajectories:
            t.untrained = g.untrained
    groups = [g for g in groups if g.untrained is None]
    for g, scored in zip(groups, await rewards.score(groups), strict=True):
        process = [p for _, p in scored] if rewards.has_process else None
        outcomes, similar = [o for o, _ in scored], setting.anchor_similarity
        group = GroupRewards.from_trajectories(
            g.trajectories, outcomes, process, g.baseline, similar
        )
        values = compute_advantages(
            estimator, group, step_alpha=alpha, step_combine=combine, **options
        )
        for t, a, anchors in zip(g.trajectories, values, group.state_keys, strict=True):
            if not t.masked and t.steps:
                trajectories.append(t)
                advantages.append(a)
                for step, anchor in zip(t.steps, anchors, strict=True):
                    step.anchor = anchor
    if setting.centre_turns:
        advantages = turns_centred(advantages)
    if setting.scale == "batch":
        advantages = batch_scaled(advantages)
    for t, a in zip(trajectories, advantages, strict=True):
        for step, value in zip(t.steps, a, strict=True):
            step.advantage = float(value)
    return trajectories, advantages
