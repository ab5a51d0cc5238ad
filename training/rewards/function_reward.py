"""A Python function over the trajectory, named "package.module:function".

The function takes the `Trajectory` and returns a number (given to the last step, as an
outcome reward) or a list with one number per step (a process reward).
"""

from __future__ import annotations

import importlib
import numbers
from collections.abc import Callable
from typing import Any

from toolgym.agents.trajectory import Trajectory
from toolgym.errors import ConfigError


class FunctionReward:
    def __init__(self, path: str) -> None:
        self.path = path
        self.function = _load(path)

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


def _load(path: str) -> Callable[[Trajectory], Any]:
    module_name, sep, name = path.partition(":")
    if not sep or not module_name or not name:
        raise ConfigError(f"reward function {path!r} must look like package.module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"reward function {path}: cannot import {module_name}: {exc}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"reward function {path}: {module_name} has no function {name!r}")
    return function
