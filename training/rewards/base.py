"""What a reward source is: a named function from a trajectory to one value per step.

The reward stage (stage.py) asks every configured source for its values, keeps them as the
step's named components (`Step.rewards`) and weights them into the per-step reward the
advantage estimators read. The env's own reward is one source among others, so a format
term, a judge's score or a learned process reward plugs in beside it without touching the
env or the estimators.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from toolgym.agents.trajectory import Trajectory, TrajectoryGroup

if TYPE_CHECKING:  # the registry (and with it the config) imports this module: no torch
    from toolgym.agents.models.device import Precision


class RewardSource(Protocol):
    def __call__(self, trajectory: Trajectory) -> list[float]:
        """One value per step of `trajectory` (masked trajectories are never scored)."""
        ...


@runtime_checkable
class PreparesScores(Protocol):
    """A source that sees the whole step before any trajectory is scored (a learned PRM
    scores and learns from the step at once, a judge batches its requests), and reports
    metrics of its own."""

    last_metrics: dict[str, float]

    async def prepare(
        self, groups: Sequence[TrajectoryGroup], returns: list[list[float]] | None
    ) -> None:
        """Runs on the run's loop: awaits its requests and continuations, and hands heavy
        compute (a model's forward and backward passes) to a thread."""
        ...


@runtime_checkable
class KeepsState(Protocol):
    """A source whose state survives a resume (saved in the run's checkpoint)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class HoldsResources(Protocol):
    """A source that holds something open (a judge's connections or model)."""

    async def aclose(self) -> None: ...


class Continuation(NamedTuple):
    """What a continuation came to: its outcome return (None where it was masked) and the
    env steps it took, the replayed ones included."""

    outcome: float | None
    env_steps: int


Continue = Callable[[Sequence[tuple[Trajectory, int, int]]], Awaitable[list[list[Continuation]]]]
"""For each (trajectory, steps, count): `count` continuations of the trajectory after its
first `steps` steps, played by the current policy."""


@dataclass(frozen=True)
class RunContext:
    """What a source that needs the run itself is given (`needs_context`): where the policy
    started and on what device (a learned PRM's model), the run's length (its schedule), and
    a way to play continuations (Monte-Carlo step values)."""

    model: str
    precision: Precision
    steps: int
    continue_from: Continue | None = None
