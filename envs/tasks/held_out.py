"""Items, as a held-out split must keep them apart: an item is what the policy sees when an
episode opens, hashed. Two seeds (or tasks) that open alike are one item, so "disjoint by
seed" is not "held out" where a generator has few distinct items; counting items by what
the policy sees is what tells them apart (`toolgym check`, bench/held_out_items.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from toolgym.envs.tasks import TaskSource


def opening_item(seen: Any) -> str:
    """The item of an episode whose opening (observation, messages) is `seen`."""
    text = json.dumps(seen, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


async def split_items(
    env: Any, train: int, held: int, until: float | None = None, source: TaskSource | None = None
) -> tuple[list[str], list[str]]:
    """The items of the first `train` train draws and `held` eval draws of `env`'s tasks (or
    of `source`, one of them), reset on `env` (a ToolEnv). The two splits' draws interleave in
    proportion, so a deadline (loop time `until`; an env with a browser resets slowly) cuts
    both alike and never leaves eval items compared with no train items at all."""
    source = source or env.task_source()
    draws = [("eval", i / held, d) for i, d in enumerate(source.head("eval", held))]
    draws += [("train", i / train, d) for i, d in enumerate(source.head("train", train))]
    draws.sort(key=lambda draw: draw[1])  # stable: at a tie the eval draw first
    loop = asyncio.get_running_loop()
    items: dict[str, list[str]] = {"train": [], "eval": []}
    for split, _, draw in draws:
        if until is not None and loop.time() > until:
            break
        obs, _ = await env.areset(seed=draw.seed, options={"task": draw.task})
        items[split].append(opening_item(obs))
    return items["train"], items["eval"]


def shared_share(held: list[str], train: list[str]) -> float:
    """The share of `held` draws whose item some `train` draw opens as too."""
    drawn = set(train)
    return sum(item in drawn for item in held) / len(held) if held else 0.0
