"""The trainer loop, in named phases:

    collect   the step's groups from its group builder (groups/): by default tasks_per_step
              tasks x rollouts_per_task rollouts with the current policy, the tasks drawn
              from each env's train split and shared among a mixture's envs by weight
              (mixture.py), on env instances the runtime keeps across episodes
    score     the reward stage: each step's named components, weighted into its reward
    advantage per group (GRPO / RLOO / GiGPO), each step's value onto its response tokens
    update    PPO-clip, ppo_epochs passes; each pass takes one optimizer step per mini-batch
              (optim.minibatches), accumulating gradients over its micro-batches
    sync      hand the new weights to the engine, its way (weight_sync.py)
    log       metrics (rollout/, reward/, adv/, train/, perf/, time/, eval/) to metrics.jsonl
    evaluate  every eval.every_steps on each env's eval split (never trained on)
    checkpoint atomically, with metrics trimmed to match on resume

In async mode (`stream_steps`) collection does not stop: groups play on the run's loop while
the trainer scores and updates, a batch at a time from stream.py, which bounds how stale a
sample may be; the engine samples its own copy of the weights, and a sync lands only between
episodes (or turns, with partial rollouts).

The parts come from builders.py; the runtime (one event loop, env pools, shared resources)
lives as long as the run. Departures from the papers: one policy update per batch by default
(ppo_epochs = 1 and minibatches = 1, so the clipping only acts if there are more or the engine
lags); masked rollouts (infrastructure failures) are dropped rather than scored; loss
aggregation is token-mean over each optimizer step (DAPO), not per-sequence as in the GRPO
paper (a flag).
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from toolgym.agents.actor_load import ReportsActors
from toolgym.agents.collector import (
    BranchRequest,
    GroupRequest,
    RolloutCollector,
    require_unmasked,
    summarize,
    tool_exceptions,
)
from toolgym.agents.device import peak_memory_gb
from toolgym.agents.engines import SamplingParams
from toolgym.agents.loading import check_model_dir
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.rollout import Prefix, RolloutConfig
from toolgym.agents.runtime import Runtime
from toolgym.agents.trajectory import Trajectory, TrajectoryGroup, write_jsonl
from toolgym.envs.saved_settings import write_env_settings
from toolgym.envs.tasks import TaskSource
from toolgym.errors import ConfigError, EnvBuildError, RunFailedError, ToolgymError, one_line
from toolgym.log import get_logger
from toolgym.training import checkpoint
from toolgym.training.advantages import GroupRewards, compute_advantages
from toolgym.training.batch import build_batch
from toolgym.training.best_policy import BEST_POLICY, beats_best, mark_best
from toolgym.training.builders import (
    PolicyParts,
    build_groups,
    build_parts,
    build_reward_stage,
    build_runtime,
    check_engine,
)
from toolgym.training.config import EnvSection, TrainConfig
from toolgym.training.distributed import Ranks
from toolgym.training.groups import (
    BuildContext,
    Collect,
    GroupBuilder,
    ReportsMetrics,
)
from toolgym.training.learner import Leader, Learner, Learns
from toolgym.training.metrics_log import METRICS, MetricsLog, read_metrics
from toolgym.training.rewards.base import Continuation
from toolgym.training.stream import GroupStream, read_stream_state, staleness_metrics
from toolgym.training.weight_sync import SYNCS, sync_way

log = get_logger(__name__)

ROLLOUTS = "rollouts"
"""RUN_DIR/rollouts/step_N.jsonl: a sample of each step's trajectories."""
RUN_FILES = (
    checkpoint.FILE, checkpoint.SHARDS, METRICS, "tensorboard", "policy", BEST_POLICY,
    "config.json", ROLLOUTS,
)  # fmt: skip
"""What a run writes into its directory."""


class EvalSet(NamedTuple):
    """One env's share of an evaluation: the first `episodes` tasks of its `split`."""

    name: str
    tasks: TaskSource
    split: str
    episodes: int
    plays: int | None = None
    """Episodes of each task (None: the evaluation's)."""


