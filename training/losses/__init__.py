"""Policy losses and the one place where their normalisation lives (aggregate.py)."""

from toolgym.training.losses.aggregate import MODES, Normalizer, aggregate, normalizer_for
from toolgym.training.losses.ppo_clip import ppo_clip_loss

__all__ = ["MODES", "Normalizer", "aggregate", "normalizer_for", "ppo_clip_loss"]
