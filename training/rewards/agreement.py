"""How far a proxy reward agrees with the verified outcome, step by step.

A reward that is not the env's (or checker's) own verdict (an implicit PRM, a judge, what
an agent reported, a format or length term) is a proxy a policy can learn to please without
solving. Each step, every proxy's episode scores are set against the episodes' verified
success: the agreement is the chance that a solved episode scores above a failed one (the
area under the ROC curve: 0.5 is no agreement, 1 is perfect), with its 95% interval
(Hanley and McNeil, 1982). An outcome proxy's score is its sum over the episode; a process
proxy's is its mean over the episode's turns, so a long failure does not outscore a short
success by its length alone. A step whose episodes all succeeded, or all failed, has
nothing to agree on and logs the score alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from toolgym.agents.trajectory import Trajectory
from toolgym.intervals import Z95, mean_interval


def agreement(scores: Sequence[float], solved: Sequence[bool]) -> tuple[float, float, float]:
    """The chance a solved episode's score is above a failed one's (ties count a half), and
    its 95% interval."""
    wins = np.asarray([s for s, ok in zip(scores, solved, strict=True) if ok], dtype=float)
    losses = np.asarray([s for s, ok in zip(scores, solved, strict=True) if not ok], dtype=float)
    if not len(wins) or not len(losses):
        raise ValueError("agreement needs solved and failed episodes both")
    above = (wins[:, None] > losses[None, :]).sum() + 0.5 * (wins[:, None] == losses[None, :]).sum()
    pairs = len(wins) * len(losses)
    area = float(above / pairs)
    # the variance at the area pulled half a pair towards 0.5, so a perfect few pairs do not
    # claim an interval of no width
    a = float((above + 0.5) / (pairs + 1))
    q1, q2 = a / (2 - a), 2 * a**2 / (1 + a)
    variance = a * (1 - a) + (len(wins) - 1) * (q1 - a**2) + (len(losses) - 1) * (q2 - a**2)
    half = Z95 * math.sqrt(max(variance / pairs, 0.0))
    return area, max(0.0, area - half), min(1.0, area + half)


def agreement_metrics(
    trajectories: Sequence[Trajectory], proxies: dict[str, str]
) -> dict[str, float]:
    """For each proxy (its name -> what it scores, "outcome" or "process"): proxy/NAME/score,
    its mean episode score, with _low and _high (its 95% interval over the episodes), and
    where the step has solved and failed episodes both, proxy/NAME/agreement with _low and
    _high."""
    kept = [t for t in trajectories if not t.masked and t.steps]
    out: dict[str, float] = {}
    solved = [t.success for t in kept]
    if not kept:
        return out
    for name, scores in proxies.items():
        with np.errstate(over="ignore"):  # a sum past a float is left out below, not raised
            per_episode = [
                float(np.sum(v) if scores == "outcome" else np.mean(v))
                for v in ([s.rewards.get(name, 0.0) for s in t.steps] for t in kept)
            ]
        if not np.isfinite(per_episode).all():  # values each finite, summed past a float
            continue
        try:
            mean, low, high = mean_interval(per_episode)
        except OverflowError:  # scores this large average past a float too
            continue
        out[f"proxy/{name}/score"] = mean
        if math.isfinite(low):
            out |= {f"proxy/{name}/score_low": low, f"proxy/{name}/score_high": high}
        if any(solved) and not all(solved):
            area, low, high = agreement(per_episode, solved)
            out |= {
                f"proxy/{name}/agreement": area,
                f"proxy/{name}/agreement_low": low,
                f"proxy/{name}/agreement_high": high,
            }
    return out
