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
Arguments: size (cells per side), n_doors, far_goal (the goal is a cell farthest from the
    start; False: any other cell, so walks of every length), max_turns, hints, show_map (repeat
    the map in every tool result), solver_slips (the share of episodes in which the scripted
    solver makes one wrong move at a random step: a weaker demonstrator, whose SFT student RL
    can then surpass), carve ("dfs": passages carved by a depth-first search from the top-left
    cell; "uniform": any perfect maze, drawn uniformly, 14x the distinct 3x3 mazes), held_out
    (the share of all mazes held out, half for eval and half for test: 0.2; a small space
    may hold out more, for tighter intervals on its held-out rates), plus ToolEnv's (parser,
    max_calls_per_turn=1, ...).
Tasks: generated from seeds, split by the maze itself (`ContentTasks`: a maze's opening map
    belongs to one split whatever seed made it): reset(options={"task": {"seed": s}}) or
    reset(seed=s) plays maze s. Small settings (size 2 or 3 without doors) make too few
    distinct mazes to hold many out: their eval split says how few it holds. A task may
    instead draw its maze: {"map": the opening map, as the env shows it} (maps.py; a
    self-play proposer's edit), of any size up to 8, refused in one line if it is not one.
Versions: v0, first release.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from typing import Any, Literal

from toolgym.envs.maze import game
from toolgym.envs.maze.layout import CARVINGS, DIRECTIONS, MazeLayout, generate
from toolgym.envs.maze.maps import parse_map
from toolgym.envs.maze.solver import solve
from toolgym.envs.tasks import TaskSource
from toolgym.envs.tasks.content import HELD_OUT, ContentTasks, check_held_out
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
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
        far_goal: bool = True,
        max_turns: int = 40,
        hints: bool = True,
        show_map: bool = False,
        solver_slips: float = 0.0,
        carve: str = "dfs",
        held_out: float = HELD_OUT,
        max_calls_per_turn: int | None = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, max_calls_per_turn=max_calls_per_turn, **kwargs)
        if not isinstance(size, int) or size < 2:
            raise ConfigError(f"maze size must be a whole number of at least 2, got {size!r}")
        if not 0.0 <= solver_slips <= 1.0:
            raise ConfigError(f"solver_slips {solver_slips}: it must be between 0 and 1")
        if carve not in CARVINGS:
            raise ConfigError(f"maze carve {carve!r}: use one of {', '.join(CARVINGS)}")
        self.carve, self.held_out = carve, check_held_out(held_out)
        self.size, self.n_doors, self.far_goal = size, n_doors, far_goal
        self.hints, self.show_map, self.solver_slips = hints, show_map, solver_slips
        self.maze_name = "0"
        """What the slips of a scripted episode are drawn from: the seed, or the map."""
        self.slip_turn: int | None = None
        self.layout: MazeLayout | None = None
        self.state = game.MazeState((0, 0))

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task = (options or {}).get("task") or {}
        if "map" in task:  # a maze drawn, not generated
            self.layout, self.maze_name = parse_map(task["map"]), str(task["map"])
        else:
            maze_seed = task.get("seed", seed)  # tasks are seeds (SeedTasks)
            if maze_seed is None:
                maze_seed = int(self.np_random.integers(2**31))
            self.layout = generate(maze_seed, self.size, self.n_doors, self.far_goal, self.carve)
            self.maze_name = str(maze_seed)
        self.state = game.initial_state(self.layout)
        chooser = random.Random(f"slip-{self.maze_name}")
        slipped = chooser.random() < self.solver_slips
        self.slip_turn = chooser.randrange(len(self.solution())) if slipped else None
        return [{"role": "user", "content": f"Map:\n{self._map()}\n{self._view()}"}]

    def task_source(self) -> TaskSource:
        return ContentTasks(self.maze_item, self.held_out)

    def maze_item(self, seed: int) -> str:
        """What identifies maze `seed`: its opening map (walls, doors, keys, start, goal)."""
        layout = generate(seed, self.size, self.n_doors, self.far_goal, self.carve)
        return layout.render(layout.start)

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
        """The solver's next call; in a slipped episode (`solver_slips`), a wrong move at one
        step, which the solver then walks back from."""
        if self.slip_turn is not None and self.turn == self.slip_turn:
            return self.mistake_action(random.Random(f"detour-{self.maze_name}"))
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
