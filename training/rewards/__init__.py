"""Reward sources, one per file, picked by name from SOURCES; the stage that combines them.

The one registry of what a run's rewards are made of: the env's own reward, terms over the
trajectory, judges and learned process rewards, and the scores recorded while an episode was
played (`result`: an agent harness's answer; `agent`: what the agent reported; `proposer`: a
self-play proposer's reward).

The registry names each source's class by its import path, loaded when a source is made:
the config checks what a source scores and its settings against it without loading any source (a
learned PRM's torch included)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolgym.config import ConfigModel, validate
from toolgym.errors import ConfigError, lookup
from toolgym.imports import load_callable
from toolgym.training.rewards.base import RewardSource, RunContext
from toolgym.training.rewards.judge_reward import JudgeSettings
from toolgym.training.rewards.mc_reward import MCSettings
from toolgym.training.rewards.prm_settings import PRMSettings
from toolgym.training.rewards.stage import RewardError, RewardStage, WeightedSource


@dataclass(frozen=True)
class SourceKind:
    """A registered reward source and what it declares about itself."""

    target: str
    """Its class, "package.module:Class", imported when a source is made."""
    scores: tuple[str, ...] = ("outcome", "process")
    """What it may score: the trajectory's outcome, its steps (a process reward), or both."""
    needs_context: bool = False
    """It belongs to a training run (a model of its own, continuations, the run's loop) and
    is given the run's `RunContext`."""
    settings: type[ConfigModel] | None = None
    """The typed settings its kwargs are read into (documented in the settings reference)."""
    rereads: bool = False
    """It reads back what the episode stored (the env's rewards, a recorded score) instead of
    scoring anew: a rescore with it would only add up the stored numbers."""
    verified: bool = False
    """It pays the env's or the checker's own verdict; any other source is a proxy of that
    verdict, whose agreement with it every step logs (agreement.py)."""
    learns: bool = False
    """It learns from the run's own episodes as they are played, so the policy it scores can
    steer what it pays: as a process reward it may only move the outcome's credit between
    turns (advantage.step_combine: redistribute), never be added to it."""

    @property
    def make(self) -> Callable[..., RewardSource]:
        return load_callable(self.target, "reward source")


_HERE = "toolgym.training.rewards"


SOURCES: dict[str, SourceKind] = {
    "env": SourceKind(f"{_HERE}.env_reward:EnvReward", rereads=True, verified=True),
    "format": SourceKind(f"{_HERE}.format_reward:FormatReward"),
    "length": SourceKind(f"{_HERE}.length_reward:LengthReward"),
    "function": SourceKind(f"{_HERE}.function_reward:FunctionReward"),
    "result": SourceKind(
        f"{_HERE}.recorded_reward:ResultScore", ("outcome",), rereads=True, verified=True
    ),
    "proposer": SourceKind(f"{_HERE}.recorded_reward:ProposerScore", ("outcome",), rereads=True),
    "agent": SourceKind(f"{_HERE}.recorded_reward:AgentScore", ("outcome",), rereads=True),
    "implicit_prm": SourceKind(
        f"{_HERE}.prm_reward:ImplicitPRMReward",
        ("process",),
        needs_context=True,
        settings=PRMSettings,
        learns=True,
    ),
    "mc_values": SourceKind(
        f"{_HERE}.mc_reward:MCValueReward", ("process",), needs_context=True, settings=MCSettings
    ),
    "judge": SourceKind(
        f"{_HERE}.judge_reward:JudgeReward", needs_context=True, settings=JudgeSettings
    ),
}


def check_source(name: str, scores: str, kwargs: dict[str, Any]) -> None:
    """A ConfigError for a source asked to score what it cannot or given arguments it does
    not take, found while the config loads: before any env or model is built."""
    kind = lookup(SOURCES, name, "reward source")
    if scores not in kind.scores:
        what = "steps" if kind.scores == ("process",) else "the episode's outcome"
        raise ConfigError(f"reward source '{name}' scores {what}: give it scores: {kind.scores[0]}")
    if kind.settings is not None:
        validate(kind.settings, kwargs)
        return
    try:
        inspect.signature(kind.make).bind(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"reward source '{name}': {exc}") from None


def make_source(name: str, context: RunContext | None = None, **kwargs: Any) -> RewardSource:
    """The source called `name`; one that belongs to a training run (`needs_context`) is
    given the run's `context` too."""
    kind = lookup(SOURCES, name, "reward source")
    if kind.needs_context:
        if context is None:
            raise ConfigError(f"reward source '{name}' needs a training run to belong to")
        kwargs["context"] = context
    try:
        return kind.make(**kwargs)
    except (TypeError, ConfigError) as exc:
        raise ConfigError(f"reward source '{name}': {exc}") from None


__all__ = [
    "SOURCES",
    "RewardError",
    "RewardSource",
    "RewardStage",
    "RunContext",
    "SourceKind",
    "WeightedSource",
    "check_source",
    "make_source",
]