class Trainer:
    def __init__(
        self,
        config: TrainConfig,
        runtime: Runtime | None = None,
        parts: PolicyParts | None = None,
        groups: GroupBuilder | None = None,
        ranks: Ranks | None = None,
    ) -> None:
        """`parts`: the policy's parts, when the caller builds them (builders.py
        `build_parts` does what the config says and is used when none are handed in).
        `groups`: what makes each step's groups (default: tasks from the mixture's envs).
        `ranks`: the leader's place in a distributed run, whose other ranks `follow`
        (learner.py); the parts' model is then this rank's shard."""
        if parts is None:
            check_engine(config)
            check_model_dir(config.model)
        if Path(config.run_dir).exists() and not Path(config.run_dir).is_dir():
            raise ConfigError(f"run_dir {config.run_dir} is a file; give a directory for the run")
        self.config = config
        self.runtime = runtime or build_runtime(config)
        # every env is built once before any model loads: a bad id, argument or value stops
        # the run here with its reason (and the instance serves the first episode)
        try:
            self.tasks = {e.label: self._task_source(e) for e in config.mixture}
            self.set_tasks = {s.label: self._task_source(s, s.split) for s in config.eval.sets}
            for chosen in self.eval_sets():
                held = len(chosen.tasks.head(chosen.split, chosen.episodes))
                if held < chosen.episodes:
                    log.warning(
                        "the %s split of %s holds %d tasks: evaluating on those %d, not %d",
                        chosen.split,
                        chosen.name,
                        held,
                        held,
                        chosen.episodes,
                    )
        except BaseException:
            self.runtime.close()
            raise
        self.run_dir = Path(config.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        parts = parts or build_parts(config, ranks)
        self.precision, self.tokenizer = parts.precision, parts.tokenizer
        self.model, self.reference, self.images = parts.model, parts.reference, parts.images
        self.engine, self.renderer, self.optimizer = parts.engine, parts.renderer, parts.optimizer
        self.pad_id = parts.pad_id
        self.ranks = ranks
        learner = Learner(
            parts.model, parts.reference, parts.optimizer, parts.precision, config, ranks
        )
        self.learner: Learns = Leader(learner, ranks) if ranks else learner
        own_weights = config.mode == "async" or ranks is not None
        self.sync_way = sync_way(self.engine, config.lora.enabled, own_weights)
        self.sync_weights = SYNCS[self.sync_way]
        self.gate = PolicyGate(self.engine.policy_version)
        """The generating weights' version; a sync waits for whoever holds it (stream.py)."""
        self.stream_state: dict[str, Any] = {}
        """Where an asynchronous run's stream stands (saved in the checkpoint)."""
        self.model.eval()  # it trains only inside `update`
        self.adapter: str | None = None
        """The adapter name the engine generates with (LoRA sync); None otherwise."""
        self.rewards = build_reward_stage(config, self.precision, self.continue_from)
        self.groups: GroupBuilder = groups or build_groups(config, self.tasks)
        self.step = 0
        self.on_step: Callable[[dict[str, Any]], None] | None = None
        self.on_episode: Callable[[Trajectory], None] | None = None
        self.last_evaluation: tuple[float, dict[str, Any], list[Trajectory]] | None = None
        """The latest in-run evaluation's temperature, metrics and episodes, so a caller that
        compares policies item by item need not play it again."""

    # ----- the loop -----------------------------------------------------------------------
    def run(
        self,
        resume: bool = False,
        overwrite: bool = False,
        on_step: Callable[[dict[str, Any]], None] | None = None,
        on_episode: Callable[[Trajectory], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Train to `steps`. A new run refuses a directory that holds one already, unless
        `overwrite` (its checkpoint, metrics and policy are removed first). `on_step` sees
        each step's record once it is logged (the CLI prints a line from it); `on_episode`
        each training episode as it ends (the CLI shows a long step is alive)."""
        self.on_step, self.on_episode = on_step, on_episode
        if resume:
            self._resume()
        else:
            self._claim_run_dir(overwrite)
            (self.run_dir / "config.json").write_text(self.config.model_dump_json(indent=2))
        self.metrics = MetricsLog(self.run_dir, self.step, self.config.tensorboard)
        try:
            if self.config.eval.at_start and not resume:
                start = {"step": -1, "env_steps": 0, **self.evaluate()}
                self.keep_if_best(start)
                self.metrics.write(start)
            if self.config.mode == "async":
                self.runtime.run(self.stream_steps())
            else:
                while self.step < self.config.steps:
                    self.finish_step(self.train_step())
            self.save_policy()
            self.learner.stop()
        finally:
            self.metrics.close()
            self.close()
        return read_metrics(self.run_dir)

    def finish_step(self, record: dict[str, Any]) -> None:
        """Evaluate when due, log the step's record, and checkpoint."""
        last = self.step + 1 == self.config.steps
        if (self.step + 1) % self.config.eval.every_steps == 0 or last:
            record |= self.evaluate()
            self.keep_if_best(record)
        self.metrics.write(record)
        if self.on_step is not None:
            self.on_step(record)
        self.step += 1
        weights = self.learner.weights_state(self.run_dir, self.step)
        checkpoint.save(
            self.run_dir, step=self.step, weights=weights,
            extra={"rewards": self.rewards.state_dict(), "groups": self.groups.state_dict(),
                   "stream": self.stream_state},
        )  # fmt: skip

    async def stream_steps(self) -> None:
        """Asynchronous training: groups are played on the loop while the trainer scores,
        updates and checkpoints in a thread (stream.py says which groups each step gets)."""
        stream = GroupStream(
            self.groups, self.collect_for, self.gate, self.config.rollout.tasks_per_step,
            self.config.max_staleness, self.config.extra_groups, self.config.partial_rollouts,
        )  # fmt: skip
        stream.load_state_dict(self.stream_state)
        stream.start()
        try:
            while self.step < self.config.steps:
                batch = await stream.take(self.step)
                staleness = staleness_metrics(
                    batch, self.step, self.config.max_staleness, self.config.partial_rollouts
                )
                t0 = time.perf_counter()
                record = await self.learn(batch.groups, batch.since_previous_s)
                t1 = time.perf_counter()
                self.adapter = await self.gate.swap(self.send_weights)
                stream.synced()
                t2 = time.perf_counter()
                step_s = batch.since_previous_s + t2 - t0
                record |= {
                    **staleness,
                    "async/groups": len(batch.groups),
                    "async/trainer_idle": (batch.waited_s + (t2 - t1)) / max(step_s, 1e-9),
                    "async/generator_idle": batch.generator_idle_s
                    / max(batch.since_previous_s, 1e-9),
                    "time/sync_s": t2 - t1,
                }
                self.stream_state = stream.state_dict()
                await asyncio.to_thread(self.finish_step, record)
        finally:
            await stream.aclose()

    def collect_for(self, step: int) -> Collect:
        """How step `step`'s groups are played: its sampling seed and options (as in sync
        mode), and with partial rollouts, turns that hold the gate one by one."""
        return functools.partial(
            self.acollect,
            temperature=self.config.rollout.temperature,
            sampling_seed=self.config.seed * 100_003 + step,
            options={"training_step": (step, self.config.steps)},
            gate=self.gate if self.config.partial_rollouts else None,
        )

    def close(self) -> None:
        """Stop the engine's workers, close the env pools and shared resources, and the loop
        (a later call such as `evaluate` opens a fresh runtime)."""
        self.runtime.run(self.engine.aclose())
        self.runtime.run(self.rewards.aclose())
        self.runtime.close()

    def train_step(self) -> dict[str, Any]:
        """One synchronous step: collect the step's groups, learn from them, sync."""
        t0 = time.perf_counter()
        asked = self.config.rollout.tasks_per_step
        context = BuildContext(
            self.step, self.engine.policy_version, asked, self.collect_for(self.step)
        )
        groups = self.runtime.run(self.groups.build(context))
        record = self.runtime.run(self.learn(groups, time.perf_counter() - t0))
        t1 = time.perf_counter()
        self.sync()
        return record | {"time/sync_s": time.perf_counter() - t1}

    async def learn(self, groups: list[TrajectoryGroup], rollout_s: float) -> dict[str, Any]:
        """Score the groups (on the loop), compute advantages and update the policy (in a
        thread, so episodes of an asynchronous run go on meanwhile); the step's record."""
        t1 = time.perf_counter()
        everything = [t for g in groups for t in g.trajectories]
        if not everything:
            raise RunFailedError(f"training step {self.step}: the group builder made no episodes")
        require_unmasked(everything, f"training step {self.step}")
        if raised := tool_exceptions(everything):
            log.warning(
                "step %d: %d tool calls raised; the first: %s",
                self.step, len(raised), one_line(raised[0]),
            )  # fmt: skip
        trajectories, advantages = await self.advantages(groups)
        require_unmasked(everything, f"training step {self.step}'s reward stage")
        self.keep_rollouts(everything)
        t2 = time.perf_counter()
        train_metrics = (
            await asyncio.to_thread(self.update, trajectories, advantages) if trajectories else {}
        )
        t3 = time.perf_counter()
        flat = np.concatenate(advantages) if advantages else np.zeros(1)
        return {
            "step": self.step,
            "env_steps": sum(len(t.steps) for t in everything),
            **rollout_metrics("rollout", everything, rollout_s, self.per_env),
            **self.rewards.metrics(everything),
            "adv/mean": float(flat.mean()),
            "adv/std": float(flat.std()),
            "adv/nonzero": float((np.abs(flat) > 1e-8).mean()),
            "groups/filtered": float(sum(not self.trains_on(g) for g in groups)),
            **self.builder_metrics(),
            **self.actor_metrics(),
            **{f"train/{k}": v for k, v in train_metrics.items()},
            "perf/update_tokens_per_s": train_metrics.get("tokens", 0.0) / max(t3 - t2, 1e-9),
            "perf/peak_memory_gb": peak_memory_gb(self.precision.device),
            "time/rollout_s": rollout_s,
            "time/advantage_s": t2 - t1,
            "time/update_s": t3 - t2,
        }

    def keep_rollouts(self, trajectories: list[Trajectory]) -> None:
        """A sample of the step's trajectories, spread evenly over them (and so over its
        groups), with their rewards scored, for `toolgym rollouts show RUN_DIR`."""
        kept = self.config.rollouts_kept
        if not kept or not trajectories:
            return
        stride = max(len(trajectories) / kept, 1.0)
        sample = [trajectories[int(i * stride)] for i in range(min(kept, len(trajectories)))]
        write_jsonl(sample, self.run_dir / ROLLOUTS / f"step_{self.step:06d}.jsonl")

    def actor_metrics(self) -> dict[str, float]:
        """What the engine and env actors did since the previous step (Ray runs)."""
        parts = [self.engine, *self.runtime.pools.values()]
        return {
            k: v
            for p in parts
            if isinstance(p, ReportsActors)
            for k, v in p.actor_metrics().items()
        }

    def builder_metrics(self) -> dict[str, float]:
        if not isinstance(self.groups, ReportsMetrics):
            return {}
        return {f"groups/{k}": float(v) for k, v in self.groups.last_metrics.items()}

    @staticmethod
    def trains_on(group: TrajectoryGroup) -> bool:
        """Whether a group gives the update anything: an unmasked member with steps."""
        return any(not t.masked and t.steps for t in group.trajectories)

    # ----- phases ------------------------------------------------------------------------------
    def eval_requests(self, plays: int = 1) -> list[GroupRequest]:
        """The first eval.episodes tasks of each env's eval split, then of each transfer
        set's split (eval.sets), `plays` rollouts each (a set's own plays, where it has them)."""
        entries = {e.label: e for e in [*self.config.mixture, *self.config.eval.sets]}
        return [
            GroupRequest(entries[e.name].ref, draw, e.plays or plays, entries[e.name].role)
            for e in self.eval_sets()
            for draw in e.tasks.head(e.split, e.episodes)
        ]

    def eval_sets(self) -> list[EvalSet]:
        """What each evaluation plays: each env's eval split, then each transfer set's own
        split."""
        episodes = self.config.eval.episodes
        own = [EvalSet(e.label, self.tasks[e.label], "eval", episodes) for e in self.config.mixture]
        return own + [
            EvalSet(s.label, self.set_tasks[s.label], s.split, s.episodes or episodes, s.plays)
            for s in self.config.eval.sets
        ]

    def collect(
        self,
        requests: Sequence[GroupRequest],
        temperature: float,
        sampling_seed: int | None,
        options: dict[str, Any] | None = None,
    ) -> list[TrajectoryGroup]:
        return self.runtime.run(self.acollect(requests, temperature, sampling_seed, options))

    async def acollect(
        self,
        requests: Sequence[GroupRequest],
        temperature: float,
        sampling_seed: int | None,
        options: dict[str, Any] | None = None,
        gate: PolicyGate | None = None,
    ) -> list[TrajectoryGroup]:
        """The requests' groups, played by the current policy on the run's loop (`gate`:
        held around each turn, for episodes that go on across weight syncs)."""
        rollout = replace(self.rollout_config(temperature, sampling_seed), gate=gate)
        concurrency = self.config.rollout.concurrency
        collector = RolloutCollector(
            self.engine, self.renderer, rollout, self.runtime.pool_for, concurrency=concurrency,
            on_episode=self.on_episode,
        )  # fmt: skip
        return await collector.collect(requests, adapter=self.adapter, options=options)

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
        )

    async def continue_from(
        self, requests: Sequence[tuple[Trajectory, int, int]]
    ) -> list[list[Continuation]]:
        """Continuations of the step's trajectories by the current policy, at the training
        temperature (Monte-Carlo step values): their outcome returns and env steps."""
        envs = {e.label: e.ref for e in self.config.mixture}
        branches = [
            BranchRequest(envs[t.env_name], Prefix(t, steps), n) for t, steps, n in requests
        ]
        r = self.config.rollout
        # the step's sampling seed: turn seeds hash the trajectory id, which a branch's extends
        rollout = self.rollout_config(r.temperature, self.config.seed * 100_003 + self.step)
        collector = RolloutCollector(
            self.engine, self.renderer, rollout, self.runtime.pool_for, concurrency=r.concurrency
        )
        options = {"training_step": (self.step, self.config.steps)}
        played = await collector.branch(branches, adapter=self.adapter, options=options)
        groups = [TrajectoryGroup(f"branch:{i}", None, c) for i, c in enumerate(played)]
        scores = await self.rewards.outcome_returns(groups)
        return [
            [
                Continuation(None if t.masked else value, len(t.steps))
                for t, value in zip(c, row, strict=True)
            ]
            for c, row in zip(played, scores, strict=True)
        ]

    async def advantages(
        self, groups: list[TrajectoryGroup]
    ) -> tuple[list[Trajectory], list[np.ndarray]]:
        """Score every trajectory (the reward stage), then advantages per group."""
        trajectories, advantages = [], []
        options = self.config.advantage.options()
        for g, scored in zip(groups, await self.rewards.score(groups), strict=True):
            process = [p for _, p in scored] if self.rewards.has_process else None
            values = compute_advantages(
                self.config.advantage.estimator,
                GroupRewards.from_trajectories(g.trajectories, [o for o, _ in scored], process),
                step_alpha=self.config.advantage.step_alpha,
                **options,
            )
            for t, a in zip(g.trajectories, values, strict=True):
                if not t.masked and t.steps:
                    trajectories.append(t)
                    advantages.append(a)
        return trajectories, advantages

    def update(
        self, trajectories: list[Trajectory], advantages: list[np.ndarray]
    ) -> dict[str, float]:
        masked = self.config.partial_rollouts and self.config.stale_turns == "mask"
        oldest = self.step - self.config.max_staleness if masked else None
        batch = build_batch(trajectories, advantages, self.pad_id, self.images, oldest)
        out = self.learner.update(batch, self.step)
        if out.pop("stopped"):
            raise RunFailedError(
                f"training step {self.step}: the loss ({out['loss']}) or gradient norm "
                f"({out['grad_norm']}) is not finite; nothing was saved from this step, so "
                f"{self.run_dir} holds the last good state (optim.on_nonfinite=skip skips "
                "such updates instead)"
            )
        return out

    def sync(self) -> None:
        """Hand the updated weights to the engine (see weight_sync.py)."""
        self.adapter = self.runtime.run(self.gate.swap(self.send_weights))

    async def send_weights(self) -> str | None:
        return await self.sync_weights(
            self.engine, self.learner, self.run_dir / "adapters", self.adapter
        )

    def evaluate(self, temperature: float | None = None) -> dict[str, Any]:
        """The policy on each env's eval tasks, at eval.temperature unless told otherwise
        (kept as `last_evaluation`)."""
        temperature = self.config.eval.temperature if temperature is None else temperature
        metrics, played = self.evaluation(temperature)
        self.last_evaluation = (temperature, metrics, played)
        return metrics

    def evaluation(
        self, temperature: float | None = None, plays: int | None = None
    ) -> tuple[dict[str, Any], list[Trajectory]]:
        """`evaluate`'s metrics and the episodes they measured: two policies' episodes on the
        same eval tasks pair item by item (a paired difference, tighter than two rates).
        Unset, `temperature` and `plays` are the eval section's."""
        temperature = self.config.eval.temperature if temperature is None else temperature
        plays = plays or self.config.eval.plays
        start = time.perf_counter()
        requests = self.eval_requests(plays)
        groups = self.collect(requests, temperature=temperature, sampling_seed=0)
        played = [t for g in groups for t in g.trajectories]
        held_out = [t for t in played if t.env_name not in self.set_tasks]
        require_unmasked(held_out, f"evaluation after step {self.step}")
        metrics = rollout_metrics("eval", held_out, 0.0, self.per_env, full=False)
        for name in self.set_tasks:
            transfer = [t for t in played if t.env_name == name]
            require_unmasked(transfer, f"transfer set {name}'s evaluation after step {self.step}")
            metrics |= rollout_metrics(f"eval/{name}", transfer, 0.0, [], full=False)
        return metrics | {"time/eval_s": time.perf_counter() - start}, played

    # ----- bookkeeping ------------------------------------------------------------------------
    @property
    def per_env(self) -> list[str]:
        """Env names that get metrics of their own (a mixture's)."""
        return [e.label for e in self.config.mixture] if len(self.config.mixture) > 1 else []

    def _task_source(self, entry: EnvSection, split: str = "train") -> TaskSource:
        """The env's task source, from one instance (which stays in the pool) reset on the
        first task of the split the run draws from it (a transfer set only its own split):
        an env that cannot be built or reset stops the run here, before any model loads."""
        pool = self.runtime.pool_for(entry.ref)
        env: Any = self.runtime.run(pool.acquire())
        try:
            tasks: TaskSource = env.unwrapped.task_source()
            first = tasks.draw(split, 0)
            self.runtime.run(env.areset(seed=first.seed, options={"task": first.task}))
        except Exception as exc:
            self.runtime.run(pool.retire(env))
            if isinstance(exc, ToolgymError):
                raise
            cause = one_line(f"{type(exc).__name__}: {exc}")
            raise EnvBuildError(f"env '{entry.id}': its first reset raised {cause}") from exc
        pool.release(env)
        return tasks

    def keep_if_best(self, record: dict[str, Any]) -> None:
        """Under eval.keep_best, save the policy as RUN_DIR/best_policy when this evaluation
        (in `record`) beats every earlier one."""
        success = record["eval/success"]
        if self.config.eval.keep_best and beats_best(self.run_dir, success):
            mark_best(self.save_policy(BEST_POLICY), record["step"], success)

    def save_policy(self, name: str = "policy") -> Path:
        """The trained policy as a model directory (`toolgym eval --model RUN_DIR/policy`);
        under LoRA, the adapter, which peft loads onto the base model."""
        path = self.run_dir / name
        if self.ranks is None:
            self.model.save_pretrained(path)
        else:  # the weights whole, gathered from the ranks
            self.model.save_pretrained(path, state_dict=self.learner.full_state_dict())
        self.tokenizer.save_pretrained(path)
        if self.images is not None:  # a vision-language model reads images through it
            self.images.processor.save_pretrained(path)
        if not self.config.envs:  # one env: later commands play the policy as it was trained
            env = self.config.env
            schemas = self.config.rollout.tool_schemas_in_prompt
            write_env_settings(path, env.id, dict(env.kwargs), schemas)
        return path

    def _claim_run_dir(self, overwrite: bool) -> None:
        check_run_dir(self.run_dir, overwrite)
        for name in held_run_files(self.run_dir):
            target = self.run_dir / name
            shutil.rmtree(target) if target.is_dir() else target.unlink()

    def _resume(self) -> None:
        if not checkpoint.exists(self.run_dir):
            raise ConfigError(f"no checkpoint in {self.run_dir} to resume from")
        state = checkpoint.load(self.run_dir, self.config.steps)
        self.learner.restore(self.run_dir, state)
        checkpoint.restore_rng(state)
        self.step = int(state["step"])
        try:
            self.rewards.load_state_dict(state["extra"].get("rewards", {}))
            self.groups.load_state_dict(state["extra"].get("groups", {}))
            read_stream_state(state["extra"].get("stream", {}))
        except (RuntimeError, ValueError, KeyError) as exc:
            raise checkpoint.CheckpointError(
                f"{self.run_dir / checkpoint.FILE}: its reward sources', group builder's or "
                f"stream's states do not fit this run: {one_line(exc)}"
            ) from None
        self.stream_state = dict(state["extra"].get("stream", {}))
        self.engine.policy_version = self.gate.version = self.step
        if self.step > 0 and self.sync_way != "shared":
            # the server may have restarted, an own copy holds the start weights: send them
            self.engine.policy_version = self.gate.version = self.step - 1
            self.sync()


def held_run_files(run_dir: Path) -> list[str]:
    return [n for n in RUN_FILES if (run_dir / n).exists()]


def check_run_dir(run_dir: str | Path, overwrite: bool) -> None:
    """Refuse a new run in a directory that holds one, unless told to start over; the CLI
    asks before anything loads, the trainer again before it writes."""
    held = held_run_files(Path(run_dir))
    if held and not overwrite:
        raise ConfigError(
            f"{run_dir} already holds a run ({', '.join(held)}); continue it with "
            "--resume, or start over with --overwrite"
        )


def rollout_metrics(
    prefix: str, trajectories: list[Trajectory], seconds: float, per_env: list[str],
    full: bool = True,
) -> dict[str, float]:  # fmt: skip
    """`prefix/success` (with its 95% interval, `success_low` and `success_high`, and the
    distinct `items` played), reward, turns and valid_actions, overall and for each env named
    in `per_env`; with `full`, the overall masked count and tokens_per_s too."""
    out: dict[str, float] = {}
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
            out |= {f"{key}masked": stats.masked, f"{key}tokens_per_s": stats.tokens_per_s}
    return out
