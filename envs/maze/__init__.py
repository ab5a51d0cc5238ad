"""toolgym/Maze-v0: a procedurally generated key-and-door maze played through tools, and
toolgym/ProposeMaze-v0, its self-play proposer (edits a maze for the solver)."""

from toolgym.envs.maze.env import MazeEnv
from toolgym.envs.maze.propose import ProposeMazeEnv

__all__ = ["MazeEnv", "ProposeMazeEnv"]
