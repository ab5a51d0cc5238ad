"""Text adventure games from TextWorld: generated here, from specs, or your own compiled
games; and the proposer that designs games for self-play."""

from toolgym.envs.textworld.env import TextWorldEnv
from toolgym.envs.textworld.propose import ProposeTextWorldEnv
from toolgym.envs.textworld.settings import GameSettings

__all__ = ["GameSettings", "ProposeTextWorldEnv", "TextWorldEnv"]
