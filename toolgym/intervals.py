"""95% intervals for the figures a learning claim rests on: a success rate over episodes
(Wilson's interval, right at 0% and 100% and on few episodes, where the normal one is not;
over items played several times each, on as many episodes as the repeats are worth), a
mean over seeds (Student's t), and the difference between two policies played on the same
items (paired, so the items' own difficulty cancels)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959964
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
       2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
"""Student's t, two-sided 95%, for 1 to 30 degrees of freedom (beyond: the normal's)."""


def t95(degrees: int) -> float:
    return T95[degrees - 1] if degrees <= len(T95) else Z95


def wilson(successes: int, n: int) -> tuple[float, float]:
    """The 95% interval of a rate seen as `successes` of `n` (0 to 1 when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    return _wilson(successes / n, n)


def item_wilson(outcomes: Sequence[Sequence[float]]) -> tuple[float, float]:
    """The 95% interval of a success rate over items each played one or more times (each
    item's outcomes, 1 for a success): Wilson's, on the episodes' count divided by the
    repeats' design effect. Two plays of one item agree more than plays of two items do, so a
    rate over few items stays as wide as those items leave it however often each is replayed;
    items played once each give Wilson's own interval."""
    outcomes = [o for o in outcomes if o]
    items, plays = len(outcomes), sum(len(o) for o in outcomes)
    successes = sum(sum(o) for o in outcomes)
    if plays == items:
        return wilson(round(successes), plays)
    p = successes / plays
    # The ratio estimator's variance over items (a cluster sample), and the episodes that
    # would give a plain rate the same variance: from one per item to one per play.
    spread = sum((sum(o) - p * len(o)) ** 2 for o in outcomes)
    between = spread * items / ((items - 1) * plays**2) if items > 1 else 0.0
    if between > 0:
        effective = p * (1 - p) / between
    else:  # no spread between items: at 0% or 100% (or one item) only the items vouch
        # for the rate; every item at the same rate between, every play counts
        effective = plays if 0 < p < 1 and items > 1 else items
    return _wilson(p, min(max(effective, items), plays))


def _wilson(p: float, n: float) -> tuple[float, float]:
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean of `values` (one per seed, say) and its 95% interval; a single value has no
    spread to measure, so its interval is unbounded."""
    if not values:
        raise ValueError("no values to average")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, -math.inf, math.inf
    half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def paired_difference(
    after: Sequence[float], before: Sequence[float]
) -> tuple[float, float, float]:
    """The mean of `after[i] - before[i]` over items played by both policies, with its 95%
    interval."""
    if len(after) != len(before):
        raise ValueError(f"{len(after)} outcomes against {len(before)}: pair them by item")
    return mean_interval([a - b for a, b in zip(after, before, strict=True)])


@dataclass(frozen=True)
class Paired:
    """Per-item success rates of the items both evaluations scored, and what only one did."""

    before: list[float]
    after: list[float]
    only_before: int
    only_after: int


def pair(before: dict[str, float], after: dict[str, float]) -> Paired:
    """The items both scored, in one order, with the counts each scored alone."""
    shared = sorted(before.keys() & after.keys())
    return Paired(
        [before[i] for i in shared],
        [after[i] for i in shared],
        len(before.keys() - after.keys()),
        len(after.keys() - before.keys()),
    )


def percent(rate: float, low: float, high: float) -> str:
    """`12.5% (7.7-19.5)`: a rate and its interval, in percent."""
    return f"{rate:.1%} ({100 * low:.1f}-{100 * high:.1f})"
