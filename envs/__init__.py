"""Environments: the Env contract, the registry, the EnvPool, and toolgym's own envs.

Importing this package registers the built-in envs with toolgym and with Gymnasium.
"""

from toolgym.envs.builtin import register_builtin_envs
from toolgym.envs.core import INFO_KEYS, Env, Message, make_info
from toolgym.envs.pool import EnvPool, EpisodeResult, EpisodeView, StopReason, scripted_policy
from toolgym.envs.registration import EnvSpec, make, register, registered_ids, spec
from toolgym.envs.spaces import MessagesSpace, TextSpace
from toolgym.envs.tasks import TaskList
from toolgym.envs.tool_env import EpisodeOverError, Outcome, ToolEnv

register_builtin_envs()

__all__ = [
    "INFO_KEYS",
    "Env",
    "EnvPool",
    "EnvSpec",
    "EpisodeOverError",
    "EpisodeResult",
    "EpisodeView",
    "Message",
    "MessagesSpace",
    "Outcome",
    "StopReason",
    "TaskList",
    "TextSpace",
    "ToolEnv",
    "make",
    "make_info",
    "register",
    "registered_ids",
    "scripted_policy",
    "spec",
]
