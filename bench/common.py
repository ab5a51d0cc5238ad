"""Shared pieces of the benchmarks: a tiny model to run, minimal envs, and when a training
run first reached a success threshold."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolgym.envs import Env, make_info


def tiny_model(path: str | None) -> Path:
    """The model at `path`, or a fresh tiny one in a temporary directory."""
    if path:
        return Path(path)
    from toolgym.agents.modelinit import init_model

    return init_model(Path(tempfile.mkdtemp(prefix="toolgym-bench-")), "qwen2", "tiny", seed=0)


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
