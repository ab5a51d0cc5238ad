"""Random strings of the kinds an agent must copy: names, ids, numbers, codes, quoted phrases.

Made-up syllable words rather than a word list, so nothing can be answered from memory and
every span must be read from the context. Every draw comes from the caller's `random.Random`.
"""

from __future__ import annotations

import random
import string

from toolgym.envs.search.world import CODAS, ONSETS, VOWELS

_FIELDS = [
    "id",
    "name",
    "city",
    "owner",
    "status",
    "code",
    "email",
    "phone",
    "price",
    "color",
    "team",
    "room",
    "date",
    "country",
    "label",
    "path",
    "user",
    "score",
    "model",
    "version",
]


class Strings:
    """Draws strings from one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def syllable(self) -> str:
        r = self.rng
        return r.choice(ONSETS) + r.choice(VOWELS) + r.choice(CODAS)

    def word(self) -> str:
        return "".join(self.syllable() for _ in range(self.rng.randint(1, 3)))

    def name(self) -> str:
        """A capitalised one- to three-word name, e.g. "Trei Voskar"."""
        return " ".join(self.word().capitalize() for _ in range(self.rng.randint(1, 3)))

    def number(self) -> str:
        r = self.rng
        kind = r.randrange(4)
        if kind == 0:
            return str(r.randint(0, 99))
        if kind == 1:
            return str(r.randint(100, 99_999))
        if kind == 2:
            return f"{r.randint(0, 9999)}.{r.randint(0, 99):02d}"
        return str(r.randint(1000, 2099))

    def ident(self) -> str:
        """An id or code: "usr_4821", "K7F-Q2", "a3f9c1", "order-00318"."""
        r = self.rng
        kind = r.randrange(4)
        if kind == 0:
            return f"{self.syllable()}_{r.randint(0, 9999)}"
        if kind == 1:
            return "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(3)) + (
                "-" + "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(2))
            )
        if kind == 2:
            return "".join(r.choice("0123456789abcdef") for _ in range(r.randint(4, 8)))
        return f"{self.word()}-{r.randint(0, 99999):05d}"

    def phrase(self) -> str:
        return " ".join(self.word() for _ in range(self.rng.randint(2, 6)))

    def value(self) -> str:
        """Any of the above: what a tool result's field might hold."""
        kind = self.rng.randrange(5)
        if kind == 0:
            return self.name()
        if kind == 1:
            return self.number()
        if kind == 2:
            return self.ident()
        if kind == 3:
            return f'"{self.phrase()}"'
        return self.word()

    def field(self) -> str:
        return self.rng.choice(_FIELDS) if self.rng.random() < 0.6 else self.word()

    def sentence(self) -> str:
        words = [self.word() for _ in range(self.rng.randint(4, 12))]
        if self.rng.random() < 0.5:
            words.insert(self.rng.randrange(len(words)), self.value())
        return " ".join(words).capitalize() + self.rng.choice(".!?.")
