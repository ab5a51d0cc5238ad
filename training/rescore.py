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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolgym.agents.trajectory import Trajectory
from toolgym.envs.registration import make
from toolgym.errors import one_line
from toolgym.intervals import wilson
from toolgym.training.rewards import make_source

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
    steps, as a return); a source that raises on an episode is that episode's problem."""
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
    for t in trajectories:
        if t.masked:
            continue
        env_id, kwargs = settings.get(t.env_name, (t.env_id, dict(other or {})))
        try:
            new: float | None = await asyncio.wait_for(replay(t, env_id, kwargs), REPLAY_TIMEOUT_S)
            problem = None
        except TimeoutError:
            new, problem = None, f"the replay took longer than {REPLAY_TIMEOUT_S:g} s"
        except Exception as exc:
            new, problem = None, one_line(f"{type(exc).__name__}: {exc}", 200)
        out.append(Rescored(t.id, t.env_name, t.total_reward, new, problem))
    return out


async def replay(trajectory: Trajectory, env_id: str, kwargs: dict[str, Any]) -> float:
    """The return the env gives the episode's actions now, from the same seed and task."""
    env = make(env_id, **kwargs)
    try:
        options = {"task": trajectory.task} if trajectory.task is not None else None
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
