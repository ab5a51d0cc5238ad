"""Handing trained weights to the generation engine, the way the engine says it takes them
(`Engine.weight_sync`, see agents/engines/base.py); one function per way, picked by name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError


async def shared(engine: Any, model: Any, adapters: Path, previous: str | None) -> str | None:
    """The engine holds the trained model itself: only the version moves."""
    engine.policy_version += 1
    return None


async def full(engine: Any, model: Any, adapters: Path, previous: str | None) -> str | None:
    """Send every weight (the engine bumps its version)."""
    await engine.update_weights(model.state_dict())
    return None


async def lora(engine: Any, model: Any, adapters: Path, previous: str | None) -> str | None:
    """Save the adapter under a fresh name, load it, drop the previous one; requests name it."""
    engine.policy_version += 1
    name = f"policy-{engine.policy_version}"
    path = adapters / name
    model.save_pretrained(path)
    await engine.load_adapter(name, str(path.resolve()))
    if previous is not None:
        await engine.unload_adapter(previous)
    return name


SYNCS: dict[str, Callable[[Any, Any, Path, str | None], Awaitable[str | None]]] = {
    "shared": shared,
    "full": full,
    "lora": lora,
}


def weight_sync(engine: Any, lora_enabled: bool) -> Callable[..., Awaitable[str | None]]:
    """How to sync `engine`: its own way; a LoRA run on an engine that is not sharing the
    model sends adapters (small) rather than full weights."""
    mode = getattr(engine, "weight_sync", None)
    if mode not in SYNCS:
        raise ConfigError(
            f"{type(engine).__name__} does not say how it takes new weights (weight_sync)"
        )
    if lora_enabled and mode == "full" and hasattr(engine, "load_adapter"):
        mode = "lora"
    return SYNCS[mode]
