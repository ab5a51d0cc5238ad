"""Shared pieces of the benchmarks: a tiny model to run, minimal envs, when a training run
first reached a success threshold, and the held-out figures that compare methods."""

from __future__ import annotations

import asyncio
import math
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from toolgym.envs import Env, make_info
from toolgym.intervals import mean_interval, paired_difference

PRM = "{source: implicit_prm, scores: process, kwargs: {beta: 0.05, lr: 1.0e-4}}"
"""The implicit PRM as the process-reward benches measure it (a `rewards=` entry)."""
MC = "{source: mc_values, scores: process, kwargs: {continuations: 2, budget: 'entropy:2'}}"
"""Monte-Carlo step values as the process-reward benches measure them."""
ADDED = "advantage.step_combine=add"
"""Monte-Carlo values added to the estimator's advantage (at weight 1), as the benches measured
them (a process reward that learns from the run, the implicit PRM, is never added)."""


def tiny_model(path: str | None, size: str = "tiny") -> Path:
    """The model at `path`, or a fresh one of `size` in a temporary directory."""
    if path:
        return Path(path)
    from toolgym.agents.models.fresh import init_model

    return init_model(Path(tempfile.mkdtemp(prefix="toolgym-bench-")), "qwen2", size, seed=0)


def steps_to_threshold(
    metrics: list[dict],
    threshold: float,
    window: int,
    cost: Callable[[dict], float] = lambda record: record["env_steps"],
) -> float | None:
    """The env steps (`cost` of each training step, summed) spent until rollout success,
    averaged over the last `window` training steps, first reached `threshold`; None if never."""
    spent, successes = 0.0, []
    for record in metrics:
        spent += cost(record)
        successes.append(record["rollout/success"])
        if len(successes) >= window and statistics.mean(successes[-window:]) >= threshold:
            return spent
    return None


class HeldOut:
    """The held-out figures of a comparison: each variant's last evaluation per seed, and the
    start's (the first evaluation of the runs made with `eval.at_start`)."""

    def __init__(self, baseline: str) -> None:
        self.baseline = baseline
        self.finals: dict[str, list[dict]] = {}
        self.start: list[dict] = []

    def train(self, variant: str, config: Any) -> list[dict]:
        """Run `config` (a TrainConfig), keep its evaluations, and return its training steps'
        records."""
        from toolgym.training.trainer import Trainer

        metrics = Trainer(config).run(overwrite=True)
        first, last = evaluations(metrics)
        self.finals.setdefault(variant, []).append(last)
        if config.eval.at_start:
            self.start.append(first)
        return training_steps(metrics)

    def report(self) -> str:
        return "\n".join(held_out_lines(self.finals, self.baseline, self.start))


def training_steps(metrics: Sequence[dict]) -> list[dict]:
    """A run's training steps' records (not the evaluation before its first step)."""
    return [record for record in metrics if "rollout/success" in record]


def evaluations(metrics: Sequence[dict]) -> tuple[dict, dict]:
    """A run's first and last evaluations (the start's, with `eval.at_start`, and the end's:
    a run always ends with one), each as its eval/ figures."""
    found = [
        {k: v for k, v in record.items() if k.startswith("eval/")}
        for record in metrics
        if "eval/success" in record
    ]
    if not found:
        raise ValueError("the run made no evaluation")
    return found[0], found[-1]


def held_out_lines(finals: dict[str, list[dict]], baseline: str, start: list[dict]) -> list[str]:
    """For each eval set (the run's own held-out split, then its transfer sets): the start's
    and each variant's success over seeds, mean and 95% interval, and each variant's
    difference from `baseline`, paired by seed."""
    first = finals[baseline][0]
    every = [*start, *(run for runs in finals.values() for run in runs)]
    keys = ["eval/success"] + sorted(
        k
        for k in first
        if k.endswith("/success") and k.count("/") == 2 and all(k in run for run in every)
    )  # the sets every run evaluated
    lines = []
    for key in keys:
        name = key.removeprefix("eval/").removesuffix("/success").removesuffix("success")
        items = first.get(key.removesuffix("success") + "items")
        lines.append(f"{name or 'held-out'} ({items} distinct items), success over seeds:")
        for variant, runs in [("start", start), *finals.items()]:
            values = [run[key] for run in runs]
            shown = ", ".join(f"{v:.1%}" for v in values)
            lines.append(f"  {variant:<8} {_interval(mean_interval(values))}   seeds {shown}")
        for variant, runs in finals.items():
            if variant != baseline:
                pairs = [run[key] for run in runs], [run[key] for run in finals[baseline]]
                lines.append(
                    f"  {variant} - {baseline}: {_interval(paired_difference(*pairs), True)}"
                    " (paired by seed)"
                )
    return lines


def _interval(figure: tuple[float, float, float], signed: bool = False) -> str:
    """A mean and its interval in percent, or (`signed`) a difference in points."""
    mean, low, high = (100 * x for x in figure)
    sign, unit = ("+", " points") if signed else ("", "%")
    if not math.isfinite(low):
        return f"{mean:{sign}.1f}{unit} (one seed: no interval)"
    return f"{mean:{sign}.1f}{unit} ({low:{sign}.1f} to {high:{sign}.1f})"


class QuestionEnv(Env):
    """One question per seed; `turns` model turns, each answered by a tool taking `tool_s`."""

    def __init__(self, turns: int = 1, tool_s: float = 0.0) -> None:
        self.turns, self.tool_s, self.turn = turns, tool_s, 0

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> Any:
        await super().areset(seed=seed)
        self.turn = 0
        question = f"Question {seed}: what is {seed} times {(seed or 0) + 7}?"
        return [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": question},
        ], make_info(f"q{seed}")

    async def astep(self, action: str) -> Any:
        self.turn += 1
        if self.tool_s:
            await asyncio.sleep(self.tool_s)  # the tool's latency
        obs = [{"role": "tool", "content": f"result {self.turn}"}]
        return obs, 0.0, self.turn >= self.turns, False, make_info(f"t{self.turn}")
