"""Maze steps per second through the toolkit, next to a bare loop over the same game logic.

All paths replay the same precomputed optimal actions for the same seeds, so they do the
same game work; what differs is what toolgym adds around it:

- bare:    `generate` + the rule functions + the observation text, called directly
- env:     one MazeEnv through the sync API (parse the tool call, validate the arguments,
           run the tool, build messages and info)
- runner:  the same env through the episode runner, many episodes at once on reused
           instances from an EnvPool, with per-call timeouts and token bookkeeping (a
           replaying policy stands in for the model, so the rendering is counted too; its
           turns' ids are encoded before the clock starts, as a model samples them)
- runner without rendering: the same, with a renderer that hands back fixed ids, so the
           row shows the runner's own cost apart from the chat template and the tokenizer
           (what the row measured before the runner rendered deltas)

The ratio bare / toolkit is the toolkit's overhead factor per step (1.0 = free). Each path
runs `--repeats` times and the median is shown, because these machines are shared and noisy.

A second table does the same for TextWorld-v0 (`--textworld N` games, 0 to skip): TextWorld's
own `env.step` in this process (the same infos requested) against TextWorldEnv, which adds
the command checks, the worker process and its socket, and the observation text. Both replay
the games' walkthroughs; the games are generated before the clock starts, by an env sharing
the timed envs' resources (as a run's instances share the runtime's), so the game host they
fork their workers from is running before the clock starts too.

    python bench/env_step.py [--episodes 200] [--size 4] [--repeats 5] [--model DIR]
                             [--textworld 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from common import tiny_model
from transformers import AutoTokenizer

import toolgym
from toolgym.agents.collector import play_pooled
from toolgym.agents.engines.base import Capabilities, Completion, SamplingParams
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import EnvLoop, EpisodeRequest, RolloutConfig
from toolgym.envs import EnvPool
from toolgym.envs.maze import game
from toolgym.envs.maze.layout import generate
from toolgym.envs.maze.solver import solve
from toolgym.envs.resources import Resources
from toolgym.tools import HermesParser, ToolCall

RULES = {
    "move": lambda layout, state, a: game.move(layout, state, a["direction"]),
    "pick_up": lambda layout, state, a: game.pick_up(layout, state),
    "open_door": lambda layout, state, a: game.open_door(layout, state, a["direction"]),
}


def plans(seeds: range, size: int) -> dict[int, list[ToolCall]]:
    out = {}
    for seed in seeds:
        layout = generate(seed, size)
        out[seed] = solve(layout, game.initial_state(layout))
    return out


def bare(seeds: range, size: int, calls: dict[int, list[ToolCall]]) -> int:
    steps = 0
    for seed in seeds:
        layout = generate(seed, size)
        state = game.initial_state(layout)
        layout.render(state.pos)
        for call in calls[seed]:
            state, message = RULES[call.name](layout, state, call.arguments)
            _ = f"{message} {game.describe(layout, state)}"
            steps += 1
        assert game.solved(layout, state)
    return steps


def single_env(seeds: range, size: int, texts: dict[int, list[str]]) -> int:
    env = toolgym.make("toolgym/Maze-v0", size=size)
    steps = 0
    for seed in seeds:
        env.reset(seed=seed)
        for text in texts[seed]:
            *_, terminated, truncated, _ = env.step(text)
            steps += 1
        assert terminated
    env.close()
    return steps


class Replay:
    """A policy that replays one episode's precomputed turns."""

    capabilities = Capabilities("shared")  # no weights to sync, no context kept

    def __init__(self, turns: list[tuple[str, list[int]]]) -> None:
        self.turns = iter(turns)

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: object = None
    ) -> Completion:
        text, ids = next(self.turns)
        return Completion(ids, [0.0] * len(ids), text, "stop")

    async def aclose(self) -> None:
        pass


class FixedIds(ChatRenderer):
    """A renderer that skips the chat template and the tokenizer: fixed ids for every prompt
    and delta, so only the runner's own work is timed."""

    def prompt_ids(self, messages: object, tools: object = None) -> list[int]:
        return [0] * 8

    def delta_ids(
        self, new_messages: object, completion_ids: object, tools: object = None
    ) -> list[int]:
        return [0] * 8


def runner(
    seeds: range,
    size: int,
    turns: dict[int, list[tuple[str, list[int]]]],
    slots: int,
    renderer: ChatRenderer,
) -> int:
    config = RolloutConfig(SamplingParams(max_tokens=64), max_context_tokens=1 << 20)

    async def run() -> int:
        limit = asyncio.Semaphore(slots)
        async with EnvPool(lambda: toolgym.make("toolgym/Maze-v0", size=size)) as pool:

            async def one(seed: int) -> int:
                async with limit:
                    loop = EnvLoop(Replay(turns[seed]), renderer, config)
                    traj = await play_pooled(pool, EpisodeRequest(seed=seed), loop)
                assert traj.terminated, traj.infra_error
                return len(traj.steps)

            return sum(await asyncio.gather(*(one(s) for s in seeds)))

    return asyncio.run(run())


