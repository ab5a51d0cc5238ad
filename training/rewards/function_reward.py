"""A Python function over the trajectory, named "package.module:function".

The function takes the `Trajectory` and returns a number (given to the last step, as an
outcome reward) or a list with one number per step (a process reward).
"""

from __future__ import annotations

import numbers

from toolgym.agents.trajectory import Trajectory
from toolgym.errors import ConfigError
from toolgym.imports import load_callable


class FunctionReward:
    def __init__(self, path: str) -> None:
        self.path = path
        self.function = load_callable(path, "reward function")

    def __call__(self, trajectory: Trajectory) -> list[float]:
        value = self.function(trajectory)
        steps = len(trajectory.steps)
        if isinstance(value, numbers.Real):
            return [0.0] * (steps - 1) + [float(value)] if steps else []
        if isinstance(value, (list, tuple)) and all(isinstance(v, numbers.Real) for v in value):
            return [float(v) for v in value]
        raise ConfigError(
            f"reward function {self.path} returned {type(value).__name__}; return a number or a "
            "list of numbers, one per step"
        )
