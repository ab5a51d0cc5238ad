"""Generated tasks split by content: an item (what the env's generator makes of a seed, named
by the env's own `item_of`) belongs to exactly one split, decided by a hash of the item, so no
seed of any split can bring a train item into eval or test.

Train task i is seed i when train owns that seed's item, else the first seed of a hashed probe
sequence of i whose item it owns: any index is reached at once (pretraining corpora start at a
random one), and train keeps repeats, as the generator makes them. Eval and test walk their
own ranges of seeds (as `SeedTasks`: split k from k * 10^9) and keep each item once, so "128
held-out episodes" are 128 distinct items, and a split whose space runs out says how many it
holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from toolgym.envs.tasks import (
    SPLITS,
    SeedTasks,
    Task,
    TaskDraw,
    TaskSource,
    check_split,
    content_key,
)
from toolgym.errors import ConfigError

HELD_OUT = 0.2
"""The share of all items held out, half for eval and half for test; train owns the rest. A
small space may hold out more, so that its held-out rates have tighter intervals."""

SCAN_LIMIT = 5_000
"""Seeds a held-out split walks past without finding a new item before it counts as spent
(a small space, e.g. 2x2 mazes); also the most probes for one train task."""


def check_held_out(held_out: float) -> float:
    """`held_out`, if it is a share in (0, 1): a ConfigError in one line otherwise."""
    if isinstance(held_out, bool) or not isinstance(held_out, int | float):
        raise ConfigError(f"held_out {held_out!r}: give the held-out share as a number in (0, 1)")
    if not 0.0 < held_out < 1.0:
        raise ConfigError(f"held_out {held_out!r}: the held-out share must lie in (0, 1)")
    return held_out


def split_of(item: str, held_out: float = HELD_OUT) -> str:
    """The split that owns `item`: its hash's place in [0, 1) against the held-out shares
    (eval below half of `held_out`, test below all of it)."""
    place = int(hashlib.sha256(item.encode("utf-8", "surrogatepass")).hexdigest()[:12], 16)
    place_01 = place / 16**12
    if place_01 < held_out / 2:
        return "eval"
    return "test" if place_01 < held_out else "train"


class ContentTasks(TaskSource):
    """Task i of a split is {"seed": s}: for train, seed i or a probe of i whose item train
    owns; for eval and test, the split's i-th seed that opens a new item it owns.

    Args:
        item_of: seed -> the item it generates (a string: what identifies the task, e.g. a
            maze's layout, start and goal); the same seed always gives the same item.
        held_out: the share of all items held out, half for eval and half for test.
    """

    def __init__(self, item_of: Callable[[int], str], held_out: float = HELD_OUT) -> None:
        self.item_of, self.held_out = item_of, check_held_out(held_out)
        walked = [split for split in SPLITS if split != "train"]  # train is reached at once
        self._seeds: dict[str, list[int]] = {split: [] for split in walked}
        self._next: dict[str, int] = {split: 0 for split in walked}  # the next seed offset
        self._seen: dict[str, set[str]] = {split: set() for split in walked}
        self._spent: dict[str, bool] = {split: False for split in walked}

    @classmethod
    def of_generator(cls, generate: Callable[[int], Mapping[str, Any]]) -> ContentTasks:
        """For an env whose generated task is its item: the task's fields (its "seed" aside,
        which only names it) are what the policy is asked."""
        return cls(
            lambda seed: content_key({k: v for k, v in generate(seed).items() if k != "seed"})
        )

    def size(self, split: str) -> int | None:
        """None while a split may hold more; a spent held-out split's count."""
        check_split(split)
        return len(self._seeds[split]) if self._spent.get(split) else None

    def task(self, split: str, index: int) -> Task:
        check_split(split)
        if not 0 <= index < SeedTasks.SPAN:
            raise ConfigError(f"task index {index} of split '{split}' is outside [0, 10^9)")
        if split == "train":
            return {"seed": self._train_seed(index)}
        if not self._reach(split, index + 1):
            raise ConfigError(
                f"the {split} split holds {len(self._seeds[split])} distinct items, not task "
                f"{index}: these settings generate too few items to hold more out"
            )
        return {"seed": self._seeds[split][index]}

    def head(self, split: str, n: int) -> list[TaskDraw]:
        check_split(split)
        if split == "train":
            return [self.draw(split, i) for i in range(n)]
        self._reach(split, n)
        return [self.draw(split, i) for i in range(min(n, len(self._seeds[split])))]

    def _train_seed(self, index: int) -> int:
        """Seed `index` if train owns its item, else the first probe of `index` that it owns
        (probes lie in the upper half of the train range)."""
        half = SeedTasks.SPAN // 2
        for attempt in range(SCAN_LIMIT):
            digest = hashlib.sha256(f"train-{index}-{attempt}".encode()).hexdigest()
            seed = index if attempt == 0 else half + int(digest[:12], 16) % half
            if split_of(self._item(seed, "train"), self.held_out) == "train":
                return seed
        raise ConfigError(
            f"no training item in {SCAN_LIMIT} seeds: these settings generate too few items "
            "for any to be left to train on"
        )

    def _item(self, seed: int, split: str) -> str:
        try:
            return self.item_of(seed)
        except ConfigError:
            raise
        except Exception as exc:  # a generator's bug or a setting it cannot take
            raise ConfigError(
                f"generating task {seed} of split '{split}' raised {type(exc).__name__}: {exc}"
            ) from None

    def _reach(self, split: str, n: int) -> bool:
        """Walk `split`'s seeds until it has `n` tasks; False when it runs out first."""
        seeds, seen = self._seeds[split], self._seen[split]
        base, fruitless = SPLITS.index(split) * SeedTasks.SPAN, 0
        while len(seeds) < n and not self._spent[split]:
            offset = self._next[split]
            if offset >= SeedTasks.SPAN or fruitless >= SCAN_LIMIT:
                self._spent[split] = True
                break
            self._next[split] = offset + 1
            item = self._item(base + offset, split)
            if split_of(item, self.held_out) == split and item not in seen:
                seeds.append(base + offset)
                seen.add(item)
                fruitless = 0
            else:
                fruitless += 1
        return len(seeds) >= n
