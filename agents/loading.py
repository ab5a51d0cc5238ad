"""Loading a model directory as the right transformers class: a causal LM, or a
vision-language model (a config with a `vision_config`), which transformers loads through
AutoModelForImageTextToText rather than AutoModelForCausalLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from toolgym.agents.vision import is_vision_config


def load_model(path: str | Path, dtype: torch.dtype = torch.float32) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    config = AutoConfig.from_pretrained(path)
    auto: Any = AutoModelForImageTextToText if is_vision_config(config) else AutoModelForCausalLM
    return auto.from_pretrained(path, dtype=dtype)


def is_vision_model(path: str | Path) -> bool:
    """Whether the model directory at `path` holds a vision-language model (False when it
    has no readable config: loading it reports why)."""
    from transformers import AutoConfig

    try:
        return is_vision_config(AutoConfig.from_pretrained(path))
    except (OSError, ValueError):
        return False
