"""Demonstrations: an env's scripted solver played through the rollout path, recorded as
trajectories with the same token bookkeeping as the model's own rollouts (for SFT).

With `mistake_rate` > 0 some turns play the env's `mistake_action` instead: the episode then
shows the solver recovering from a state it would never reach itself (a wall bumped into, a
detour). Those turns are kept in the context but not imitated, so a model learns what to do
after its own errors without learning to make them (noise injection into demonstrations).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from toolgym.agents.engines.base import Capabilities, Completion, SamplingParams
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import EpisodeRequest, RolloutConfig, run_episode
from toolgym.agents.trajectory import Trajectory
from toolgym.envs.resources import Resources
from toolgym.envs.tasks import TaskDraw
from toolgym.errors import ConfigError


@dataclass
class Demonstration:
    trajectory: Trajectory
    imitate: list[bool]
    """Per step: learn from it (the solver's action) or not (an injected mistake)."""


class ScriptedEngine:
    """Answers with `env.scripted_action()` (or, at `mistake_rate`, `env.mistake_action()`),
    tokenized and closed like a model's turn."""

    capabilities: ClassVar[Capabilities] = Capabilities("shared")  # no weights, no context

    def __init__(
        self, env: Any, renderer: ChatRenderer, mistake_rate: float = 0.0, seed: int = 0
    ) -> None:
        self.env, self.renderer = env, renderer
        self.mistake_rate, self.rng = mistake_rate, random.Random(f"mistakes-{seed}")
        self.imitate: list[bool] = []

    async def generate(
        self,
        prompt_ids: list[int],
        sampling: SamplingParams,
        adapter: str | None = None,
        images: list[str] | None = None,
    ) -> Completion:
        """The env's scripted action (it reads the env itself, so the prompt's images are
        not needed)."""
        env = self.env.unwrapped
        mistake = self.mistake_rate > 0 and self.rng.random() < self.mistake_rate
        action = env.mistake_action(self.rng) if mistake else env.scripted_action()
        if action is None:
            hook = "mistake_action" if mistake else "scripted solver"
            raise RuntimeError(f"{type(env).__name__} has no {hook} to demonstrate with")
        self.imitate.append(not mistake)
        ids = self.renderer.encode_plain(action) + self.renderer.closing_ids()
        return Completion(ids, [0.0] * len(ids), action, "stop", prompt_tokens=len(prompt_ids))

    async def aclose(self) -> None:
        pass


def demonstrations(
    env_fn: Callable[[], Any],
    renderer: ChatRenderer,
    draws: Sequence[TaskDraw],
    *,
    mistake_rate: float = 0.0,
    max_context_tokens: int = 4096,
    env_id: str = "",
    max_concurrent: int = 32,
) -> list[Demonstration]:
    """One scripted episode per drawn task (e.g. `source.head("train", 300)`); mistakes are
    drawn from a generator seeded by the draw's seed. At most `max_concurrent` episodes run at
    once, and their envs share one set of resources (one sandbox pool, not one per episode)."""
    if not 0.0 <= mistake_rate < 1.0:
        raise ConfigError(f"mistake_rate (--mistakes) must be in [0, 1), got {mistake_rate}")
    config = RolloutConfig(
        SamplingParams(max_tokens=max_context_tokens), max_context_tokens=max_context_tokens
    )

    resources = Resources()
    slots = asyncio.Semaphore(max_concurrent)

    async def play(draw: TaskDraw) -> Demonstration:
        async with slots:
            env = env_fn()
            env.unwrapped.use_resources(resources)
            engine = ScriptedEngine(env, renderer, mistake_rate, draw.seed)
            try:
                request = EpisodeRequest(
                    f"demo:{draw.split}:{draw.index}", seed=draw.seed, task=draw.task
                )
                trajectory = await run_episode(
                    env, engine, renderer, config, request, env_id=env_id
                )
            finally:
                await env.aclose()
        if trajectory.infra_error:  # a demonstration that cannot be played is a bug, not data
            raise RuntimeError(
                f"demonstration of {draw.split} task {draw.index} failed: {trajectory.infra_error}"
            )
        return Demonstration(trajectory, engine.imitate[: len(trajectory.steps)])

    async def all_draws() -> list[Demonstration]:
        try:
            return list(await asyncio.gather(*(play(d) for d in draws)))
        finally:
            await resources.aclose()

    return asyncio.run(all_draws())
