"""What a proposer earns for a task, from its solvers' solve rate: one rule per name, picked
from PROPOSER_REWARDS. A proposal that failed validation earns the run's penalty instead
(azr has its own); these rules see only valid proposals, or None for a malformed one.

- learnability (default; Absolute Zero's r_propose): 1 - solve rate, and 0 when the task was
  always or never solved. Pays for tasks at the edge of the solver's ability; a task nobody
  can solve earns nothing, so drifting toward impossible tasks does not pay.
- one_minus (Search Self-Play): 1 - solve rate. Pays for hardness alone; leans on validation
  (grounding) to keep tasks solvable.
- azr: learnability, but -0.5 when always or never solved and -1 when malformed: the ends
  are punished rather than ignored.
- band(lo, hi): 1 when the solve rate is within [lo, hi], else 0: a target difficulty.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from toolgym.errors import ConfigError, lookup

ProposerReward = Callable[[float | None], float | None]
"""solve rate in [0, 1] (None: malformed) -> reward, or None to take the run's penalty."""


def learnability(rate: float | None) -> float | None:
    if rate is None:
        return None
    return 0.0 if rate in (0.0, 1.0) else 1.0 - rate


def one_minus(rate: float | None) -> float | None:
    return None if rate is None else 1.0 - rate


def azr(rate: float | None) -> float | None:
    if rate is None:
        return -1.0
    return -0.5 if rate in (0.0, 1.0) else 1.0 - rate


def band(lo: float, hi: float) -> ProposerReward:
    if not 0.0 <= lo <= hi <= 1.0:
        raise ConfigError(f"band({lo}, {hi}): give 0 <= lo <= hi <= 1")

    def within(rate: float | None) -> float | None:
        return None if rate is None else float(lo <= rate <= hi)

    return within


PROPOSER_REWARDS: dict[str, Callable[..., ProposerReward]] = {
    "learnability": lambda: learnability,
    "one_minus": lambda: one_minus,
    "azr": lambda: azr,
    "band": band,
}
"""Each name's rule, made from the numbers written after it (band's lo and hi)."""
_CALL = re.compile(r"^\s*(\w+)\s*(?:\(([^()]*)\))?\s*$")


def proposer_reward(spec: str) -> ProposerReward:
    """The rule `spec` names: `learnability`, `one_minus`, `azr` or `band(lo, hi)`."""
    match = _CALL.match(spec)
    if match is None:
        raise ConfigError(f"proposer reward {spec!r}: give a name, or band(lo, hi)")
    name, written = match.groups()
    make = lookup(PROPOSER_REWARDS, name, "proposer reward")
    wanted = "band(lo, hi), two numbers" if name == "band" else f"{name}, no arguments"
    try:
        numbers = [float(a) for a in written.split(",")] if written and written.strip() else []
    except ValueError:
        raise ConfigError(f"proposer reward {spec!r}: give {wanted}") from None
    try:
        return make(*numbers)
    except TypeError:  # too many or too few numbers
        raise ConfigError(f"proposer reward {spec!r}: give {wanted}") from None
