"""Maze-v0: deterministic generation, solvable keys and doors, the optimal solver, and
state keys that recur across trajectories (what GiGPO's anchor states need)."""

from __future__ import annotations

import itertools

import pytest

import toolgym
from toolgym.envs.maze import game
from toolgym.envs.maze.layout import DIRECTIONS, generate
from toolgym.envs.maze.solver import solve
from toolgym.errors import ConfigError


def play(env, actions):
    out = []
    for a in actions:
        out.append(env.step(a))
    return out


def render(env, name, **arguments):
    return env.parser.render([toolgym.tools.ToolCall(name, arguments)])


@pytest.mark.parametrize("size,n_doors", [(2, 1), (4, 1), (5, 2), (6, 3)])
def test_every_seed_is_solvable_and_doors_block_the_only_path(size, n_doors):
    for seed in range(40):
        layout = generate(seed, size, n_doors)
        assert layout == generate(seed, size, n_doors)
        assert len(layout.doors) == len(layout.keys) == min(n_doors, len(layout.doors))
        assert len(layout.passages) == size * size - 1  # a spanning tree: a perfect maze
        calls = solve(layout, game.initial_state(layout))
        names = [c.name for c in calls]
        assert names.count("open_door") == len(layout.doors)
        assert names.count("pick_up") == len(layout.keys)
        # Without opening doors the goal is unreachable.
        state = game.initial_state(layout)
        for c in calls:
            if c.name == "move":
                state = game.move(layout, state, c.arguments["direction"])[0]
            elif c.name == "pick_up":
                state = game.pick_up(layout, state)[0]
            else:
                state = game.open_door(layout, state, c.arguments["direction"])[0]
        assert game.solved(layout, state)


def test_different_seeds_give_different_mazes():
    assert len({generate(s, 4).passages for s in range(20)}) > 15


def test_scripted_solver_plays_optimal_episodes_through_the_tool_api():
    env = toolgym.make("toolgym/Maze-v0", size=4, n_doors=1)
    for seed in range(5):
        obs, info = env.reset(seed=seed)
        optimal = len(env.solution())
        total, turns = 0.0, 0
        while True:
            obs, reward, terminated, truncated, info = env.step(env.scripted_action())
            total, turns = total + reward, turns + 1
            assert info["valid_action"]
            if terminated or truncated:
                break
        assert terminated and not truncated and total == 1.0 and turns == optimal


def test_walls_block_and_empty_pick_up_is_harmless():
    env = toolgym.make("toolgym/Maze-v0", size=4)
    env.reset(seed=3)
    layout = env.layout
    wall = next(d for d in DIRECTIONS if game.what_is(layout, env.state, d) == "wall")
    obs, reward, *_, info = env.step(render(env, "move", direction=wall))
    assert obs[0]["content"].startswith(f"You cannot move {wall}: there is a wall.")
    assert info["valid_action"] and reward == 0.0
    obs, *_ = env.step(render(env, "pick_up"))
    assert obs[0]["content"].startswith("There is nothing here to pick up.")


def test_locked_door_needs_a_key():
    layout = generate(0, 4, 1)
    (a, b) = tuple(next(iter(layout.doors)))
    direction = next(d for d, (dr, dc) in DIRECTIONS.items() if (a[0] + dr, a[1] + dc) == b)
    state = game.MazeState(a)
    assert (
        game.move(layout, state, direction)[1]
        == f"You cannot move {direction}: there is a closed door."
    )
    assert game.open_door(layout, state, direction)[1] == "The door is locked and you hold no key."
    opened, message = game.open_door(layout, game.MazeState(a, held=1), direction)
    assert message == f"You unlocked the door to the {direction}." and opened.held == 0
    assert game.move(layout, opened, direction)[0].pos == b
    assert f"Closed doors: {direction}." in game.describe(layout, state)
    assert f"Closed doors: {direction}." not in game.describe(layout, opened)


def test_the_view_lists_exactly_the_exits_a_move_can_take():
    layout = generate(5, 4, 0)
    for r, c in itertools.product(range(4), repeat=2):
        state = game.MazeState((r, c))
        view = game.describe(layout, state)
        listed = view.split("Exits: ")[1].split(".")[0].split(", ")
        movable = [d for d in DIRECTIONS if game.move(layout, state, d)[0].pos != (r, c)]
        assert listed == movable, view


