"""Warnings a run gives while it trains, each with what to try: a step whose groups carry no
signal (every rollout of a task earned the same, so the update changes nothing), a run
whose rollout success has not risen, a valid-call collapse and a gamed reward
(credit_alarms.py). The run log writes them and the console shows them (run/log.py); they
read only the steps' records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgym.training.run.credit_alarms import CallCollapse, GamedReward

NO_SIGNAL_EVERY = 10
"""After a step with no signal is reported, the next is reported no sooner than this many
steps later (with the count since)."""
MOSTLY_EQUAL = 0.75
"""A step where at least this share of the groups carry no signal is reported once a run."""
CEILING = 0.95
"""Rollout success this high from the start leaves nothing to rise to: no not-learning warning."""


@dataclass
class Settings:
    """What the advice names (the run's own values)."""

    steps: int
    lr: float
    rollouts_per_task: int
    run_dir: str
    warm_start: str = "toolgym sft"
    """The command that warm-starts this run's policy (`toolgym warm-start` for an agent)."""
    warm_started: bool = False
    """The run's model was trained on this env already (a warm start, or an earlier run):
    telling its user to warm-start it would send them back where they came from."""
    selfplay: bool = False
    """The tasks are the policy's own proposals, not the env's."""
    centred: bool = False
    """The run centres its turns' advantages already (`advantage.centre_turns`)."""


@dataclass
class Advisor:
    settings: Settings
    success: list[float] = field(default_factory=list)
    silent_steps: list[int] = field(default_factory=list)
    last_silent_told: int | None = None
    mostly_told: bool = False
    not_learning_told: bool = False
    collapse: CallCollapse = field(init=False)
    gamed: GamedReward = field(init=False)

    def __post_init__(self) -> None:
        self.collapse = CallCollapse(self.settings.lr, self.settings.centred)
        self.gamed = GamedReward(max(3, self.settings.steps // 10))

    @property
    def window(self) -> int:
        """The steps averaged at each end when asking whether rollout success rose."""
        return max(5, self.settings.steps // 8)

    def read(self, record: dict[str, Any]) -> list[str]:
        """The warnings step `record["step"]`'s record calls for (none for the start's
        evaluation, step 0)."""
        step = int(record["step"])
        if step < 1:
            return []
        if isinstance(record.get("rollout/success"), int | float):
            self.success.append(float(record["rollout/success"]))
        found = [self.collapse.read(record), *self.gamed.read(record)]
        found += [self.no_signal(step, record), self.not_learning(step)]
        return [w for w in found if w]

    def no_signal(self, step: int, record: dict[str, Any]) -> str | None:
        groups = record.get("signal/groups", 0)
        equal = record.get("signal/equal_groups", 0)
        if not groups or not equal:
            return None
        succeeded = int(record.get("signal/equal_succeeded", 0))
        failed = int(equal) - succeeded
        if equal == groups:
            self.silent_steps.append(step)
            told = self.last_silent_told
            if told is not None and step - told < NO_SIGNAL_EVERY:
                return None
            since = [s for s in self.silent_steps if told is None or s > told]
            self.last_silent_told = step
            count = f" ({len(since)} such steps since step {since[0]})" if len(since) > 1 else ""
            return (
                f"step {step}: none of its {int(groups)} groups carries a learning signal{count}: "
                f"every rollout of a task earned the same ({failed} all failed, {succeeded} all "
                f"succeeded), so the update changes nothing. {self.remedy(failed, succeeded)}"
            )
        if equal / groups >= MOSTLY_EQUAL and not self.mostly_told:
            self.mostly_told = True
            return (
                f"step {step}: {int(equal)} of its {int(groups)} groups carry no learning signal "
                f"({failed} all failed, {succeeded} all succeeded); only the rest teach the "
                f"update. {self.remedy(failed, succeeded)}"
            )
        return None

    def remedy(self, failed: int, succeeded: int) -> str:
        """What to try, from what the run already did: the same groups mean another thing
        after a warm start, and in self-play, where the policy proposes its own tasks."""
        s = self.settings
        more = (
            f"raise rollout.rollouts_per_task (now {s.rollouts_per_task}) so each group has "
            "more chances to differ"
        )
        if failed < succeeded:
            return f"The tasks are too easy for the policy: make them harder, or {more}."
        if s.selfplay:
            return (
                "The proposed tasks are too hard for the solver: the proposer is paid for tasks "
                "the solver solves some of the time, so they should ease as it learns; if they "
                f"do not, {more}."
            )
        if s.warm_started:
            return (
                "The tasks are too hard for the policy, warm start and all (its model was "
                "trained on this env already): ease the env's settings, warm-start it on more "
                f"or better demonstrations ({s.warm_start}), or {more}."
            )
        return (
            "The tasks are too hard for the policy: warm-start it on demonstrations "
            f"({s.warm_start}), ease the env's settings, or {more}."
        )

    def not_learning(self, step: int) -> str | None:
        """Once a run: rollout success over the last `window` steps no higher than over the
        first (checked every `window` steps from 2 windows in)."""
        w = self.window
        if self.collapse.told or self.gamed.warned:  # those say why already
            return None
        if self.not_learning_told or len(self.success) < 2 * w or step % w:
            return None
        first, last = self.success[:w], self.success[-w:]
        before, after = sum(first) / w, sum(last) / w
        if after > before or before >= CEILING:
            return None
        self.not_learning_told = True
        s = self.settings
        return (
            f"step {step}: the run is not learning yet: rollout success was {before:.3f} over "
            f"steps 1-{w} and is {after:.3f} over steps {step - w + 1}-{step}. Look at what the "
            f"policy does (toolgym rollouts show {s.run_dir}); if its tool calls are often "
            f"invalid, warm-start it{' longer' * s.warm_started} ({s.warm_start}); otherwise "
            f"try optim.lr above {s.lr:g} or "
            f"more rollouts per task (rollout.rollouts_per_task, now {s.rollouts_per_task})."
        )
