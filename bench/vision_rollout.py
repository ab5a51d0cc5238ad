"""What screenshots cost a run: a tiny vision-language model (Qwen2-VL's architecture,
`toolgym model init --arch qwen2_vl`) playing MiniWoB++'s click-button, reading the page as
the outline alone (the baseline) or the outline plus a screenshot (plus set-of-marks).

Per variant, over the same seeds and the same sampling seeds, in the same run:
- rollout: episodes per second with `--episodes` at once (browser, rendering, engine);
- context: tokens per episode (a 160x210 page is 48 image tokens);
- score: the trainer's forward and backward over the collected batch (the policy loss's
  log-probabilities), per trajectory.
Printed as ratios against the outline-only baseline. Variants alternate over `--rounds`, so
the machine's noise falls on all of them alike.

    python bench/vision_rollout.py [--episodes 16] [--turns 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from typing import Any

import numpy as np

from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.models.fresh import init_model
from toolgym.agents.render_vision import make_renderer
from toolgym.agents.rollout import EpisodeRequest, RolloutConfig, run_episode
from toolgym.envs.gui.miniwob import MiniWoBEnv
from toolgym.envs.resources import Resources
from toolgym.training.update.batch import build_batch, token_logprobs

VARIANTS = {
    "outline": {},
    "screenshot": {"screenshot": True},
    "screenshot+marks": {"screenshot": True, "marks": True},
}


async def collect(engine: HFEngine, renderer: Any, resources: Resources, args: Any,
                  settings: dict[str, Any]) -> tuple[list[Any], float]:  # fmt: skip
    config = RolloutConfig(SamplingParams(max_tokens=24, seed=7), max_context_tokens=4000)
    envs = []
    for _ in range(args.episodes):
        env = MiniWoBEnv(task="click-button", max_turns=args.turns, time_limit_s=None, **settings)
        env.use_resources(resources)
        envs.append(env)
    start = time.perf_counter()
    trajectories = await asyncio.gather(
        *[
            run_episode(env, engine, renderer, config, EpisodeRequest(seed=k, trajectory_id=str(k)))
            for k, env in enumerate(envs)
        ]
    )
    elapsed = time.perf_counter() - start
    for env in envs:
        await env.aclose()
    masked = [t.infra_error for t in trajectories if t.masked]
    assert not masked, masked
    return list(trajectories), elapsed


def score_seconds(engine: HFEngine, trajectories: list[Any]) -> float:
    """The trainer's forward and backward over the batch, in seconds."""
    advantages = [np.ones(len(t.steps)) for t in trajectories]
    batch = build_batch(trajectories, advantages, engine.pad_id, engine.images)
    engine.model.train()
    start = time.perf_counter()
    logprobs, _ = token_logprobs(engine.model, batch)
    (logprobs * batch.loss_mask).sum().backward()
    elapsed = time.perf_counter() - start
    engine.model.zero_grad()
    engine.model.eval()
    return elapsed


async def main(args: Any) -> None:
    engine = HFEngine(args.model)
    renderer = make_renderer(engine.tokenizer, engine.images)
    resources = Resources()
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    tokens: dict[str, list[float]] = {v: [] for v in VARIANTS}
    scores: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        await collect(engine, renderer, resources, args, {})  # warm-up: browser, caches
        for _ in range(args.rounds):
            for name, settings in VARIANTS.items():
                trajectories, elapsed = await collect(engine, renderer, resources, args, settings)
                rates[name].append(len(trajectories) / elapsed)
                tokens[name].append(statistics.mean(len(t.token_ids) for t in trajectories))
                scores[name].append(score_seconds(engine, trajectories) / len(trajectories))
    finally:
        await resources.aclose()
        await engine.aclose()
    base_rate = statistics.median(rates["outline"])
    base_score = statistics.median(scores["outline"])
    print(f"{args.episodes} episodes at once, {args.turns} turns, {args.rounds} rounds (medians)")
    print(f"{'variant':<18}{'episodes/s':>11}{'vs outline':>11}{'tokens/ep':>10}"
          f"{'score ms/traj':>14}{'vs outline':>11}")  # fmt: skip
    for name in VARIANTS:
        rate, score = statistics.median(rates[name]), statistics.median(scores[name])
        print(
            f"{name:<18}{rate:>11.2f}{rate / base_rate:>10.2f}x{statistics.mean(tokens[name]):>10.0f}"
            f"{score * 1000:>14.1f}{score / base_score:>10.2f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a vision-language model directory (default: a tiny one)")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    arguments.model = arguments.model or init_model(tempfile.mkdtemp(), "qwen2_vl", "tiny")
    asyncio.run(main(arguments))
