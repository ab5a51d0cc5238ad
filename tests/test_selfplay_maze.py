"""Maze self-play's parts: a maze read back from its map (every generated maze round-trips,
hostile maps are refused in one line), Maze-v0 playing a drawn maze, ProposeMaze-v0's edits
and what it refuses to propose, and the domain's stages (a copy, a goal out of reach, a maze
the solver env holds out); the loop on a real model is test_selfplay_loops.py's."""

from __future__ import annotations

import re

import pytest

import toolgym
from toolgym.envs.maze.layout import generate
from toolgym.envs.maze.maps import parse_map, shortest_path
from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks.content import ContentTasks, split_of
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.errors import ConfigError
from toolgym.training.selfplay.domains.maze import MazeDomain
from toolgym.training.selfplay.validation import Proposal

SOLVER = {"size": 3, "n_doors": 0, "far_goal": False, "max_turns": 6}


def test_every_generated_maze_reads_back_from_its_map():
    for seed in range(300):
        for size, doors in ((2, 0), (3, 0), (4, 1), (6, 2), (8, 3)):
            layout = generate(seed, size, doors, far_goal=False)
            if layout.start in layout.keys:  # a key under the start is not drawn
                continue
            drawn = layout.render(layout.start)
            read = parse_map(drawn)
            assert (read.passages, read.start, read.goal) == (
                layout.passages,
                layout.start,
                layout.goal,
            )
            assert read.render(read.start) == drawn


CLOSED = "#####\n#@#G#\n#####\n#...#\n#####"


@pytest.mark.parametrize(
    ("drawn", "says"),
    [
        (42, "is text"),
        ("#" * 1_000_000, "at most 8x8"),
        ("###\n#@#\n###", "a square of 2 x size + 1"),
        ("#####\n#@.G#\n###\n#...#\n#####", "a square of 2 x size + 1"),
        ("#####\n#@.G.\n#.###\n#...#\n#####", "walls on its border"),
        ("#####\n#@.@#\n#.###\n#...#\n#####", "one start @, this one 2"),
        ("#####\n#@..#\n#.###\n#...#\n#####", "one goal G, this one 0"),
        ("#####\n#@.x#\n#.###\n#.G.#\n#####", "a cell is one of"),
        ("#####\n#@?G#\n#.###\n#...#\n#####", "between cells is"),
        ("#####\n#@#G#\n#####\n#...#\n#####", "cannot be reached"),
        ("#######\n#@D.D.#\n#D#####\n#.D...#\n#####.#\n#G....#\n#######", "at most 3 doors"),
    ],
)
def test_a_hostile_map_is_refused_in_one_line(drawn, says):
    with pytest.raises(ConfigError, match=re.escape(says)) as caught:
        parse_map(drawn)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


def test_maze_v0_plays_a_drawn_maze_and_refuses_a_broken_one():
    layout = generate(7, 3, 0, far_goal=False)
    drawn = layout.render(layout.start)
    env = toolgym.make("toolgym/Maze-v0", **SOLVER)
    try:
        obs, _ = env.reset(options={"task": {"map": drawn}})
        assert drawn in obs[-1]["content"]
        total, done = 0.0, False
        while not done:
            _, reward, done, truncated, _ = env.step(env.unwrapped.scripted_action())
            total, done = total + reward, done or truncated
        assert total == 1.0
        with pytest.raises(ConfigError, match="cannot be reached"):
            env.reset(options={"task": {"map": CLOSED}})
    finally:
        env.close()


def call(env, name, **arguments):
    from toolgym.tools.records import ToolCall

    return env.step(env.unwrapped.parser.render([ToolCall(name, arguments)]))


def test_the_proposer_edits_the_shown_maze_and_hands_back_a_new_training_maze():
    shown = ProposedTask(
        kind="maze",
        instruction="x" * 10,
        check={"map": generate(3, 3, 0, False).render(generate(3, 3, 0, False).start)},
    )
    env = toolgym.make("toolgym/ProposeMaze-v0", **SOLVER)
    try:
        obs, _ = env.reset(seed=1, options={"task": {"examples": [shown.model_dump()]}})
        assert shown.check["map"] in obs[-1]["content"]
        *_, info = call(env, "propose")
        assert "the one shown" in info["error"]  # nothing edited yet
        layout = env.unwrapped.layout
        off_grid = next(
            d
            for d, (dr, dc) in {
                "north": (-1, 0),
                "south": (1, 0),
                "east": (0, 1),
                "west": (0, -1),
            }.items()
            if not layout.inside((layout.goal[0] + dr, layout.goal[1] + dc))
        )
        *_, info = call(env, "move_goal", direction=off_grid)
        assert "cannot leave the grid" in info["error"]
        result, terminated, turns = None, False, 0
        while not terminated and turns < 8:
            _, _, terminated, truncated, info = env.step(env.unwrapped.scripted_action())
            result, turns = info.get("result"), turns + 1
        assert terminated and result is not None
        task = ProposedTask.model_validate(result)
        assert task.check["from"] == shown.check["map"] != task.check["map"] == task.instruction
        assert split_of(task.check["map"]) == "train"
        assert task.check["path"] == shortest_path(parse_map(task.check["map"]))
    finally:
        env.close()


