"""toolgym: Gymnasium-style tool environments and step-level RL for tool-using LLM agents.

The core package holds what every layer shares (errors, config loading, logging, the CLI)
and re-exports the registry, so `toolgym.make("toolgym/Maze-v0")` works after a bare
`import toolgym`. The re-exports are lazy: importing the core must not import the layers
built on it (dependencies point one way: training -> agents -> envs -> tools -> core).
"""

from __future__ import annotations

import importlib
from typing import Any

from toolgym.version import __version__

_LAZY = {
    "register": "toolgym.envs.registration",
    "make": "toolgym.envs.registration",
    "spec": "toolgym.envs.registration",
    "registered_ids": "toolgym.envs.registration",
    "Env": "toolgym.envs.core",
    "ToolEnv": "toolgym.envs.tool_env",
    "tool": "toolgym.tools.tool",
    "Injected": "toolgym.tools.tool",
    "ToolSet": "toolgym.tools.toolset",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'toolgym' has no attribute {name!r}")
