"""toolgym/Maze-v0: find the goal of a grid maze, unlocking doors with keys on the way.

Observation: the opening user message shows the whole map (# wall, D door, K key, @ you,
    G goal) and your surroundings (the exits you can move through, closed doors next to you);
    each tool result describes your new surroundings and, with `hints`, how far the goal is.
Tools: move(direction), pick_up(), open_door(direction); direction is north/south/east/west.
    Moving into a wall or a closed door leaves you where you are; open_door uses up a key.
Reward: 1.0 when you reach the goal, else 0 (sparse).
Episode end: terminated at the goal; truncated after `max_turns` turns.
state_key: position and inventory (keys held, keys taken, doors opened), so the same state
    recurs across the trajectories of a group and within one (GiGPO's anchor states).
Arguments: size (cells per side), n_doors, max_turns, hints, show_map (repeat the map in every
    tool result), plus ToolEnv's (parser, max_calls_per_turn=1, ...).
Tasks: generated from seeds (`SeedTasks`): reset(options={"task": {"seed": s}}) or
    reset(seed=s) plays maze s.
Versions: v0, first release.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from typing import Any, Literal

from toolgym.envs.maze import game
from toolgym.envs.maze.layout import DIRECTIONS, MazeLayout, generate
from toolgym.envs.maze.solver import solve
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import tool

Direction = Literal["north", "south", "east", "west"]


class MazeEnv(ToolEnv):
    instructions = (
        "You are in a grid maze. Reach the goal G. Closed doors (D) open with a key (K): "
        "stand on a key and pick it up, then open the door next to you."
    )

    def __init__(
        self,
        size: int = 4,
        n_doors: int = 1,
        max_turns: int = 40,
        hints: bool = True,
        show_map: bool = False,
        max_calls_per_turn: int | None = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, max_calls_per_turn=max_calls_per_turn, **kwargs)
        self.size, self.n_doors, self.hints, self.show_map = size, n_doors, hints, show_map
        self.layout: MazeLayout | None = None
        self.state = game.MazeState((0, 0))

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task = (options or {}).get("task") or {}
        maze_seed = task.get("seed", seed)  # tasks are seeds (SeedTasks)
        if maze_seed is None:
            maze_seed = int(self.np_random.integers(2**31))
        self.layout = generate(maze_seed, self.size, self.n_doors)
        self.state = game.initial_state(self.layout)
        return [{"role": "user", "content": f"Map:\n{self._map()}\n{self._view()}"}]

    @tool
    async def move(self, direction: Direction) -> str:
        """Move one cell.

        Args:
            direction: north, south, east or west.
        """
        self.state, message = game.move(self._layout(), self.state, direction)
        return self._report(message)

    @tool
    async def pick_up(self) -> str:
        """Pick up the key lying in your cell."""
        self.state, message = game.pick_up(self._layout(), self.state)
        return self._report(message)

    @tool
    async def open_door(self, direction: Direction) -> str:
        """Unlock the closed door next to you with one of your keys.

        Args:
            direction: the side the door is on: north, south, east or west.
        """
        self.state, message = game.open_door(self._layout(), self.state, direction)
        return self._report(message)

    def outcome(self) -> Outcome:
        return Outcome(1.0, True) if game.solved(self._layout(), self.state) else Outcome()

    def state_key(self) -> Hashable:
        return self.state.key()

    def solution(self) -> list[ToolCall]:
        """The optimal calls from the current state to the goal."""
        return solve(self._layout(), self.state)

    def scripted_action(self) -> str | None:
        return self.parser.render(self.solution()[:1])

    def mistake_action(self, rng: random.Random) -> str | None:
        """A move in a direction the solver would not take now: into a wall or down a detour."""
        best = self.solution()[:1]
        avoid = best[0].arguments.get("direction") if best and best[0].name == "move" else None
        direction = rng.choice([d for d in DIRECTIONS if d != avoid])
        return self.parser.render([ToolCall(name="move", arguments={"direction": direction})])

    def _layout(self) -> MazeLayout:
        if self.layout is None:
            raise RuntimeError("MazeEnv: call reset() before using its tools")
        return self.layout

    def _map(self) -> str:
        return self._layout().render(self.state.pos, self.state.taken, self.state.opened)

    def _view(self) -> str:
        return game.describe(self._layout(), self.state, self.hints)

    def _report(self, message: str) -> str:
        text = f"{message} {self._view()}"
        return f"{text}\nMap:\n{self._map()}" if self.show_map else text
