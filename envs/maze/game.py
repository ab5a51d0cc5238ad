"""The maze's rules as pure functions over an immutable state, shared by the env, the
scripted solver and the benchmark's bare loop (so all three play exactly the same game)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from toolgym.envs.maze.layout import DIRECTIONS, Cell, MazeLayout, edge, neighbour


@dataclass(frozen=True)
class MazeState:
    """Where the agent is and what it has done: position, keys held, keys taken, doors opened."""

    pos: Cell
    held: int = 0
    taken: frozenset[int] = frozenset()
    opened: frozenset[int] = frozenset()

    def key(self) -> str:
        """The state_key: equal whenever position and inventory (and the map's changes) are."""
        taken = ",".join(map(str, sorted(self.taken)))
        opened = ",".join(map(str, sorted(self.opened)))
        return f"{self.pos[0]},{self.pos[1]}|keys={self.held}|taken={taken}|opened={opened}"


def initial_state(layout: MazeLayout) -> MazeState:
    return MazeState(layout.start)


def solved(layout: MazeLayout, state: MazeState) -> bool:
    return state.pos == layout.goal


def what_is(layout: MazeLayout, state: MazeState, direction: str) -> str:
    """'wall', 'open' or 'closed door' for the edge in `direction`."""
    target = neighbour(state.pos, direction)
    e = edge(state.pos, target)
    if not layout.inside(target) or e not in layout.passages:
        return "wall"
    door = layout.doors.get(e)
    return "closed door" if door is not None and door not in state.opened else "open"


def move(layout: MazeLayout, state: MazeState, direction: str) -> tuple[MazeState, str]:
    blocker = what_is(layout, state, direction)
    if blocker != "open":
        return state, f"You cannot move {direction}: there is a {blocker}."
    new = replace(state, pos=neighbour(state.pos, direction))
    return new, f"You moved {direction}."


def pick_up(layout: MazeLayout, state: MazeState) -> tuple[MazeState, str]:
    key = layout.keys.get(state.pos)
    if key is None or key in state.taken:
        return state, "There is nothing here to pick up."
    return replace(state, held=state.held + 1, taken=state.taken | {key}), "You picked up a key."


def open_door(layout: MazeLayout, state: MazeState, direction: str) -> tuple[MazeState, str]:
    if what_is(layout, state, direction) != "closed door":
        return state, f"There is no closed door to the {direction}."
    if state.held == 0:
        return state, "The door is locked and you hold no key."
    door = layout.doors[edge(state.pos, neighbour(state.pos, direction))]
    return replace(
        state, held=state.held - 1, opened=state.opened | {door}
    ), f"You unlocked the door to the {direction}."


def describe(layout: MazeLayout, state: MazeState, hints: bool = True) -> str:
    """The agent's view: position, exits and closed doors, what lies here, and (with hints) the
    goal."""
    sides = {d: what_is(layout, state, d) for d in DIRECTIONS}
    exits = [d for d, what in sides.items() if what == "open"]
    doors = [d for d, what in sides.items() if what == "closed door"]
    lines = [f"Position: row {state.pos[0]}, column {state.pos[1]}."]
    lines.append(f"Exits: {', '.join(exits)}." if exits else "No exits.")
    if doors:
        lines.append(f"Closed doors: {', '.join(doors)}.")
    here = layout.keys.get(state.pos)
    if here is not None and here not in state.taken:
        lines.append("There is a key here.")
    lines.append(f"Keys held: {state.held}.")
    if solved(layout, state):
        lines.append("You reached the goal!")
    elif hints:
        dr, dc = layout.goal[0] - state.pos[0], layout.goal[1] - state.pos[1]
        vertical = f"{abs(dr)} {'south' if dr > 0 else 'north'}" if dr else ""
        horizontal = f"{abs(dc)} {'east' if dc > 0 else 'west'}" if dc else ""
        lines.append(f"Goal: {' and '.join(p for p in (vertical, horizontal) if p)}.")
    return " ".join(lines)
