"""Which env each task slot of a training step goes to, and which task it draws.

A step's n slots sit on a regular grid, u_j = (j + o_k) / n, shifted by an offset o_k =
frac(k x (sqrt(5) - 1) / 2) that moves each step along a low-discrepancy sequence; slot j goes
to the env whose share of [0, 1) holds u_j. So every step gives each env its share of the n
tasks to within one (exactly, when n x weight is whole), the remainders rotate fairly from step
to step, and the allotment is a pure function of the step (a resumed run draws the same
tasks). The slot draws task g of that env's train split, g the slot's number in the run:
generated envs get distinct seeds, task lists run through shuffled passes.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

GOLDEN = (5**0.5 - 1) / 2


def allot(weights: Sequence[float], step: int, slots: int) -> list[int]:
    """The env index of each of a step's `slots` slots."""
    total = float(sum(weights))
    edges = list(itertools.accumulate(w / total for w in weights))
    offset = (step * GOLDEN) % 1.0
    return [
        min(bisect.bisect_right(edges, (j + offset) / slots), len(weights) - 1)
        for j in range(slots)
    ]


def step_slots(run_seed: int, step: int, tasks_per_step: int) -> list[int]:
    """The slot numbers of a training step (disjoint across steps of a run)."""
    first = run_seed * 10_007 + step * tasks_per_step
    return list(range(first, first + tasks_per_step))
