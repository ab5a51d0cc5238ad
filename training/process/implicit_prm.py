"""The implicit process reward model (OPRL; Yuan et al., 2024, "Free Process Rewards without
Process Labels"): a language model trained only on outcomes, read as a step scorer.

Training: within a group, every successful trajectory is preferred to every failed one, with
the trajectory-level DPO loss over the policy's action tokens

    L = -log sigmoid(beta * [(log pi_prm(y+) - log pi_old(y+)) - (log pi_prm(y-) - log pi_old(y-))])

Reading: the reward of step t is the PRM's log-ratio over that step's action tokens

    r_t = beta * sum_{tokens k of action t} (log pi_prm(k) - log pi_old(k))      (beta = 0.05)

so steps the PRM finds likelier than the policy did (those of successful trajectories, once it
has learned) score above 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

BETA = 0.05


def step_rewards(
    prm_logprobs: np.ndarray,
    old_logprobs: np.ndarray,
    spans: Sequence[tuple[int, int]],
    beta: float = BETA,
) -> np.ndarray:
    """r_t for each step, from per-token logprobs of one trajectory and each step's
    [start, end) span of action tokens in them."""
    ratio = np.asarray(prm_logprobs, float) - np.asarray(old_logprobs, float)
    if ratio.shape != np.shape(old_logprobs) or ratio.ndim != 1:
        raise ValueError("prm and old logprobs must be one value per token, alike in length")
    return np.array([beta * ratio[start:end].sum() for start, end in spans])


def preference_pairs(outcomes: Sequence[float], valid: Sequence[bool]) -> list[tuple[int, int]]:
    """(preferred, rejected) index pairs of one group: each unmasked trajectory with a higher
    outcome over each with a lower one. A group whose outcomes all tie gives none."""
    kept = [i for i in range(len(outcomes)) if valid[i]]
    return [(i, j) for i in kept for j in kept if outcomes[i] > outcomes[j]]


def dpo_loss(
    prm_totals: Any, old_totals: Any, pairs: Sequence[tuple[int, int]], beta: float = BETA
) -> Any:
    """The mean trajectory-level DPO loss over `pairs`; `prm_totals` (with gradients) and
    `old_totals` are each trajectory's summed action-token logprobs, as torch tensors."""
    import torch
    import torch.nn.functional as F

    if not pairs:
        return prm_totals.sum() * 0.0  # keeps the graph: a step with no pairs learns nothing
    margins = beta * (prm_totals - old_totals.detach())
    preferred = torch.tensor([p for p, _ in pairs])
    rejected = torch.tensor([r for _, r in pairs])
    return -F.logsigmoid(margins[preferred] - margins[rejected]).mean()
