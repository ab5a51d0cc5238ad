"""Progress of the long commands (train, eval, sft, pretrain, index build, simulator-sft,
sandbox build-image): a bar on a terminal, and plain lines off one, so a log file shows the
work is alive and how far it got."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from toolgym.cli.show import console
from toolgym.training.run.log import clock, step_line

BAR_EVERY_S = 0.1
"""A bar is redrawn at most this often (its figures are computed no more often)."""


class Ticker:
    """`advance(done, **fields)` moves a bar on a terminal; off one it prints a line at most
    every `every_s` seconds and at the last unit. `say(text)` prints a line either way."""

    def __init__(self, label: str, total: int | None, every_s: float = 10.0) -> None:
        """`total` None: a count with no end known (no bar, no ETA)."""
        self.label, self.every_s = label, every_s
        self.total: int | None = None if total is None else max(int(total), 1)
        self.started = time.perf_counter()
        self.last_line = -float("inf")
        self.bar: Progress | None = None
        self.task: Any = None

    def __enter__(self) -> Self:
        if console.is_terminal:
            columns = (TextColumn(escape(self.label)), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[shown]}"), TimeElapsedColumn(),
                       TextColumn("eta"), TimeRemainingColumn())  # fmt: skip
            self.bar = Progress(*columns, console=console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total, shown="")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.bar is not None:
            self.bar.stop()

    def advance(self, done: int, shown: str | Callable[[], str] = "") -> None:
        """`shown`: the running figures, e.g. `loss 0.123`, or what computes them: it is
        called only when they are drawn (a bar at most BAR_EVERY_S, a line every_s)."""
        now = time.perf_counter()
        last = self.total is not None and done >= self.total
        every = BAR_EVERY_S if self.bar is not None else self.every_s
        if now - self.last_line < every and not last:
            return
        self.last_line = now
        figures = shown() if callable(shown) else shown
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=self.total, shown=figures)
            return
        tail = f"  {figures}" if figures else ""
        if self.total is None:
            self.say(f"{self.label} {done}{tail}  {self.elapsed()}")
        else:
            self.say(
                f"{self.label} {done}/{self.total}{tail}  {self.elapsed()}"
                f"  eta {clock(self.eta_s(done))}"
            )

    def say(self, text: str) -> None:
        console.print(text, markup=False, soft_wrap=True)

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started

    def elapsed(self) -> str:
        return clock(self.elapsed_s())

    def eta_s(self, done: int) -> float | None:
        if done <= 0 or self.total is None:
            return None
        return self.elapsed_s() / done * max(self.total - done, 0)


HEARTBEAT_S = 30.0
"""Within a long step, a line at most this often says how many episodes it has played."""


class TrainSteps(Ticker):
    """A training run's progress: one line per step (step, success, reward, valid calls,
    loss, KL, the share of later turns whose anchor state recurs in their group, seconds,
    ETA) on a terminal or off it, and a bar as well on a terminal. A step
    that runs long (text games play minutes a step) says every HEARTBEAT_S how many episodes
    it has played (`episode`, the trainer's on_episode), so the run is seen to be alive."""

    def __init__(self, total: int, heartbeat_s: float = HEARTBEAT_S) -> None:
        super().__init__("training", total)
        self.first: int | None = None
        """The first step this process plays (counted from 1; a resumed run starts later)."""
        self.previous = self.started
        self.heartbeat_s = heartbeat_s
        self.played = 0
        self.heard = self.started
        self.step_shown = 0

    def episode(self, trajectory: Any) -> None:
        self.played += 1
        now = time.perf_counter()
        if now - self.heard < self.heartbeat_s:
            return
        self.heard = now
        self.say(
            f"step {self.step_shown + 1}/{self.total}: {self.played} "
            f"episode{'s' if self.played != 1 else ''} played so far, "
            f"{clock(now - self.previous)} into the step"
        )

    def __call__(self, record: dict[str, Any]) -> None:
        now = time.perf_counter()
        step = int(record["step"])  # counted from 1
        if step == 0:  # the start's evaluation: no step to pace by; the pace starts after it
            self.say(step_line(record, self.total or 0, now - self.previous, None))
            self.started = self.previous = self.heard = now
            return
        if self.first is None:
            self.first = step
        done = step + 1 - self.first
        eta = (now - self.started) / max(done, 1) * max((self.total or 0) - step, 0)
        self.say(step_line(record, self.total or 0, now - self.previous, eta))
        self.previous = self.heard = now
        self.played, self.step_shown = 0, step
        if self.bar is not None:
            self.bar.update(self.task, completed=step)


class Stages:
    """Progress through named stages (`stages(stage, done, total)`): a ticker per stage,
    which says the stage's name when it starts; a total of None counts without a bar."""

    def __init__(self) -> None:
        self.stage: str | None = None
        self.ticker: Ticker | None = None

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.ticker is not None:
            self.ticker.__exit__(None, None, None)

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if stage != self.stage:
            self.__exit__()
            self.stage = stage
            self.ticker = Ticker(stage, total).__enter__()
        assert self.ticker is not None
        self.ticker.advance(done)