def test_the_proposer_will_not_propose_a_maze_the_solver_holds_out():
    tasks = ContentTasks(lambda s: generate(s, 3, 0, False).render(generate(s, 3, 0, False).start))
    held = tasks.draw("eval", 0).task["seed"]
    layout = generate(held, 3, 0, False)
    env = toolgym.make("toolgym/ProposeMaze-v0", **SOLVER)
    try:
        env.reset(seed=0)
        env.unwrapped.layout = layout  # as if the edits had led here
        *_, info = call(env, "propose")
        assert "held out for evaluation" in info["error"]
    finally:
        env.close()


def maze_task(drawn: str, shown: str = "") -> ProposedTask:
    return ProposedTask(kind="maze", instruction=drawn, check={"map": drawn, "from": shown})


def refused(domain: MazeDomain, task: ProposedTask) -> str | None:
    from toolgym.agents.trajectory import Trajectory

    proposal = Proposal(Trajectory("p0"), task)
    for name, stage in domain.stages():
        if (reason := stage(task, proposal)) is not None:
            return f"{name}: {reason}"
    return None


def test_the_domain_refuses_copies_goals_out_of_reach_and_held_out_mazes():
    domain = MazeDomain(EnvRef("maze", "toolgym/Maze-v0", {**SOLVER, "max_turns": 3}))
    references = domain.references(6)
    assert len({domain.identity(t) for t in references}) == 6
    assert all(split_of(domain.identity(t)) == "train" for t in references)
    near = next(r for r in references if r.check["path"] <= 3)
    far = next(generate(s, 3, 0, False) for s in range(10**4)
               if split_of((m := generate(s, 3, 0, False)).render(m.start)) == "train"
               and shortest_path(m) > 3)  # fmt: skip
    assert refused(domain, maze_task(near.check["map"], near.check["map"])).startswith("edited")
    assert refused(domain, maze_task(CLOSED)).startswith("playable: the goal")
    assert "more than a solver's 3 turns" in refused(domain, maze_task(far.render(far.start)))
    tasks = ContentTasks(lambda s: generate(s, 3, 0, False).render(generate(s, 3, 0, False).start))
    held = generate(tasks.draw("test", 0).task["seed"], 3, 0, False)
    assert refused(domain, maze_task(held.render(held.start))).startswith("held out")
    assert refused(domain, maze_task(near.check["map"])) is None
    assert domain.solver_task(near) == {"map": near.check["map"]}


def test_a_call_on_the_last_turn_proposes_the_maze_as_it_stands():
    """With two turns and no propose call, the last turn's call hands the maze back as it
    then stands: after a second edit, or after an edit refused (off the grid)."""
    import random

    env = toolgym.make("toolgym/ProposeMaze-v0", **{**SOLVER, "max_turns": 2})
    inner = env.unwrapped
    try:
        for seed in range(50):  # a training maze whose first edit already makes a new one
            env.reset(seed=seed)
            first, second = inner._scripted_plan(random.Random(seed), 2)[:2]
            env.step(inner.parser.render([first]))
            if inner._unproposable() is None:
                break
        kept = inner._drawn_map()
        *_, terminated, truncated, info = env.step(inner.mistake_action(random.Random(0)))
        assert "cannot leave the grid" in info["error"] and terminated and not truncated
        assert ProposedTask.model_validate(info["result"]).check["map"] == kept
        env.reset(seed=seed)
        env.step(inner.parser.render([first]))
        obs, _, terminated, _, info = env.step(inner.parser.render([second]))
        assert terminated and "Moved the" in obs[0]["content"]
        assert ProposedTask.model_validate(info["result"]).check["map"] == inner._drawn_map()
    finally:
        env.close()
