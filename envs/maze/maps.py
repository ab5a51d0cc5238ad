"""A maze read back from its drawn map (MazeLayout.render with the agent on the start): what a
task names a maze by when no seed made it (a proposer's edit, a task file). Everything in a
map may be hostile, so its size is bounded before it is read and each rule it breaks is said
in one line; a maze whose goal cannot be reached is refused."""

from __future__ import annotations

from toolgym.envs.maze import game
from toolgym.envs.maze.layout import Cell, Edge, MazeLayout, edge
from toolgym.envs.maze.solver import solve
from toolgym.errors import ConfigError

MAX_SIZE = 8
"""The largest maze a map may draw (cells a side)."""
MAX_DOORS = 3
"""The most doors (and keys) a map may hold: the solver searches position x keys x doors."""
CELL = {".", "@", "G", "K"}
EDGE = {"#", ".", "D"}


def parse_map(text: object) -> MazeLayout:
    """The maze `text` draws (# wall, . floor, @ start, G goal, K key, D closed door), or a
    ConfigError saying what is wrong with it."""
    if not isinstance(text, str):
        raise ConfigError(f"a maze map is text, got {type(text).__name__}")
    width = 2 * MAX_SIZE + 1
    if len(text) > width * (width + 1):
        raise ConfigError(f"a maze map is at most {MAX_SIZE}x{MAX_SIZE} cells")
    rows = text.strip("\n").split("\n")
    n = len(rows)
    if n % 2 == 0 or not 5 <= n <= width or any(len(row) != n for row in rows):
        raise ConfigError(
            "a maze map is a square of 2 x size + 1 lines of as many characters (size 2 to "
            f"{MAX_SIZE}); this one has {n} lines"
        )
    size = n // 2
    passages: set[Edge] = set()
    doors: dict[Edge, int] = {}
    keys: dict[Cell, int] = {}
    marks: dict[str, list[Cell]] = {"@": [], "G": []}
    for r, row in enumerate(rows):
        for c, char in enumerate(row):
            where = f"row {r + 1}, column {c + 1}"
            if r in (0, n - 1) or c in (0, n - 1) or (r % 2 == 0 and c % 2 == 0):
                if char != "#":
                    raise ConfigError(f"a maze map has walls on its border and corners ({where})")
            elif r % 2 == 1 and c % 2 == 1:
                if char not in CELL:
                    raise ConfigError(f"a cell is one of . @ G K, not {char!r} ({where})")
                cell = (r // 2, c // 2)
                if char in marks:
                    marks[char].append(cell)
                elif char == "K":
                    keys[cell] = len(keys)
            else:
                if char not in EDGE:
                    raise ConfigError(f"between cells is # . or D, not {char!r} ({where})")
                if char != "#":
                    passage = _edge_at(r, c)
                    passages.add(passage)
                    if char == "D":
                        doors[passage] = len(doors)
    for mark, name in (("@", "start @"), ("G", "goal G")):
        if len(marks[mark]) != 1:
            raise ConfigError(f"a maze map has one {name}, this one {len(marks[mark])}")
    if len(doors) > MAX_DOORS or len(keys) > MAX_DOORS:
        raise ConfigError(f"a maze map holds at most {MAX_DOORS} doors and {MAX_DOORS} keys")
    layout = MazeLayout(size, frozenset(passages), doors, keys, marks["@"][0], marks["G"][0])
    check_reachable(layout)
    return layout


def check_reachable(layout: MazeLayout) -> None:
    """A ConfigError if the goal cannot be reached from the start."""
    try:
        solve(layout, game.initial_state(layout))
    except ValueError:
        raise ConfigError("the goal of this maze cannot be reached from its start") from None


def _edge_at(r: int, c: int) -> Edge:
    """The edge drawn at grid row r, column c: between the cells above and below it (r even)
    or left and right of it (c even)."""
    if r % 2 == 0:
        return edge(((r - 1) // 2, c // 2), ((r + 1) // 2, c // 2))
    return edge((r // 2, (c - 1) // 2), (r // 2, (c + 1) // 2))


def shortest_path(layout: MazeLayout) -> int:
    """The fewest calls (moves, pick-ups, door openings) from the start to the goal."""
    return len(solve(layout, game.initial_state(layout)))
