"""From trajectories and per-step advantages to padded token tensors for the policy loss.

Logits at position p predict token p+1, so every per-token array here has length T-1 and
entry p belongs to target token p+1. A step's advantage lands on that step's response tokens
only; prompt and environment tokens have loss mask 0. Masked trajectories are left out. An
episode of several segments (Trajectory.segment_starts) is one row per segment.
A vision-language model's rows also carry their images' pixels (prepared by the same image
encoder the engine used), so the scored sequence is the sampled one, pixels included.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from toolgym.agents.vision import ImageEncoder, ImageInputs, vision_inputs


@dataclass
class TokenBatch:
    input_ids: torch.Tensor  # (B, T), right-padded
    attention_mask: torch.Tensor  # (B, T)
    loss_mask: torch.Tensor  # (B, T-1), 1 where the target token is the model's own
    old_logprobs: torch.Tensor  # (B, T-1), behaviour log-probabilities of the targets
    advantages: torch.Tensor  # (B, T-1)
    images: list[ImageInputs | None] = field(default_factory=list)
    """Each row's images (vision-language models; empty for text-only batches)."""
    proximal_logprobs: torch.Tensor | None = None
    """(B, T-1): the trained weights' log-probabilities before the update (the loss modes
    that correct for older behaviour policies read them; see `Learner.with_proximal`)."""

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def to(self, device: torch.device) -> TokenBatch:
        proximal = self.proximal_logprobs
        return replace(
            self,
            input_ids=self.input_ids.to(device),
            attention_mask=self.attention_mask.to(device),
            loss_mask=self.loss_mask.to(device),
            old_logprobs=self.old_logprobs.to(device),
            advantages=self.advantages.to(device),
            images=[None if i is None else i.to(device) for i in self.images],
            proximal_logprobs=None if proximal is None else proximal.to(device),
        )

    def split(self, size: int) -> Iterator[TokenBatch]:
        """Micro-batches of `size` sequences (trimmed of padding they no longer need)."""
        for start in range(0, len(self), size):
            yield self.take(range(start, min(start + size, len(self))))

    def take(self, rows: Sequence[int]) -> TokenBatch:
        """The given rows, trimmed of padding they do not need."""
        index = torch.as_tensor(list(rows), dtype=torch.long)
        width = int(self.attention_mask[index].sum(-1).max())
        proximal = self.proximal_logprobs
        return TokenBatch(
            self.input_ids[index, :width], self.attention_mask[index, :width],
            self.loss_mask[index, : width - 1], self.old_logprobs[index, : width - 1],
            self.advantages[index, : width - 1],
            [self.images[i] for i in rows] if self.images else [],
            None if proximal is None else proximal[index, : width - 1],
        )  # fmt: skip


def build_batch(
    trajectories: Sequence[Any],
    advantages: Sequence[np.ndarray],
    pad_id: int,
    images: ImageEncoder | None = None,
    min_version: int | None = None,
) -> TokenBatch:
    """`advantages[i]` holds one value per step of `trajectories[i]`; `images` prepares the
    pixels of trajectories that have images (the model's encoder). Steps made by weights
    older than `min_version` stay in the sequence but out of the loss."""
    kept = [
        (t, a) for t, a in zip(trajectories, advantages, strict=True) if not t.masked and t.steps
    ]
    if not kept:
        raise ValueError("no trajectory to train on (all masked or empty)")
    rows = [(t, a, begin, end) for t, a in kept for begin, end in t.segments()]
    width = max(end - begin for _, _, begin, end in rows)
    size = len(rows)
    input_ids = torch.full((size, width), pad_id, dtype=torch.long)
    attention = torch.zeros((size, width), dtype=torch.long)
    loss_mask = torch.zeros((size, width - 1))
    old = torch.zeros((size, width - 1))
    adv = torch.zeros((size, width - 1))
    for row, (t, step_advantages, begin, end) in enumerate(rows):
        input_ids[row, : end - begin] = torch.tensor(t.token_ids[begin:end])
        attention[row, : end - begin] = 1
        for step, value in zip(t.steps, step_advantages, strict=True):
            if not begin <= step.response_start < end:
                continue  # another segment's turn
            span = slice(step.response_start - begin - 1, step.response_end - begin - 1)
            loss_mask[row, span] = float(min_version is None or step.policy_version >= min_version)
            old[row, span] = torch.tensor(step.logprobs)
            adv[row, span] = float(value)
    pixels: list[ImageInputs | None] = []
    if any(t.images for t, _ in kept):
        if images is None:
            raise ValueError("trajectories with images need the model's image encoder (images=)")
        pixels = [images.encode(t.images) for t, _, _, _ in rows]
    return TokenBatch(input_ids, attention, loss_mask, old, adv, pixels)


def token_logprobs(
    model: Any, batch: TokenBatch, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of each target token under `model` (B, T-1), and their entropy, at
    the loss positions; 0 elsewhere. Prompt and environment tokens are most of a multi-turn
    sequence, so the vocabulary projection, the softmax and their backward run only at the
    positions where some row has a loss token (`logits_to_keep`)."""
    where = batch.loss_mask > 0
    columns = where.any(0).nonzero().squeeze(-1)
    inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
    pixels = ImageInputs.join(batch.images)
    if pixels is not None:
        inputs |= vision_inputs(model, batch.input_ids, batch.attention_mask, pixels)
    logits = model(**inputs, logits_to_keep=columns).logits  # (B, columns, V)
    if logits.shape[1] != len(columns):  # a model that ignores logits_to_keep gives them all
        logits = logits[:, columns]
    kept = where[:, columns]
    log_probs = torch.log_softmax(logits[kept].float(), dim=-1)
    targets = batch.input_ids[:, 1:][:, columns][kept]
    chosen = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_probs.exp() * log_probs).sum(-1) if with_entropy else None
    return _spread(chosen, where), None if entropy is None else _spread(entropy, where)


def _spread(values: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """Values of the selected positions back into a (B, T-1) tensor, zeros elsewhere."""
    return torch.zeros(where.shape, dtype=values.dtype, device=values.device).masked_scatter(
        where, values
    )
