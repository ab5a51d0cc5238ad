"""Streaming collection for asynchronous training: groups are played on the run's loop while
the trainer trains, and handed to it as they finish.

Units. A builder whose groups are plain requests (`PlaysRequests`) is streamed one group at a
time: unit n is slot n mod G of step n // G's requests (G = groups per step), so the first
groups to finish train first. Any other builder is streamed a step at a time: unit n is
`build` for step n, costing G slots.

Admission, not dropping after the fact. A unit starts only while the slots started and not
yet trained stay within (max_staleness + 1) x G + extra_groups: with every batch G groups,
that is AReaL's and SkyRL's rule, accepted + running <= (eta + version + 1) x G.

Staleness. A group's staleness is the trainer's version when it trains minus the version its
unit started under. The batch for version v holds every unit that started under v - eta or
earlier (the trainer waits for those), then the first others to finish, up to G groups: so no
group is ever trained more than eta versions after it started, and with eta = 0 every batch
is exactly one step's units, as in synchronous training.

Partial rollouts. A unit holds the gate only around each turn, not for its whole length:
episodes go on across syncs, their later turns made by newer weights, each step recording
its version. The batch is the first G groups to finish, none waited for; the turns of a
group carried over from older weights are corrected by the loss (loss.mode), and their
staleness is reported, not bounded by eta.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.trajectory import TrajectoryGroup
from toolgym.errors import RunFailedError
from toolgym.training.groups import BuildContext, Collect, GroupBuilder, PlaysRequests

CollectFor = Callable[[int], Collect]
"""Step k's way to play requests (its sampling seed and options)."""


@dataclass
class Unit:
    index: int
    version: int
    """The policy's version when it started."""
    groups: list[TrajectoryGroup] | None = None
    """Its groups once finished."""
    started_at: float = 0.0
    finished_at: float = 0.0


@dataclass
class Batch:
    """What the trainer trains on at one version."""

    groups: list[TrajectoryGroup]
    units: list[Unit]
    waited_s: float
    """How long the trainer waited for it."""
    generator_idle_s: float
    """Time nothing was being played since the previous batch."""
    since_previous_s: float
    rollout_s: float
    """From the first of its units starting to play to the last finishing."""


