"""The values a generated database's rows name (its places, kinds and states), from one of
three sets:

- "domain": the domain's own few words (domains.py): Lisbon, books, shipped. A policy can
  learn every question these make by heart.
- "wide": made-up words from a space of hundreds of thousands ("Zendondros", "farsis"), drawn
  afresh for each database, so that the only way to write a query that names the question's
  value is to copy it from the question.
- "held_out": the same kind of words, from the part of that space that "wide" never draws:
  a word's own hash puts it on one side, so a policy trained on "wide" databases and
  evaluated on "held_out" ones has never seen one of their values, whatever the seeds.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from toolgym.envs.sql.domains import Domain

VALUE_SETS = ("domain", "wide", "held_out")
ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr",
          "gl", "kr", "st", "tr")  # fmt: skip
VOWELS = ("a", "e", "i", "o", "u")
CODAS = ("", "l", "m", "n", "r", "s")
HELD_OUT_SHARE = 5
"""One word in this many belongs to the held-out side."""


@dataclass(frozen=True)
class Vocabulary:
    """The values one database's rows are drawn from."""

    places: tuple[str, ...]
    kinds: tuple[str, ...]
    states: tuple[str, ...]

    def columns(self) -> tuple[tuple[str, ...], ...]:
        return self.places, self.kinds, self.states


def is_held_out(word: str) -> bool:
    """Whether `word` is on the held-out side of the made-up words (by its hash alone)."""
    return hashlib.sha256(word.lower().encode()).digest()[0] % HELD_OUT_SHARE == 0


def vocabulary(domain: Domain, values: str, seed: str) -> Vocabulary:
    """The values of a database of `domain` with value set `values`; the wide sets are drawn
    from `seed`, with as many places, kinds and states as the domain has."""
    if values == "domain":
        return Vocabulary(domain.places, domain.kinds, domain.states)
    rng = random.Random(f"toolgym-sql-values-{seed}")
    held_out = values == "held_out"
    taken: set[str] = set()

    def words(count: int, syllables: int, capital: bool) -> tuple[str, ...]:
        drawn: list[str] = []
        while len(drawn) < count:
            word = "".join(_syllable(rng) for _ in range(syllables))
            word = word.capitalize() if capital else word
            if word.lower() not in taken and is_held_out(word) == held_out:
                taken.add(word.lower())
                drawn.append(word)
        return tuple(drawn)

    return Vocabulary(
        words(len(domain.places), 3, capital=True),
        words(len(domain.kinds), 2, capital=False),
        words(len(domain.states), 2, capital=False),
    )


def _syllable(rng: random.Random) -> str:
    return rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
