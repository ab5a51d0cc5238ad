"""toolgym/Maze-v0: a procedurally generated key-and-door maze played through tools."""

from toolgym.envs.maze.env import MazeEnv

__all__ = ["MazeEnv"]
