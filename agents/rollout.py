"""Run one episode of an env with a policy engine and record it as a Trajectory: the one
episode runner, for training, evaluation, demonstrations and benchmarks.

The loop: render the opening messages -> generate -> step the env with the decoded text ->
append the env's answer as a token delta -> generate ... Each episode runs on its own
timeline: its tool calls start as soon as its own turn ends. Anything that fails outside the
policy (the env raising or hanging, a server error, the episode timeout) ends the episode as
masked, never as a zero reward. Every reset and step is bounded by `call_timeout_s`; an env
that raised, hung or answered in the wrong shape (a reward that is not a finite number among
them) ends `ENV_FAILED`, and `run_pooled` retires that instance instead of reusing it. Every
observation's text is made valid Unicode before the renderer reads it.

What it cannot protect against: an env that blocks the event loop with synchronous work
stalls every episode (asyncio cannot pre-empt it), and one that swallows `CancelledError`
outlives its timeout. Envs await their slow work or hand it to a thread or process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
import zlib
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from toolgym.agents.engines.base import Engine, KeepsEpisodeContext, SamplingParams
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.render import ChatRenderer
from toolgym.agents.trajectory import EpisodeEnd, Step, Trajectory
from toolgym.envs.core import RESULT_LIMIT
from toolgym.envs.episode_env import EpisodeEnv
from toolgym.envs.pool import Pool
from toolgym.tools.text import clean_messages


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
    call_timeout_s: float | None = 120.0
    """Limit for each env reset and step; past it the episode ends ENV_FAILED (masked)."""
    gate: PolicyGate | None = None
    """The policy's one clock: each turn is stamped with its version (None: version 0, for
    weights that never move)."""
    hold_turns: bool = False
    """Each turn's generation holds the gate (a weight sync waits for turns in flight and
    lands between them): for episodes that go on across weight updates. False: the caller
    holds it for the whole episode, or the weights do not move under the episode."""


@dataclass(frozen=True)
class Prefix:
    """Where a continuation starts: after the first `steps` steps of `trajectory`. The env is
    reset to the trajectory's task and seed and those steps' actions are replayed; the policy
    then goes on from the trajectory's tokens up to that point."""

    trajectory: Trajectory
    steps: int


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to play, as a collector hands it to the rollout: frozen, so what was asked
    for is what is played and what its trajectory records."""

    trajectory_id: str = "0"
    group_id: str = ""
    seed: int | None = None
    task: dict[str, Any] | None = None
    """Goes to reset as `options["task"]`."""
    options: dict[str, Any] | None = None
    """Reset options besides the task (e.g. the trainer's step)."""
    role: str = "policy"
    adapter: str | None = None
    """The LoRA adapter the engine generates with (None: the base weights)."""
    prefix: Prefix | None = None
    """Continue this episode rather than start afresh (see Prefix)."""

    def reset_options(self) -> dict[str, Any] | None:
        if self.task is None:
            return self.options
        return {**(self.options or {}), "task": self.task}

    def trajectory(self, env_id: str, env_name: str) -> Trajectory:
        """The empty trajectory this episode fills."""
        return Trajectory(
            self.trajectory_id, self.group_id, env_id, self.seed, env_name=env_name,
            role=self.role, task=self.task,
        )  # fmt: skip


async def run_episode(
    env: EpisodeEnv,
    engine: Engine,
    renderer: ChatRenderer,
    config: RolloutConfig,
    request: EpisodeRequest = EpisodeRequest(),
    *,
    env_id: str = "",
    env_name: str = "",
) -> Trajectory:
    """Play one episode; never raises for env, engine or timeout failures (they are masked).
    With a `request.prefix`, the episode continues that one (see Prefix); an env that answers
    the replayed actions differently than it did is not deterministic, and the continuation
    is masked. `env_id` and `env_name` label the trajectory."""
    traj = request.trajectory(env_id, env_name)
    options, prefix = request.reset_options(), request.prefix
    start = time.perf_counter()
    episode = _EpisodeKey() if engine.capabilities.episode_context else None
    try:
        async with asyncio.timeout(config.episode_timeout_s):
            await _play(
                env, engine, renderer, config, traj, options, request.adapter, prefix, episode
            )
    except TimeoutError:
        traj.end, traj.infra_error = (
            EpisodeEnd.TIMEOUT,
            f"episode timed out after {config.episode_timeout_s:g} s",
        )
    except EnvFailed as exc:
        traj.end, traj.infra_error = EpisodeEnd.ENV_FAILED, str(exc)
    except Exception as exc:
        traj.end, traj.infra_error = EpisodeEnd.INFRA_ERROR, f"{type(exc).__name__}: {exc}"
    finally:
        if episode is not None:
            cast(KeepsEpisodeContext, engine).end_episode(episode)
    traj.elapsed_s = time.perf_counter() - start
    return traj


class _EpisodeKey:
    """Names one episode to an engine that keeps its context: unique while it lives."""

    __slots__ = ()


async def run_pooled(
    pool: Pool, engine: Engine, renderer: ChatRenderer, config: RolloutConfig,
    request: EpisodeRequest,
) -> Trajectory:  # fmt: skip
    """`run_episode` on an instance from `pool`: given back after the episode, or retired
    (closed, not reused) when it failed or the episode timed out."""
    try:
        env = await pool.acquire()
    except Exception as exc:
        traj = request.trajectory(pool.env_id, pool.name)
        traj.end, traj.infra_error = EpisodeEnd.INFRA_ERROR, str(exc)
        return traj
    traj = await run_episode(
        env, engine, renderer, config, request, env_id=pool.env_id, env_name=pool.name
    )
    if traj.end in (EpisodeEnd.ENV_FAILED, EpisodeEnd.TIMEOUT):
        await pool.retire(env)
    else:
        pool.release(env)
    return traj


class EnvFailed(Exception):
    """The env's reset or step raised, timed out or returned the wrong shape."""


async def _env_call(call: Awaitable[Any], what: str, size: int, limit: float | None) -> Any:
    try:
        async with asyncio.timeout(limit):
            returned = await call
    except TimeoutError:
        raise EnvFailed(f"{what} timed out after {limit:g} s") from None
    except Exception as exc:
        raise EnvFailed(f"{what} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(returned, tuple) or len(returned) != size:
        got = f"{len(returned)} values" if isinstance(returned, tuple) else type(returned).__name__
        raise EnvFailed(f"{what} returned {got}, expected a {size}-tuple (run `toolgym check`)")
    return returned


def _result(result: Any) -> Any:
    """A step's result as plain JSON data, bounded; anything else is the env's failure."""
    if result is None:
        return None
    try:
        text = json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EnvFailed(f"step returned a result that is not JSON data: {exc}") from None
    if len(text) > RESULT_LIMIT:
        raise EnvFailed(
            f"step returned a result of {len(text)} characters (at most {RESULT_LIMIT})"
        )
    return json.loads(text)


def _finite(reward: Any) -> float:
    """A step's reward as a float; anything else (NaN, infinity, not a number) is the env's
    failure, never a number to train on."""
    try:
        value = float(reward)
    except (TypeError, ValueError):
        raise EnvFailed(f"step returned a reward of type {type(reward).__name__}") from None
    if not math.isfinite(value):
        raise EnvFailed(f"step returned a reward of {value}: rewards must be finite")
    return value


async def _play(
    env: EpisodeEnv,
    engine: Engine,
    renderer: ChatRenderer,
    config: RolloutConfig,
    traj: Trajectory,
    options: dict[str, Any] | None,
    adapter: str | None,
    prefix: Prefix | None = None,
    episode: _EpisodeKey | None = None,
) -> None:
    limit = config.call_timeout_s
    obs, info = await _env_call(env.areset(seed=traj.seed, options=options), "reset", 2, limit)
    obs = clean_messages(obs)
    traj.messages, traj.tools = obs, info.get("tools") or []
    traj.token_ids = renderer.prompt_ids(obs, traj.tools)
    traj.images = renderer.image_urls(obs)
    traj.prompt_length = len(traj.token_ids)
    state = info["state_key"]
    if prefix is not None:
        state = await _replay(env, traj, prefix, limit)
        traj.images += [url for step in traj.steps for url in renderer.image_urls(step.observation)]
    for turn in range(len(traj.steps), 1 << 30):
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
        extra: dict[str, Any] = {"images": list(traj.images)} if traj.images else {}
        if episode is not None:  # engines that keep no context take no key
            extra["episode"] = episode
        gate = config.gate
        async with gate.hold() if gate and config.hold_turns else contextlib.nullcontext():
            completion = await engine.generate(list(traj.token_ids), sampling, adapter, **extra)
            version = gate.version if gate else 0  # the weights that made this turn
        t1 = time.perf_counter()
        begin = len(traj.token_ids)
        traj.token_ids += completion.token_ids
        returned = await _env_call(env.astep(completion.text), "step", 5, limit)
        obs, reward, terminated, truncated, info = returned
        obs, reward = clean_messages(obs), _finite(reward)
        result = _result(info.get("result"))
        traj.steps.append(
            Step(
                begin, len(traj.token_ids), list(completion.logprobs), completion.text, obs, reward,
                state, info["state_key"], info["valid_action"], info["tool_calls"], info["error"],
                completion.finish_reason, t1 - t0, time.perf_counter() - t1, version,
                result=result,
            )
        )  # fmt: skip
        state = info["state_key"]
        if isinstance(info.get("solved"), bool):
            traj.solved = info["solved"]
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
        traj.images += renderer.image_urls(obs)


async def _replay(env: EpisodeEnv, traj: Trajectory, prefix: Prefix, limit: float | None) -> Any:
    """Step `env` through the prefix's actions, checking that it answers as it did; copy
    those steps and the tokens before the next one into `traj`. Returns the state key."""
    source = prefix.trajectory
    if (
        not 0 < prefix.steps < len(source.steps)
        or traj.token_ids != source.token_ids[: traj.prompt_length]
    ):
        raise EnvFailed(
            f"cannot continue {source.id} after step {prefix.steps}: it has "
            f"{len(source.steps)} steps, and a continuation starts before its last, from its own prompt"
        )
    state = None
    for k, step in enumerate(source.steps[: prefix.steps]):
        obs, reward, _, _, info = await _env_call(env.astep(step.action), "step", 5, limit)
        if (
            obs != step.observation
            or info["state_key"] != step.next_state_key
            or reward != step.reward
        ):
            raise EnvFailed(
                f"replaying step {k} of {source.id} gave another answer than it did: the env is "
                "not deterministic, so its states cannot be restored by replay"
            )
        traj.steps.append(replace(step, rewards={}))
        state = info["state_key"]
    traj.token_ids = list(source.token_ids[: source.steps[prefix.steps].response_start])
    return state


def turn_seed(base: int | None, trajectory_id: str, turn: int) -> int | None:
    """A distinct, reproducible sampling seed per trajectory and turn (None stays None)."""
    return None if base is None else zlib.crc32(f"{base}:{trajectory_id}:{turn}".encode())
