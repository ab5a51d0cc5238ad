"""Procedural maze layouts: a perfect maze per seed, with doors on the way to the goal and the
keys that open them placed where they can be reached first.

Positions are (row, col) cells; walls and doors sit on the edges between neighbouring cells.
A perfect maze has exactly one path between two cells, so every edge on the start-goal path
is a chokepoint: a door there must be opened, and its key must lie on the start side of it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

Cell = tuple[int, int]
Edge = frozenset[Cell]

DIRECTIONS: dict[str, Cell] = {"north": (-1, 0), "south": (1, 0), "east": (0, 1), "west": (0, -1)}


def neighbour(cell: Cell, direction: str) -> Cell:
    dr, dc = DIRECTIONS[direction]
    return cell[0] + dr, cell[1] + dc


def edge(a: Cell, b: Cell) -> Edge:
    return frozenset((a, b))


@dataclass(frozen=True)
class MazeLayout:
    """The fixed part of a maze: passages, doors (edge -> door index), keys (cell -> key index)."""

    size: int
    passages: frozenset[Edge]
    doors: dict[Edge, int]
    keys: dict[Cell, int]
    start: Cell
    goal: Cell

    def inside(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.size and 0 <= cell[1] < self.size

    def render(
        self, agent: Cell | None = None, taken: Iterable[int] = (), opened: Iterable[int] = ()
    ) -> str:
        """ASCII map: # wall, D closed door, K key, @ agent, G goal, . floor."""
        taken, opened = set(taken), set(opened)
        n = 2 * self.size + 1
        grid = [["#"] * n for _ in range(n)]
        for r in range(self.size):
            for c in range(self.size):
                grid[2 * r + 1][2 * c + 1] = "."
        for e in self.passages:
            (r1, c1), (r2, c2) = sorted(e)
            door = self.doors.get(e)
            grid[r1 + r2 + 1][c1 + c2 + 1] = "D" if door is not None and door not in opened else "."
        for (r, c), k in self.keys.items():
            if k not in taken:
                grid[2 * r + 1][2 * c + 1] = "K"
        grid[2 * self.goal[0] + 1][2 * self.goal[1] + 1] = "G"
        if agent is not None:
            grid[2 * agent[0] + 1][2 * agent[1] + 1] = "@"
        return "\n".join("".join(row) for row in grid)


CARVINGS = ("dfs", "uniform")
"""How passages are carved: a depth-first search from the top-left cell (long corridors, and
few distinct mazes of a small size: 14 of a 3x3 grid's 192), or a spanning tree drawn
uniformly from all of them (Wilson's algorithm)."""


def generate(
    seed: int, size: int = 4, n_doors: int = 1, far_goal: bool = True, carve: str = "dfs"
) -> MazeLayout:
    """The layout for `seed`: the same seed and arguments always give the same maze. The goal
    is a cell farthest from the start, or with `far_goal=False` any other cell (walks of every
    length, and many more distinct mazes of a small size)."""
    if size < 2:
        raise ValueError(f"maze size must be at least 2, got {size}")
    if carve not in CARVINGS:
        raise ValueError(f"maze carve {carve!r}: use one of {', '.join(CARVINGS)}")
    rng = np.random.default_rng(seed)
    passages = _carve(rng, size) if carve == "dfs" else _carve_uniform(rng, size)
    start = (int(rng.integers(size)), int(rng.integers(size)))
    distances = _distances(passages, start)
    farthest = max(distances.values()) if far_goal else None
    goals = sorted(c for c, d in distances.items() if d == farthest or (not far_goal and d))
    goal = goals[int(rng.integers(len(goals)))]
    path = _path(passages, start, goal)
    n_doors = min(n_doors, len(path) - 1)
    door_steps = (
        sorted(rng.choice(len(path) - 1, size=n_doors, replace=False).tolist()) if n_doors else []
    )
    doors = {edge(path[i], path[i + 1]): index for index, i in enumerate(door_steps)}
    keys: dict[Cell, int] = {}
    for index in range(n_doors):
        # Key `index` lies where the agent can be with doors < index open and the rest shut.
        region = _reachable_with_open_doors(passages, doors, index, start)
        if index > 0:
            region -= _reachable_with_open_doors(passages, doors, index - 1, start)
        choices = sorted(region - set(keys) - {start, goal}) or sorted(region - set(keys) - {goal})
        keys[choices[int(rng.integers(len(choices)))]] = index
    return MazeLayout(size, frozenset(passages), doors, keys, start, goal)


def _carve(rng: np.random.Generator, size: int) -> set[Edge]:
    """Randomised depth-first search: a spanning tree of the grid, i.e. a perfect maze."""
    seen = {(0, 0)}
    stack = [(0, 0)]
    passages: set[Edge] = set()
    while stack:
        cell = stack[-1]
        options = [
            n
            for d in DIRECTIONS
            if (n := neighbour(cell, d)) not in seen and 0 <= n[0] < size and 0 <= n[1] < size
        ]
        if not options:
            stack.pop()
            continue
        nxt = options[int(rng.integers(len(options)))]
        passages.add(edge(cell, nxt))
        seen.add(nxt)
        stack.append(nxt)
    return passages


def _carve_uniform(rng: np.random.Generator, size: int) -> set[Edge]:
    """Wilson's algorithm: loop-erased random walks from each cell to the tree so far, which
    draws every spanning tree of the grid (every perfect maze) with equal chance."""
    cells = [(x, y) for x in range(size) for y in range(size)]
    tree = {cells[int(rng.integers(len(cells)))]}
    passages: set[Edge] = set()
    for first in cells:
        step: dict[Cell, Cell] = {}  # the walk's last exit from each cell (erases its loops)
        cell = first
        while cell not in tree:
            around = [n for d in DIRECTIONS if 0 <= (n := neighbour(cell, d))[0] < size
                      and 0 <= n[1] < size]  # fmt: skip
            step[cell] = around[int(rng.integers(len(around)))]
            cell = step[cell]
        cell = first
        while cell not in tree:
            tree.add(cell)
            passages.add(edge(cell, step[cell]))
            cell = step[cell]
    return passages


def _reachable_with_open_doors(
    passages: set[Edge], doors: dict[Edge, int], n_open: int, start: Cell
) -> set[Cell]:
    """Cells reachable from `start` when doors 0..n_open-1 are open and the rest are shut."""
    shut = {e for e, d in doors.items() if d >= n_open}
    return set(_distances(passages - shut, start))


def _breadth_first(passages: set[Edge], start: Cell) -> dict[Cell, tuple[int, Cell | None]]:
    """For every cell reachable from `start`: its distance and the cell it was reached from."""
    seen: dict[Cell, tuple[int, Cell | None]] = {start: (0, None)}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for d in DIRECTIONS:
            n = neighbour(cell, d)
            if n not in seen and edge(cell, n) in passages:
                seen[n] = (seen[cell][0] + 1, cell)
                queue.append(n)
    return seen


def _distances(passages: set[Edge], start: Cell) -> dict[Cell, int]:
    return {cell: dist for cell, (dist, _) in _breadth_first(passages, start).items()}


def _path(passages: set[Edge], start: Cell, goal: Cell) -> list[Cell]:
    parent = {cell: prev for cell, (_, prev) in _breadth_first(passages, start).items()}
    path = [goal]
    while (prev := parent[path[-1]]) is not None:
        path.append(prev)
    return path[::-1]
