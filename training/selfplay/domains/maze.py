"""Maze self-play, a curriculum by editing: the proposer is shown a maze from the pool and
moves its goal or start (toolgym/ProposeMaze-v0), and solvers play the edited maze on
Maze-v0. Paid by learnability, the proposer is pushed toward mazes its solvers solve some of
the time: from the short walks the solver masters toward the longer ones it does not.

Stages (a map is read strictly, so the generic text rules have nothing to add): `edited` refuses a maze no edit changed (a copy of the pool earns
nothing by being solved); `playable` refuses a map that does not read as a maze, or whose
goal lies further than the solver's turns can walk; `held out` refuses a maze the solver env
holds out of training (its eval or test item, by content): the proposer env already refuses
to propose one, and this stage makes sure, since evaluation plays those mazes.
"""

from __future__ import annotations

from typing import Any

from toolgym.envs.maze.env import MazeEnv
from toolgym.envs.maze.maps import parse_map, shortest_path
from toolgym.envs.maze.propose import KIND, held_out_maze
from toolgym.envs.ref import EnvRef
from toolgym.envs.registration import make
from toolgym.envs.tasks.content import HELD_OUT
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.errors import ConfigError
from toolgym.training.selfplay.validation import Proposal, Stage

GENERATION = ("size", "n_doors", "far_goal", "carve", "held_out")
"""The solver's settings the proposer shares: what its own mazes are, and what is held out."""
REFERENCE_DRAWS = 50
"""Training draws walked per reference wanted (training repeats its mazes)."""
SOLVER_MAX_TURNS = 40
"""Maze-v0's default turn limit (a solver env that sets none)."""


def edited(task: ProposedTask, proposal: Proposal) -> str | None:
    if task.check.get("map") == task.check.get("from"):
        return "the maze is the one it was shown"
    return None


class MazeDomain:
    name = "maze"

    def __init__(self, solver: EnvRef, proposer_kwargs: dict[str, Any] | None = None) -> None:
        self.solver = solver
        shared = {k: v for k, v in solver.kwargs.items() if k in GENERATION}
        self.proposer = EnvRef("propose-maze", "toolgym/ProposeMaze-v0",
                               {**shared, **(proposer_kwargs or {})})  # fmt: skip
        self.held_out = float(solver.kwargs.get("held_out", HELD_OUT))
        self.max_turns = int(solver.kwargs.get("max_turns", SOLVER_MAX_TURNS))

    def stages(self) -> list[tuple[str, Stage]]:
        return [("edited", edited), ("playable", self._playable), ("held out", self._held_out)]

    def _playable(self, task: ProposedTask, proposal: Proposal) -> str | None:
        try:
            layout = parse_map(task.check.get("map"))
        except ConfigError as exc:
            return str(exc)
        if task.instruction != task.check["map"]:
            return "the task's text is not its map"
        steps = shortest_path(layout)
        if steps > self.max_turns:
            return f"its goal is {steps} moves away, more than a solver's {self.max_turns} turns"
        return None

    def _held_out(self, task: ProposedTask, proposal: Proposal) -> str | None:
        if held_out_maze(parse_map(task.check.get("map")), self.held_out):
            return "the solver env holds this maze out of training (evaluation plays it)"
        return None

    def solver_task(self, task: ProposedTask) -> dict[str, Any]:
        """The map, once it reads as a maze (ConfigError otherwise)."""
        parse_map(task.check.get("map"))
        return {"map": task.check["map"]}

    def identity(self, task: ProposedTask) -> str:
        """The map: one drawing is one maze."""
        return str(task.check.get("map"))

    def references(self, k: int) -> list[ProposedTask]:
        """The solver env's first k distinct training mazes, as maps (fewer where its
        settings make fewer)."""
        env = make(self.solver.env_id, **self.solver.kwargs)
        try:
            maze = env.unwrapped
            if not isinstance(maze, MazeEnv):
                raise ConfigError(f"maze self-play solves on Maze-v0, not {self.solver.env_id}")
            tasks, maps = maze.task_source(), dict[str, None]()
            for index in range(REFERENCE_DRAWS * k):
                if len(maps) == k:
                    break
                maps[maze.maze_item(tasks.task("train", index)["seed"])] = None
        finally:
            env.close()
        return [ProposedTask(kind=KIND, instruction=m,
                             check={"map": m, "path": shortest_path(parse_map(m)), "from": ""})
                for m in maps]  # fmt: skip
