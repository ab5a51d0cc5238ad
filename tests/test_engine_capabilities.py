"""Every registered engine declares what it can do (`Capabilities`), and the declaration
matches its methods: the trainer reads the declaration and never probes for a method."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolgym.agents.engines import (
    ENGINES,
    Capabilities,
    ServesAdapters,
    TakesFullWeights,
    engine_class,
)
from toolgym.training.update.weight_sync import SYNCS, lora, sync_way


@pytest.mark.parametrize("name", list(ENGINES))
def test_each_engine_declares_capabilities_its_methods_back(name):
    cls = engine_class(name)
    declared = cls.capabilities
    assert isinstance(declared, Capabilities) and declared.weight_sync in SYNCS
    assert declared.adapters == issubclass(cls, ServesAdapters)
    assert declared.full_weights == issubclass(cls, TakesFullWeights)
    assert declared.weight_sync != "lora" or declared.adapters
    assert declared.weight_sync != "full" or declared.full_weights
    assert declared.episode_context == callable(getattr(cls, "end_episode", None))
    assert callable(cls.for_policy)


class Declared:
    """An engine that takes full weights and serves adapters, recording what it is sent."""

    capabilities = Capabilities("full", full_weights=True, adapters=True)

    def __init__(self) -> None:
        self.calls = []

    async def update_weights(self, state_dict):
        self.calls.append(("full", sorted(state_dict)))

    async def load_adapter(self, name, path):
        self.calls.append(("load", name))

    async def unload_adapter(self, name):
        self.calls.append(("unload", name))


class Saved:
    def full_state_dict(self):
        return {"w": 1}

    def save_adapter(self, path):
        Path(path).mkdir(parents=True)


def test_weight_sync_follows_the_declaration(tmp_path):
    import asyncio

    engine = Declared()
    assert sync_way(engine, lora_enabled=False) == "full"
    assert sync_way(engine, lora_enabled=True) == "lora"  # adapters are smaller than weights
    engine.capabilities = Capabilities("shared")
    assert sync_way(engine, lora_enabled=True) == "shared"
    # given its own copy (asynchronous training), a sharing engine takes full weights
    assert sync_way(engine, lora_enabled=True, own_weights=True) == "full"

    async def two_lora_syncs():
        first = await lora(engine, Saved(), tmp_path, None, 1)  # named by the gate's version
        return first, await lora(engine, Saved(), tmp_path, first, 2)

    assert asyncio.run(two_lora_syncs()) == ("policy-1", "policy-2")
    assert engine.calls == [("load", "policy-1"), ("load", "policy-2"), ("unload", "policy-1")]
