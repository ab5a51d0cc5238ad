"""Env transcripts: named envs played by their scripted solvers on training tasks, rendered as
the chat template writes a rollout, so a pretrained model has read the env's own prompts, tool
calls and results before it is fine-tuned on them."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from toolgym.agents.models.corpus.chat import Message, render
from toolgym.errors import ConfigError

MAX_TURNS = 50


def transcripts(env_id: str, seed: int, env_kwargs: dict[str, Any] | None = None) -> Iterator[str]:
    """Endless transcripts of `env_id`, its training tasks in order from a seed-chosen start."""
    from toolgym.envs import make

    env = make(env_id, **(env_kwargs or {}))
    try:
        source = env.unwrapped.task_source()
        index = random.Random(f"env-text-{seed}").randrange(1_000_000)  # wraps in task lists
        while True:
            draw = source.draw("train", index)
            index += 1
            yield _episode(env, draw.seed, draw.task, env_id)
    finally:
        env.close()


def _episode(env: Any, seed: int, task: dict[str, Any], env_id: str) -> str:
    obs, _ = env.reset(seed=seed, options={"task": task})
    messages: list[Message] = list(obs)
    for _ in range(MAX_TURNS):
        action = env.unwrapped.scripted_action()
        if action is None:
            raise ConfigError(
                f"{env_id} has no scripted solver (scripted_action returned None), so it cannot "
                "be played into the pretraining corpus"
            )
        messages.append({"role": "assistant", "content": action})
        obs, _, terminated, truncated, _ = env.step(action)
        messages += obs
        if terminated or truncated:
            break
    tools = env.unwrapped.tool_schemas() if seed % 2 else None
    return render(messages, tools)
