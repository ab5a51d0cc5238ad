"""Copying: passages that come back later word for word, at any distance.

Once the first words of a repeated passage are seen, the rest is predictable only by finding
its first occurrence and reading on from there: what induction heads do, and what writing a
name or an id read from a tool result needs. Whole passages repeat (not only short spans), so
a large share of each document's tokens teaches it.
"""

from __future__ import annotations

from toolgym.agents.models.corpus.strings import Strings

_LEADS = ("Again:\n", "Repeat:\n", "Copy:\n", "Once more:\n", "", "", "")


def document(strings: Strings, chars: int) -> str:
    rng = strings.rng
    passages: list[str] = []
    parts: list[str] = []
    size = 0
    while size < chars:
        if passages and rng.random() < 0.5:
            text = rng.choice(passages)
            if rng.random() < 0.5:  # a tail of it, to copy from the middle of a passage
                lines = text.split("\n")
                text = "\n".join(lines[rng.randrange(len(lines)) :])
            part = rng.choice(_LEADS) + text
        else:
            part = passage(strings, rng.randint(40, 400))
            passages.append(part)
        parts.append(part)
        size += len(part) + 1
    return "\n".join(parts)


def passage(strings: Strings, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        line = (
            strings.sentence()
            if strings.rng.random() < 0.4
            else f"{strings.field()}: {strings.value()}"
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)
