"""Advantage estimators, one per file, picked by name from ESTIMATORS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from toolgym.errors import lookup
from toolgym.training.advantages.base import GroupRewards, broadcast
from toolgym.training.advantages.gigpo import gigpo
from toolgym.training.advantages.grpo import grpo
from toolgym.training.advantages.rloo import rloo
from toolgym.training.advantages.step_term import with_step_term

ESTIMATORS: dict[str, Callable[..., list[np.ndarray]]] = {
    "grpo": grpo,
    "rloo": rloo,
    "gigpo": gigpo,
}


def estimator(name: str) -> Callable[..., list[np.ndarray]]:
    return lookup(ESTIMATORS, name, "advantage estimator")


def compute_advantages(
    name: str, group: GroupRewards, *, step_alpha: float = 1.0, **options: Any
) -> list[np.ndarray]:
    """The estimator's advantages (a group with a baseline of its own: each return less it,
    SPIRAL's role-conditioned advantage), plus `step_alpha` times the normalised step term
    when the group carries process rewards."""
    if group.baseline is not None:
        values = broadcast(group.returns - group.baseline, group)
    else:
        values = estimator(name)(group, **options)
    if group.process is None or step_alpha == 0:
        return values
    return with_step_term(values, group.process, group.valid, alpha=step_alpha)


__all__ = ["ESTIMATORS", "GroupRewards", "compute_advantages", "estimator", "gigpo", "grpo", "rloo"]
