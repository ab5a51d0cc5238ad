"""Permissive spaces for LLM text: Gymnasium's `Text` space needs a fixed length and a
character set that rejects ordinary text, so it cannot describe what a model writes."""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

_SAMPLE_CHARS = np.array(list(string.ascii_letters + string.digits + string.punctuation + " \n"))
ROLES = frozenset({"system", "user", "assistant", "tool", "ipython"})


class TextSpace(Space[str]):
    """Any Python string up to `max_length` characters (the model's raw turn)."""

    def __init__(
        self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None
    ) -> None:
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Random printable text (useful to fuzz parsers; rarely a valid tool call)."""
        length = int(self.np_random.integers(1, min(self.max_length, 64) + 1))
        return "".join(self.np_random.choice(_SAMPLE_CHARS, size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length


class MessagesSpace(Space[list]):
    """A list of OpenAI-format chat messages: dicts with a known `role` and a `content`
    that is a string or a list of content parts (text, images)."""

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, Any]]:
        text = TextSpace(seed=int(self.np_random.integers(2**31))).sample()
        return [{"role": "user", "content": text}]

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(message_problem(m) is None for m in x)

    def __repr__(self) -> str:
        return "MessagesSpace()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessagesSpace)


def message_problem(message: Any) -> str | None:
    """Why `message` is not a valid chat message, in plain words; None when it is."""
    if not isinstance(message, dict):
        return f"a message must be a dict, got {type(message).__name__}"
    role = message.get("role")
    if role not in ROLES:
        return f"message role {role!r} is not one of {sorted(ROLES)}"
    content = message.get("content")
    if content is None and role == "assistant" and message.get("tool_calls"):
        return None  # an assistant turn that only calls tools (OpenAI's own shape)
    if not isinstance(content, (str, list)):
        return f"message content must be a string or a list of parts, got {type(content).__name__}"
    return None
