"""Stored episodes scored again, and how far the new score agrees with the stored one.

Two ways to score: a reward source by name (reward/: `format`, `length`, `function` with
your own function, ...) run on each stored episode as the reward stage runs it; or `replay`,
the env's own check again: each episode's actions are replayed in a fresh env built with the
settings it was played with, and the env's return then is the new score (a changed env, a
check that is not deterministic, or a reward bug shows as disagreement). Agreement is on
success (a return above 0, as every rate counts it), with its 95% interval, beside the mean
absolute difference of the scores. Masked episodes were never scored and are skipped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolgym.agents.trajectory import Trajectory
from toolgym.envs.core import Env
from toolgym.envs.registration import make
from toolgym.envs.tasks import SPLITS, content_key
from toolgym.errors import ConfigError, lookup, one_line
from toolgym.intervals import wilson
from toolgym.training.rewards import SOURCES, make_source

REPLAY = "replay"
REPLAY_TIMEOUT_S = 60.0
"""One episode's replay stops after this long (a hung env is a problem, not a hang)."""


@dataclass
class Rescored:
    trajectory_id: str
    env_name: str
    stored: float
    """The env's return as stored (what the run's success counted)."""
    new: float | None
    """The new score; None where it could not be had (`problem` says why)."""
    problem: str | None = None

    @property
    def agrees(self) -> bool:
        return self.new is not None and (self.new > 0) == (self.stored > 0)


@dataclass
class Agreement:
    episodes: int
    scored: int
    agreeing: int
    low: float
    high: float
    mean_abs_difference: float
    masked: int
    problems: int

    @property
    def rate(self) -> float:
        return self.agreeing / self.scored if self.scored else 0.0


def with_source(
    trajectories: Sequence[Trajectory], name: str, kwargs: Mapping[str, Any]
) -> list[Rescored]:
    """Each unmasked episode scored by the reward source `name` (its values summed over the
    steps, as a return); a source that raises on an episode is that episode's problem. A
    source that only reads back what the episodes stored is refused: it would check nothing."""
    if lookup(SOURCES, name, "reward source").rereads:
        raise ConfigError(
            f"--reward {name} reads back what the episodes stored, so its scores would agree "
            "by construction and check nothing: rescore with replay (the env's own check "
            "again) or a source that scores anew (format, length, function)"
        )
    source = make_source(name, **kwargs)
    out = []
    for t in trajectories:
        if t.masked:
            continue
        try:
            new: float | None = float(sum(source(t)))
            problem = None
        except Exception as exc:
            new, problem = None, one_line(f"{type(exc).__name__}: {exc}", 200)
        out.append(Rescored(t.id, t.env_name, t.total_reward, new, problem))
    return out


async def by_replay(
    trajectories: Sequence[Trajectory],
    settings: Mapping[str, tuple[str, dict[str, Any]]],
    other: Mapping[str, Any] | None = None,
) -> list[Rescored]:
    """Each unmasked episode replayed in a fresh env; `settings`: each env name's id and
    kwargs; an episode whose name is not there is played on its env_id with `other`."""
    out = []
    owns: dict[str, OwnTasks] = {}
    """Per env setting: its own tasks, read once."""
    for t in trajectories:
        if t.masked:
            continue
        env_id, kwargs = settings.get(t.env_name, (t.env_id, dict(other or {})))
        own = owns.setdefault(json.dumps([env_id, kwargs], sort_keys=True, default=str), OwnTasks())
        try:
            new: float | None = await asyncio.wait_for(
                replay(t, env_id, kwargs, own), REPLAY_TIMEOUT_S
            )
            problem = None
        except TimeoutError:
            new, problem = None, f"the replay took longer than {REPLAY_TIMEOUT_S:g} s"
        except Exception as exc:
            new, problem = None, one_line(f"{type(exc).__name__}: {exc}", 200)
        out.append(Rescored(t.id, t.env_name, t.total_reward, new, problem))
    return out


async def replay(
    trajectory: Trajectory,
    env_id: str,
    kwargs: dict[str, Any],
    own: OwnTasks | None = None,
) -> float:
    """The return the env gives the episode's actions now, from the same seed and task. A
    rollout file is shared data: its task is played only if it is one of the env's own tasks
    (by content) or one the env takes from a client (`Env.client_task`: plain data, never
    code to import, a file or a loopback address); anything else is refused in words."""
    env = make(env_id, **kwargs)
    try:
        task = replay_task(env.unwrapped, trajectory.task, own or OwnTasks())
        options = {"task": task} if task is not None else None
        await env.areset(seed=trajectory.seed, options=options)
        total = 0.0
        for step in trajectory.steps:
            _, reward, terminated, truncated, _ = await env.astep(step.action)
            total += float(reward)
            if terminated or truncated:
                break
        return total
    finally:
        await env.aclose()


OWN_TASKS_LIMIT = 100_000
"""The most tasks of one split read as the env's own."""


class OwnTasks:
    """The content keys (`content_key`) of an env's own tasks, read on first need."""

    def __init__(self) -> None:
        self.keys: set[str] | None = None

    def hold(self, env: Any, task: dict[str, Any]) -> bool:
        if set(task) == {"seed"} and type(task["seed"]) is int:
            return True  # a generated source's draw: the env makes the task from the seed
        if self.keys is None:
            self.keys = _own_keys(env)
        return content_key(task) in self.keys


def replay_task(env: Any, task: dict[str, Any] | None, own: OwnTasks) -> dict[str, Any] | None:
    """`task` if the env holds it among its own tasks, else as its client-task rules take it
    (ConfigError, saying why, when they do not)."""
    if task is None:
        return None
    if not isinstance(task, dict):
        raise ConfigError(f"the stored task is a {type(task).__name__}, not the env's fields")
    if own.hold(env, task):
        return task
    try:
        return env.client_task(task)
    except ConfigError as exc:
        raise ConfigError(f"the stored task is not one of the env's own, and {exc}") from None


def _own_keys(env: Any) -> set[str]:
    if not isinstance(env, Env):
        return set()
    source = env.task_source()
    keys = set()
    for split in SPLITS:
        size = source.size(split)
        if size is not None and size <= OWN_TASKS_LIMIT:
            keys |= {content_key(source.task(split, index)) for index in range(size)}
    return keys


def agreement(rows: Sequence[Rescored], masked: int) -> Agreement:
    scored = [r for r in rows if r.new is not None]
    agreeing = sum(r.agrees for r in scored)
    low, high = wilson(agreeing, len(scored)) if scored else (0.0, 1.0)
    gaps = [abs(r.new - r.stored) for r in scored if r.new is not None]
    return Agreement(
        episodes=len(rows) + masked,
        scored=len(scored),
        agreeing=agreeing,
        low=low,
        high=high,
        mean_abs_difference=sum(gaps) / len(gaps) if gaps else 0.0,
        masked=masked,
        problems=len(rows) - len(scored),
    )
