"""Reward sources, one per file, picked by name from SOURCES; the stage that combines them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolgym.errors import ConfigError, lookup
from toolgym.training.rewards.base import RewardSource, RunContext
from toolgym.training.rewards.env_reward import EnvReward
from toolgym.training.rewards.format_reward import FormatReward
from toolgym.training.rewards.function_reward import FunctionReward
from toolgym.training.rewards.judge_reward import JudgeReward
from toolgym.training.rewards.length_reward import LengthReward
from toolgym.training.rewards.mc_reward import MCValueReward
from toolgym.training.rewards.prm_reward import ImplicitPRMReward
from toolgym.training.rewards.stage import RewardError, RewardStage, WeightedSource

SOURCES: dict[str, Callable[..., RewardSource]] = {
    "env": EnvReward,
    "format": FormatReward,
    "length": LengthReward,
    "function": FunctionReward,
    "implicit_prm": ImplicitPRMReward,
    "mc_values": MCValueReward,
    "judge": JudgeReward,
}


def make_source(name: str, context: RunContext | None = None, **kwargs: Any) -> RewardSource:
    """The source called `name`; one that trains a model of its own (`needs_context`) is
    given the run's `context` too."""
    source = lookup(SOURCES, name, "reward source")
    if getattr(source, "needs_context", False):
        if context is None:
            raise ConfigError(f"reward source '{name}' needs a training run to belong to")
        kwargs["context"] = context
    try:
        return source(**kwargs)
    except (TypeError, ConfigError) as exc:
        raise ConfigError(f"reward source '{name}': {exc}") from None


__all__ = [
    "SOURCES",
    "RewardError",
    "RewardSource",
    "RewardStage",
    "RunContext",
    "WeightedSource",
    "make_source",
]