class GroupStream:
    def __init__(
        self,
        builder: GroupBuilder,
        collect_for: CollectFor,
        gate: PolicyGate,
        groups_per_step: int,
        max_staleness: int,
        extra_groups: int = 0,
        partial: bool = False,
        whole_steps: bool = False,
        steps: int | None = None,
    ) -> None:
        """`whole_steps`: stream every builder a step at a time (synchronous training, whose
        batches wait for their whole step anyway: one collection, under one concurrency).
        `steps`: the run's length; no unit of a later step starts."""
        self.builder, self.collect_for, self.gate = builder, collect_for, gate
        self.per_group = isinstance(builder, PlaysRequests) and not whole_steps
        self.groups_per_step, self.max_staleness = groups_per_step, max_staleness
        self.capacity = (max_staleness + 1) * groups_per_step + extra_groups
        """Slots that may be started and not yet trained."""
        self.cost = 1 if self.per_group else groups_per_step
        """Slots one unit takes."""
        self.partial, self.whole_steps = partial, whole_steps
        self.units_per_step = groups_per_step if self.per_group else 1
        self.last_unit = None if steps is None else steps * self.units_per_step
        self.next_unit = 0
        self.restart: list[int] = []
        """Units a resumed run plays again (started before the kill, never trained)."""
        self.units: dict[int, Unit] = {}
        """Started and not yet trained."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._producer: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._idle_s, self._idle_since = 0.0, time.perf_counter()
        self._last_batch = time.perf_counter()
        self._training = 0
        """Slots of the batch being trained: a group started before its weights land would
        be one version staler than the rule allows."""

    # ----- the producer --------------------------------------------------------------------
    def start(self) -> None:
        self._producer = asyncio.get_running_loop().create_task(self._produce())

    async def _produce(self) -> None:
        while True:
            self._changed.clear()
            while (index := self._admissible()) is not None:
                self._launch(index)
            await self._changed.wait()

    def _admissible(self) -> int | None:
        """The next unit to start, if its slots fit."""
        if not self._room() or self._failure is not None:
            return None
        if self.restart:
            return self.restart.pop(0)
        if self.next_unit == self.last_unit:
            return None
        self.next_unit += 1
        return self.next_unit - 1

    def _launch(self, index: int) -> None:
        unit = Unit(index, self.gate.version)
        self.units[index] = unit
        if self.running() == 1:
            self._idle_s += time.perf_counter() - self._idle_since
        task = asyncio.get_running_loop().create_task(self._play(unit))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _play(self, unit: Unit) -> None:
        hold = contextlib.nullcontext() if self.partial else self.gate.hold()
        try:
            async with hold:
                unit.version = self.gate.version  # a sync may have landed before it got in
                unit.started_at = time.perf_counter()
                unit.groups = await self._groups(unit)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the trainer's next take raises it
            self._failure = exc
            unit.groups = []
        unit.finished_at = time.perf_counter()
        if self.running() == 0:
            self._idle_since = unit.finished_at
        self._changed.set()

    async def _groups(self, unit: Unit) -> list[TrajectoryGroup]:
        step = unit.index // self.units_per_step
        collect = self.collect_for(step)
        if not self.per_group:
            context = BuildContext(step, unit.version, self.groups_per_step, collect)
            return await self.builder.build(context)
        assert isinstance(self.builder, PlaysRequests)
        requests = self.builder.requests(step, self.groups_per_step)  # the same for each slot
        return await collect([requests[unit.index % self.groups_per_step]])

    def running(self) -> int:
        return sum(u.groups is None for u in self.units.values())

    # ----- the trainer's side -------------------------------------------------------------------
    async def take(self, version: int) -> Batch:
        """The batch to train at `version` (see the module's docstring)."""
        t0 = time.perf_counter()
        while True:
            if self._failure is not None:
                raise self._failure
            due = (
                []
                if self.partial
                else [u for u in self.units.values() if u.version <= version - self.max_staleness]
            )
            done = [u for u in self.units.values() if u.groups is not None]
            if all(u.groups is not None for u in due) and (
                sum(len(u.groups or []) for u in done) >= self.groups_per_step
                or (self.running() == 0 and not self._can_start() and done)
            ):
                break
            self._changed.clear()
            await self._changed.wait()
        chosen = {u.index: u for u in due}
        count = sum(len(u.groups or []) for u in due)
        for u in sorted(done, key=lambda u: (u.finished_at, u.index)):
            if count >= self.groups_per_step:
                break
            if u.index not in chosen:
                chosen[u.index] = u
                count += len(u.groups or [])
        units = [chosen[i] for i in sorted(chosen)]
        for u in units:
            del self.units[u.index]
        self._training = len(units) * self.cost  # held until `synced`
        now = time.perf_counter()
        idle = self._idle_s + (now - self._idle_since if self.running() == 0 else 0.0)
        self._idle_s, self._idle_since = 0.0, now
        played = max(u.finished_at for u in units) - min(u.started_at for u in units)
        batch = Batch(
            [g for u in units for g in u.groups or []], units, now - t0, idle,
            now - self._last_batch, played,
        )  # fmt: skip
        self._last_batch = now
        return batch

    def _can_start(self) -> bool:
        """Whether another unit may yet start before this batch is taken."""
        more = bool(self.restart) or self.next_unit != self.last_unit
        return more and self._room()

    def _room(self) -> bool:
        """Whether one more unit's slots fit beside those held."""
        held = len(self.units) * self.cost + self._training
        return held + self.cost <= self.capacity

    def synced(self) -> None:
        """The trained batch's weights have landed: its slots are free for new groups."""
        self._training = 0
        self._changed.set()

    async def aclose(self) -> None:
        """Stop the producer and every unit still playing (their episodes are cancelled)."""
        tasks = [t for t in (self._producer, *self._tasks) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._producer = None

    # ----- resume ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The next fresh unit, and the units started but not trained (a resume plays them
        again, first): no group is lost or trained twice."""
        return {"next_unit": self.next_unit, "untrained": sorted([*self.units, *self.restart])}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.next_unit, self.restart = read_stream_state(state)

    def start_at(self, step: int) -> None:
        """Play from step `step`'s first unit (a checkpoint that holds no stream state)."""
        self.next_unit = step * self.units_per_step


def read_stream_state(state: Any) -> tuple[int, list[int]]:
    """A checkpoint's stream state as (next unit, untrained units); ValueError for anything
    else (a corrupted or foreign checkpoint)."""
    if not isinstance(state, dict):
        raise ValueError(f"the stream's state is a {type(state).__name__}, not a mapping")
    next_unit, untrained = state.get("next_unit", 0), state.get("untrained", [])
    numbers = [next_unit, *untrained] if isinstance(untrained, list) else None
    if numbers is None or not all(type(n) is int and n >= 0 for n in numbers):
        raise ValueError("the stream's next_unit and untrained must be whole numbers >= 0")
    if any(n >= next_unit for n in untrained):
        raise ValueError("the stream's untrained units must come before its next_unit")
    return next_unit, list(untrained)


def staleness_metrics(batch: Batch, version: int, eta: int, partial: bool) -> dict[str, float]:
    """How many versions behind `version` each trajectory's oldest turn is, as shares. Without
    partial rollouts a sample past eta is a bug in the stream: RunFailedError, before it
    trains; with them, carried turns may be older (the loss corrects or masks them)."""
    lags, spanning = [], 0
    for g in batch.groups:
        for t in g.trajectories:
            versions = {s.policy_version for s in t.steps}
            if versions:
                lags.append(version - min(versions))
                spanning += len(versions) > 1
    if lags and max(lags) > eta and not partial:
        raise RunFailedError(
            f"training step {version}: a trajectory is {max(lags)} versions old, past "
            f"max_staleness={eta}"
        )
    n = max(len(lags), 1)
    return {
        "async/staleness_mean": sum(lags) / n,
        **{f"async/staleness_{k}": lags.count(k) / n for k in range(eta + 1)},
        "async/staleness_over": sum(lag > eta for lag in lags) / n,
        "async/partial_share": spanning / n,
    }


def batch_metrics(
    stream: GroupStream, batch: Batch, step: int, t0: float, t1: float, t2: float
) -> dict[str, float]:
    """How stale `batch` was and who waited for whom (the trainer for groups, or the generator
    for weights): its learning began at `t0`, its sync at `t1` and ended at `t2`. A
    synchronous run records only its sync's time: its staleness would be a chart of zeros."""
    if stream.whole_steps:  # synchronous: nothing is stale and nobody waits on the other
        return {"time/sync_s": t2 - t1}
    step_s = batch.since_previous_s + t2 - t0
    return {
        **staleness_metrics(batch, step, stream.max_staleness, stream.partial),
        "async/groups": len(batch.groups),
        "async/trainer_idle": (batch.waited_s + (t2 - t1)) / max(step_s, 1e-9),
        "async/generator_idle": batch.generator_idle_s / max(batch.since_previous_s, 1e-9),
        "time/sync_s": t2 - t1,
    }
