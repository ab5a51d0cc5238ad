"""Handing trained weights to the generation engine, the way the engine says it takes them
(`Capabilities.weight_sync`, see agents/engines/base.py); one function per way, picked by name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import torch

from toolgym.agents.engines import PolicyEngine, ServesAdapters, TakesFullWeights
from toolgym.errors import ConfigError


class TrainedWeights(Protocol):
    """The trained weights as a sync reads them (learner.py's Learner)."""

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """Every weight, whole (gathered from the shards of a distributed run)."""
        ...

    def save_adapter(self, path: Path) -> None:
        """Write the LoRA adapter as peft saves it."""
        ...


Sync = Callable[[PolicyEngine, TrainedWeights, Path, "str | None", int], Awaitable["str | None"]]
"""(engine, trained weights, adapters directory, the adapter in use, the version the new
weights will be) -> the adapter to use. The version is the policy gate's (agents/policy_gate.py),
the run's one clock: a sync only hands weights over, and the gate moves once it lands."""


async def shared(
    engine: PolicyEngine, weights: TrainedWeights, adapters: Path, previous: str | None,
    version: int,
) -> str | None:  # fmt: skip
    """The engine holds the trained model itself: nothing to send."""
    return None


async def full(
    engine: PolicyEngine, weights: TrainedWeights, adapters: Path, previous: str | None,
    version: int,
) -> str | None:  # fmt: skip
    """Send every weight."""
    if not isinstance(engine, TakesFullWeights):
        raise ConfigError(f"{type(engine).__name__} declares full weights but cannot take them")
    await engine.update_weights(weights.full_state_dict())
    return None


async def lora(
    engine: PolicyEngine, weights: TrainedWeights, adapters: Path, previous: str | None,
    version: int,
) -> str | None:  # fmt: skip
    """Save the adapter under the version's name, load it, drop the previous one; requests
    name it."""
    if not isinstance(engine, ServesAdapters):
        raise ConfigError(f"{type(engine).__name__} declares adapters but cannot serve them")
    name = f"policy-{version}"
    path = adapters / name
    weights.save_adapter(path)
    await engine.load_adapter(name, str(path.resolve()))
    if previous is not None:
        await engine.unload_adapter(previous)
    return name


SYNCS: dict[str, Sync] = {"shared": shared, "full": full, "lora": lora}


def sync_way(engine: PolicyEngine, lora_enabled: bool, own_weights: bool = False) -> str:
    """How to sync `engine`: its declared way. An engine that would share the trained model
    but was given its own copy (`own_weights`, asynchronous training) takes full weights; a
    LoRA run on an engine that takes full weights and serves adapters sends adapters (small)."""
    declared = engine.capabilities
    if declared.weight_sync == "shared" and own_weights:
        return "full"
    if lora_enabled and declared.weight_sync == "full" and declared.adapters:
        return "lora"
    return declared.weight_sync
