"""Monte-Carlo step values from branched rollouts (TreePS-RAG style): from the state after
step t of a trajectory, restored by replaying its action prefix on a deterministic env (or
from a snapshot where the env offers one), K continuations run to the end; the value of step
t is their mean outcome. The last step's value is the trajectory's own outcome, and a step
not branched takes the value of the next one that is known (its continuation is the one the
trajectory took), so every step has a value for the step term.

Which steps to branch is a budget: all of them, every k-th, those where the policy was
least sure (the highest mean token entropy), or those GiGPO has nothing to compare: steps
whose anchor state no other turn of their group shares (`alone`), where an outcome-only step
advantage is 0 and a value adds what the group cannot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from toolgym.errors import ConfigError


def steps_to_branch(
    n_steps: int,
    budget: str = "all",
    entropies: Sequence[float] | None = None,
    alone: Sequence[bool] | None = None,
) -> list[int]:
    """The steps (0-based, never the last: its value is the outcome) to branch from.

    budget: "all"; "every:K" (steps K-1, 2K-1, ...); "entropy:N" (the N steps with the
    highest mean token entropy, in step order; needs `entropies`); "alone" (the steps whose
    anchor state is their group's alone; needs `alone`).
    """
    candidates = list(range(max(n_steps - 1, 0)))
    kind, _, arg = budget.partition(":")
    if kind == "all" and not arg:
        return candidates
    if kind == "alone" and not arg:
        if alone is None or len(alone) != n_steps:
            raise ConfigError("an 'alone' budget needs, for each step, whether its state is alone")
        return [t for t in candidates if alone[t]]
    try:
        count = int(arg)
    except ValueError:
        count = 0
    if count < 1 or kind not in ("every", "entropy"):
        raise ConfigError(f"branch budget {budget!r}: use 'all', 'every:K', 'entropy:N' or 'alone'")
    if kind == "every":
        return [t for t in candidates if (t + 1) % count == 0]
    if entropies is None or len(entropies) != n_steps:
        raise ConfigError("an 'entropy:N' budget needs one mean entropy per step")
    ranked = sorted(candidates, key=lambda t: (-entropies[t], t))
    return sorted(ranked[:count])


def step_values(
    n_steps: int, continuations: Mapping[int, Sequence[float]], outcome: float
) -> np.ndarray:
    """V_t for every step: the mean of step t's continuation outcomes where it was branched,
    the next known value where it was not, the outcome at the last step."""
    values = np.zeros(n_steps)
    following = float(outcome)
    for t in range(n_steps - 1, -1, -1):
        outcomes = continuations.get(t) if t < n_steps - 1 else None
        if outcomes:
            following = float(np.mean(outcomes))
        values[t] = following
    return values
