"""The warm start from your own agent (`toolgym warm-start`): the agent of a harness config
plays the env's train tasks through the gateway with a teacher behind it (agents/gateway/
teacher.py), each episode recorded in the policy's own tokens; the kept episodes (the solved
ones, by default) are the demonstrations the policy is fine-tuned on, and it is saved where
the config's `model` can name it. The agent, its check and its budgets are the config's, so
the policy imitates the very prompts training will give it.

From a model that has never called your agent's tools, RL has no signal (every episode 0);
this is the step that gives it one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from toolgym.agents.collector import GroupRequest
from toolgym.agents.demonstrations import Demonstration
from toolgym.agents.engines.base import SamplingParams
from toolgym.agents.gateway.teacher import Replies, Teacher
from toolgym.agents.models.loading import check_model_dir, load_model, load_tokenizer
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.runtime import Runtime
from toolgym.agents.trajectory import Trajectory
from toolgym.envs.ref import EnvRef
from toolgym.envs.saved_settings import write_env_settings
from toolgym.envs.tasks import TaskDraw
from toolgym.errors import ConfigError
from toolgym.training.config import TrainConfig
from toolgym.training.harness_play import HarnessPlay
from toolgym.training.supervised.sft import SFTConfig, sft_draws
from toolgym.training.supervised.warm_start import (
    Demonstrated,
    WarmStartResult,
    fine_tune,
    save_policy,
)

Keep = Literal["solved", "all"]


@dataclass(frozen=True)
class AgentWarmStart:
    """`episodes` of the env's train tasks played with the teacher, the `keep` ones imitated
    for `fine_tune`'s epochs; `held_out` eval tasks, played alike, measure the NLL."""

    episodes: int = 500
    keep: Keep = "solved"
    """"solved": only the episodes the agent's result was right in (a teacher's wrong turns
    are not imitated); "all": every episode the agent finished."""
    fine_tune: SFTConfig = field(default_factory=SFTConfig)
    held_out: int = 16


def agent_warm_start(
    config: TrainConfig, replies: Replies, out: Path, plan: AgentWarmStart,
    on_demonstrated: Callable[[Demonstrated], None] | None = None,
    on_epoch: Callable[[int, float, float], None] | None = None,
    on_step: Callable[[int, int, float], None] | None = None,
) -> WarmStartResult:  # fmt: skip
    """Fine-tune `config.model` on its agent's episodes with `replies` as the teacher, and save
    it (with the env settings beside it) to `out`."""
    if config.harness is None:
        raise ConfigError("warm-start plays your agent: the config needs a `harness:` section")
    model = Path(config.model)
    check_model_dir(model)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory for the model")
    env = config.mixture[0]
    tokenizer = load_tokenizer(model)
    renderer = ChatRenderer(tokenizer)
    runtime = Runtime()
    try:
        pool = runtime.pool_for(env.ref)

        async def play_all() -> tuple[list[Trajectory], list[Trajectory]]:
            instance = await pool.acquire()
            source = instance.unwrapped.task_source()
            pool.release(instance)
            train, held_out = sft_draws(source, plan.fine_tune.seed, plan.episodes, plan.held_out)
            teacher = Teacher(replies, renderer, tokenizer)
            try:
                demonstrated, measured = await _play(
                    config, runtime, teacher, renderer, env.ref, [train, held_out]
                )
                return demonstrated, measured
            finally:
                await teacher.aclose()

        played, held_out_played = runtime.run(play_all())
    finally:
        runtime.close()
    demos = _kept(played, plan.keep, replies.name)
    held_out = _kept(held_out_played, "all", replies.name)
    demonstrated = Demonstrated(
        episodes=len(played), solved=sum(t.success for t in played),
        imitated_turns=sum(len(d.imitate) for d in demos), mistakes=0,
    )  # fmt: skip
    if on_demonstrated is not None:
        on_demonstrated(demonstrated)
    policy = load_model(model)
    losses, before, after = fine_tune(
        policy, tokenizer, None, demos, held_out, plan.fine_tune, on_epoch, on_step
    )
    save_policy(policy, tokenizer, None, out)
    write_env_settings(out, env.id, env.kwargs, True)
    return WarmStartResult(demonstrated, losses, before, after)


async def _play(
    config: TrainConfig, runtime: Runtime, teacher: Teacher, renderer: ChatRenderer,
    ref: EnvRef, draw_lists: Sequence[Sequence[TaskDraw]],
) -> list[list[Trajectory]]:  # fmt: skip
    """The agent's episodes on each list of draws, each call answered by the teacher (one
    harness for all: a worker's process serves every list)."""
    assert config.harness is not None
    r = config.rollout
    rollout = RolloutConfig(
        SamplingParams(max_tokens=r.max_tokens), max_turns=r.max_turns,
        max_context_tokens=r.max_context_tokens, episode_timeout_s=r.episode_timeout_s,
    )  # fmt: skip
    play = HarnessPlay(config.harness, r.max_turns, [config.run_dir])
    collector = await play.collector(
        runtime, teacher, renderer, PolicyGate(), rollout, runtime.pool_for, None
    )
    played = []
    for draws in draw_lists:
        groups = await collector.collect([GroupRequest(ref, d, 1) for d in draws])
        played.append([t for g in groups for t in g.trajectories])
    return played


def _kept(played: list[Trajectory], keep: Keep, teacher: str) -> list[Demonstration]:
    """The episodes to imitate, every turn of each (the teacher wrote them all)."""
    finished = [t for t in played if not t.masked and t.steps]
    kept = [t for t in finished if keep == "all" or t.success]
    if not kept:
        masked = [t for t in played if t.masked]
        why = f"; {len(masked)} masked, the first: {masked[0].infra_error}" if masked else ""
        raise ConfigError(
            f"the teacher {teacher} gave no episode to imitate: {len(finished)} of "
            f"{len(played)} finished, none {'solved' if keep == 'solved' else 'kept'}{why}"
        )
    return [Demonstration(t, [True] * len(t.steps)) for t in kept]
