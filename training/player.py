"""Playing episodes with the current weights, for training and for evaluation: the run's task
sources, the collector each call builds, continuations for Monte-Carlo step values, and the
metrics a set of episodes is summed up in. The trainer holds one and tells it which adapter
the engine now samples with; nothing here changes the weights."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from toolgym.agents.collector import (
    BranchRequest,
    GroupRequest,
    PlaysGroups,
    RolloutCollector,
    masked_reasons,
    require_unmasked,
    summarize,
)
from toolgym.agents.engines import PolicyEngine, SamplingParams
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.ray.actor_load import ReportsActors
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import Prefix, RolloutConfig
from toolgym.agents.runtime import Runtime
from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.envs.tasks import TaskSource
from toolgym.errors import EnvBuildError, ToolgymError, one_line
from toolgym.log import get_logger
from toolgym.training.config import EnvSection, TrainConfig
from toolgym.training.groups import Collect
from toolgym.training.harness_play import HarnessPlay
from toolgym.training.rewards.base import Continuation
from toolgym.training.run.summary import HELD_OUT

log = get_logger(__name__)

OutcomeReturns = Callable[[Sequence[TrajectoryGroup]], Awaitable[list[list[float]]]]
"""The reward stage's outcome return of each member of each group."""


class EvalSet(NamedTuple):
    """One env's share of an evaluation: the first `episodes` tasks of its `split`."""

    name: str
    tasks: TaskSource
    split: str
    episodes: int
    plays: int | None = None
    """Episodes of each task (None: the evaluation's)."""


@dataclass(frozen=True)
class RunTasks:
    """The task sources of a run: each training env's, and each transfer set's."""

    train: dict[str, TaskSource]
    sets: dict[str, TaskSource]


def probe_tasks(config: TrainConfig, runtime: Runtime) -> RunTasks:
    """Every env built and reset once, before any model loads: a bad id, argument or value
    stops the run here with its reason (and the instance serves the first episode)."""
    tasks = RunTasks(
        {e.label: task_source(runtime, e) for e in config.mixture},
        {s.label: task_source(runtime, s, s.split) for s in config.eval.sets},
    )
    for chosen in eval_sets(config, tasks):
        held = len(chosen.tasks.head(chosen.split, chosen.episodes))
        if held < chosen.episodes:
            log.warning(
                "the %s split of %s holds %d tasks: evaluating on those %d, not %d",
                chosen.split, chosen.name, held, held, chosen.episodes,
            )  # fmt: skip
    return tasks


def task_source(runtime: Runtime, entry: EnvSection, split: str = "train") -> TaskSource:
    """The env's task source, from one instance (which stays in the pool) reset on the first
    task of the split the run draws from it (a transfer set only its own split)."""
    pool = runtime.pool_for(entry.ref)
    env = runtime.run(pool.acquire())
    try:
        tasks = env.unwrapped.task_source()
        first = tasks.draw(split, 0)
        runtime.run(env.areset(seed=first.seed, options={"task": first.task}))
    except Exception as exc:
        runtime.run(pool.retire(env))
        if isinstance(exc, ToolgymError):
            raise
        cause = one_line(f"{type(exc).__name__}: {exc}")
        raise EnvBuildError(f"env '{entry.id}': its first reset raised {cause}") from exc
    pool.release(env)
    return tasks


def eval_sets(config: TrainConfig, tasks: RunTasks) -> list[EvalSet]:
    """What each evaluation plays: each env's eval split, then each transfer set's own split."""
    episodes = config.eval.episodes
    own = [EvalSet(e.label, tasks.train[e.label], "eval", episodes) for e in config.mixture]
    return own + [
        EvalSet(s.label, tasks.sets[s.label], s.split, s.episodes or episodes, s.plays)
        for s in config.eval.sets
    ]


