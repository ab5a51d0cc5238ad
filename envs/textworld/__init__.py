"""Text adventure games from TextWorld: generated here, or your own compiled games."""

from toolgym.envs.textworld.env import TextWorldEnv
from toolgym.envs.textworld.settings import GameSettings

__all__ = ["GameSettings", "TextWorldEnv"]
