"""The trainer: one loop, in named phases, for synchronous and asynchronous training alike.

    collect   the step's groups from its group builder (groups/), played by the Player
              (player.py) and handed over by the stream (stream.py): by default
              tasks_per_step tasks x rollouts_per_task rollouts with the current policy, the
              tasks drawn from each env's train split and shared among a mixture's envs by
              weight (groups/allotment.py), on env instances the runtime keeps across episodes
    score     the reward stage: each step's named components, weighted into its reward
    advantage per group (GRPO / RLOO / GiGPO), each step's value onto its response tokens
    update    PPO-clip, ppo_epochs passes; each pass takes one optimizer step per mini-batch
              (optim.minibatches), accumulating gradients over its micro-batches
    sync      hand the new weights to the engine, its way (update/weight_sync.py)
    log       metrics (rollout/, reward/, adv/, signal/, explore/, train/, perf/, time/,
              eval/, async/), and the step's line and warnings into the run log (run/log.py)
    evaluate  every eval.every_steps on each env's eval split (never trained on)
    checkpoint atomically, in the run directory (run/directory.py)

Synchronous training is the stream at max_staleness 0 with the engine sharing the trained
weights: no group starts before the previous step's weights land, so each batch is exactly
one step's groups. In async mode collection does not stop: groups play on the run's loop
while the trainer scores and updates, the engine samples its own copy of the weights, and a
sync lands only between episodes (or turns, with partial rollouts).

The parts come from builders.py; the runtime (one event loop, env pools, shared resources)
lives as long as the run. Departures from the papers: one policy update per batch by default
(ppo_epochs = 1 and minibatches = 1, so the clipping only acts if there are more or the engine
lags); masked rollouts (infrastructure failures) are dropped rather than scored; loss
aggregation is token-mean over each optimizer step (DAPO), not per-sequence as in the GRPO
paper (a flag).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from toolgym.agents.collector import require_unmasked, tool_exceptions
from toolgym.agents.models.device import peak_memory_gb
from toolgym.agents.models.loading import check_model_dir
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.runtime import Runtime
from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.errors import RunFailedError, one_line
from toolgym.log import get_logger
from toolgym.training.advantages.metrics import advantage_metrics
from toolgym.training.builders import (
    PolicyParts,
    build_groups,
    build_parts,
    build_reward_stage,
    build_runtime,
    build_snapshot,
    check_engine,
    model_hint,
)
from toolgym.training.config import TrainConfig
from toolgym.training.credit import assign_credit
from toolgym.training.distributed import Ranks
from toolgym.training.exploration import exploration_metrics, signal_metrics
from toolgym.training.groups import Collect, GroupBuilder, group_metrics
from toolgym.training.player import Player, probe_tasks, rollout_metrics
from toolgym.training.rewards.base import Continuation
from toolgym.training.run import checkpoint
from toolgym.training.run.directory import HasState, RunDirectory, SavedPolicy
from toolgym.training.run.files import read_metrics
from toolgym.training.run.log import RunLog
from toolgym.training.run.metrics import MetricsLog, env_steps_spent
from toolgym.training.stream import GroupStream, batch_metrics
from toolgym.training.update.batch import build_batch
from toolgym.training.update.fidelity import warn_on_fidelity
from toolgym.training.update.learner import Leader, Learner, Learns
from toolgym.training.update.weight_sync import SYNCS, sync_way

log = get_logger(__name__)


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
            check_model_dir(config.model, hint=model_hint(config))
        self.config = config
        self.run_files = RunDirectory(config)
        self.run_dir = self.run_files.path
        self.runtime = runtime or build_runtime(config)
        try:
            tasks = probe_tasks(config, self.runtime)  # before any model loads
        except BaseException:
            self.runtime.close()
            raise
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
        synchronous = config.mode == "sync"
        self.sync_way = sync_way(self.engine, config.lora.enabled, not synchronous or bool(ranks))
        self.sync_weights = SYNCS[self.sync_way]
        self.gate = PolicyGate()
        """The one clock: the weights' version, which stamps each turn and each sync moves."""
        self.model.eval()  # it trains only inside `update`
        self.player = Player(config, self.runtime, tasks, self.engine, self.renderer, self.gate)
        self.rewards = build_reward_stage(config, self.precision, self.continue_from)
        self.snapshot = build_snapshot(config, parts, self.player, self.learner)
        self.groups: GroupBuilder = groups or build_groups(config, tasks.train, self.snapshot)
        stream = config.async_training  # sync mode refuses any of it: defaults there
        self.stream = GroupStream(
            self.groups, self.collect_for, self.gate, config.rollout.tasks_per_step,
            0 if synchronous else stream.max_staleness, stream.extra_groups,
            partial=stream.partial_rollouts, whole_steps=synchronous, steps=config.steps,
        )  # fmt: skip
        self.step = 0
        self.spent = 0.0
        """Env steps spent so far: the episodes' turns and any Monte-Carlo branches'."""
        self.on_step: Callable[[dict[str, Any]], None] | None = None
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
        self.on_step, self.player.on_episode = on_step, on_episode
        with self.opened(resume, overwrite):
            self.runtime.run(self.train_steps())
        return read_metrics(self.run_dir)

    @contextlib.contextmanager
    def opened(self, resume: bool = False, overwrite: bool = False) -> Iterator[None]:
        """The run directory claimed (or resumed), its logs open, the start evaluated; a clean
        exit saves the policy. What drives the steps (`run`, training/driven.py) runs in it."""
        self._resume() if resume else self.run_files.claim(overwrite)
        sinks = ["tensorboard"] * self.config.tensorboard + list(self.config.loggers)
        self.metrics = MetricsLog(self.run_dir, self.step, sinks)
        try:
            with RunLog(self.run_dir, self.config, self.step) as self.report:
                if self.config.eval.at_start and not resume:
                    self.log_step({"step": 0, "env_steps": 0, **self.evaluate()})
                yield
                self.run_files.save_policy(self.policy())
                self.learner.stop()
        finally:
            self.metrics.close()
            self.close()

    async def train_steps(self) -> None:
        """Each step: take its batch from the stream, learn from it, sync the weights, then
        evaluate, log and checkpoint in a thread (episodes of an asynchronous run play on)."""
        self.stream.start()
        try:
            while not self.done(self.step):
                batch = await self.stream.take(self.step)
                t0 = time.perf_counter()
                record = await self.learn(batch.groups, batch.rollout_s)
                t1 = time.perf_counter()
                self.player.adapter = await self.gate.swap(self.send_weights)
                self.stream.synced()
                record |= batch_metrics(self.stream, batch, self.step, t0, t1, time.perf_counter())
                stream_state = self.stream.state_dict()  # on the loop, which changes it
                await asyncio.to_thread(self.finish_step, record, stream_state)
        finally:
            await self.stream.aclose()

    def collect_for(self, step: int) -> Collect:
        """How step `step`'s groups are played (with partial rollouts, turns that hold the
        gate one by one)."""
        return self.player.collect_for(step, hold_turns=self.stream.partial)

    def finish_step(self, record: dict[str, Any], stream_state: dict[str, Any]) -> None:
        """Evaluate when due, log the step's record, and checkpoint when due."""
        self.spent += env_steps_spent(record)
        self.step += 1  # the steps done, and so this one's number
        if self.step % self.config.eval.every_steps == 0 or self.done(self.step):
            record |= self.evaluate()
        self.log_step(record)
        if self.step % self.config.checkpoint.every_steps and not self.done(self.step):
            return
        weights = self.learner.weights_state(self.run_dir, self.step)
        states = {"rewards": self.rewards.state_dict(), "groups": self.groups.state_dict()}
        self.run_files.save_checkpoint(self.step, weights, states | {"stream": stream_state})

    def log_step(self, record: dict[str, Any]) -> None:
        """Keep the policy if its evaluation (if any) is the best yet (eval.keep_best), then
        the record into metrics.jsonl, the run log and the caller's on_step."""
        if "eval/success" in record:
            self.run_files.keep_if_best(record, self.policy)
        self.metrics.write(record)
        self.report.step(record)
        if self.on_step is not None:
            self.on_step(record)

    def done(self, step: int) -> bool:
        """Whether training ends after `step` steps: `steps` reached or `max_env_steps` spent."""
        budget = self.config.max_env_steps
        return step >= self.config.steps or (budget is not None and self.spent >= budget)

    def close(self) -> None:
        """Stop the engine's workers, close the env pools, shared resources and the loop."""
        for engine in [self.engine, *([self.snapshot.engine] if self.snapshot else [])]:
            self.runtime.run(engine.aclose())
        self.runtime.run(self.rewards.aclose())
        self.runtime.close()

    async def learn(self, groups: list[TrajectoryGroup], rollout_s: float) -> dict[str, Any]:
        """Score the groups (on the loop), compute advantages and update the policy (in a
        thread, so episodes of an asynchronous run go on meanwhile); the step's record."""
        t1, number = time.perf_counter(), self.step + 1  # steps count from 1 wherever shown
        everything = [t for g in groups for t in g.trajectories]
        if not everything:
            raise RunFailedError(f"training step {number}: the group builder made no episodes")
        if all(t.masked for t in everything):  # what stops the run stays readable
            self.run_files.keep_rollouts(number, everything)
        require_unmasked(everything, f"training step {number}")
        if raised := tool_exceptions(everything):
            log.warning(
                "step %d: %d tool calls raised; the first: %s",
                number, len(raised), one_line(raised[0]),
            )  # fmt: skip
        trajectories, advantages = await self.advantages(groups)
        require_unmasked(everything, f"training step {number}'s reward stage")
        self.metrics.samples(number, self.run_files.keep_rollouts(number, everything))
        t2 = time.perf_counter()
        train_metrics = (
            await asyncio.to_thread(self.update, trajectories, advantages) if trajectories else {}
        )
        t3 = time.perf_counter()
        warn_on_fidelity(number, train_metrics, self.config)
        return {
            "step": number,
            "env_steps": sum(len(t.steps) for t in everything),
            **rollout_metrics("rollout", everything, rollout_s, self.player.per_env),
            **self.rewards.metrics(everything),
            **advantage_metrics(advantages, groups, self.config.advantage.anchor_similarity),
            **signal_metrics(groups, trajectories, advantages),
            **exploration_metrics(groups),
            **group_metrics(self.groups, groups),
            **self.player.actor_metrics(),
            **{f"train/{k}": v for k, v in train_metrics.items()},
            "perf/update_tokens_per_s": train_metrics.get("tokens", 0.0) / max(t3 - t2, 1e-9),
            "perf/peak_memory_gb": peak_memory_gb(self.precision.device),
            "time/rollout_s": rollout_s,
            "time/advantage_s": t2 - t1,
            "time/update_s": t3 - t2,
        }

    async def advantages(
        self, groups: list[TrajectoryGroup]
    ) -> tuple[list[Trajectory], list[np.ndarray]]:
        """Score each trained group's episodes (the reward stage), then their advantages."""
        return await assign_credit(groups, self.rewards, self.config.advantage)

    def update(
        self, trajectories: list[Trajectory], advantages: list[np.ndarray]
    ) -> dict[str, float]:
        masked = self.stream.partial and self.config.async_training.stale_turns == "mask"
        oldest = self.step - self.stream.max_staleness if masked else None
        batch = build_batch(trajectories, advantages, self.pad_id, self.images, oldest)
        out = self.learner.update(batch, self.step)
        if out.pop("stopped"):
            raise RunFailedError(
                f"training step {self.step + 1}: the loss ({out['loss']}) or gradient norm "
                f"({out['grad_norm']}) is not finite; nothing was saved from this step, so "
                f"{self.run_dir} holds the last good state (optim.on_nonfinite=skip skips "
                "such updates instead)"
            )
        return out

    def sync(self) -> None:
        """Hand the updated weights to the engine (see update/weight_sync.py)."""
        self.player.adapter = self.runtime.run(self.gate.swap(self.send_weights))

    async def send_weights(self) -> str | None:
        return await self.sync_weights(
            self.engine, self.learner, self.run_dir / "adapters", self.player.adapter,
            self.gate.version + 1,
        )  # fmt: skip

    def evaluate(self, temperature: float | None = None) -> dict[str, Any]:
        """The policy on each env's eval tasks, at eval.temperature unless told otherwise
        (kept as `last_evaluation`)."""
        temperature = self.config.eval.temperature if temperature is None else temperature
        metrics, played = self.player.evaluation(f"after step {self.step}", temperature)
        self.last_evaluation = (temperature, metrics, played)
        self.run_files.keep_evaluation(self.step, played)
        return metrics

    async def continue_from(
        self, requests: Sequence[tuple[Trajectory, int, int]]
    ) -> list[list[Continuation]]:
        """Continuations of the step's trajectories by the current policy (Monte-Carlo step
        values), scored by the reward stage."""
        return await self.player.continuations(requests, self.step, self.rewards.outcome_returns)

    # ----- the run directory ------------------------------------------------------------
    def policy(self) -> SavedPolicy:
        """The trained policy as it is saved (a distributed run's weights gathered whole)."""
        whole = None if self.ranks is None else self.learner.full_state_dict()
        return SavedPolicy(self.model, self.tokenizer, self.images, whole)

    def _resume(self) -> None:
        state = self.run_files.load_checkpoint()
        self.learner.restore(self.run_dir, state)
        checkpoint.restore_rng(state)
        self.step = int(state["step"])
        done = [r for r in read_metrics(self.run_dir) if 0 < r["step"] <= self.step]
        self.spent = sum(env_steps_spent(r) for r in done if "env_steps" in r)
        parts: dict[str, HasState] = {
            "rewards": self.rewards, "groups": self.groups, "stream": self.stream
        }  # fmt: skip
        self.run_files.restore_parts(state, parts)
        if not state["extra"].get("stream"):  # written before its steps were streamed
            self.stream.start_at(self.step)
        self.gate.version = self.step
        if self.step > 0 and self.sync_way != "shared":
            # the server may have restarted, an own copy holds the start weights: send them
            self.gate.version = self.step - 1
            self.sync()
