"""Chat rendering for vision-language models: image parts become image placeholder tokens.

The chat template renders each image part as one placeholder (Qwen2-VL's
`<|vision_start|><|image_pad|><|vision_end|>`); here each placeholder is widened to the
number of tokens the image takes once the model's image processor has prepared it, so the
token ids hold one position per image embedding, as the model's forward pass expects. The
images themselves travel beside the ids (Trajectory.images), in the same order.

Everything else is ChatRenderer's exact bookkeeping: prompt ids once, then completions and
deltas appended, never re-rendered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolgym.agents.render import ChatRenderer, Message
from toolgym.agents.vision import ImageEncoder, ImageError, image_urls


class VisionChatRenderer(ChatRenderer):
    def __init__(
        self,
        tokenizer: Any,
        images: ImageEncoder,
        chat_template: str | None = None,
        tool_schemas: bool = True,
    ) -> None:
        super().__init__(tokenizer, chat_template, tool_schemas)
        self.images = images

    def readable(self, messages: Sequence[Message]) -> list[Message]:
        return list(messages)

    def image_urls(self, messages: Sequence[Message]) -> list[str]:
        return image_urls(messages)

    def prompt_ids(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]] | None = None
    ) -> list[int]:
        return self._widen(super().prompt_ids(messages, tools), image_urls(messages))

    def delta_ids(
        self,
        new_messages: Sequence[Message],
        completion_ids: Sequence[int],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> list[int]:
        ids = super().delta_ids(new_messages, completion_ids, tools)
        return self._widen(ids, image_urls(new_messages))

    def _widen(self, ids: list[int], urls: list[str]) -> list[int]:
        pad = self.images.image_token_id
        if ids.count(pad) != len(urls):
            raise ImageError(
                f"the chat template rendered {ids.count(pad)} image placeholders for "
                f"{len(urls)} images (does it render image parts?)"
            )
        out: list[int] = []
        pending = iter(urls)
        for token in ids:
            out += [pad] * self.images.tokens(next(pending)) if token == pad else [token]
        return out


def make_renderer(
    tokenizer: Any, images: ImageEncoder | None = None, **options: Any
) -> ChatRenderer:
    """The renderer for a model: VisionChatRenderer when it reads images (`images`, its
    encoder), else ChatRenderer, whose prompts hold the text of image messages alone."""
    if images is None:
        return ChatRenderer(tokenizer, **options)
    return VisionChatRenderer(tokenizer, images, **options)
