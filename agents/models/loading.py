"""Loading a model directory as the right transformers class: a causal LM, or a
vision-language model (a config with a `vision_config`), which transformers loads through
AutoModelForImageTextToText rather than AutoModelForCausalLM.

A path that is not a model directory is a ConfigError saying what is wrong with it, never
transformers' traceback about hub repository names (nothing is ever downloaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from toolgym.agents.vision import is_vision_config
from toolgym.errors import ConfigError


def check_model_dir(path: str | Path, what: str = "model", hint: str | None = None) -> Path:
    """`path` as a model directory, or a ConfigError that says what is wrong with it (and
    `hint`: how to make the one needed)."""
    found = Path(path)
    hint = hint or "make one with `toolgym model init --out DIR` (or pretrain, or sft)"
    if not found.exists():
        raise ConfigError(f"{what} directory {found} does not exist; {hint}")
    if not found.is_dir():
        raise ConfigError(f"{what} {found} is a file; give a model directory ({hint})")
    if not (found / "config.json").is_file():
        raise ConfigError(f"{what} {found} is not a model directory (no config.json); {hint}")
    return found


def load_tokenizer(source: str | Path) -> Any:
    """The tokenizer saved in a directory (or already in the local cache under a name):
    never a download; one that cannot be loaded is a ConfigError with the reason."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(source, local_files_only=True)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"no tokenizer could be loaded from {source} ({first})") from None


def load_model(path: str | Path, dtype: torch.dtype = torch.float32) -> Any:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    check_model_dir(path)
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
