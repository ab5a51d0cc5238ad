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

Control tokens come only from the template: the messages' own text (a page, a program's
output) is encoded as plain text, so `<|im_end|>` written in it stays the characters it is
and cannot forge a turn (content_spans.py finds the text in the render).

Image content parts are left out here: a text-only model reads the text parts of a message
(render_vision.py renders them for vision-language models).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from toolgym.agents.content_spans import mark_texts, text_spans
from toolgym.agents.vision import text_only
from toolgym.log import get_logger
from toolgym.tools.text import clean_text, map_texts

log = get_logger(__name__)

Message = dict[str, Any]

_PLACEHOLDER = "\u2063toolgym-assistant-turn\u2063"
_LEAD_IN: list[Message] = [{"role": "user", "content": "."}]
_WORD_JOINER = "\u2060"


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
        return self._template(self.readable(messages), tools, add_generation_prompt)

    def _template(
        self,
        messages: Sequence[Message],
        tools: Sequence[dict[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> str:
        text = self.tokenizer.apply_chat_template(
            list(messages),
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
        """Token ids of `text`, special tokens written in it included, nothing added. A lone
        surrogate (text no tokenizer can read) is read as U+FFFD, as the envs write it."""
        text = clean_text(text)
        if self._backend is not None:  # the Rust tokenizer, without the Python wrapper's cost
            return list(self._backend.encode(text, add_special_tokens=False).ids)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def encode_plain(self, text: str) -> list[int]:
        """Token ids of `text` read as plain text: a control token written in it is its
        characters, never the control token."""
        text = clean_text(text)
        if self._plain_backend is not None:
            return list(self._plain_backend.encode(text, add_special_tokens=False).ids)
        return list(
            self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
        )

    def prompt_ids(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> list[int]:
        """The opening prompt: every message, then the assistant generation prompt."""
        return self._render_ids(list(messages), tools)

    def delta_ids(
        self,
        new_messages: Sequence[Message],
        completion_ids: Sequence[int],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> list[int]:
        """Ids to append after a completion: the rest of the assistant turn's closing (all of
        it if the completion did not end with the closing token), the new messages, and the
        next generation prompt."""
        turn = {"role": "assistant", "content": _PLACEHOLDER}
        tools = tools if self._tools_reach_the_tail else None
        tail = self._render_ids([*_LEAD_IN, turn, *new_messages], tools, after=_PLACEHOLDER)
        if completion_ids and tail[:1] == [completion_ids[-1]] and tail[0] in self.closing_ids():
            tail = tail[1:]
        return tail

    def _render_ids(
        self, messages: list[Message], tools: Sequence[dict[str, Any]] | None, after: str = ""
    ) -> list[int]:
        """Render with the generation prompt and encode what follows `after`: the template's
        own text read for control tokens, the messages' texts as plain text."""
        readable = self.readable(messages)
        rendered = self._template(readable, tools, True)
        start = rendered.index(after) + len(after) if after else 0
        marked, texts = mark_texts(readable)
        if not any(self._control.search(t) for t in texts):
            return self.encode(rendered[start:])
        spans = text_spans(rendered, self._template(marked, tools, True), texts)
        if spans is None:  # the template renders these texts in a way we cannot follow
            log.debug("escaping control tokens in message text: the render did not align")
            return self._render_ids(self._escape(messages), tools, after)
        ids, at = [], start
        for begin, end in spans:
            if end <= start:
                continue
            ids += self.encode(rendered[at : max(begin, start)])
            ids += self.encode_plain(rendered[max(begin, start) : end])
            at = end
        return ids + self.encode(rendered[at:])

    def _escape(self, messages: list[Message]) -> list[Message]:
        """The messages with a word joiner after the first character of every control token
        written in their texts: what they say stays readable, and no control token is left."""
        return map_texts(
            messages,
            lambda text: self._control.sub(lambda m: m[0][0] + _WORD_JOINER + m[0][1:], text),
        )

    @functools.cached_property
    def _control(self) -> re.Pattern[str]:
        """The tokenizer's special tokens, as a pattern over text."""
        special = [t.content for t in self.tokenizer.added_tokens_decoder.values() if t.special]
        special = sorted(
            set(special) | set(self.tokenizer.all_special_tokens), key=len, reverse=True
        )
        return re.compile("|".join(map(re.escape, special)) or "(?!)")

    @functools.cached_property
    def _plain_backend(self) -> Any:
        """A copy of the Rust tokenizer that reads special tokens as plain text (a copy, so
        the shared one never changes under another thread)."""
        if self._backend is None:
            return None
        from tokenizers import Tokenizer

        plain = Tokenizer.from_str(self._backend.to_str())
        plain.encode_special_tokens = True
        return plain

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
    def _tools_reach_the_tail(self) -> bool:
        """Whether this template writes anything of the tools after an assistant turn. Most
        write them once, before the conversation (the system prompt or the first user
        turn); then a delta is rendered without them, which spares rendering every schema
        to JSON again each turn. Probed once, with a tool's answer and a user's last; a
        template that refuses the probe keeps the tools in every delta, as before."""
        probe = [{"type": "function", "function": {"name": "probe", "description": "p",
                  "parameters": {"type": "object", "properties": {}}}}]  # fmt: skip
        for last in ({"role": "tool", "content": "r"}, {"role": "user", "content": "u"}):
            messages = [{"role": "tool", "content": "t"}, last]
            try:
                with_tools = self._tail_after_assistant(messages, probe)
                without = self._tail_after_assistant(messages, None)
            except Exception:  # e.g. a template that wants roles to alternate strictly
                return True
            if with_tools != without:
                return True
        return False

    @functools.cached_property
    def closing_tokens(self) -> list[str]:
        """The special token that ends an assistant's content in this template (<|im_end|>)."""
        tail = self._tail_after_assistant([], None)
        special = sorted(self.tokenizer.all_special_tokens, key=len, reverse=True)
        return [t for t in special if tail.startswith(t)][:1]
