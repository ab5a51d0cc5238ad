"""The step term: process rewards added to an estimator's episode advantage.

Outcome-only estimators (GRPO, RLOO, GiGPO's episode level) give every step of a trajectory
the same credit, or, for GiGPO, finer credit only where states repeat. A process reward p_t
(an implicit PRM's, a Monte-Carlo step value, a judge's score, an env's dense reward) says
how good step t was; normalised over every step of the group's unmasked trajectories,

    S_t = (p_t - mean_{group steps} p) / (std_{group steps} p + eps)

it joins the estimator's advantage as

    A_t = A_t^estimator + alpha * S_t        (alpha = 1, OPRL's default)

Added so, a process reward can outweigh the verified outcome: a failed episode's turns the
PRM likes get positive credit, and a PRM that comes to favour malformed calls pays for them.
`redistribute` keeps the outcome's credit and only moves it between an episode's turns:

    c_t = tanh((p_t - mean_{episode} p) / std_{centred steps}),  c_t -= mean_{episode} c
    A_t = A_t^estimator + alpha * |A_t^estimator| * c_t

Each episode's turns then sum to the estimator's credit; with alpha <= 1/2 no turn's credit
changes its sign, so a failure's turns are all blamed, its worse ones (by the process
reward) more, and a success's turns all credited, its better ones more. A one-turn episode
has nothing to redistribute, and stays out of the spread of the centred steps (pooled over
the group's episodes of several turns).

Steps of masked trajectories get 0 and are left out of the statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolgym.training.advantages.base import EPS, GROUP_STD, Scale, normalize


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


def redistributed(
    advantages: Sequence[np.ndarray],
    process: Sequence[np.ndarray],
    valid: np.ndarray,
    *,
    alpha: float = 0.5,
) -> list[np.ndarray]:
    """The estimator's advantages with each episode's credit moved between its turns as the
    process reward ranks them (module docstring); the episode's sum is unchanged."""
    kept = [i for i in range(len(process)) if valid[i] and len(process[i]) > 1]  # turns to rank
    centred = {i: np.asarray(process[i], float) - np.mean(process[i]) for i in kept}
    pooled = np.concatenate([centred[i] for i in kept]) if kept else np.zeros(0)
    out = [np.asarray(a, float) if valid[i] else np.zeros(len(a)) for i, a in enumerate(advantages)]
    if len(pooled) < 2:
        return out
    spread = pooled.std(ddof=1) + EPS
    for i in kept:
        shares = np.tanh(centred[i] / spread)
        shares -= shares.mean()
        out[i] = out[i] + alpha * np.abs(out[i]) * shares
    return out
