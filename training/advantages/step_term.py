"""The step term: process rewards added to an estimator's episode advantage.

Outcome-only estimators (GRPO, RLOO, GiGPO's episode level) give every step of a trajectory
the same credit, or, for GiGPO, finer credit only where states repeat. A process reward p_t
(an implicit PRM's, a Monte-Carlo step value, a judge's score, an env's dense reward) says
how good step t was; normalised over every step of the group's unmasked trajectories,

    S_t = (p_t - mean_{group steps} p) / (std_{group steps} p + eps)

it joins the estimator's advantage as

    A_t = A_t^estimator + alpha * S_t        (alpha = 1, OPRL's default)

Steps of masked trajectories get 0 and are left out of the statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolgym.training.advantages.base import GROUP_STD, Scale, normalize


def step_term(
    process: Sequence[np.ndarray], valid: np.ndarray, *, scale: Scale = GROUP_STD
) -> list[np.ndarray]:
    """S_t for every step (zeros for masked trajectories)."""
    kept = [i for i in range(len(process)) if valid[i]]
    out = [np.zeros(len(p)) for p in process]
    if not kept:
        return out
    pooled = normalize(np.concatenate([np.asarray(process[i], float) for i in kept]), scale)
    start = 0
    for i in kept:
        out[i] = pooled[start : start + len(process[i])]
        start += len(process[i])
    return out


def with_step_term(
    advantages: Sequence[np.ndarray],
    process: Sequence[np.ndarray],
    valid: np.ndarray,
    *,
    alpha: float = 1.0,
) -> list[np.ndarray]:
    """The estimator's advantages plus alpha times the step term (its scores' units are
    their source's own, so always divided by their spread)."""
    term = step_term(process, valid)
    return [
        a + alpha * s if valid[i] else np.zeros(len(a))
        for i, (a, s) in enumerate(zip(advantages, term, strict=True))
    ]
