"""Advantage estimators, one per file, picked by name from ESTIMATORS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from toolgym.errors import lookup
from toolgym.training.advantages.base import GroupRewards
from toolgym.training.advantages.gigpo import gigpo
from toolgym.training.advantages.grpo import grpo
from toolgym.training.advantages.rloo import rloo

ESTIMATORS: dict[str, Callable[..., list[np.ndarray]]] = {
    "grpo": grpo,
    "rloo": rloo,
    "gigpo": gigpo,
}


def estimator(name: str) -> Callable[..., list[np.ndarray]]:
    return lookup(ESTIMATORS, name, "advantage estimator")


def compute_advantages(name: str, group: GroupRewards, **options: Any) -> list[np.ndarray]:
    return estimator(name)(group, **options)


__all__ = ["ESTIMATORS", "GroupRewards", "compute_advantages", "estimator", "gigpo", "grpo", "rloo"]
