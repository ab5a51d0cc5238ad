"""Rollout loop overhead versus the raw engine, on the same prompts, with no tools.

Both paths generate greedily from the same tiny model with the same prompt ids, so they
produce the same tokens. `raw` submits the prompts straight to the engine; `rollout` runs
one-turn episodes through the collector (env reset, rendering, generation, env step,
trajectory bookkeeping). The ratio rollout / raw is the toolkit's overhead (target < 1.05).

    python bench/rollout_overhead.py [--model DIR] [--episodes 128] [--max-tokens 64] [--repeats 7]
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
from toolgym.agents.rollout import RolloutConfig
from toolgym.envs import EnvPool, SeedTasks


async def raw(engine: HFEngine, prompts: list[list[int]], sampling: SamplingParams) -> int:
    completions = await asyncio.gather(*(engine.generate(p, sampling) for p in prompts))
    return sum(len(c.token_ids) for c in completions)


async def rollout(
    engine: HFEngine, renderer: ChatRenderer, episodes: int, sampling: SamplingParams
) -> int:
    async with EnvPool(QuestionEnv, name="question") as pool:
        collector = RolloutCollector(
            engine, renderer, RolloutConfig(sampling), pools_of(pool), concurrency=episodes
        )
        groups = await collector.collect(
            requests_for(pool.ref, SeedTasks().head("train", episodes))
        )
    return sum(t.generated_tokens for g in groups for t in g.trajectories)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    engine = HFEngine(tiny_model(args.model))
    renderer = ChatRenderer(engine.tokenizer)
    sampling = SamplingParams(max_tokens=args.max_tokens, temperature=0)

    async def prompts() -> list[list[int]]:
        env = QuestionEnv()
        draws = SeedTasks().head("train", args.episodes)
        return [renderer.prompt_ids((await env.areset(seed=d.seed))[0]) for d in draws]

    prompt_ids = asyncio.run(prompts())
    asyncio.run(raw(engine, prompt_ids[:4], sampling))  # warm-up
    times: dict[str, list[float]] = {"raw engine (baseline)": [], "rollout collector": []}
    tokens: dict[str, int] = {}
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits both alike
        for name, run in (
            ("raw engine (baseline)", lambda: raw(engine, prompt_ids, sampling)),
            ("rollout collector", lambda: rollout(engine, renderer, args.episodes, sampling)),
        ):
            start = time.perf_counter()
            tokens[name] = asyncio.run(run())
            times[name].append(time.perf_counter() - start)
    asyncio.run(engine.aclose())
    base = statistics.median(times["raw engine (baseline)"])
    print(
        f"{args.episodes} prompts, greedy, up to {args.max_tokens} tokens each, median of {args.repeats} runs"
    )
    print(f"{'path':24} {'tokens':>7} {'seconds':>8} {'tokens/s':>9} {'ratio':>6}")
    for name, samples in times.items():
        t = statistics.median(samples)
        print(f"{name:24} {tokens[name]:7d} {t:8.3f} {tokens[name] / t:9,.0f} {t / base:6.3f}")


if __name__ == "__main__":
    main()
