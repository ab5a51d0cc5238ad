"""toolgym: Gymnasium-style tool environments and step-level RL for tool-using LLM agents.

The core package holds what every layer shares (errors, config loading, logging, the CLI)
and re-exports what a user writing an env needs, so `toolgym.make("toolgym/Maze-v0")`,
`toolgym.ToolEnv` or `toolgym.ToolCallError` work after a bare `import toolgym`. The
re-exports are lazy (the heavy layers load on first use), but the registry is not: importing
toolgym registers every installed package's envs with Gymnasium too, so
`gymnasium.make("mypkg/Env-v0")` works after `import toolgym` as it does after
`toolgym.make`.
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
    "Outcome": "toolgym.envs.tool_env",
    "EpisodeOverError": "toolgym.envs.tool_env",
    "TaskSource": "toolgym.envs.tasks",
    "ListTasks": "toolgym.envs.tasks",
    "SeedTasks": "toolgym.envs.tasks",
    "TaskDraw": "toolgym.envs.tasks",
    "tool": "toolgym.tools.tool",
    "Injected": "toolgym.tools.tool",
    "ToolCall": "toolgym.tools.records",
    "ToolCallError": "toolgym.tools.tool",
    "InfraError": "toolgym.tools.tool",
    "ToolSet": "toolgym.tools.toolset",
    "ToolgymError": "toolgym.errors",
    "ConfigError": "toolgym.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'toolgym' has no attribute {name!r}")


def _register_installed_envs() -> None:
    """toolgym's envs and every `toolgym.envs` entry point's, in both registries (a plugin
    that fails is reported by `toolgym list`, never raised here)."""
    from toolgym.envs.registration import load_plugins

    load_plugins()


_register_installed_envs()
