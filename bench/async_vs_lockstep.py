"""Per-episode async rollouts versus lock-step turns, on a 3-turn task whose tool takes 50 ms.

Both collect `--episodes` episodes with at most `--slots` in flight (the engine's batch).
Lock-step (the batch-synchronous baseline) plays them in waves of `slots`: every episode's
turn t is generated together, the wave waits for its longest answer, then every tool call
runs (concurrently) and the wave waits for the slowest, then turn t+1; the next wave starts
when the whole wave is done. Async (toolgym's collector): each episode runs on its own
timeline; its tool call starts when its own answer is done, while other episodes still
decode, and a new episode takes a slot as soon as one finishes.

Both paths use the same engine, episodes and per-turn sampling seeds, so they generate the
same tokens; only the scheduling differs. Answer lengths vary the way real ones do because
generation also stops at a fixed set of token ids, which the model emits at random.
The ratio lock-step / async is the speed-up (target at least 2x).

    python bench/async_vs_lockstep.py [--model DIR] [--episodes 128] [--slots 32] [--tool-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from common import QuestionEnv, tiny_model

from toolgym.agents.collector import RolloutCollector, pools_of, requests_for
from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig, turn_seed
from toolgym.envs import EnvPool, SeedTasks

TURNS = 3


async def lock_step(
    engine: HFEngine,
    renderer: ChatRenderer,
    episodes: int,
    slots: int,
    sampling: SamplingParams,
    tool_s: float,
) -> int:
    tokens = 0
    for first in range(0, episodes, slots):
        seeds = list(range(first, min(first + slots, episodes)))
        envs = [QuestionEnv(TURNS, tool_s) for _ in seeds]
        opened = await asyncio.gather(
            *(env.areset(seed=s) for s, env in zip(seeds, envs, strict=True))
        )
        ids = [renderer.prompt_ids(obs) for obs, _ in opened]
        for turn in range(TURNS):
            seeded = [
                SamplingParams(
                    **{
                        **vars(sampling),
                        "seed": turn_seed(sampling.seed, f"question:train:{s}:0", turn),
                    }
                )
                for s in seeds
            ]
            completions = await asyncio.gather(
                *(engine.generate(i, p) for i, p in zip(ids, seeded, strict=True))
            )
            steps = await asyncio.gather(
                *(env.astep(c.text) for env, c in zip(envs, completions, strict=True))
            )
            for k, (c, (obs, *_)) in enumerate(zip(completions, steps, strict=True)):
                tokens += len(c.token_ids)
                ids[k] = ids[k] + c.token_ids + renderer.delta_ids(obs, c.token_ids)
    return tokens


async def per_episode(
    engine: HFEngine,
    renderer: ChatRenderer,
    episodes: int,
    slots: int,
    sampling: SamplingParams,
    tool_s: float,
) -> int:
    async with EnvPool(lambda: QuestionEnv(TURNS, tool_s), name="question") as pool:
        collector = RolloutCollector(
            engine, renderer, RolloutConfig(sampling), pools_of(pool), concurrency=slots
        )
        groups = await collector.collect(
            requests_for(pool.ref, SeedTasks().head("train", episodes))
        )
    assert all(len(t.steps) == TURNS and not t.masked for g in groups for t in g.trajectories)
    return sum(t.generated_tokens for g in groups for t in g.trajectories)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--slots", type=int, default=32, help="episodes in flight at once")
    parser.add_argument("--tool-ms", type=float, default=50.0)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument(
        "--stop-tokens",
        type=int,
        default=40,
        help="how many token ids end an answer (sets the mean length)",
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    engine = HFEngine(tiny_model(args.model))
    renderer = ChatRenderer(engine.tokenizer)
    ordinary = [
        i for i in range(len(engine.tokenizer)) if i not in engine.tokenizer.all_special_ids
    ]
    sampling = SamplingParams(
        max_tokens=args.max_tokens,
        temperature=1.0,
        seed=0,
        stop_token_ids=ordinary[100 : 100 + args.stop_tokens],
    )
    tool_s = args.tool_ms / 1000
    runs = {"lock-step turns (baseline)": lock_step, "per-episode async": per_episode}
    asyncio.run(per_episode(engine, renderer, 4, 4, sampling, tool_s))  # warm-up
    times: dict[str, list[float]] = {name: [] for name in runs}
    tokens: dict[str, int] = {}
    steps: dict[str, int] = {}
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits both alike
        for name, run in runs.items():
            start, before = time.perf_counter(), engine.decode_steps
            tokens[name] = asyncio.run(
                run(engine, renderer, args.episodes, args.slots, sampling, tool_s)
            )
            times[name].append(time.perf_counter() - start)
            steps[name] = engine.decode_steps - before
    asyncio.run(engine.aclose())
    base = statistics.median(times["lock-step turns (baseline)"])
    print(
        f"{args.episodes} episodes x {TURNS} turns, {args.slots} in flight, tool {args.tool_ms:g} ms, answers up to {args.max_tokens} tokens, median of {args.repeats} runs"
    )
    print(
        f"{'path':28} {'tokens':>7} {'seconds':>8} {'speed-up':>9} {'decode steps':>13} {'fewer steps':>12}"
    )
    base_steps = steps["lock-step turns (baseline)"]
    for name in runs:
        t = statistics.median(times[name])
        print(
            f"{name:28} {tokens[name]:7d} {t:8.3f} {base / t:8.2f}x {steps[name]:13d} {base_steps / steps[name]:11.2f}x"
        )
    print(
        "speed-up is wall clock here; 'fewer steps' is what an engine whose step cost does not grow with batch size (a GPU server) gains"
    )


if __name__ == "__main__":
    main()
