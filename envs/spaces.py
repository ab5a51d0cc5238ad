"""Permissive spaces for LLM text: Gymnasium's `Text` space needs a fixed length and a
character set that rejects ordinary text, so it cannot describe what a model writes."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import string
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Space
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

_SAMPLE_CHARS = np.array(list(string.ascii_letters + string.digits + string.punctuation + " \n"))
ROLES = frozenset({"system", "user", "assistant", "tool", "ipython"})


class TextSpace(Space[str]):
    """Any Python string up to `max_length` characters (the model's raw turn)."""

    def __init__(
        self,
        max_length: int = 1_000_000,
        seed: int | np.random.Generator | None = None,
        shared_bytes: int = 1 << 20,
    ) -> None:
        self.max_length = max_length
        self.shared_bytes = shared_bytes
        """Each env's slot when an async vector env shares observations through memory."""
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

    def __init__(
        self, seed: int | np.random.Generator | None = None, shared_bytes: int = 1 << 20
    ) -> None:
        self.shared_bytes = shared_bytes
        """Each env's slot when an async vector env shares observations through memory."""
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


# ----- Gymnasium's async vector env: observations through shared memory --------------------
# `AsyncVectorEnv(shared_memory=True)` (make_vec's default) asks each space for a shared
# buffer, a view of it, and a writer. Chat messages have no fixed shape, so each env gets a
# fixed-size byte slot holding its pickled observation (pickled as the pipe would send it);
# the view decodes a slot when read, and deep-copies (the vector env's default) to a tuple.

_HEADER = 8


class SharedObservations(Sequence[Any]):
    """The vector env's live view of its envs' latest observations, one slot per env."""

    def __init__(self, space: MessagesSpace | TextSpace, memory: Any, n: int) -> None:
        self.space, self.memory, self.n = space, memory, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self.n)))
        if not -self.n <= index < self.n:
            raise IndexError(index)
        slot = _slot(self.memory, index % self.n, self.space.shared_bytes)
        size = int.from_bytes(slot[:_HEADER].tobytes(), "little")
        return pickle.loads(slot[_HEADER : _HEADER + size].tobytes()) if size else None

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedObservations({list(self)!r})"


def _slot(memory: Any, index: int, size: int) -> np.ndarray:
    buffer = np.frombuffer(memory.get_obj(), dtype=np.uint8)
    return buffer[index * size : (index + 1) * size]


@create_shared_memory.register(MessagesSpace)
@create_shared_memory.register(TextSpace)
def _create_shared(space: MessagesSpace | TextSpace, n: int = 1, ctx: Any = mp) -> Any:
    return ctx.Array("B", n * space.shared_bytes)


@read_from_shared_memory.register(MessagesSpace)
@read_from_shared_memory.register(TextSpace)
def _read_shared(space: MessagesSpace | TextSpace, memory: Any, n: int = 1) -> SharedObservations:
    return SharedObservations(space, memory, n)


@write_to_shared_memory.register(MessagesSpace)
@write_to_shared_memory.register(TextSpace)
def _write_shared(space: MessagesSpace | TextSpace, index: int, value: Any, memory: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    room = space.shared_bytes - _HEADER
    if len(data) > room:
        raise ValueError(
            f"an observation of {len(data):,} bytes does not fit the shared-memory slot of "
            f"{room:,} bytes; give the env's space a larger `shared_bytes`, or make the vector "
            "env with vector_kwargs={'shared_memory': False}"
        )
    slot = _slot(memory, index, space.shared_bytes)
    slot[:_HEADER] = np.frombuffer(len(data).to_bytes(_HEADER, "little"), dtype=np.uint8)
    slot[_HEADER : _HEADER + len(data)] = np.frombuffer(data, dtype=np.uint8)
