"""Collect groups of N rollouts per task, many episodes at once under a concurrency limit,
each in the one episode frame (`play_pooled`) whoever plays it.

Every member of a group starts from the same task and seed (what group-relative advantages
compare); each episode runs on its own timeline, on an env instance taken from its env's
pool. Failed or timed-out episodes come back masked and are counted, and the rest of the
batch goes on.

A request names its env (`EnvRef`: name, id, arguments) and its task; it holds nothing
live, so it can be sent to another process. The collector turns a reference into a pool
through its `pools` (the runtime's, in a run).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from toolgym.agents.engines.base import Engine
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import EnvLoop, EpisodeRequest, Prefix, RolloutConfig
from toolgym.agents.trajectory import EpisodeEnd, Trajectory, TrajectoryGroup
from toolgym.envs.episode_env import EpisodeEnv
from toolgym.envs.pool import Pool
from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks import TaskDraw
from toolgym.errors import EpisodesMasked, one_line
from toolgym.intervals import item_wilson

PoolSource = Callable[[EnvRef], Pool]
"""The pool that runs a referenced env's episodes (the runtime's `pool_for`)."""


def pools_of(*pools: Pool) -> PoolSource:
    """A pool source over pools already made, found by their env's name."""
    by_name = {p.name: p for p in pools}

    def pool_for(env: EnvRef) -> Pool:
        if env.name not in by_name:
            raise KeyError(f"no pool for env '{env.name}' (pools: {', '.join(by_name)})")
        return by_name[env.name]

    return pool_for


@dataclass(frozen=True)
class GroupRequest:
    """`size` episodes of one drawn task on the env `env` names."""

    env: EnvRef
    draw: TaskDraw
    size: int = 1
    role: str = "policy"
    name: str | None = None
    """The group's id, where the builder that asks for it names it (self-play's
    `{proposal}:solver`); None: made from the env, split and draw index."""

    @property
    def group_id(self) -> str:
        """Unique per env, split and draw index (a train index is never drawn twice), or the
        name given: its episodes' ids start with it."""
        return self.name or f"{self.env.name}:{self.draw.split}:{self.draw.index}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON where the task is), to send the request to another process."""
        return {"env": self.env.to_dict(), "draw": asdict(self.draw), "size": self.size,
                "role": self.role, "name": self.name}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupRequest:
        name = data.get("name")
        return cls(EnvRef.from_dict(data["env"]), TaskDraw(**data["draw"]), int(data["size"]),
                   str(data["role"]), None if name is None else str(name))  # fmt: skip


@dataclass(frozen=True)
class BranchRequest:
    """`size` continuations of `prefix` on the env `env` names (Monte-Carlo step values)."""

    env: EnvRef
    prefix: Prefix
    size: int = 1


def requests_for(
    env: EnvRef, draws: Iterable[TaskDraw], size: int = 1, role: str = "policy"
) -> list[GroupRequest]:
    return [GroupRequest(env, d, size, role) for d in draws]


@dataclass
class RolloutStats:
    episodes: int
    masked: int
    success_rate: float
    successes: int
    """Unmasked episodes the env judged solved (`Trajectory.success`; `success_rate` of them)."""
    items: int
    """Distinct items played (`Trajectory.item`): fewer than the episodes when draws repeat."""
    mean_reward: float
    mean_turns: float
    valid_action_rate: float
    tool_exception_rate: float
    """Tool calls that raised (the tool's or env's bug, not the policy's mistake), of all
    calls: a tool that raises on every call shows here instead of training silently."""
    success_interval: tuple[float, float]
    """The 95% interval of `success_rate`, over items: Wilson's, narrowed by an item's repeats
    only as far as its plays differ (`item_wilson`)."""
    generated_tokens: int
    tokens_per_s: float
    seconds: float


