"""Learning-rate schedules: linear warm-up over `warmup_steps` training steps, then constant,
linear or cosine decay to `min_lr_ratio` x lr at the last step. A pure function of the step,
so a resumed run needs no scheduler state."""

from __future__ import annotations

import math
from collections.abc import Callable

DECAYS: dict[str, Callable[[float], float]] = {
    "constant": lambda progress: 1.0,
    "linear": lambda progress: 1.0 - progress,
    "cosine": lambda progress: 0.5 * (1.0 + math.cos(math.pi * progress)),
}


def lr_factor(step: int, total: int, schedule: str, warmup: int, min_ratio: float) -> float:
    """The multiplier of the base learning rate at training step `step` of `total`."""
    if step < warmup:
        return (step + 1) / (warmup + 1)
    if schedule == "constant":
        return 1.0
    span = max(total - 1 - warmup, 1)
    progress = min(max((step - warmup) / span, 0.0), 1.0)
    return min_ratio + (1.0 - min_ratio) * DECAYS[schedule](progress)
