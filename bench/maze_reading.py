"""Does a Maze policy read the maze it is shown? For each policy, on the opening turn of every
held-out maze of the quickstart's settings, the probability it gives each of the four moves
(each whole tool call scored by teacher forcing on the prompt the trainer renders), then:

    exit     the mass on moves through an open exit
    solver   the mass on the scripted solver's move
    blind    the same two figures for a maze-blind policy: this policy's own move distribution
             averaged over all the mazes, given to every maze alike (the baseline, measured in
             the same run on the same mazes)

and the ratios policy / blind. Beside them, the success of two scripted policies that read no
further than the last message, on the same mazes: one moving through a random open exit, one
heading for the goal when an exit leads that way. A ratio near 1 says the policy's moves do not depend on the
maze: whatever RL does then, it cannot lift success on mazes it never saw. This is the bench a
larger base reruns (`toolgym model init --size mini`, or a pretrained one) to see whether
reading starts.

    python bench/maze_reading.py runs/quickstart/sft runs/quickstart/rl/policy [--mazes 91]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
from pathlib import Path
from typing import Any

import torch

from toolgym.agents.render import ChatRenderer
from toolgym.envs.maze import game
from toolgym.envs.maze.env import MazeEnv
from toolgym.envs.maze.layout import DIRECTIONS, neighbour
from toolgym.envs.registration import make
from toolgym.tools.records import ToolCall
from toolgym.training.quickstart_recipe import ENV_ARGS, ENV_ID


def move_probabilities(model, renderer, prompt: list[int], calls: list[str]) -> list[float]:
    """P(call | prompt) for each call text, normalised over `calls`."""
    scores = []
    for text in calls:
        completion = renderer.encode(text)
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1 : -1].log_softmax(-1)
        scores.append(logits.gather(1, torch.tensor(completion)[:, None]).sum())
    return torch.stack(scores).softmax(0).tolist()


async def opening_turns(n: int) -> list[tuple[list[dict], list[str], str, set[str], Any]]:
    """The opening messages, the four move calls, the solver's move, the open exits and the
    layout of the first `n` held-out mazes."""
    env = make(ENV_ID, **ENV_ARGS)
    maze = env.unwrapped
    assert isinstance(maze, MazeEnv)
    turns = []
    for draw in maze.task_source().head("eval", n):
        messages, _ = await env.areset(seed=draw.seed, options={"task": draw.task})
        layout = maze.layout
        assert layout is not None
        calls = [
            maze.parser.render([ToolCall(name="move", arguments={"direction": d})])
            for d in DIRECTIONS
        ]
        best = maze.solution()[0].arguments["direction"]
        exits = {d for d in DIRECTIONS if game.what_is(layout, maze.state, d) == "open"}
        turns.append((messages, calls, best, exits, layout))
    await env.aclose()
    return turns


def reactive_success(layouts, towards_goal: bool, rounds: int = 20) -> float:
    """The success of a policy that reads only its surroundings: a random open exit, or (with
    `towards_goal`) one that leads towards the goal when there is one."""
    rng, wins = random.Random(0), 0
    for layout in layouts:
        for _ in range(rounds):
            state = game.initial_state(layout)
            for _ in range(ENV_ARGS["max_turns"]):
                exits = [d for d in DIRECTIONS if game.what_is(layout, state, d) == "open"]
                ahead = [d for d in exits if towards(layout, state, d)] if towards_goal else []
                state, _ = game.move(layout, state, rng.choice(ahead or exits))
                if game.solved(layout, state):
                    wins += 1
                    break
    return wins / (rounds * len(layouts))


def towards(layout, state, direction: str) -> bool:
    row, column = neighbour(state.pos, direction)
    before = abs(layout.goal[0] - state.pos[0]) + abs(layout.goal[1] - state.pos[1])
    return abs(layout.goal[0] - row) + abs(layout.goal[1] - column) < before


def measure(policy: Path, turns) -> dict[str, float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(policy).eval()
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(policy), tool_schemas=False)
    probs = [
        dict(
            zip(
                DIRECTIONS,
                move_probabilities(model, renderer, renderer.prompt_ids(m), calls),
                strict=True,
            )
        )
        for m, calls, *_ in turns
    ]
    blind = {d: statistics.mean(p[d] for p in probs) for d in DIRECTIONS}
    rows = list(zip(probs, turns, strict=True))
    return {
        "exit": statistics.mean(sum(p[d] for d in exits) for p, (_, _, _, exits, _) in rows),
        "blind exit": statistics.mean(
            sum(blind[d] for d in exits) for _, (_, _, _, exits, _) in rows
        ),
        "solver": statistics.mean(p[best] for p, (_, _, best, _, _) in rows),
        "blind solver": statistics.mean(blind[best] for _, (_, _, best, _, _) in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policies", nargs="+", type=Path)
    parser.add_argument("--mazes", type=int, default=91, help="held-out mazes (91: all)")
    args = parser.parse_args()
    turns = asyncio.run(opening_turns(args.mazes))
    print(f"{ENV_ID} {ENV_ARGS}: the opening turn of {len(turns)} held-out mazes")
    layouts = [layout for *_, layout in turns]
    print(
        f"a random open exit each turn: {reactive_success(layouts, False):.1%} success; "
        f"towards the goal when an exit leads there: {reactive_success(layouts, True):.1%}"
    )
    print(
        f"{'policy':<40} {'exit':>6} {'blind':>6} {'ratio':>6} {'solver':>7} {'blind':>6} {'ratio':>6}"
    )
    for policy in args.policies:
        m = measure(policy, turns)
        print(
            f"{str(policy)[-40:]:<40} {m['exit']:>6.3f} {m['blind exit']:>6.3f} "
            f"{m['exit'] / m['blind exit']:>6.2f} {m['solver']:>7.3f} {m['blind solver']:>6.3f} "
            f"{m['solver'] / m['blind solver']:>6.2f}"
        )


if __name__ == "__main__":
    main()
