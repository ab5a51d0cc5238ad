"""GiGPO (Feng et al., 2025, "Group-in-Group Policy Optimization for LLM Agent Training").

Episode level (the outer group): each trajectory's return, normalized within its group

    A^E_i = (R_i - mean_j R_j) / (std_j R_j + eps)

Step level (the inner groups): steps taken from the same anchor state. The anchor of step t
is the state its action was taken in (the state_key reset returned for t = 0, or step t-1
returned), gathered across all trajectories of the group and all time steps, repeats within
one trajectory included. Each step's discounted return

    R_t = r_t + gamma * R_{t+1}        (gamma = 0.95; no bootstrap after truncation)

is normalized within its anchor group; an anchor group of one step has nothing to compare
with and gives 0:

    A^S_t = (R_t - mean_{anchor} R) / (std_{anchor} R + eps)

Final advantage of step t of trajectory i:  A = A^E_i + omega * A^S_t   (omega = 1.0).

Both levels divide as `advantage.scale` says (base.Scale): the paper's is the group's std.
Standard deviations are sample standard deviations (ddof=1), as in the reference code.
`step_leave_one_out=True` compares each step with the mean of the others of its anchor group
(R_t - mean_others R = (R_t - mean R) * n / (n - 1)), as RLOO does for episodes: a mean that
holds the step's own return couples the baseline to the action it scores, a bias that shrinks
only as anchor groups grow (docs/training.md, "Is the gradient biased?").
`episode_over_steps=True` reproduces the reference code's episode statistics, which pool one
row per step (a long trajectory weighs more); the default normalizes over trajectories, as
the paper's equation is written. Masked trajectories are excluded from every statistic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable

import numpy as np
from pydantic import Field

from toolgym.config import ConfigModel
from toolgym.training.advantages.base import GROUP_STD, GroupRewards, Scale, normalize


class GiGPOSettings(ConfigModel):
    """GiGPO's own settings, read under `advantage.estimator: gigpo`."""

    gamma: float = Field(0.95, ge=0, le=1)
    """The step-level discount."""
    omega: float = 1.0
    """The weight of the step-level advantage."""
    episode_over_steps: bool = False
    """Episode statistics pooled over step rows, as the reference code does."""
    step_leave_one_out: bool = False
    """Step level: each step's return less the mean of the others of its anchor group
    (with `advantage.scale: none`, an unbiased expected gradient; the group mean, which
    holds the step's own return, is biased in small anchor groups)."""


def discounted_returns(rewards: np.ndarray, gamma: float) -> np.ndarray:
    out = np.zeros(len(rewards))
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def episode_advantages(
    group: GroupRewards, *, scale: Scale = GROUP_STD, episode_over_steps: bool = False
) -> np.ndarray:
    """A^E per trajectory (0 for masked ones)."""
    returns = group.returns
    valid = np.flatnonzero(group.valid)
    advantages = np.zeros(len(returns))
    if len(valid) < 2:
        return advantages
    if episode_over_steps:
        rows = np.concatenate([np.full(len(group.rewards[i]), returns[i]) for i in valid])
        if len(rows) < 2:
            return advantages
        advantages[valid] = (returns[valid] - rows.mean()) / scale.divisor(rows)
    else:
        advantages[valid] = normalize(returns[valid], scale)
    return advantages


def step_advantages(
    group: GroupRewards,
    *,
    gamma: float = 0.95,
    scale: Scale = GROUP_STD,
    leave_one_out: bool = False,
) -> list[np.ndarray]:
    """A^S per step, from anchor-state groups across the whole group (0 for masked ones).
    `leave_one_out`: each step's return less the mean of the others of its anchor group, and
    a step alone in its anchor group less the other trajectories' mean return (no baseline
    holds the step's own return, and none is dropped for want of company)."""
    returns = [discounted_returns(r, gamma) for r in group.rewards]
    anchors: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    valid = np.flatnonzero(group.valid)
    for i in valid:
        for t, key in enumerate(group.state_keys[i]):
            anchors[key].append((int(i), t))
    advantages = [np.zeros(len(r)) for r in group.rewards]
    starts = {int(i): returns[i][0] if len(returns[i]) else 0.0 for i in valid}
    all_starts = sum(starts.values())
    for members in anchors.values():
        values = np.array([returns[traj][step] for traj, step in members])
        values = normalize(values, scale)
        if leave_one_out and len(members) > 1:  # less the others' mean: n / (n - 1) times
            values *= len(members) / (len(members) - 1)
        elif leave_one_out and len(starts) > 1:  # alone: less the other episodes' mean return
            ((traj, step),) = members
            others = (all_starts - starts[traj]) / (len(starts) - 1)
            values = np.array([returns[traj][step] - others])
        for (traj, step), value in zip(members, values, strict=True):
            advantages[traj][step] = value
    return advantages


def gigpo(
    group: GroupRewards,
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    scale: Scale = GROUP_STD,
    episode_over_steps: bool = False,
    step_leave_one_out: bool = False,
) -> list[np.ndarray]:
    episode = episode_advantages(group, scale=scale, episode_over_steps=episode_over_steps)
    steps = step_advantages(group, gamma=gamma, scale=scale, leave_one_out=step_leave_one_out)
    return [
        (episode[i] + omega * steps[i]) if group.valid[i] else np.zeros(len(steps[i]))
        for i in range(len(steps))
    ]
