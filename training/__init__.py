"""Training: the trainer loop, its estimators, losses and reward sources, and self-play.

`train(config, resume=...)` starts a run as `toolgym train` does (training/launch.py); it
loads on first use, so importing a config from here loads no torch."""

from __future__ import annotations

from typing import Any

__all__ = ["train"]


def __getattr__(name: str) -> Any:
    if name == "train":
        from toolgym.training.launch import train

        return train
    raise AttributeError(f"module 'toolgym.training' has no attribute {name!r}")
