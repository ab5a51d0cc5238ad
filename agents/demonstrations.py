"""Demonstrations: an env's scripted solver played through the rollout path, recorded as
trajectories with the same token bookkeeping as the model's own rollouts (for SFT)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from toolgym.agents.engines.base import Completion, SamplingParams
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig, run_episode
from toolgym.agents.trajectory import Trajectory


class ScriptedEngine:
    """Answers with `env.scripted_action()`, tokenized and closed like a model's turn."""

    policy_version = 0

    def __init__(self, env: Any, renderer: ChatRenderer) -> None:
        self.env, self.renderer = env, renderer

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, adapter: str | None = None
    ) -> Completion:
        action = self.env.unwrapped.scripted_action()
        if action is None:
            raise RuntimeError(
                f"{type(self.env.unwrapped).__name__} has no scripted solver to demonstrate"
            )
        ids = self.renderer.encode(action) + self.renderer.closing_ids()
        return Completion(ids, [0.0] * len(ids), action, "stop", prompt_tokens=len(prompt_ids))

    async def aclose(self) -> None:
        pass


def demonstrations(
    env_fn: Callable[[], Any],
    renderer: ChatRenderer,
    seeds: Sequence[int],
    *,
    max_context_tokens: int = 4096,
    env_id: str = "",
) -> list[Trajectory]:
    """One scripted episode per seed."""
    config = RolloutConfig(
        SamplingParams(max_tokens=max_context_tokens), max_context_tokens=max_context_tokens
    )

    async def play(seed: int) -> Trajectory:
        env = env_fn()
        try:
            return await run_episode(
                env,
                ScriptedEngine(env, renderer),
                renderer,
                config,
                seed=seed,
                trajectory_id=f"demo:{seed}",
                env_id=env_id,
            )
        finally:
            await env.aclose()

    async def all_seeds() -> list[Trajectory]:
        return list(await asyncio.gather(*(play(s) for s in seeds)))

    return asyncio.run(all_seeds())
