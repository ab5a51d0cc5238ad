"""Generation engines behind one protocol (base.py); one backend per file, picked by name."""

from __future__ import annotations

import importlib
from typing import Any

from toolgym.agents.engines.base import Completion, Engine, EngineError, SamplingParams
from toolgym.errors import ConfigError, did_you_mean

ENGINES = {
    "hf": "toolgym.agents.engines.hf:HFEngine",
    "openai": "toolgym.agents.engines.openai_http:OpenAIEngine",
    "vllm": "toolgym.agents.engines.vllm_inproc:VLLMEngine",
}


def make_engine(name: str, **kwargs: Any) -> Any:
    """Build the engine registered as `name` ("hf", "openai" or "vllm")."""
    if name not in ENGINES:
        raise ConfigError(
            f"unknown engine '{name}'.{did_you_mean(name, ENGINES)} Known: {', '.join(ENGINES)}"
        )
    module, _, attr = ENGINES[name].partition(":")
    return getattr(importlib.import_module(module), attr)(**kwargs)


__all__ = ["ENGINES", "Completion", "Engine", "EngineError", "SamplingParams", "make_engine"]