class Player:
    def __init__(
        self, config: TrainConfig, runtime: Runtime, tasks: RunTasks,
        engine: PolicyEngine, renderer: ChatRenderer, gate: PolicyGate,
    ) -> None:  # fmt: skip
        self.config, self.runtime, self.tasks = config, runtime, tasks
        self.engine, self.renderer = engine, renderer
        self.gate = gate
        """The run's policy clock: every turn played is stamped with its version."""
        self.adapter: str | None = None
        """The adapter name the engine generates with (LoRA sync); None otherwise."""
        self.on_episode: Callable[[Trajectory], None] | None = None
        """Sees each episode as it ends."""
        self.harness = (
            HarnessPlay(config.harness, config.rollout.max_turns, [config.run_dir])
            if config.harness
            else None
        )
        """The user's agent, when it plays the episodes through the gateway."""

    def collect_for(self, step: int, hold_turns: bool = False) -> Collect:
        """How step `step`'s groups are played: its sampling seed and options, and whether
        turns hold the gate one by one (partial rollouts)."""
        return functools.partial(
            self.acollect,
            temperature=self.config.rollout.temperature,
            sampling_seed=self.step_seed(step),
            step=step,
            hold_turns=hold_turns,
        )

    def step_seed(self, step: int) -> int:
        return self.config.seed * 100_003 + step

    def collect(
        self, requests: Sequence[GroupRequest], temperature: float, sampling_seed: int | None
    ) -> list[TrajectoryGroup]:
        return self.runtime.run(self.acollect(requests, temperature, sampling_seed))

    async def acollect(
        self,
        requests: Sequence[GroupRequest],
        temperature: float,
        sampling_seed: int | None,
        step: int | None = None,
        hold_turns: bool = False,
    ) -> list[TrajectoryGroup]:
        """The requests' groups, played by the current policy on the run's loop (`step`: the
        training step they are played for, where the run's clock moves first; `hold_turns`:
        the gate held around each turn, for episodes that go on across weight syncs)."""
        if step is not None:
            self.runtime.at_step(step, self.config.steps)
        rollout = replace(self.rollout_config(temperature, sampling_seed), hold_turns=hold_turns)
        collector: PlaysGroups
        if self.harness is not None:
            collector = await self.harness.collector(
                self.runtime, self.engine, self.renderer, self.gate, rollout,
                self.runtime.pool_for, self.on_episode,
            )  # fmt: skip
        else:
            collector = RolloutCollector(
                self.engine, self.renderer, rollout, self.runtime.pool_for,
                concurrency=self.config.rollout.concurrency, on_episode=self.on_episode,
            )  # fmt: skip
        return await collector.collect(requests, adapter=self.adapter)

    def rollout_config(self, temperature: float, sampling_seed: int | None) -> RolloutConfig:
        r = self.config.rollout
        sampling = SamplingParams(
            max_tokens=r.max_tokens, temperature=temperature, seed=sampling_seed
        )
        return RolloutConfig(
            sampling,
            max_turns=r.max_turns,
            max_context_tokens=r.max_context_tokens,
            episode_timeout_s=r.episode_timeout_s,
            gate=self.gate,
        )

    async def continuations(
        self,
        requests: Sequence[tuple[Trajectory, int, int]],
        step: int,
        outcome_returns: OutcomeReturns,
    ) -> list[list[Continuation]]:
        """For each (trajectory, steps, count), `count` continuations after its first `steps`
        steps at the training temperature (Monte-Carlo step values): their outcome returns
        and env steps. The step's sampling seed: turn seeds hash the trajectory id, which a
        branch's extends."""
        envs = {e.label: e.ref for e in self.config.mixture}
        branches = [
            BranchRequest(envs[t.env_name], Prefix(t, steps), n) for t, steps, n in requests
        ]
        r = self.config.rollout
        rollout = self.rollout_config(r.temperature, self.step_seed(step))
        collector = RolloutCollector(
            self.engine, self.renderer, rollout, self.runtime.pool_for, concurrency=r.concurrency
        )
        self.runtime.at_step(step, self.config.steps)
        played = await collector.branch(branches, adapter=self.adapter)
        groups = [TrajectoryGroup(f"branch:{i}", None, c) for i, c in enumerate(played)]
        scores = await outcome_returns(groups)
        return [
            [
                Continuation(None if t.masked else value, len(t.steps))
                for t, value in zip(c, row, strict=True)
            ]
            for c, row in zip(played, scores, strict=True)
        ]

    # ----- evaluation ----------------------------------------------------------------------
    def eval_sets(self) -> list[EvalSet]:
        return eval_sets(self.config, self.tasks)

    def eval_requests(self, plays: int = 1) -> list[GroupRequest]:
        """The first eval.episodes tasks of each env's eval split, then of each transfer
        set's split (eval.sets), `plays` rollouts each (a set's own plays, where it has them)."""
        entries = {e.label: e for e in [*self.config.mixture, *self.config.eval.sets]}
        return [
            GroupRequest(entries[e.name].ref, draw, e.plays or plays, entries[e.name].role)
            for e in self.eval_sets()
            for draw in e.tasks.head(e.split, e.episodes)
        ]

    def evaluation(
        self, after: str, temperature: float | None = None, plays: int | None = None
    ) -> tuple[dict[str, Any], list[Trajectory]]:
        """The policy on each env's eval tasks and each set's (eval.sets): the metrics, the
        held-out sets pooled with the eval split as `held_out/...` where the run has any, and
        the episodes they measured (two policies' episodes on the same eval tasks pair item by
        item, a paired difference tighter than two rates). Unset, `temperature` and `plays`
        are the eval section's; `after` says when, in a failure's message."""
        temperature = self.config.eval.temperature if temperature is None else temperature
        plays = plays or self.config.eval.plays
        start = time.perf_counter()
        groups = self.collect(self.eval_requests(plays), temperature, sampling_seed=0)
        played = [t for g in groups for t in g.trajectories]
        held_out = [t for t in played if t.env_name not in self.tasks.sets]
        require_unmasked(held_out, f"evaluation {after}")
        metrics = rollout_metrics("eval", held_out, 0.0, self.per_env, full=False)
        for name in self.tasks.sets:
            transfer = [t for t in played if t.env_name == name]
            require_unmasked(transfer, f"transfer set {name}'s evaluation {after}")
            metrics |= rollout_metrics(f"eval/{name}", transfer, 0.0, [], full=False)
        if pooled := [t for t in played if t.env_name in self.config.held_out_sets]:
            metrics |= rollout_metrics(HELD_OUT, held_out + pooled, 0.0, [], full=False)
        if masked := masked_reasons(played):
            metrics |= {"eval/masked": sum(masked.values()), "eval/masked_reasons": masked}
        return metrics | {"time/eval_s": time.perf_counter() - start}, played

    def actor_metrics(self) -> dict[str, float]:
        """What the engine and env actors did since the previous step (Ray runs)."""
        parts = [self.engine, *self.runtime.pools.values()]
        return {
            k: v
            for p in parts
            if isinstance(p, ReportsActors)
            for k, v in p.actor_metrics().items()
        }

    @property
    def per_env(self) -> list[str]:
        """Env names that get metrics of their own (a mixture's)."""
        return [e.label for e in self.config.mixture] if len(self.config.mixture) > 1 else []


