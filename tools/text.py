"""Text a model wrote, made safe to send back: valid UTF-8 and bounded in size.

A model can write anything a tokenizer can decode, and a JSON escape (`"\\ud800"`) can put a
lone surrogate into a tool's name or arguments; echoed raw, that breaks the next prompt's
tokenizer and every UTF-8 writer after it. Echoes of the model's own text (a name, an
argument, a list of errors) are cut to a size the next turn can afford.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")

ECHO_CHARS = 200
"""The most characters of a model's own text quoted back in one error."""


def clean_text(text: str) -> str:
    """`text` as valid Unicode: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def map_texts(messages: list[dict[str, Any]], change: Callable[[str], str]) -> list[dict[str, Any]]:
    """New messages with `change(text)` in place of every text: a plain content, or the text
    parts of a list content (other parts, images, are kept as they are)."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            message = {**message, "content": change(content)}
        elif isinstance(content, list):
            parts = [
                {**p, "text": change(p["text"])}
                if isinstance(p, dict) and isinstance(p.get("text"), str)
                else p
                for p in content
            ]
            message = {**message, "content": parts}
        out.append(message)
    return out


def clean_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every text made valid Unicode."""
    return map_texts(messages, clean_text)


def clip(text: str, limit: int, what: str = "characters") -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}[... {len(text) - limit} more {what}]"


def echo(text: str, limit: int = ECHO_CHARS) -> str:
    """The model's own text as quoted back in an error: clean and short."""
    return clip(clean_text(text), limit)


def nesting(value: Any) -> int:
    """How deep lists and objects nest in a parsed JSON value (without recursion)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level + 1)
            stack.extend(
                (v, level + 1) for v in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def clean_value(value: Any) -> Any:
    """A parsed JSON value with every string (keys included) made valid Unicode (call it on
    values whose `nesting` is bounded)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value


def clip_list(items: list[str], limit: int, what: str = "problems") -> list[str]:
    """The first `limit` items, and one line counting the rest."""
    if len(items) <= limit:
        return items
    return [*items[:limit], f"... and {len(items) - limit} more {what}"]
