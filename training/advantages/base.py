"""What advantage estimators read: one group's per-step rewards and anchor states.

A group is the N rollouts of one task and seed. Estimators are pure functions from a
`GroupRewards` to per-step advantages (one array per trajectory, one value per step); masked
trajectories (infrastructure failures) get zeros and are left out of every statistic.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolgym.training.advantages.anchors import similar_state_keys

EPS = 1e-6


@dataclass
class GroupRewards:
    rewards: list[np.ndarray]
    """Per trajectory, the reward of each step."""
    state_keys: list[list[Hashable]]
    """Per trajectory, the state each step's action was taken in (GiGPO's anchors)."""
    valid: np.ndarray
    """Per trajectory, False when it is masked (an infrastructure failure)."""
    process: list[np.ndarray] | None = None
    """Per trajectory, each step's process reward (None: outcome rewards alone)."""
    baseline: float | None = None
    """A baseline from outside the group (a running mean over steps): the advantage is then
    the return less it, whatever the estimator."""

    @classmethod
    def from_trajectories(
        cls,
        trajectories: Sequence[Any],
        rewards: Sequence[np.ndarray] | None = None,
        process: Sequence[np.ndarray] | None = None,
        baseline: float | None = None,
        anchor_similarity: float | None = None,
    ) -> GroupRewards:
        """`rewards`: each trajectory's per-step rewards from the reward stage (default:
        the env's own); `process`: its per-step process rewards, if any source gives them;
        `baseline`: the group's own from its builder (TrajectoryGroup.baseline);
        `anchor_similarity`: states this alike share an anchor (anchors.py; None: equal
        state keys only)."""
        if rewards is None:
            rewards = [
                np.array([s.reward for s in t.steps], dtype=np.float64) for t in trajectories
            ]
        return cls(
            rewards=[np.asarray(r, dtype=np.float64) for r in rewards],
            state_keys=(
                [[s.state_key for s in t.steps] for t in trajectories]
                if anchor_similarity is None
                else similar_state_keys(trajectories, anchor_similarity)
            ),
            valid=np.array([not t.masked for t in trajectories], dtype=bool),
            process=None if process is None else [np.asarray(p, np.float64) for p in process],
            baseline=baseline,
        )

    @property
    def returns(self) -> np.ndarray:
        """Undiscounted return of each trajectory."""
        return np.array([r.sum() for r in self.rewards])


def anchor_recurrence(group: GroupRewards) -> tuple[int, int, int, int]:
    """How many of the group's turns share their anchor state with another turn of the group
    (GiGPO's step groups of more than one, which compare actions from the same state), out
    of how many, over all turns and over the turns after the first (every episode of a group
    starts in the same state, so a first turn always recurs: beyond it is where step
    credit differs from the episode's). Masked trajectories are left out, as in every
    statistic: (recurring, turns, recurring after the first, turns after the first)."""
    counts: dict[Hashable, int] = {}
    keys = [group.state_keys[i] for i in np.flatnonzero(group.valid)]
    for trajectory in keys:
        for key in trajectory:
            counts[key] = counts.get(key, 0) + 1
    shared = [[counts[key] > 1 for key in trajectory] for trajectory in keys]
    later = [flags[1:] for flags in shared]
    return (
        sum(map(sum, shared)),
        sum(map(len, shared)),
        sum(map(sum, later)),
        sum(map(len, later)),
    )


SCALES = ("group", "none", "floor", "batch")
"""How centred advantages are divided (`advantage.scale`): by their comparison group's
standard deviation (GRPO's, GiGPO's); by nothing (Dr. GRPO); by that standard deviation or
`std_floor`, whichever is larger; or, after every group is centred, by the standard deviation
of the whole step's advantages (`batch_scaled`)."""


@dataclass(frozen=True)
class Scale:
    """The scaling every estimator applies to its centred values, the step anchors' included.
    Group std divides a near-constant group by a tiny spread: a group of failures whose
    returns differ only by a -0.2 penalty, (0, 0, -0.2, 0), gets (0.5, 0.5, -1.5, 0.5), as
    much credit as a group where one episode in four succeeded. A floor keeps such a group
    small and leaves groups whose outcomes differ as group std has them."""

    kind: str = "group"
    floor: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in SCALES:
            raise ValueError(f"advantage.scale: {self.kind!r} is not one of {', '.join(SCALES)}")

    def divisor(self, values: np.ndarray) -> float:
        """What `values`' deviations from their mean are divided by."""
        if self.kind in ("none", "batch"):  # batch: divided once the whole step is centred
            return 1.0
        std = float(values.std(ddof=1))
        return std + EPS if self.kind == "group" else max(std, self.floor)


GROUP_STD = Scale()


def normalize(values: np.ndarray, scale: Scale = GROUP_STD) -> np.ndarray:
    """values - mean, divided as `scale` says (sample standard deviations, ddof=1). Fewer
    than two values carry no comparison: they get 0."""
    if len(values) < 2:
        return np.zeros_like(values)
    return (values - values.mean()) / scale.divisor(values)


def turns_centred(advantages: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every turn's advantage less the mean over the whole step's turns. Each group's
    episode advantages sum to 0, but a turn takes its episode's: where failures run longer
    than successes, the turns' sum is negative, and every turn's share of it lands on the
    tokens all calls share (`<tool_call>`, `{"name": `, `"arguments": {`). Step after step
    that pushes the call format itself down, until it breaks. Centred, those tokens get no
    net push; the shift is the same for every turn, a baseline, so the expected gradient
    is unchanged."""
    flat = np.concatenate(advantages) if advantages else np.zeros(0)
    if not len(flat):
        return list(advantages)
    return [a - flat.mean() for a in advantages]


def batch_scaled(advantages: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every turn's advantage divided by their standard deviation over the whole step (the
    `batch` scale, as REINFORCE++ does): one scale for every group, so a group's share of the
    update follows how much its outcomes differ."""
    flat = np.concatenate(advantages) if advantages else np.zeros(0)
    if len(flat) < 2:
        return list(advantages)
    return [a / (flat.std() + EPS) for a in advantages]


def broadcast(per_trajectory: np.ndarray, group: GroupRewards) -> list[np.ndarray]:
    """Give every step of a trajectory its trajectory's advantage; masked ones get 0."""
    return [
        np.full(len(r), per_trajectory[i] if group.valid[i] else 0.0)
        for i, r in enumerate(group.rewards)
    ]
