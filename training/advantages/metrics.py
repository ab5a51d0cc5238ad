"""What a step's advantages and anchor states say, for the step's record: how the
advantages spread, and how often GiGPO's anchor states recur (its step groups of more than
one turn), which says whether step credit has anything to compare on this env."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolgym.agents.trajectory import TrajectoryGroup
from toolgym.training.advantages.base import GroupRewards, anchor_recurrence


def advantage_metrics(
    advantages: Sequence[np.ndarray],
    groups: Sequence[TrajectoryGroup],
    anchor_similarity: float | None = None,
) -> dict[str, float]:
    """adv/mean, adv/std and adv/nonzero over every trained step; adv/anchor_coverage, the
    share of turns whose anchor state another turn of their group shares, and
    adv/anchor_coverage_after_first, the same over turns after the first, where episodes
    have any (whatever the estimator: a GRPO run logs what GiGPO would have to compare),
    with anchors as `anchor_similarity` draws them (anchors.py)."""
    flat = np.concatenate(advantages) if advantages else np.zeros(1)
    counts = np.zeros(4)
    for group in groups:
        rewards = GroupRewards.from_trajectories(
            group.trajectories, anchor_similarity=anchor_similarity
        )
        counts += anchor_recurrence(rewards)
    shared, turns, shared_later, later = counts
    metrics = {
        "adv/mean": float(flat.mean()),
        "adv/std": float(flat.std()),
        "adv/nonzero": float((np.abs(flat) > 1e-8).mean()),
        "adv/anchor_coverage": float(shared / turns) if turns else 0.0,
    }
    if later:  # single-turn episodes have no turn after the first to speak of
        metrics["adv/anchor_coverage_after_first"] = float(shared_later / later)
    return metrics | call_credit(groups)


def call_credit(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """The mean advantage of the trained turns whose call was valid (adv/valid_turns) and of
    those whose call was malformed (adv/invalid_turns), where the step has any. Every valid
    call shares its format's tokens, so a negative adv/valid_turns pushes that format down
    for every action at once; an adv/invalid_turns above it pays malformed calls over valid
    ones. Either is how an update breaks calls (run/advice.py names which)."""
    turns = [
        (s.advantage, s.valid_action)
        for g in groups
        for t in g.trajectories
        for s in t.steps
        if s.advantage is not None
    ]
    out = {}
    for key, valid in (("adv/valid_turns", True), ("adv/invalid_turns", False)):
        values = [advantage for advantage, was_valid in turns if was_valid is valid]
        if values:
            out[key] = float(np.mean(values))
    return out
