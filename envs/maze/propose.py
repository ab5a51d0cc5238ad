"""toolgym/ProposeMaze-v0: the proposer's side of maze self-play: a model edits a maze it is
shown into a new one for the solver (a mutation, as ACCEL edits levels: a tiny model can
learn to move a mark where it could not learn to draw a maze).

Observation: the maze to edit, its shortest path, and the request. The maze is the reset
    task's first example (a self-play pool task, whose `check` holds its map); without one,
    the training maze of the reset's seed, under the env's own maze settings (Maze-v0's).
Tools: move_goal(direction) and move_start(direction) move that mark to the neighbouring
    cell (an edit, not a walk: walls do not stop it; the grid's edge, the other mark, a key
    or a goal then out of reach do); each result shows the edited map and its shortest
    path. propose() hands the maze back as the task and ends the episode; it refuses a maze
    no edit changed, and one the solver env holds out from training (its eval and test
    splits: self-play never trains on what evaluation plays), saying to edit further. A
    call on the episode's last turn proposes the maze as it then stands, if it can be (a
    tiny proposer need not learn to count its edits).
Result: a ProposedTask (kind "maze"): the map as its instruction; `check` holds the map, its
    shortest path and the map it was edited from.
Reward: 0 (the builder pays the proposer from its solvers' results).
Episode end: terminated by propose (or the last turn's call); truncated after `max_turns`
    turns (default 5) with nothing handed back when the maze then is not one to propose.
Arguments: Maze-v0's (the shown maze's settings, and `held_out`, the solver's held-out share),
    max_edits (the scripted proposer's most edits), plus ToolEnv's.
Scripted proposer: 1 to `max_edits` random edits, more while the maze is held out, then
    propose; for demonstrations.
Versions: v0, first release.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from typing import Any

from toolgym.envs.maze import game
from toolgym.envs.maze.env import Direction, MazeEnv
from toolgym.envs.maze.layout import DIRECTIONS, MazeLayout, neighbour
from toolgym.envs.maze.maps import check_reachable, parse_map, shortest_path
from toolgym.envs.tasks.content import split_of
from toolgym.envs.tool_env import Outcome
from toolgym.errors import ConfigError
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import ToolCallError, tool

KIND = "maze"


def held_out_maze(layout: MazeLayout, held_out: float) -> bool:
    """Whether the solver env holds this maze out of training (it opens an eval or test
    item: its map, by content)."""
    return split_of(layout.render(layout.start), held_out) != "train"


class ProposeMazeEnv(MazeEnv):
    instructions = (
        "Edit the maze into a new one for a player who should solve it sometimes, but not "
        "always: move its goal G or its start @ one cell a call, then propose it."
    )
    move = None  # the solver's tools, hidden: a proposer edits the maze, it does not walk it
    pick_up = None
    open_door = None

    def __init__(self, max_edits: int = 3, **kwargs: Any) -> None:
        kwargs.setdefault("max_turns", 5)
        super().__init__(**kwargs)
        if not isinstance(max_edits, int) or max_edits < 1:
            raise ConfigError(f"max_edits {max_edits!r}: give a whole number of at least 1")
        self.max_edits = max_edits
        self.shown = ""
        """The map of the maze as it was shown, before any edit."""
        self.proposed = False
        self.plan: list[ToolCall] = []

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        given = dict((options or {}).get("task") or {})
        examples = given.get("examples")
        shown = _example_map(examples[0]) if isinstance(examples, list) and examples else None
        # played alone (sft, eval), the task's own maze: a training maze, as a pool shows one
        await super().start(seed, {"task": {"map": shown}} if shown is not None else options)
        layout = self._layout()
        self.shown, self.proposed = layout.render(layout.start), False
        self.plan = self._scripted_plan(random.Random(f"edits-{self.maze_name}"))
        return [{"role": "user", "content": f"Maze to edit:\n{self._drawn()}\nEdit it."}]

    @tool
    async def move_goal(self, direction: Direction) -> str:
        """Move the goal G to the neighbouring cell.

        Args:
            direction: north, south, east or west.
        """
        return self._edit("goal", direction)

    @tool
    async def move_start(self, direction: Direction) -> str:
        """Move the start @ to the neighbouring cell.

        Args:
            direction: north, south, east or west.
        """
        return self._edit("start", direction)

    @tool
    async def propose(self) -> str:
        """Hand the edited maze to the solver; the episode ends."""
        refused = self._unproposable()
        if refused is not None:
            raise ToolCallError(refused)
        return self._hand_back_maze()

    def outcome(self) -> Outcome:
        """Ended once proposed; a call on the last turn that left the maze proposable
        proposes it as it stands (an edit, or an edit refused)."""
        last = self.turn is not None and self.turn >= self.max_turns
        if not self.proposed and last and self._unproposable() is None:
            self._hand_back_maze()
        return Outcome(0.0, True) if self.proposed else Outcome()

    def state_key(self) -> Hashable:
        """The maze as it stands (a proposer group holds proposers shown different mazes,
        so the marks' cells alone would take one maze's state for another's)."""
        return f"{self._drawn_map()}|{self.proposed}"

    def scripted_action(self) -> str | None:
        """The next of the episode's random edits, then propose."""
        if self.proposed or self.layout is None:
            return None
        if self.plan:
            return self.parser.render([self.plan[0]])
        if self._unproposable() is not None:
            self.plan = self._scripted_plan(random.Random(f"more-{self._drawn_map()}"), 1)
            return self.parser.render(self.plan[:1])
        return self.parser.render([ToolCall("propose", {})])

    def mistake_action(self, rng: random.Random) -> str | None:
        """An edit off the grid (refused, the maze unchanged)."""
        layout = self._layout()
        for mark, cell in (("goal", layout.goal), ("start", layout.start)):
            for direction in DIRECTIONS:
                if not layout.inside(neighbour(cell, direction)):
                    name = "move_goal" if mark == "goal" else "move_start"
                    return self.parser.render([ToolCall(name, {"direction": direction})])
        return None

    # ----- helpers ---------------------------------------------------------------------------
    def _edit(self, mark: str, direction: str) -> str:
        layout = self._layout()
        moved = _moved(layout, mark, direction)
        if isinstance(moved, str):
            raise ToolCallError(moved)
        self.layout, self.state = moved, game.initial_state(moved)
        if self.plan and self.plan[0] == ToolCall(f"move_{mark}", {"direction": direction}):
            self.plan.pop(0)
        return f"Moved the {mark} {direction}.\n{self._drawn()}"

    def _unproposable(self) -> str | None:
        """Why the maze as it stands cannot be proposed, or None."""
        if self._drawn_map() == self.shown:
            return "the maze is the one shown: edit it first"
        if held_out_maze(self._layout(), self.held_out):
            return "that maze is held out for evaluation: edit it further"
        return None

    def _hand_back_maze(self) -> str:
        drawn, steps = self._drawn_map(), shortest_path(self._layout())
        self.hand_back({"kind": KIND, "instruction": drawn,
                        "check": {"map": drawn, "path": steps, "from": self.shown}})  # fmt: skip
        self.proposed = True
        return f"Proposed: {_moves(steps)} from start to goal."

    def _drawn_map(self) -> str:
        layout = self._layout()
        return layout.render(layout.start)

    def _drawn(self) -> str:
        layout = self._layout()
        return f"{self._drawn_map()}\nShortest path: {_moves(shortest_path(layout))}."

    def _scripted_plan(self, rng: random.Random, at_least: int = 1) -> list[ToolCall]:
        """Random edits that each apply (1 to max_edits of them)."""
        layout, plan = self._layout(), []
        for _ in range(rng.randint(at_least, max(self.max_edits, at_least))):
            options = [(mark, d) for mark in ("goal", "start") for d in DIRECTIONS
                       if not isinstance(_moved(layout, mark, d), str)]  # fmt: skip
            if not options:
                break
            mark, direction = rng.choice(options)
            moved = _moved(layout, mark, direction)
            assert not isinstance(moved, str)
            layout = moved
            plan.append(ToolCall(f"move_{mark}", {"direction": direction}))
        return plan


def _moved(layout: MazeLayout, mark: str, direction: str) -> MazeLayout | str:
    """The layout with its goal (or start) moved a cell, or why that edit cannot be made."""
    cell = layout.goal if mark == "goal" else layout.start
    other = layout.start if mark == "goal" else layout.goal
    target = neighbour(cell, direction)
    if not layout.inside(target):
        return f"the {mark} cannot leave the grid"
    if target == other or target in layout.keys:
        return f"the {mark} cannot share a cell with the {'start' if mark == 'goal' else 'goal'} or a key"
    start, goal = (layout.start, target) if mark == "goal" else (target, layout.goal)
    moved = MazeLayout(layout.size, layout.passages, layout.doors, layout.keys, start, goal)
    try:
        check_reachable(moved)
    except ConfigError as exc:
        return str(exc)
    return moved


def _moves(n: int) -> str:
    return f"{n} move{'s' if n != 1 else ''}"


def _example_map(example: object) -> str | None:
    """The map of a shown pool task (its check's, else its instruction), if it is one."""
    if not isinstance(example, dict):
        return None
    check = example.get("check")
    drawn = check.get("map") if isinstance(check, dict) else example.get("instruction")
    try:
        parse_map(drawn)
    except ConfigError:
        return None
    return str(drawn)
