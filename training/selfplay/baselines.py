"""Baselines for the proposer's rewards, where a group of one sample has none.

A proposer's group is often one proposal (Search Self-Play's was), and group-relative
advantages then come out 0, or, without the group, as plain REINFORCE: every proposal pushed
by its raw reward. Two ways out, by name:

- partition: normalise each reward against the others in its partition (same env, role and
  task kind) across the step: (r - mean) / (std + eps). A partition of one sample has no
  baseline and gets advantage 0, with a warning naming it.
- ema: subtract a running mean of the role's rewards (decay `decay` per step), kept across
  steps and in the checkpoint; the first step's baseline is its own mean.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from toolgym.log import get_logger

log = get_logger(__name__)

EPS = 1e-6


def partition_advantages(
    rewards: Sequence[float], partitions: Sequence[Hashable], std_normalize: bool = True
) -> np.ndarray:
    """Each reward against its partition's mean (and std): one advantage per reward."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, key in enumerate(partitions):
        members[key].append(i)
    values = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(values)
    for key, where in members.items():
        if len(where) == 1:
            log.warning("self-play: partition %s holds one sample; its advantage is 0", key)
            continue
        group = values[where]
        centred = group - group.mean()
        out[where] = centred / (group.std() + EPS) if std_normalize else centred
    return out


class EMABaseline:
    """A running mean of each role's rewards; advantages are rewards minus it."""

    def __init__(self, decay: float = 0.9) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay {decay}: give 0 <= decay < 1")
        self.decay = decay
        self.means: dict[str, float] = {}

    def advantages(self, role: str, rewards: Sequence[float]) -> np.ndarray:
        """`rewards` (one step's, for `role`) minus the baseline before this step; then the
        baseline moves toward their mean."""
        values = np.asarray(rewards, dtype=np.float64)
        if not len(values):
            return values
        mean = float(values.mean())
        baseline = self.means.get(role, mean)
        self.means[role] = self.decay * baseline + (1 - self.decay) * mean
        return values - baseline

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "means": dict(self.means)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.means = {str(k): float(v) for k, v in state.get("means", {}).items()}