TEXTWORLD_GAME = {"family": "custom", "world_size": 5, "nb_objects": 8, "quest_length": 5}


def textworld_games(n: int, resources: Resources) -> list[tuple[str, list[str]]]:
    """(game file, walkthrough) of the first `n` games of TEXTWORLD_GAME, generated into the
    cache on the first run."""
    env = toolgym.make("toolgym/TextWorld-v0", game=TEXTWORLD_GAME)
    env.unwrapped.use_resources(resources)
    games = []
    for seed in range(n):
        env.reset(seed=seed)
        inner = env.unwrapped
        games.append((inner.game_file, inner.walkthrough()))
    env.close()
    return games


def textworld_bare(games: list[tuple[str, list[str]]]) -> int:
    import textworld

    from toolgym.envs.textworld.worker import requested_infos

    steps = 0
    for path, walkthrough in games:
        game = textworld.start(path, request_infos=requested_infos())
        game.reset()
        for command in walkthrough:
            state, _, done = game.step(command)
            steps += 1
        assert state.won
        game.close()
    return steps


def textworld_env(games: list[tuple[str, list[str]]], resources: Resources) -> int:
    env = toolgym.make("toolgym/TextWorld-v0", max_turns=100)
    env.unwrapped.use_resources(resources)
    steps = 0
    for path, walkthrough in games:
        env.reset(options={"task": {"game": path}})
        for command in walkthrough:
            *_, terminated, _, _ = env.step(f"<command>{command}</command>")
            steps += 1
        assert terminated
    env.close()
    return steps


def table(title: str, rows: list[tuple[str, tuple[int, float]]]) -> None:
    base_rate = rows[0][1][0] / rows[0][1][1]
    print(title)
    print(f"{'path':32} {'steps':>7} {'seconds':>9} {'steps/s':>10} {'overhead':>9}")
    for name, (steps, seconds) in rows:
        rate = steps / seconds
        print(f"{name:32} {steps:7d} {seconds:9.3f} {rate:10,.0f} {base_rate / rate:8.1f}x")


def timed(fn: Callable[[], int], repeats: int) -> tuple[int, float]:
    times, steps = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        steps = fn()
        times.append(time.perf_counter() - start)
    return steps, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--model", help="model directory whose tokenizer renders (default: a fresh tiny one)"
    )
    parser.add_argument("--textworld", type=int, default=20, help="TextWorld games (0: skip)")
    args = parser.parse_args()
    seeds = range(args.episodes)
    calls = plans(seeds, args.size)
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(tiny_model(args.model)))
    render = HermesParser().render
    texts = {seed: [render([c]) for c in cs] for seed, cs in calls.items()}
    fixed = FixedIds(renderer.tokenizer)
    closing = renderer.closing_ids()  # the model's side: its ids are sampled, not encoded
    turns = {seed: [(t, renderer.encode(t) + closing) for t in ts] for seed, ts in texts.items()}

    rows = [
        ("bare game loop (baseline)", timed(lambda: bare(seeds, args.size, calls), args.repeats)),
        (
            "MazeEnv, sync reset/step",
            timed(lambda: single_env(seeds, args.size, texts), args.repeats),
        ),
        (
            f"runner, {args.slots} at once",
            timed(lambda: runner(seeds, args.size, turns, args.slots, renderer), args.repeats),
        ),
        (
            f"runner, {args.slots} at once, no rendering",
            timed(lambda: runner(seeds, args.size, turns, args.slots, fixed), args.repeats),
        ),
    ]
    table(
        f"Maze-v0 size {args.size}, {args.episodes} episodes of optimal play, median of {args.repeats} runs",
        rows,
    )
    if args.textworld:
        loop = asyncio.new_event_loop()
        resources = Resources(loop=loop)
        games = textworld_games(args.textworld, resources)
        print()
        table(
            f"TextWorld-v0 {TEXTWORLD_GAME}, {len(games)} games' walkthroughs, median of {args.repeats} runs",
            [
                (
                    "TextWorld env.step (baseline)",
                    timed(lambda: textworld_bare(games), args.repeats),
                ),
                (
                    "TextWorldEnv, sync reset/step",
                    timed(lambda: textworld_env(games, resources), args.repeats),
                ),
            ],
        )
        loop.run_until_complete(resources.aclose())
        loop.close()


if __name__ == "__main__":
    main()
