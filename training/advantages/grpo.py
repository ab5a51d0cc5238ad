"""GRPO (Shao et al., 2024, "DeepSeekMath"), outcome supervision:

    A_i = (R_i - mean_j R_j) / (std_j R_j + eps)

over the unmasked trajectories j of the group; every step of trajectory i gets A_i. The
division is `advantage.scale`'s (base.Scale): `none` is Dr. GRPO.
"""

from __future__ import annotations

import numpy as np

from toolgym.training.advantages.base import GROUP_STD, GroupRewards, Scale, broadcast, normalize


def grpo(group: GroupRewards, *, scale: Scale = GROUP_STD) -> list[np.ndarray]:
    returns = group.returns
    advantages = np.zeros(len(returns))
    advantages[group.valid] = normalize(returns[group.valid], scale)
    return broadcast(advantages, group)
