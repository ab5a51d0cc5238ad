"""Reward sources, one per file, picked by name from SOURCES; the stage that combines them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolgym.errors import ConfigError, lookup
from toolgym.training.rewards.base import RewardSource
from toolgym.training.rewards.env_reward import EnvReward
from toolgym.training.rewards.format_reward import FormatReward
from toolgym.training.rewards.function_reward import FunctionReward
from toolgym.training.rewards.length_reward import LengthReward
from toolgym.training.rewards.stage import RewardError, RewardStage, WeightedSource

SOURCES: dict[str, Callable[..., RewardSource]] = {
    "env": EnvReward,
    "format": FormatReward,
    "length": LengthReward,
    "function": FunctionReward,
}


def make_source(name: str, **kwargs: Any) -> RewardSource:
    source = lookup(SOURCES, name, "reward source")
    try:
        return source(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"reward source '{name}': {exc}") from None


__all__ = ["SOURCES", "RewardError", "RewardSource", "RewardStage", "WeightedSource", "make_source"]
