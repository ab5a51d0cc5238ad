"""RLOO (Ahmadian et al., 2024): each trajectory's baseline is the mean of the others,

    A_i = R_i - 1/(N-1) * sum_{j != i} R_j  =  N/(N-1) * (R_i - mean_j R_j)

over the N unmasked trajectories; a lone trajectory has no baseline and gets 0. Divided as
`advantage.scale` says (base.Scale); the paper's RLOO divides by nothing (`scale: none`).
"""

from __future__ import annotations

import numpy as np

from toolgym.training.advantages.base import GROUP_STD, GroupRewards, Scale, broadcast, normalize


def rloo(group: GroupRewards, *, scale: Scale = GROUP_STD) -> list[np.ndarray]:
    returns = group.returns[group.valid]
    n = len(returns)
    advantages = np.zeros(len(group.rewards))
    if n >= 2:
        advantages[group.valid] = normalize(returns, scale) * n / (n - 1)
    return broadcast(advantages, group)