def test_state_keys_repeat_across_trajectories_and_within_one():
    env = toolgym.make("toolgym/Maze-v0", size=4)
    _, first = env.reset(seed=11)
    _, second = env.reset(seed=11)
    assert first["state_key"] == second["state_key"]  # same task and seed, same anchor state
    start = first["state_key"]
    free = next(d for d in DIRECTIONS if game.what_is(env.layout, env.state, d) == "open")
    back = {"north": "south", "south": "north", "east": "west", "west": "east"}[free]
    *_, info1 = env.step(render(env, "move", direction=free))
    *_, info2 = env.step(render(env, "move", direction=back))
    assert info1["state_key"] != start and info2["state_key"] == start


def test_horizon_truncates_and_invalid_turns_are_flagged():
    env = toolgym.make("toolgym/Maze-v0", size=5, max_turns=2)
    env.reset(seed=0)
    *_, terminated, truncated, info = env.step("I will think about it.")
    assert not info["valid_action"] and "no tool call found" in info["error"]
    *_, terminated, truncated, info = env.step(render(env, "pick_up") + render(env, "pick_up"))
    assert truncated and not terminated
    assert not info["valid_action"] and "at most 1 tool call(s) per turn" in info["error"]
    with pytest.raises(toolgym.envs.EpisodeOverError, match="needs reset"):
        env.step(render(env, "pick_up"))


def test_reset_without_seed_draws_new_mazes_reproducibly():
    env = toolgym.make("toolgym/Maze-v0")
    env.reset(seed=7)
    env.reset()
    a = env.layout
    env.reset(seed=7)
    env.reset()
    assert env.layout == a


def test_any_goal_makes_walks_of_every_length_and_many_small_mazes():
    """far_goal=False: the goal is any cell but the start, so 3x3 mazes are ~1,000 distinct
    (against 140 with the farthest goal), enough to hold a hundred out."""
    far = {generate(s, 3, 0).render(generate(s, 3, 0).start) for s in range(3000)}
    anywhere = [generate(s, 3, 0, far_goal=False) for s in range(3000)]
    assert len(far) <= 140 < 800 < len({m.render(m.start) for m in anywhere})
    lengths = {len(solve(m, game.initial_state(m))) for m in anywhere}
    assert {1, 2, 3, 4} <= lengths
    assert generate(7, 4, 1) == generate(7, 4, 1, far_goal=True)  # the default is unchanged


def test_a_slipping_solver_makes_one_wrong_move_then_walks_back():
    env = toolgym.make("toolgym/Maze-v0", size=4, n_doors=0, solver_slips=1.0)
    for seed in range(5):
        env.reset(seed=seed)
        optimal, turns, wrong = len(env.solution()), 0, 0
        while True:
            before = len(env.solution())
            *_, terminated, truncated, _ = env.step(env.scripted_action())
            turns, wrong = turns + 1, wrong + (len(env.solution()) >= before and not terminated)
            if terminated or truncated:
                break
        assert terminated and wrong == 1 and turns in (optimal + 1, optimal + 2)
    with pytest.raises(ConfigError, match="solver_slips 2"):
        toolgym.make("toolgym/Maze-v0", solver_slips=2)


def test_uniform_carving_draws_every_perfect_maze_where_depth_first_draws_few():
    """carve="uniform" (Wilson's algorithm): a 3x3 grid's 192 spanning trees, each about as
    often, and 13,824 distinct mazes with any goal, where the depth-first carve makes 14 trees
    (1,008 mazes): room to hold a thousand mazes out."""
    uniform = [generate(s, 3, 0, far_goal=False, carve="uniform") for s in range(6000)]
    trees = {}
    for layout in uniform:
        assert len(layout.passages) == 8 and solve(layout, game.initial_state(layout))
        trees[layout.passages] = trees.get(layout.passages, 0) + 1
    assert len(trees) == 192 and max(trees.values()) < 3 * min(trees.values())
    assert len({generate(s, 3, 0, carve="dfs").passages for s in range(6000)}) == 14
    assert uniform[5] == generate(5, 3, 0, far_goal=False, carve="uniform")
    for seed in range(20):  # keys and doors still block the only path
        layout = generate(seed, 5, 2, carve="uniform")
        names = [c.name for c in solve(layout, game.initial_state(layout))]
        assert names.count("open_door") == len(layout.doors) == 2
    env = toolgym.make("toolgym/Maze-v0", size=3, n_doors=0, far_goal=False, carve="uniform")
    source = env.unwrapped.task_source()
    assert len({source.item_of(d.seed) for d in source.head("eval", 400)}) == 400
    with pytest.raises(ConfigError, match="maze carve 'bfs'"):
        toolgym.make("toolgym/Maze-v0", carve="bfs")
