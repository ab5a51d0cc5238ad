"""Is the policy gradient biased when the policy decides when an episode ends? Computed
exactly, not sampled, on an episode small enough to enumerate.

The episode: at each of up to three turns the policy says "go" or "stop" (one token a turn;
logit theta_t at turn t); "stop" ends the episode, and so does the third turn. The reward, 1
at the last turn, is paid for going once and then stopping: J = p1 (1 - p2). The expected
gradient of a training step is the sum, over every batch of B episodes the policy can
play, of the batch's probability times the gradient toolgym's own advantages
(training/advantages) and loss aggregation (training/losses/aggregate.py) give it, at a
ratio of 1 (the first PPO pass). It is compared with the true gradient of J: an unbiased
estimator points the same way (cosine 1) whatever B; a biased one does not, and a bias that
vanishes as B grows is one a run's batch of hundreds of episodes hardly sees.

    python bench/gradient_bias.py [--batch 2 3 4 5]
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

import numpy as np
import torch

from toolgym.training.advantages import GroupRewards, Scale, compute_advantages
from toolgym.training.losses import MODES
from toolgym.training.losses.aggregate import aggregate, normalizer_for

TURNS = 3
EPISODES = (("stop",), ("go", "stop"), ("go", "go", "stop"), ("go", "go", "go"))
"""Every episode the policy can play: what it said at each turn."""
PAID = ("go", "stop")
MEAN_ONLY = Scale("none")
THETA = np.array([0.5, 0.0, -0.5])
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "RLOO": ("rloo", {"scale": MEAN_ONLY}),
    "GRPO": ("grpo", {}),
    "GRPO, mean only": ("grpo", {"scale": MEAN_ONLY}),
    "GiGPO (gamma 1, mean only)": ("gigpo", {"gamma": 1.0, "scale": MEAN_ONLY}),
    "GiGPO, step leave-one-out": (
        "gigpo", {"gamma": 1.0, "scale": MEAN_ONLY, "step_leave_one_out": True}),
}  # fmt: skip


def episode_probabilities(theta: np.ndarray) -> np.ndarray:
    go = 1 / (1 + np.exp(-theta))
    return np.array([np.prod([go[t] if a == "go" else 1 - go[t] for t, a in enumerate(e)])
                     for e in EPISODES])  # fmt: skip


def score(episode: tuple[str, ...], theta: np.ndarray) -> np.ndarray:
    """d log pi(action_t) / d theta for each turn t: (turns, parameters)."""
    go = 1 / (1 + np.exp(-theta))
    rows = np.zeros((len(episode), TURNS))
    for t, action in enumerate(episode):
        rows[t, t] = 1 - go[t] if action == "go" else -go[t]
    return rows


def true_gradient(theta: np.ndarray) -> np.ndarray:
    """d J / d theta = E[R * sum_t score_t]."""
    probabilities = episode_probabilities(theta)
    return sum(p * float(e == PAID) * score(e, theta).sum(0)
               for p, e in zip(probabilities, EPISODES, strict=True))  # fmt: skip


def expected_gradient(
    theta: np.ndarray, batch: int, estimator: str, options: dict[str, Any], mode: str
) -> np.ndarray:
    """The exact expectation of one step's gradient over batches of `batch` episodes (one
    group), as toolgym computes it."""
    probabilities = episode_probabilities(theta)
    total = np.zeros(TURNS)
    for drawn in itertools.product(range(len(EPISODES)), repeat=batch):
        episodes = [EPISODES[k] for k in drawn]
        rewards = [np.array([0.0] * (len(e) - 1) + [float(e == PAID)]) for e in episodes]
        states = [[f"turn {t}" for t in range(len(e))] for e in episodes]
        group = GroupRewards(rewards, states, np.ones(batch, dtype=bool))
        advantages = compute_advantages(estimator, group, **options)
        mask = torch.zeros(batch, TURNS, dtype=torch.float64)
        for i, episode in enumerate(episodes):
            mask[i, : len(episode)] = 1
        normalizer = normalizer_for(mask, max_tokens=TURNS)
        gradient = np.zeros(TURNS)
        for k in range(TURNS):  # the aggregation is linear: one parameter at a time
            per_token = torch.zeros(batch, TURNS, dtype=torch.float64)
            for i, episode in enumerate(episodes):
                per_token[i, : len(episode)] = torch.from_numpy(
                    advantages[i] * score(episode, theta)[:, k]
                )
            gradient[k] = float(aggregate(per_token, mask, mode, normalizer))
        total += np.prod(probabilities[list(drawn)]) * gradient
    return total


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[2, 3, 4, 5])
    args = parser.parse_args()
    truth = true_gradient(THETA)
    print(f"true gradient at theta {THETA.tolist()}: {np.round(truth, 5).tolist()}")
    print("cosine of the expected step gradient with it, by batch size "
          f"{', '.join(map(str, args.batch))}:")  # fmt: skip
    for name, (estimator, options) in VARIANTS.items():
        for mode in MODES:
            cosines = [cosine(expected_gradient(THETA, b, estimator, options, mode), truth)
                       for b in args.batch]  # fmt: skip
            print(f"  {name:28} {mode:20} " + "  ".join(f"{c:.4f}" for c in cosines))


if __name__ == "__main__":
    main()
