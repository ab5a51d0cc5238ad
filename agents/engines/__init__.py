"""Generation engines behind one protocol (base.py); one backend per file, picked by name."""

from __future__ import annotations

import importlib
from typing import Any

from toolgym.agents.engines.base import (
    Capabilities,
    Completion,
    Engine,
    EngineError,
    PolicyContext,
    PolicyEngine,
    SamplingParams,
    ServesAdapters,
    TakesFullWeights,
)
from toolgym.errors import lookup

ENGINES = {
    "hf": "toolgym.agents.engines.hf:HFEngine",
    "openai": "toolgym.agents.engines.openai_http:OpenAIEngine",
    "vllm": "toolgym.agents.engines.vllm_inproc:VLLMEngine",
}


def engine_class(name: str) -> Any:
    """The engine class registered as `name` ("hf", "openai" or "vllm")."""
    module, _, attr = lookup(ENGINES, name, "engine").partition(":")
    return getattr(importlib.import_module(module), attr)


def make_engine(name: str, **kwargs: Any) -> Any:
    """Build the engine registered as `name` from its own arguments."""
    return engine_class(name)(**kwargs)


def policy_engine(name: str, context: PolicyContext) -> PolicyEngine:
    """The engine `name` as a trainer's: built by its `for_policy` from the trainer's context,
    each engine taking what it needs."""
    engine: PolicyEngine = engine_class(name).for_policy(context)
    return engine


__all__ = [
    "ENGINES", "Capabilities", "Completion", "Engine", "EngineError", "PolicyContext", "PolicyEngine",
    "SamplingParams", "ServesAdapters", "TakesFullWeights", "engine_class", "make_engine",
    "policy_engine",
]  # fmt: skip
