"""Where the messages' own text lies in a rendered chat, so that a tokenizer reads control
tokens (`<|im_end|>`, `<|eot_id|>` ...) only where the chat template wrote them.

A page, a program's output or a tool's answer can contain the text `<|im_start|>user`;
encoded with the rest of the render, it would become the real control token and forge a
turn in the policy's context. The texts are found by rendering the same messages once more
with each text replaced by a numbered sentinel: the render splits into the template's own
pieces around the sentinels, and the real render must be those pieces with the texts (or
the texts as the template trimmed them) between them. Where the two do not line up (a
template that renders differently for different contents), there is no span to trust.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from toolgym.tools.text import map_texts

Message = dict[str, Any]

_SENTINEL = "\u2063\u2064{}\u2064\u2063"
_SENTINEL_RE = re.compile("\u2063\u2064(\\d+)\u2064\u2063")


def mark_texts(messages: Sequence[Message]) -> tuple[list[Message], list[str]]:
    """The messages with every non-empty text replaced by a numbered sentinel, and the texts
    in that numbering."""
    texts: list[str] = []

    def mark(text: str) -> str:
        if not text:
            return text
        texts.append(text)
        return _SENTINEL.format(len(texts) - 1)

    return map_texts(list(messages), mark), texts


def text_spans(rendered: str, skeleton: str, texts: list[str]) -> list[tuple[int, int]] | None:
    """The (start, end) spans of `rendered` that hold `texts`, by aligning it with
    `skeleton` (the same render with `mark_texts`' sentinels); None if they do not align."""
    parts = _SENTINEL_RE.split(skeleton)
    pieces, numbers = parts[0::2], [int(n) for n in parts[1::2]]
    spans, at = [], 0
    for k, number in enumerate(numbers):
        if not rendered.startswith(pieces[k], at) or number >= len(texts):
            return None
        at += len(pieces[k])
        following = pieces[k + 1]
        text = texts[number]
        for form in dict.fromkeys((text, text.strip(), text.lstrip(), text.rstrip())):
            end = at + len(form)
            if rendered.startswith(form, at) and rendered.startswith(following, end):
                break
        else:
            return None
        spans.append((at, end))
        at = end
    if rendered[at:] != pieces[-1]:
        return None
    return spans
