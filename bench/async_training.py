"""Synchronous versus asynchronous training on Maze with a slow tool, for the same samples.

Every tool call takes `--tool-ms` (200 by default), and answers have a long tail of lengths
(a sampled SFT policy mostly writes a short tool call, and now and then runs on to
`rollout.max_tokens`). Three runs train the same number of groups, `--steps` x
`rollout.tasks_per_step`, from the same start model and seed:

    sync      collect a step's groups, wait for the slowest episode, train, sync, repeat
    async     eta = 1: the next step's groups play while the trainer trains; a sync waits
              for the episodes in flight to end
    partial   eta = 1 with partial rollouts: episodes go on across syncs (one lands between
              turns), `--extra` groups over-provisioned, each step trains the first to finish

It prints wall clock (and the ratio sync / mode: above 1 is faster than sync), the trainer's
and the generator's idle fractions (the generator is idle while no episode is in flight), and
successes per 1,000 env steps. On this machine the model's forward passes and the trainer's
update share the same two cores, so what async mode can win is mostly the tool's waiting and
the long answers' tail; on a GPU, generation and training stop competing for compute.

    python bench/async_training.py --model DIR [--steps 8] [--tool-ms 200] [--extra 4]
        [section.field=value ...]

DIR: a model that writes Maze tool calls, e.g. the quickstart's `runs/quickstart/sft`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from toolgym.config import load_config
from toolgym.envs import register
from toolgym.envs.maze import MazeEnv
from toolgym.training.config import TrainConfig
from toolgym.training.trainer import Trainer

ENV_ID = "bench/SlowMaze-v0"
RECIPE = [
    f"env.id={ENV_ID}",
    "env.kwargs={size: 2, n_doors: 0, max_turns: 6, invalid_action_reward: -0.2}",
    "rollout.tasks_per_step=8",
    "rollout.rollouts_per_task=4",
    "rollout.max_tokens=96",
    "rollout.tool_schemas_in_prompt=false",
    "optim.lr=5e-4",
    "optim.micro_batch_size=16",
    "optim.minibatches=2",
    "eval.every_steps=1000",
    "eval.episodes=1",
    "tensorboard=false",
]
MODES = {
    "sync": ["mode=sync"],
    "async": ["mode=async", "async_training.max_staleness=1"],
    "partial": [
        "mode=async",
        "async_training.max_staleness=1",
        "async_training.partial_rollouts=true",
        "loss.mode=decoupled",
    ],
}


class SlowMaze(MazeEnv):
    """Maze whose every step (the tool call) takes `tool_s` seconds."""

    def __init__(self, tool_s: float = 0.2, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tool_s = tool_s

    async def astep(self, action: str) -> Any:
        await asyncio.sleep(self.tool_s)
        return await super().astep(action)


def run(mode: str, args: argparse.Namespace, out: Path) -> dict[str, float]:
    extra = [f"async_training.extra_groups={args.extra}"] if mode == "partial" else []
    config = load_config(
        TrainConfig,
        None,
        [f"model={args.model}", f"run_dir={out / mode}", f"steps={args.steps}", "seed=0",
         *RECIPE, f"env.kwargs.tool_s={args.tool_ms / 1000}", *MODES[mode], *extra,
         *args.overrides],
    )  # fmt: skip
    trainer = Trainer(config)
    start = time.perf_counter()
    metrics = trainer.run(overwrite=True)
    wall = time.perf_counter() - start
    episodes = config.rollout.tasks_per_step * config.rollout.rollouts_per_task
    successes = sum(m["rollout/success"] * episodes for m in metrics)
    env_steps = sum(m["env_steps"] for m in metrics)
    return {
        "wall": wall,
        "trainer_idle": statistics.mean(
            m.get("async/trainer_idle", trainer_idle(m)) for m in metrics
        ),
        "generator_idle": statistics.mean(
            m.get("async/generator_idle", generator_idle(m)) for m in metrics
        ),
        "success_per_1k": 1000 * successes / max(env_steps, 1),
        "samples": sum(m.get("async/groups", config.rollout.tasks_per_step) for m in metrics),
        "staleness": statistics.mean(m.get("async/staleness_mean", 0.0) for m in metrics),
    }


def trainer_idle(record: dict[str, float]) -> float:
    """Sync mode: the trainer waits for the whole collection."""
    busy = record["time/advantage_s"] + record["time/update_s"]
    return record["time/rollout_s"] / (record["time/rollout_s"] + busy)


def generator_idle(record: dict[str, float]) -> float:
    """Sync mode: nothing plays while the trainer scores and updates."""
    return 1.0 - trainer_idle(record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--tool-ms", type=float, default=200.0)
    parser.add_argument("--extra", type=int, default=4, help="over-provisioned groups (partial)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("overrides", nargs="*", help="config overrides for every run")
    args = parser.parse_args()
    register(ENV_ID, f"{__name__}:SlowMaze", override=True)
    out = Path(tempfile.mkdtemp(prefix="toolgym-async-bench-"))
    results = {mode: run(mode, args, out) for mode in args.modes}
    base = results.get("sync", {}).get("wall")
    print(f"\n{args.steps} steps, tool {args.tool_ms:g} ms; runs in {out}")
    print(
        "mode      wall s  sync/mode  trainer idle  generator idle  staleness  groups  success/1k env steps"
    )
    for mode, r in results.items():
        ratio = f"{base / r['wall']:.2f}x" if base else "-"
        print(
            f"{mode:8} {r['wall']:7.1f}  {ratio:>9}  {r['trainer_idle']:12.2f}  "
            f"{r['generator_idle']:14.2f}  {r['staleness']:9.2f}  {r['samples']:6.0f}  "
            f"{r['success_per_1k']:8.1f}"
        )


if __name__ == "__main__":
    main()
