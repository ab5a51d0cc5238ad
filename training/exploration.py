"""Whether a step's groups explore, and whether they carry anything to learn from.

Group-relative methods learn only from differences within a group: a group whose rollouts
all did the same thing, or all earned the same, gives the update nothing. These figures say
so per step (the run log warns on them, run/log.py):

    explore/distinct_per_group   distinct action sequences per group, over its size (1: every
                                 rollout differed; 1/G: all G did exactly the same)
    explore/repeated_actions     the share of turns that repeat an earlier turn of their
                                 episode: the same action in the same state (a loop)
    signal/groups                the groups trained on
    signal/equal_groups          of them, those whose advantages are all zero (no signal)
    signal/equal_succeeded       of those, the ones where every episode succeeded (too easy;
                                 the rest all failed alike: too hard)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolgym.agents.trajectory import Trajectory, TrajectoryGroup

NO_SIGNAL = 1e-8
"""An advantage this small moves nothing."""


def exploration_metrics(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Over the groups' unmasked episodes with turns."""
    distinct, repeated, turns = [], 0, 0
    for group in groups:
        played = [t for t in group.trajectories if not t.masked and t.steps]
        if played:
            sequences = {tuple(s.action for s in t.steps) for t in played}
            distinct.append(len(sequences) / len(played))
        for t in played:
            seen: set[tuple[object, str]] = set()
            for s in t.steps:
                turn = (s.state_key, s.action)
                repeated += turn in seen
                seen.add(turn)
            turns += len(t.steps)
    if not distinct:
        return {}
    return {
        "explore/distinct_per_group": float(np.mean(distinct)),
        "explore/repeated_actions": repeated / max(turns, 1),
    }


def signal_metrics(
    groups: Sequence[TrajectoryGroup],
    trained: Sequence[Trajectory],
    advantages: Sequence[np.ndarray],
) -> dict[str, float]:
    """`trained` and `advantages`: the step's trained episodes and their per-step advantages
    (the trainer's), matched to their groups by identity."""
    by_episode = {id(t): a for t, a in zip(trained, advantages, strict=True)}
    count = equal = succeeded = 0
    for group in groups:
        members = [t for t in group.trajectories if id(t) in by_episode]
        if group.untrained is not None or not members:
            continue
        count += 1
        if all(np.all(np.abs(by_episode[id(t)]) <= NO_SIGNAL) for t in members):
            equal += 1
            succeeded += all(t.success for t in members)
    return {
        "signal/groups": float(count),
        "signal/equal_groups": float(equal),
        "signal/equal_succeeded": float(succeeded),
    }