def summarize(trajectories: Sequence[Trajectory], seconds: float = 0.0) -> RolloutStats:
    """Statistics over the unmasked trajectories (masked ones are only counted)."""
    kept = [t for t in trajectories if not t.masked]
    steps = [s for t in kept for s in t.steps]
    tokens = sum(t.generated_tokens for t in trajectories)
    n = max(len(kept), 1)
    successes = sum(t.success for t in kept)
    outcomes = item_outcomes(kept)
    return RolloutStats(
        episodes=len(trajectories),
        masked=len(trajectories) - len(kept),
        success_rate=successes / n,
        successes=successes,
        items=len(outcomes),
        mean_reward=sum(t.total_reward for t in kept) / n,
        mean_turns=len(steps) / n,
        valid_action_rate=sum(s.valid_action for s in steps) / max(len(steps), 1),
        tool_exception_rate=len(tool_exceptions(kept))
        / max(sum(len(s.tool_calls) for s in steps), 1),
        success_interval=item_wilson(list(outcomes.values())),
        generated_tokens=tokens,
        tokens_per_s=tokens / seconds if seconds > 0 else 0.0,
        seconds=seconds,
    )


REASON_CHARS = 160
"""A masked episode's reason is kept to this many characters (its first line)."""


def masked_reasons(trajectories: Iterable[Trajectory]) -> dict[str, int]:
    """How many episodes were masked for each reason (the first line of their infra_error):
    what a run's summary says it left out, and why."""
    return dict(
        Counter(one_line(t.infra_error or "")[:REASON_CHARS] for t in trajectories if t.masked)
    )


def item_outcomes(trajectories: Iterable[Trajectory]) -> dict[str, list[float]]:
    """Each item's outcomes over its unmasked episodes (1.0 for a success), by `Trajectory.item`."""
    outcomes: dict[str, list[float]] = defaultdict(list)
    for t in trajectories:
        if not t.masked:
            outcomes[t.item].append(float(t.success))
    return outcomes


def item_success(trajectories: Iterable[Trajectory]) -> dict[str, float]:
    """Each item's success rate over its scored (unmasked) episodes."""
    return {item: sum(o) / len(o) for item, o in item_outcomes(trajectories).items()}


def tool_exceptions(trajectories: Sequence[Trajectory]) -> list[str]:
    """The error text of every step whose tool calls include one that raised."""
    return [
        str(s.error)
        for t in trajectories
        for s in t.steps
        for c in s.tool_calls
        if c.get("error") == "exception"
    ]


def require_unmasked(trajectories: Sequence[Trajectory], where: str) -> None:
    """Raise EpisodesMasked (a RunFailedError) when every trajectory was masked: nothing was
    learned or measured, and going on would report success on nothing. The message counts the
    causes and quotes the first one; the error holds every reason's count."""
    if not trajectories or not all(t.masked for t in trajectories):
        return
    causes = Counter(str(t.end.value if t.end else "unknown") for t in trajectories)
    first = one_line(trajectories[0].infra_error)
    counted = ", ".join(f"{n} {cause}" for cause, n in causes.most_common())
    raise EpisodesMasked(
        f"{where}: all {len(trajectories)} rollouts failed ({counted}); the first: {first}",
        masked_reasons(trajectories),
    )


def grouped(
    requests: Sequence[GroupRequest], played: Sequence[Trajectory]
) -> list[TrajectoryGroup]:
    """The requests' groups, from their episodes played in request order (`size` each)."""
    groups, at = [], 0
    for r in requests:
        members = list(played[at : at + r.size])
        at += r.size
        groups.append(TrajectoryGroup(r.group_id, r.draw.seed, members, r.env.name))
    return groups


