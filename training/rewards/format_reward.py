"""Format terms: a value for each malformed turn (the env's `valid_action` was False) and for
each turn cut off at the token limit before it ended."""

from __future__ import annotations

from toolgym.agents.trajectory import Trajectory


class FormatReward:
    """Args:
    invalid: added for a turn whose action was malformed (e.g. -0.2).
    cut_off: added for a turn that ran into max_tokens (finish_reason "length").
    """

    def __init__(self, invalid: float = -0.1, cut_off: float = 0.0) -> None:
        self.invalid, self.cut_off = float(invalid), float(cut_off)

    def __call__(self, trajectory: Trajectory) -> list[float]:
        return [
            (0.0 if s.valid_action else self.invalid)
            + (self.cut_off if s.finish_reason == "length" else 0.0)
            for s in trajectory.steps
        ]
