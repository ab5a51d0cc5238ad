"""Advantage estimators, one per file, picked by name from ESTIMATORS. An estimator declares
the typed settings it takes (`advantage.NAME` in a config, checked as the config loads) and
divides its centred values as the `scale` it is given says (base.Scale); a new one is its
file and one line here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolgym.config import ConfigModel
from toolgym.errors import lookup
from toolgym.training.advantages.base import (
    GROUP_STD,
    SCALES,
    GroupRewards,
    Scale,
    batch_scaled,
    broadcast,
    turns_centred,
)
from toolgym.training.advantages.gigpo import GiGPOSettings, gigpo
from toolgym.training.advantages.grpo import grpo
from toolgym.training.advantages.rloo import rloo
from toolgym.training.advantages.step_term import redistributed, with_step_term


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: its function (a group and a `scale` keyword -> one advantage
    per step of each trajectory) and the settings its other keyword arguments are read from
    (None: it takes none)."""

    compute: Callable[..., list[np.ndarray]]
    settings: type[ConfigModel] | None = None


ESTIMATORS: dict[str, Estimator] = {
    "grpo": Estimator(grpo),
    "rloo": Estimator(rloo),
    "gigpo": Estimator(gigpo, GiGPOSettings),
}


def estimator(name: str) -> Callable[..., list[np.ndarray]]:
    return lookup(ESTIMATORS, name, "advantage estimator").compute


def compute_advantages(
    name: str,
    group: GroupRewards,
    *,
    step_alpha: float = 0.5,
    step_combine: str = "redistribute",
    scale: Scale = GROUP_STD,
    **options: Any,
) -> list[np.ndarray]:
    """The estimator's advantages, divided as `scale` says (a group with a baseline of its
    own: each return less it, SPIRAL's role-conditioned advantage), and where the group
    carries process rewards, its credit moved between each episode's turns by them
    (`step_combine` redistribute, at weight `step_alpha`) or `step_alpha` times their
    normalised step term added to it (add; step_term.py)."""
    if group.baseline is not None:
        values = broadcast(group.returns - group.baseline, group)
    else:
        values = estimator(name)(group, scale=scale, **options)
    if group.process is None or step_alpha == 0:
        return values
    if step_combine == "redistribute":
        return redistributed(values, group.process, group.valid, alpha=step_alpha)
    return with_step_term(values, group.process, group.valid, alpha=step_alpha)


__all__ = [
    "ESTIMATORS",
    "GROUP_STD",
    "SCALES",
    "Estimator",
    "GroupRewards",
    "Scale",
    "batch_scaled",
    "compute_advantages",
    "estimator",
    "gigpo",
    "grpo",
    "rloo",
    "turns_centred",
]
