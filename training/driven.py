"""Training driven by your own loop (ART's shape): you gather each step's groups with your
own code against sessions of the policy's gateway, score the episodes yourself (with state
of your own, or a judge comparing a group's episodes), and hand the groups over for one
update, on the same trainer, run directory, evaluations and checkpoints as `toolgym train`.

    with DrivenRun(load_config(TrainConfig, "configs/harness_arithmetic.yaml")) as run:
        for _ in range(10):
            groups = run.gather([[play] * 4 for play in my_tasks])
            for group in groups:
                for episode in group.trajectories:
                    episode.record("result", my_score(episode))  # or session.score, in play
            run.train(groups)

Each play is an async function given a `DrivenSession` (`base_url`, `api_key`: any OpenAI
client or framework records into its episode). Whose fault a failure is goes as in a harness
run: a play that raises before its first model call masks its episode; after it, the episode
is kept and counts as the policy's failure (scored 0 unless you scored it). The config's
`harness` is the agent each evaluation plays on the env's eval split; its budgets bound each
session. An episode left unscored is refused in words when it is handed over: a step never
trains on nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from toolgym.agents.gateway.result_check import RESULT
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import Session, SessionSettings
from toolgym.agents.trajectory import EpisodeEnd, Trajectory, TrajectoryGroup
from toolgym.errors import ConfigError, one_line
from toolgym.training.config import TrainConfig
from toolgym.training.trainer import Trainer


@dataclass
class DrivenSession:
    """One episode's session: point an OpenAI client at `base_url` with `api_key`."""

    base_url: str
    api_key: str
    trajectory: Trajectory

    def score(self, value: float, solved: bool | None = None) -> None:
        """The episode's reward (its `result` score) and, where you know it, whether it solved
        its task (else a reward above 0 counts as success)."""
        self.trajectory.record(RESULT, value)
        if solved is not None:
            self.trajectory.solved = solved


Play = Callable[[DrivenSession], Awaitable[Any]]


class DrivenRun:
    def __init__(self, config: TrainConfig, overwrite: bool = False) -> None:
        if config.harness is None:
            raise ConfigError(
                "a driven run needs a `harness:` section: its agent plays each evaluation, "
                "its budgets bound your sessions, and its rewards pay the score you record"
            )
        if RESULT not in [r.source for r in config.rewards]:
            raise ConfigError(f"a driven run pays the score you record: add {{source: {RESULT}}}"
                              " to its rewards")  # fmt: skip
        self.config, self.overwrite = config, overwrite
        self.trainer = Trainer(config)
        self._opened = self.trainer.opened(overwrite=overwrite)
        self.gateway: Gateway | None = None
        self._rollout_s = 0.0
        """How long the last gather took (the step's rollout time)."""

    def __enter__(self) -> DrivenRun:
        self._opened.__enter__()
        t = self.trainer
        self.gateway = Gateway(t.engine, t.renderer, t.tokenizer, t.gate)
        t.runtime.run(self.gateway.start())
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.gateway is not None:
            self.trainer.runtime.run(self.gateway.aclose())
        self._opened.__exit__(kind, exc, tb)

    @property
    def step(self) -> int:
        """The updates made so far."""
        return self.trainer.step

    def gather(self, groups: Sequence[Sequence[Play]]) -> list[TrajectoryGroup]:
        """Play each group (each of its plays one episode, all at once) with the current
        policy; the groups of episodes, for you to score and hand to `train`."""
        if self.gateway is None:
            raise RuntimeError("open the run first: `with DrivenRun(config) as run:`")
        return self.trainer.runtime.run(self._gather(self.gateway, groups))

    def train(self, groups: Sequence[TrajectoryGroup]) -> dict[str, Any]:
        """One update on `groups`, then the weights synced, and an evaluation and a checkpoint
        when due: the step's record (as metrics.jsonl keeps it)."""
        unscored = [
            t.id for g in groups for t in g.trajectories if not t.masked and RESULT not in t.scores
        ]
        if unscored:
            raise ConfigError(
                f"{len(unscored)} episodes have no score (the first: {unscored[0]}): score each "
                f"with session.score(...) or episode.record({RESULT!r}, value)"
            )
        return self.trainer.runtime.run(self._train(list(groups)))

    async def _train(self, groups: list[TrajectoryGroup]) -> dict[str, Any]:
        t = self.trainer
        record = await t.learn(groups, self._rollout_s)
        t.player.adapter = await t.gate.swap(t.send_weights)
        await asyncio.to_thread(t.finish_step, record, t.stream.state_dict())
        return record

    async def _gather(
        self, gateway: Gateway, groups: Sequence[Sequence[Play]]
    ) -> list[TrajectoryGroup]:
        started = time.perf_counter()
        env = self.config.mixture[0]
        step = self.trainer.step + 1
        made = []
        for g, plays in enumerate(groups):
            group_id = f"driven:{step}:{g}"
            made.append(TrajectoryGroup(group_id, None, [
                Trajectory(f"{group_id}:{k}", group_id, env.id, env_name=env.label)
                for k in range(len(plays))
            ], env.label))  # fmt: skip
        settings = self._settings()
        await asyncio.gather(*(
            self._play(gateway, settings, play, traj)
            for plays, group in zip(groups, made, strict=True)
            for play, traj in zip(plays, group.trajectories, strict=True)
        ))  # fmt: skip
        self._rollout_s = time.perf_counter() - started
        return made

    def _settings(self) -> SessionSettings:
        t, harness, rollout = self.trainer, self.config.harness, self.config.rollout
        assert harness is not None
        sampling = t.player.rollout_config(rollout.temperature, t.player.step_seed(t.step)).sampling
        return SessionSettings(
            sampling=sampling, max_calls=min(harness.max_calls, rollout.max_turns or 1 << 30),
            max_completion_tokens=harness.max_completion_tokens,
            max_context_tokens=rollout.max_context_tokens,
        )  # fmt: skip

    async def _play(
        self, gateway: Gateway, settings: SessionSettings, play: Play, traj: Trajectory
    ) -> None:
        session: Session = gateway.open(settings, traj)
        started = time.perf_counter()
        failed: str | None = None
        try:
            async with asyncio.timeout(self.config.rollout.episode_timeout_s):
                await play(DrivenSession(gateway.url_of(session), session.key, traj))
        except Exception as exc:  # your code's failure, or its time running out
            failed = one_line(f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc), 300)
        finally:
            gateway.close(session)
            traj.elapsed_s = time.perf_counter() - started
        if session.failed or (failed and session.ended is None and not traj.steps):
            traj.end, traj.infra_error = EpisodeEnd.INFRA_ERROR, session.failed or failed
            return
        traj.end = session.ended.end if session.ended else EpisodeEnd.TERMINATED
        if failed and traj.steps:
            traj.steps[-1].error = f"the play failed after the policy's replies: {failed}"
            if RESULT not in traj.scores:
                traj.record(RESULT, 0.0)