class PlaysGroups(Protocol):
    """What plays a run's group requests: a `Collector`, with the env's own loop or an agent
    harness through the gateway as its way to play."""

    async def collect(
        self,
        requests: Sequence[GroupRequest],
        adapter: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> list[TrajectoryGroup]: ...


class PlaysEpisode(Protocol):
    """A way to play one episode on an env instance the frame holds: the env's own loop
    (`EnvLoop`), or an agent harness through the gateway (gateway/collector.py)."""

    async def play(self, env: EpisodeEnv, traj: Trajectory, request: EpisodeRequest) -> None:
        """Play `request` into `traj`; never raises for the env's, the engine's or the agent's
        failures: they end `traj` masked (`ENV_FAILED` or `TIMEOUT` retires the instance)."""
        ...


RETIRED = (EpisodeEnd.ENV_FAILED, EpisodeEnd.TIMEOUT)
"""How an episode ended when its env instance is closed, not reused: it failed, or it may
still be busy with a call the timeout left."""


async def play_pooled(pool: Pool, request: EpisodeRequest, way: PlaysEpisode) -> Trajectory:
    """The one frame of every episode: the trajectory the request names, an instance from
    `pool`, the wall clock, and the instance given back after the episode or retired. A way
    to play that raises (its own bug) masks the episode instead of failing its batch."""
    traj = request.trajectory(pool.env_id, pool.name)
    try:
        env = await pool.acquire()
    except Exception as exc:
        traj.end, traj.infra_error = EpisodeEnd.INFRA_ERROR, str(exc)
        return traj
    start = time.perf_counter()
    try:
        await way.play(env, traj, request)
    except Exception as exc:
        traj.end = EpisodeEnd.ENV_FAILED
        traj.infra_error = f"playing the episode failed: {type(exc).__name__}: {one_line(exc)}"
    finally:
        traj.elapsed_s = time.perf_counter() - start
        if traj.end in RETIRED:
            await pool.retire(env)
        else:
            pool.release(env)
    return traj


class Collector:
    """Plays the requested groups, each episode in the frame (`play_pooled`) with `way`, at
    most `concurrency` at once.

    Args:
        pools: the pool each request's env runs on (`Runtime.pool_for`, or `pools_of`).
        on_episode: sees each episode as it ends (the CLI's progress).
    """

    def __init__(
        self,
        way: PlaysEpisode,
        pools: PoolSource,
        *,
        concurrency: int = 64,
        on_episode: Callable[[Trajectory], None] | None = None,
    ) -> None:
        self.way, self.pools = way, pools
        self.concurrency, self.on_episode = concurrency, on_episode
        self.masked_total = 0

    async def collect(
        self,
        requests: Sequence[GroupRequest],
        adapter: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> list[TrajectoryGroup]:
        """One group per request, in order; `options` go to every reset (e.g. the trainer's
        step), besides each draw's task."""
        episodes = [
            (self.pools(r.env), EpisodeRequest(
                f"{r.group_id}:{member}", r.group_id, r.draw.seed, task=r.draw.task,
                options=options, role=r.role, adapter=adapter,
            ))
            for r in requests
            for member in range(r.size)
        ]  # fmt: skip
        return grouped(requests, await self._run(episodes))

    async def _run(self, episodes: list[tuple[Pool, EpisodeRequest]]) -> list[Trajectory]:
        """Every episode (its pool and request), at most `concurrency` at once."""
        limit = asyncio.Semaphore(self.concurrency)

        async def one(pool: Pool, episode: EpisodeRequest) -> Trajectory:
            async with limit:
                traj = await play_pooled(pool, episode, self.way)
            if self.on_episode is not None:
                self.on_episode(traj)
            return traj

        results = await asyncio.gather(*(one(pool, e) for pool, e in episodes))
        self.masked_total += sum(t.masked for t in results)
        return list(results)


class RolloutCollector(Collector):
    """Groups played by the env's own loop (`EnvLoop`); and continuations of episodes
    already played, which only a replayable env loop can give."""

    def __init__(
        self,
        engine: Engine,
        renderer: ChatRenderer,
        config: RolloutConfig,
        pools: PoolSource,
        *,
        concurrency: int = 64,
        on_episode: Callable[[Trajectory], None] | None = None,
    ) -> None:
        super().__init__(
            EnvLoop(engine, renderer, config), pools, concurrency=concurrency,
            on_episode=on_episode,
        )  # fmt: skip
        self.engine, self.renderer, self.config = engine, renderer, config

    async def branch(
        self,
        requests: Sequence[BranchRequest],
        adapter: str | None = None,
        options: dict[str, Any] | None = None,
    ) -> list[list[Trajectory]]:
        """Each request's continuations, in order (ids: the prefix's id, `/after{steps}:k`)."""
        episodes = []
        for r in requests:
            t = r.prefix.trajectory
            for k in range(r.size):
                episodes.append((self.pools(r.env), EpisodeRequest(
                    f"{t.id}/after{r.prefix.steps}:{k}", t.group_id, t.seed, task=t.task,
                    options=options, role=t.role, adapter=adapter, prefix=r.prefix,
                )))  # fmt: skip
        results = await self._run(episodes)
        out, at = [], 0
        for r in requests:
            out.append(list(results[at : at + r.size]))
            at += r.size
        return out
