"""Episodes per second with env pools on 1, 2 and 4 Ray actors, beside the in-process runtime,
in the same run; then with generation on 1 and 2 engine actors, beside the in-process engine.

The env is Maze whose every step blocks its process for `--tool-ms` (200 ms): a tool that
works on the CPU, as a sandbox or a browser does. In the trainer's process such a step
holds the event loop, so episodes step one at a time; each actor is a process of its own, so
N actors step N at a time. The policy is the same tiny model for every row (untrained: its
moves are mostly invalid, and every turn still steps the env), generating on the driver.
Scaling efficiency is (episodes/s with N actors) / (N x episodes/s with 1). The engine rows
play the env in-process with no tool delay, so generation (and, on actors, the calls to
them) is the work.

    python bench/scaleout.py [--episodes 32] [--tool-ms 200] [--actors 1 2 4]
                             [--engine-actors 1 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from common import tiny_model

from toolgym.agents.collector import RolloutCollector, requests_for
from toolgym.agents.engines import Engine, SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.runtime import Runtime
from toolgym.envs import register
from toolgym.envs.maze import MazeEnv
from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks import SeedTasks

ENV_ID = "scaleout:bench/BlockingMaze-v0"
"""Importing this module (bench/ is put on the actors' path) registers it."""


class BlockingMaze(MazeEnv):
    """Maze whose every step blocks its process for `tool_s` seconds."""

    def __init__(self, tool_s: float = 0.2, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tool_s = tool_s

    async def astep(self, action: str) -> Any:
        time.sleep(self.tool_s)  # CPU-bound work: nothing else in this process runs meanwhile
        return await super().astep(action)


register("bench/BlockingMaze-v0", f"{__name__}:BlockingMaze", override=True)


def episodes_per_s(
    runtime: Runtime, engine: Engine, tokenizer: Any, ref: EnvRef, episodes: int
) -> float:
    """Play `episodes` one-rollout episodes at once on `runtime`'s pool of `ref`."""
    renderer = ChatRenderer(tokenizer)
    config = RolloutConfig(SamplingParams(max_tokens=16, temperature=1.0, seed=0), max_turns=4)
    collector = RolloutCollector(engine, renderer, config, runtime.pool_for, concurrency=episodes)
    requests = requests_for(ref, SeedTasks().head("train", episodes))

    async def play() -> int:
        groups = await collector.collect(requests)
        return sum(not t.masked for g in groups for t in g.trajectories)

    runtime.pool_for(ref)  # built before the clock starts
    start = time.perf_counter()
    played = runtime.run(play())
    seconds = time.perf_counter() - start
    if played < episodes:
        raise SystemExit(f"{episodes - played} of {episodes} episodes failed")
    return played / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--tool-ms", type=float, default=200)
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--engine-actors", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    sys.path.insert(0, here)
    from toolgym.agents.ray.cluster import import_ray
    from toolgym.agents.ray.engines import RayEngines
    from toolgym.agents.ray.envs import RayRuntime

    ray = import_ray()
    cpus = max(*args.actors, *args.engine_actors)
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    model = tiny_model(args.model)
    engine = HFEngine(model)
    tokenizer = engine.tokenizer
    ref = EnvRef("maze", ENV_ID, {"size": 2, "n_doors": 0, "tool_s": args.tool_ms / 1000})
    with Runtime() as runtime:
        baseline = episodes_per_s(runtime, engine, tokenizer, ref, args.episodes)
    print(f"in-process runtime: {baseline:.2f} episodes/s")
    rates: dict[int, float] = {}
    first = args.actors[0]
    for n in args.actors:
        runtime = RayRuntime("local", env_actors=n, env_cpus=1)
        try:
            rates[n] = episodes_per_s(runtime, engine, tokenizer, ref, args.episodes)
        finally:
            runtime.close()
        efficiency = rates[n] / (n * rates[first] / first)
        print(f"{n} env actor(s): {rates[n]:.2f} episodes/s, {rates[n] / baseline:.2f}x the "
              f"in-process runtime, scaling efficiency {efficiency:.0%}", flush=True)  # fmt: skip

    quick = EnvRef("maze", ENV_ID, {"size": 2, "n_doors": 0, "tool_s": 0.0})
    with Runtime() as runtime:
        local = episodes_per_s(runtime, engine, tokenizer, quick, args.episodes)
    print(f"in-process engine: {local:.2f} episodes/s")
    for n in args.engine_actors:
        engines = RayEngines(model, actors=n, cpus=1, seed=0)
        try:
            with Runtime() as runtime:
                rate = episodes_per_s(runtime, engines, tokenizer, quick, args.episodes)
        finally:
            asyncio.run(engines.aclose())
        print(f"{n} engine actor(s): {rate:.2f} episodes/s, {rate / local:.2f}x the in-process "
              "engine", flush=True)  # fmt: skip
    ray.shutdown()


if __name__ == "__main__":
    main()
