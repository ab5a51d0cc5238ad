"""Anchor states by similarity, for envs whose states rarely repeat exactly.

GiGPO compares the steps taken from one anchor state, and an env names that state with its
`state_key`. Where exact keys rarely recur (a code env keyed by its latest output, a search
env by the documents seen, a served env keyed by a hash of the observation), few steps have
another to compare with and GiGPO falls back to GRPO. With `advantage.anchor_similarity: s`
two states share an anchor group when the observations their steps acted on are at least
`s` alike: the Jaccard index of their sets of words, |A & B| / |A | B|.

The rule is greedy and keeps equal keys together: each distinct key, in the order the group
first meets it, joins the first earlier group whose first state is similar enough, and
otherwise starts one. It is not transitive (a state can be close to two groups that are not
close to each other), so a group is always compared through its first state, which makes the
result depend only on the order of the group's steps, never on chance.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import Any

WORD = re.compile(r"\w+")


def words(messages: Sequence[Any]) -> frozenset[str]:
    """The lower-cased words of the messages' text (images left out)."""
    from toolgym.agents.vision import text_only  # torch: the estimators' registry stays light

    text = " ".join(str(m.get("content") or "") for m in text_only(messages))
    return frozenset(WORD.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b|; two empty sets are the same state (1.0)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def similar_state_keys(trajectories: Sequence[Any], threshold: float) -> list[list[Hashable]]:
    """Per trajectory, the anchor key of each step: the key of the first state of its
    similarity group (its own key when no earlier state is `threshold` alike)."""
    exact = [[s.state_key for s in t.steps] for t in trajectories]
    seen: dict[Hashable, frozenset[str]] = {}
    for t, keys in zip(trajectories, exact, strict=True):
        if t.masked:  # left out of every statistic, so it draws no anchor either
            continue
        for turn, key in enumerate(keys):
            if key not in seen:  # the state step `turn` acted on: what came before it
                before = t.messages if turn == 0 else t.steps[turn - 1].observation
                seen[key] = words(before)
    firsts: list[Hashable] = []
    joined: dict[Hashable, Hashable] = {}
    for key, state in seen.items():
        match = next((f for f in firsts if jaccard(seen[f], state) >= threshold), None)
        if match is None:
            firsts.append(key)
        joined[key] = key if match is None else match
    return [[joined.get(key, key) for key in keys] for keys in exact]
