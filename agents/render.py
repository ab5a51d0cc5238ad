"""Chat rendering with exact token bookkeeping.

A conversation's token sequence is built once and only ever appended to:

    prompt ids (the opening messages, rendered by the chat template)
    + the model's completion ids, exactly as generated (never decoded and re-encoded)
    + delta ids: the end of the model's turn if it did not write it itself, the new
      messages from the environment, and the prompt for the next assistant turn
    + completion ids + delta ids + ...

Re-rendering the whole conversation each turn would re-tokenize the model's text (BPE may
split it differently) and let templates rewrite earlier turns (Qwen3 drops past reasoning),
so the ids the trainer scores would not be the ids the model sampled. The delta is cut from
a render of a fixed placeholder assistant turn followed by the new messages, which is
independent of everything before it.

Image content parts are left out here: a text-only model reads the text parts of a message
(render_vision.py renders them for vision-language models).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from toolgym.agents.vision import text_only

Message = dict[str, Any]

_PLACEHOLDER = "\u2063toolgym-assistant-turn\u2063"
_LEAD_IN: list[Message] = [{"role": "user", "content": "."}]


class ChatRenderer:
    """Messages and tool schemas to token ids through a tokenizer's chat template."""

    def __init__(
        self, tokenizer: Any, chat_template: str | None = None, tool_schemas: bool = True
    ) -> None:
        """`tool_schemas=False` leaves the tools' JSON schemas out of rendered prompts (for
        small models when the env's own messages already describe its tools)."""
        self.tokenizer = tokenizer
        self.chat_template = chat_template or tokenizer.chat_template
        if not self.chat_template:
            raise ValueError("the tokenizer has no chat template; pass chat_template=")
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        self.tool_schemas = tool_schemas

    def render_text(
        self,
        messages: Sequence[Message],
        tools: Sequence[dict[str, Any]] | None = None,
        add_generation_prompt: bool = False,
    ) -> str:
        text = self.tokenizer.apply_chat_template(
            self.readable(messages),
            tools=list(tools) if tools and self.tool_schemas else None,
            chat_template=self.chat_template,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )
        return str(text)

    def readable(self, messages: Sequence[Message]) -> list[Message]:
        """The messages as this model reads them: the text of their content parts."""
        return text_only(messages)

    def image_urls(self, messages: Sequence[Message]) -> list[str]:
        """The images of `messages` this model reads, in token order: none."""
        return []

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, special tokens written in it included, nothing added."""
        if self._backend is not None:  # the Rust tokenizer, without the Python wrapper's cost
            return list(self._backend.encode(text, add_special_tokens=False).ids)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> list[int]:
        """The opening prompt: every message, then the assistant generation prompt."""
        return self.encode(self.render_text(messages, tools, add_generation_prompt=True))

    def delta_ids(
        self,
        new_messages: Sequence[Message],
        completion_ids: Sequence[int],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> list[int]:
        """Ids to append after a completion: the rest of the assistant turn's closing (all of
        it if the completion did not end with the closing token), the new messages, and the
        next generation prompt."""
        tail = self._tail_after_assistant(new_messages, tools)
        if completion_ids:
            last = self.tokenizer.decode([completion_ids[-1]], skip_special_tokens=False)
            if last and tail.startswith(last) and last in self.closing_tokens:
                tail = tail[len(last) :]
        return self.encode(tail)

    def closing_ids(self) -> list[int]:
        """Token ids that end an assistant turn in this template (for stop conditions)."""
        return [self.tokenizer.convert_tokens_to_ids(t) for t in self.closing_tokens]

    def _tail_after_assistant(
        self, new_messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None
    ) -> str:
        turn = {"role": "assistant", "content": _PLACEHOLDER}
        full = self.render_text([*_LEAD_IN, turn, *new_messages], tools, add_generation_prompt=True)
        return full[full.index(_PLACEHOLDER) + len(_PLACEHOLDER) :]

    @functools.cached_property
    def closing_tokens(self) -> list[str]:
        """The special token that ends an assistant's content in this template (<|im_end|>)."""
        tail = self._tail_after_assistant([], None)
        special = sorted(self.tokenizer.all_special_tokens, key=len, reverse=True)
        return [t for t in special if tail.startswith(t)][:1]
