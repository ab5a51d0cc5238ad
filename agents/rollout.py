"""Run one episode of an env with a policy engine and record it as a Trajectory.

The loop: render the opening messages -> generate -> step the env with the decoded text ->
append the env's answer as a token delta -> generate ... Each episode runs on its own
timeline: its tool calls start as soon as its own turn ends. Anything that fails outside the
policy (the env raising, a server error, the episode timeout) ends the episode as masked,
never as a zero reward.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from toolgym.agents.engines.base import Engine, SamplingParams
from toolgym.agents.render import ChatRenderer
from toolgym.agents.trajectory import EpisodeEnd, Step, Trajectory


@dataclass
class RolloutConfig:
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """Per-turn sampling; `max_tokens` is also capped by the remaining context budget."""
    max_turns: int | None = None
    """Stop after this many model turns (None: only the env's own limit)."""
    max_context_tokens: int = 4096
    """Total tokens per episode (prompt, model and env); past it the episode is truncated."""
    episode_timeout_s: float | None = 600.0
    """Wall-clock limit per episode; a timed-out episode is masked."""


async def run_episode(
    env: Any,
    engine: Engine,
    renderer: ChatRenderer,
    config: RolloutConfig,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    trajectory_id: str = "0",
    group_id: str = "",
    env_id: str = "",
    adapter: str | None = None,
) -> Trajectory:
    """Play one episode; never raises for env, engine or timeout failures (they are masked)."""
    traj = Trajectory(trajectory_id, group_id, env_id, seed)
    start = time.perf_counter()
    try:
        async with asyncio.timeout(config.episode_timeout_s):
            await _play(env, engine, renderer, config, traj, options, adapter)
    except TimeoutError:
        traj.end, traj.infra_error = (
            EpisodeEnd.TIMEOUT,
            f"episode timed out after {config.episode_timeout_s:g} s",
        )
    except Exception as exc:
        traj.end, traj.infra_error = EpisodeEnd.INFRA_ERROR, f"{type(exc).__name__}: {exc}"
    traj.elapsed_s = time.perf_counter() - start
    return traj


async def _play(
    env: Any,
    engine: Engine,
    renderer: ChatRenderer,
    config: RolloutConfig,
    traj: Trajectory,
    options: dict[str, Any] | None,
    adapter: str | None,
) -> None:
    obs, info = await env.areset(seed=traj.seed, options=options)
    traj.messages, traj.tools = obs, info.get("tools") or []
    traj.token_ids = renderer.prompt_ids(obs, traj.tools)
    traj.prompt_length = len(traj.token_ids)
    state = info["state_key"]
    for turn in range(1 << 30):
        budget = config.max_context_tokens - len(traj.token_ids)
        if budget <= 0:
            traj.end = EpisodeEnd.CONTEXT
            return
        sampling = replace(
            config.sampling,
            max_tokens=min(config.sampling.max_tokens, budget),
            seed=turn_seed(config.sampling.seed, traj.id, turn),
        )
        t0 = time.perf_counter()
        completion = await engine.generate(list(traj.token_ids), sampling, adapter)
        t1 = time.perf_counter()
        begin = len(traj.token_ids)
        traj.token_ids += completion.token_ids
        obs, reward, terminated, truncated, info = await env.astep(completion.text)
        traj.steps.append(
            Step(
                begin, len(traj.token_ids), list(completion.logprobs), completion.text, obs, float(reward),
                state, info["state_key"], info["valid_action"], info["tool_calls"], info["error"],
                completion.finish_reason, t1 - t0, time.perf_counter() - t1, engine.policy_version,
            )
        )  # fmt: skip
        state = info["state_key"]
        if info.get("infra_error"):
            traj.end, traj.infra_error = EpisodeEnd.INFRA_ERROR, str(info["infra_error"])
            return
        if terminated or truncated:
            traj.end = EpisodeEnd.TERMINATED if terminated else EpisodeEnd.TRUNCATED
            return
        if config.max_turns is not None and turn + 1 >= config.max_turns:
            traj.end = EpisodeEnd.MAX_TURNS
            return
        delta = renderer.delta_ids(obs, completion.token_ids, traj.tools)
        if len(traj.token_ids) + len(delta) >= config.max_context_tokens:
            traj.end = EpisodeEnd.CONTEXT
            return
        traj.token_ids += delta


def turn_seed(base: int | None, trajectory_id: str, turn: int) -> int | None:
    """A distinct, reproducible sampling seed per trajectory and turn (None stays None)."""
    return None if base is None else zlib.crc32(f"{base}:{trajectory_id}:{turn}".encode())
