"""The scripted optimal solver: breadth-first search over (position, inventory) states gives
the fewest tool calls from any state to the goal. Used for demonstrations, tests and bench."""

from __future__ import annotations

from collections import deque

from toolgym.envs.maze import game
from toolgym.envs.maze.game import MazeState
from toolgym.envs.maze.layout import DIRECTIONS, MazeLayout
from toolgym.tools.records import ToolCall


def solve(layout: MazeLayout, state: MazeState) -> list[ToolCall]:
    """Shortest list of calls (move / pick_up / open_door) that reaches the goal from `state`."""
    parent: dict[MazeState, tuple[MazeState, ToolCall] | None] = {state: None}
    queue = deque([state])
    while queue:
        current = queue.popleft()
        if game.solved(layout, current):
            return _unwind(parent, current)
        for call, nxt in _successors(layout, current):
            if nxt not in parent:
                parent[nxt] = (current, call)
                queue.append(nxt)
    raise ValueError("this maze has no solution from the given state")  # generate() never makes one


def _successors(layout: MazeLayout, state: MazeState) -> list[tuple[ToolCall, MazeState]]:
    out = [(ToolCall("move", {"direction": d}), game.move(layout, state, d)[0]) for d in DIRECTIONS]
    out.append((ToolCall("pick_up", {}), game.pick_up(layout, state)[0]))
    out += [
        (ToolCall("open_door", {"direction": d}), game.open_door(layout, state, d)[0])
        for d in DIRECTIONS
    ]
    return [(call, nxt) for call, nxt in out if nxt != state]


def _unwind(
    parent: dict[MazeState, tuple[MazeState, ToolCall] | None], state: MazeState
) -> list[ToolCall]:
    calls: list[ToolCall] = []
    while (link := parent[state]) is not None:
        state, call = link
        calls.append(call)
    return calls[::-1]
