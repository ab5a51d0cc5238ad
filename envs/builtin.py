"""toolgym's own environments. Adding one is one file and one `register` line here; the
contract test over every registered id then covers it."""

from __future__ import annotations

from toolgym.envs.registration import register


def register_builtin_envs() -> None:
    register(
        "toolgym/Maze-v0",
        "toolgym.envs.maze:MazeEnv",
        description="grid maze with keys and doors; move / pick_up / open_door",
    )
    register(
        "toolgym/Arithmetic-v0",
        "toolgym.envs.arithmetic:ArithmeticEnv",
        description="arithmetic questions; calculator / answer",
    )
