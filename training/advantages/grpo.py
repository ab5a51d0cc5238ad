"""GRPO (Shao et al., 2024, "DeepSeekMath"), outcome supervision:

    A_i = (R_i - mean_j R_j) / (std_j R_j + eps)      (std optional: Dr. GRPO drops it)

over the unmasked trajectories j of the group; every step of trajectory i gets A_i.
"""

from __future__ import annotations

import numpy as np

from toolgym.config import ConfigModel
from toolgym.training.advantages.base import GroupRewards, broadcast, normalize


class GRPOSettings(ConfigModel):
    """GRPO's own settings, read under `advantage.estimator: grpo`."""

    std_normalize: bool = True
    """Divide by the group's standard deviation (false: Dr. GRPO)."""


def grpo(group: GroupRewards, *, std_normalize: bool = True) -> list[np.ndarray]:
    returns = group.returns
    advantages = np.zeros(len(returns))
    advantages[group.valid] = normalize(returns[group.valid], std_normalize)
    return broadcast(advantages, group)
