"""Images in conversations, for vision-language models (Qwen2-VL's family).

Messages carry images as OpenAI-style content parts,
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}
(a browser env's screenshot). A text-only model reads the text parts alone (`text_only`); a
vision-language model gets each image as a run of placeholder tokens in its token ids (see
render_vision.py) plus the image's pixels, prepared by the model's own image processor:
the same pixels for the engine that samples and for the trainer that scores, so both compute
the same log-probabilities.

Only data URLs are read: a rollout never fetches an image from the network. An image is
bounded in bytes and pixels before it is decoded; the image processor then resizes it into
the model's pixel budget, which bounds its tokens.
"""

from __future__ import annotations

import base64
import binascii
import io
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from toolgym.errors import ConfigError, ToolgymError

Message = dict[str, Any]

MAX_IMAGE_BYTES = 8 << 20
MAX_IMAGE_PIXELS = 4096 * 4096
IMAGE_PARTS = ("image_url", "image")


class ImageError(ToolgymError, ValueError):
    """An image part that cannot be read (not a data URL, not an image, too big)."""


def is_image_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in IMAGE_PARTS


def image_urls(messages: Sequence[Message]) -> list[str]:
    """The data URLs of the messages' image parts, in the order a chat template renders them."""
    urls = []
    for message in messages:
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if is_image_part(part):
                source = part.get(part["type"])
                url = source.get("url") if isinstance(source, dict) else source
                urls.append(url if isinstance(url, str) else "")  # "" is refused when read
    return urls


def text_only(messages: Sequence[Message]) -> list[Message]:
    """The messages with each list of content parts joined into its text (images left out)."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            texts = [
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            ]
            message = {**message, "content": "\n".join(texts)}
        out.append(message)
    return out


def is_vision_config(config: Any) -> bool:
    return getattr(config, "vision_config", None) is not None


def vision_token_ids(config: Any) -> list[int]:
    """The ids that mark images and videos in a vision-language model's input: never
    sampled (an image placeholder the model wrote would stand for no image)."""
    names = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
    if not is_vision_config(config):
        return []
    vocab = int(config.get_text_config().vocab_size)
    found = (getattr(config, name, None) for name in names)
    return sorted({int(i) for i in found if i is not None and 0 <= int(i) < vocab})


@dataclass
class ImageInputs:
    """What a Qwen2-VL model takes for some images: their patches, one row each, and each
    image's (temporal, height, width) grid of patches."""

    pixel_values: torch.Tensor
    grid_thw: torch.Tensor

    @staticmethod
    def join(parts: Sequence[ImageInputs | None]) -> ImageInputs | None:
        present = [p for p in parts if p is not None]
        if not present:
            return None
        return ImageInputs(
            torch.cat([p.pixel_values for p in present]), torch.cat([p.grid_thw for p in present])
        )

    def to(self, device: torch.device) -> ImageInputs:
        return ImageInputs(self.pixel_values.to(device), self.grid_thw.to(device))


class ImageEncoder:
    """A model's image processor over data URLs, with a small cache: a screenshot is
    prepared once for the renderer (its token count), the engine and the trainer."""

    def __init__(self, processor: Any, image_token_id: int, cache_size: int = 64) -> None:
        self.processor = processor
        self.image_token_id = image_token_id
        self.merge = int(getattr(processor, "merge_size", 2))
        self.cache_size = cache_size
        self._cache: OrderedDict[str, ImageInputs] = OrderedDict()
        self._lock = threading.Lock()  # the engine encodes in a worker thread

    @classmethod
    def for_model(cls, path: str | Path, config: Any) -> ImageEncoder | None:
        """The encoder of the model at `path`, or None for a text-only model."""
        if not is_vision_config(config):
            return None
        from transformers import AutoImageProcessor

        try:
            processor = AutoImageProcessor.from_pretrained(path)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{path} is a vision-language model but its image processor does not load "
                f"(preprocessor_config.json): {exc}"
            ) from None
        return cls(processor, int(config.image_token_id))

    def encode(self, urls: Sequence[str]) -> ImageInputs | None:
        """The model inputs of these images, in order (None for no image)."""
        return ImageInputs.join([self._one(url) for url in urls])

    def tokens(self, url: str) -> int:
        """How many placeholder tokens this image takes in the model's input."""
        return int(self._one(url).grid_thw.prod()) // self.merge**2

    def _one(self, url: str) -> ImageInputs:
        if not isinstance(url, str):
            raise ImageError(f"an image part's url must be a string, got {type(url).__name__}")
        with self._lock:
            found = self._cache.get(url)
            if found is not None:
                self._cache.move_to_end(url)
                return found
        image = decode_image(url)
        try:
            prepared = self.processor(images=[image], return_tensors="pt")
        except Exception as exc:  # e.g. an aspect ratio the processor cannot resize
            raise ImageError(f"the image processor refused an image: {exc}") from None
        found = ImageInputs(prepared["pixel_values"], prepared["image_grid_thw"])
        with self._lock:
            self._cache[url] = found
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return found


def decode_image(url: str) -> Any:
    """A PIL image from a base64 data URL, bounded before it is decoded."""
    from PIL import Image

    head, comma, data = url.partition(",")
    if not (head.startswith("data:image/") and head.endswith(";base64") and comma):
        raise ImageError(f"only base64 data URLs of images are read, not {url[:40]!r}")
    if len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise ImageError(f"an image of more than {MAX_IMAGE_BYTES >> 20} MiB")
    try:
        image = Image.open(io.BytesIO(base64.b64decode(data, validate=True)))
        if image.width * image.height > MAX_IMAGE_PIXELS:
            raise ImageError(
                f"a {image.width}x{image.height} image: at most {MAX_IMAGE_PIXELS} pixels"
            )
        return image.convert("RGB")
    except (binascii.Error, OSError, Image.DecompressionBombError) as exc:
        raise ImageError(f"an image part that does not decode: {exc}") from None


def vision_inputs(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, images: ImageInputs
) -> dict[str, Any]:
    """Keyword arguments of a forward pass over ids holding image placeholders: the pixels,
    their grids, and the 3-D rotary positions (temporal, height, width) the model's own
    `get_rope_index` gives (padding skipped, so left- and right-padded rows agree)."""
    rope = next(m for m in model.modules() if hasattr(m, "get_rope_index"))
    image_token_id = rope.config.image_token_id
    token_types = (input_ids == image_token_id).int()
    positions, _ = rope.get_rope_index(
        input_ids, token_types, image_grid_thw=images.grid_thw, attention_mask=attention_mask
    )
    return {
        "pixel_values": images.pixel_values,
        "image_grid_thw": images.grid_thw,
        "mm_token_type_ids": token_types,
        "position_ids": positions,
    }