def rollout_metrics(
    prefix: str, trajectories: list[Trajectory], seconds: float, per_env: list[str],
    full: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """`prefix/success` (with its 95% interval, `success_low` and `success_high`, and the
    distinct `items` played), reward, turns and valid_actions, overall and for each env named
    in `per_env`; with `full`, the episodes played and masked overall, tokens_per_s,
    `masked_reasons` (how many episodes each reason masked) where any was, and `segments`
    (token sequences per episode) where a harness played through the gateway rewrote its
    history."""
    out: dict[str, Any] = {}
    for name in ["", *per_env]:
        chosen = [t for t in trajectories if not name or t.env_name == name]
        stats = summarize(chosen, seconds)
        key = f"{prefix}/{name}/" if name else f"{prefix}/"
        low, high = stats.success_interval
        out |= {
            f"{key}success": stats.success_rate,
            f"{key}success_low": low,
            f"{key}success_high": high,
            f"{key}items": stats.items,
            f"{key}reward": stats.mean_reward,
            f"{key}turns": stats.mean_turns,
            f"{key}valid_actions": stats.valid_action_rate,
            f"{key}tool_exceptions": stats.tool_exception_rate,
        }
        if full and not name:
            out |= {f"{key}episodes": stats.episodes, f"{key}masked": stats.masked,
                    f"{key}tokens_per_s": stats.tokens_per_s}  # fmt: skip
            kept = [t for t in chosen if not t.masked and t.steps]
            if any(t.segment_starts for t in kept):  # a harness rewrote its history
                out[f"{key}segments"] = sum(len(t.segments()) for t in kept) / len(kept)
            if stats.masked:
                out[f"{key}masked_reasons"] = masked_reasons(trajectories)
    return out
