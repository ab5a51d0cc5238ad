"""Generated document kinds for pretraining, one per file, by name.

Each kind is a function `(strings, chars) -> str` writing one document of about `chars`
characters from the caller's seeded `Strings`.
"""

from __future__ import annotations

from collections.abc import Callable

from toolgym.agents.models.corpus.kinds import copy, recall, tag_chat, tool_chat
from toolgym.agents.models.corpus.strings import Strings

Kind = Callable[[Strings, int], str]

KINDS: dict[str, Kind] = {
    "copy": copy.document,
    "recall": recall.document,
    "tool_chat": tool_chat.document,
    "tag_chat": tag_chat.document,
}
