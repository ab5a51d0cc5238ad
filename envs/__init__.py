"""Environments: the Env contract, the registry, task sources, env pools, shared resources,
and toolgym's own envs.

Importing this package registers the built-in envs with toolgym and with Gymnasium.
"""

from toolgym.envs.builtin import register_builtin_envs
from toolgym.envs.core import INFO_KEYS, Env, Message, make_info
from toolgym.envs.pool import EnvBuildError, EnvPool
from toolgym.envs.ref import EnvRef
from toolgym.envs.registration import EnvSpec, make, register, registered_ids, spec
from toolgym.envs.resources import Resources
from toolgym.envs.spaces import MessagesSpace, TextSpace
from toolgym.envs.tasks import ListTasks, SeedTasks, TaskDraw, TaskSource
from toolgym.envs.tasks.content import ContentTasks
from toolgym.envs.tool_env import EpisodeOverError, Outcome, ToolEnv

register_builtin_envs()

__all__ = [
    "INFO_KEYS",
    "ContentTasks",
    "Env",
    "EnvBuildError",
    "EnvPool",
    "EnvRef",
    "EnvSpec",
    "EpisodeOverError",
    "ListTasks",
    "Message",
    "MessagesSpace",
    "Outcome",
    "Resources",
    "SeedTasks",
    "TaskDraw",
    "TaskSource",
    "TextSpace",
    "ToolEnv",
    "make",
    "make_info",
    "register",
    "registered_ids",
    "spec",
]
