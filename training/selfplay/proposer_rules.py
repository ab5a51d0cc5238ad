"""What a proposer earns for a valid task, from its solvers' solve rate: one rule per name,
picked from PROPOSER_RULES. A proposal that failed validation earns the run's penalties
instead (`selfplay.invalid_penalty`, `selfplay.format_penalty`); these rules see only valid
proposals.

- learnability (default; Absolute Zero's r_propose): 1 - solve rate, and 0 when the task was
  always or never solved. Pays for tasks at the edge of the solver's ability; a task nobody
  can solve earns nothing, so drifting toward impossible tasks does not pay. With the
  default penalties (-0.5 for a readable task a stage refused, -1 for one that cannot be
  read: Absolute Zero's format-aware penalties) it is Absolute Zero's reward whole.
- one_minus (Search Self-Play): 1 - solve rate. Pays for hardness alone; leans on validation
  (grounding) to keep tasks solvable.
- band(lo, hi): 1 when the solve rate is within [lo, hi], else 0: a target difficulty.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from toolgym.errors import ConfigError, lookup

PROPOSER = "proposer"
"""The trajectory score a proposer's reward is recorded under (and the reward source that
reads it)."""

ProposerRule = Callable[[float], float]
"""A valid task's solve rate in [0, 1] -> the proposer's reward."""


def learnability(rate: float) -> float:
    return 0.0 if rate in (0.0, 1.0) else 1.0 - rate


def one_minus(rate: float) -> float:
    return 1.0 - rate


def band(lo: float, hi: float) -> ProposerRule:
    if not 0.0 <= lo <= hi <= 1.0:
        raise ConfigError(f"band({lo}, {hi}): give 0 <= lo <= hi <= 1")

    def within(rate: float) -> float:
        return float(lo <= rate <= hi)

    return within


PROPOSER_RULES: dict[str, Callable[..., ProposerRule]] = {
    "learnability": lambda: learnability,
    "one_minus": lambda: one_minus,
    "band": band,
}
"""Each name's rule, made from the numbers written after it (band's lo and hi)."""
_CALL = re.compile(r"^\s*(\w+)\s*(?:\(([^()]*)\))?\s*$")


def proposer_rule(spec: str) -> ProposerRule:
    """The rule `spec` names: `learnability`, `one_minus` or `band(lo, hi)`."""
    match = _CALL.match(spec)
    if match is None:
        raise ConfigError(f"proposer reward {spec!r}: give a name, or band(lo, hi)")
    name, written = match.groups()
    make = lookup(PROPOSER_RULES, name, "proposer reward")
    wanted = "band(lo, hi), two numbers" if name == "band" else f"{name}, no arguments"
    try:
        numbers = [float(a) for a in written.split(",")] if written and written.strip() else []
    except ValueError:
        raise ConfigError(f"proposer reward {spec!r}: give {wanted}") from None
    try:
        return make(*numbers)
    except TypeError:  # too many or too few numbers
        raise ConfigError(f"proposer reward {spec!r}: give {wanted}") from None
