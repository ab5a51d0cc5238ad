"""Loss aggregation: the one place that turns per-token losses into a scalar.

Every mode takes its denominators from the whole optimizer step (`normalizer`), never from
the micro-batch at hand, so splitting a step into micro-batches with gradient accumulation
gives the same gradient as one big batch.

- token-mean: sum of all tokens' losses / number of loss tokens in the step (DAPO).
- seq-mean-token-mean: each sequence's token mean, averaged over sequences (GRPO paper).
- seq-mean-token-sum: each sequence's token sum, averaged over sequences (Dr. GRPO style,
  divided by a constant `max_tokens` to keep the scale independent of length).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from toolgym.training.losses import MODES


@dataclass(frozen=True)
class Normalizer:
    """Counts over the whole optimizer step."""

    tokens: int
    sequences: int
    max_tokens: int = 1


def normalizer_for(mask: torch.Tensor, max_tokens: int = 1) -> Normalizer:
    return Normalizer(int(mask.sum()), int((mask.sum(-1) > 0).sum()), max_tokens)


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, mode: str, normalizer: Normalizer
) -> torch.Tensor:
    """per_token, mask: (batch, tokens). Returns this micro-batch's share of the step's loss."""
    mask = mask.to(per_token.dtype)
    if mode == "token-mean":
        return (per_token * mask).sum() / max(normalizer.tokens, 1)
    per_sequence = (per_token * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        per_sequence = per_sequence / mask.sum(-1).clamp(min=1)
    elif mode == "seq-mean-token-sum":
        per_sequence = per_sequence / max(normalizer.max_tokens, 1)
    else:
        raise ValueError(f"unknown loss aggregation '{mode}'; choose one of {MODES}")
    return per_sequence.sum() / max(normalizer.sequences, 1)
