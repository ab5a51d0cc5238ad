"""Supervised warm start on demonstration trajectories: next-token cross-entropy on the
demonstrator's own tokens only (the same loss mask as RL), token-mean over each step."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from toolgym.training.batch import build_batch, token_logprobs
from toolgym.training.losses import aggregate, normalizer_for


@dataclass
class SFTConfig:
    epochs: int = 3
    lr: float = 1e-3
    batch_size: int = 16
    """Sequences per optimizer step."""
    micro_batch_size: int = 8
    grad_clip: float = 1.0
    seed: int = 0


def sft(
    model: Any, trajectories: Sequence[Any], pad_id: int, config: SFTConfig | None = None
) -> list[float]:
    """Train `model` in place; returns the mean loss of each epoch."""
    config = config or SFTConfig()
    kept = [t for t in trajectories if not t.masked and t.steps]
    if not kept:
        raise ValueError("no demonstration to learn from")
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    rng = random.Random(config.seed)
    losses = []
    model.train()
    for _ in range(config.epochs):
        order = list(kept)
        rng.shuffle(order)
        epoch = []
        for start in range(0, len(order), config.batch_size):
            chunk = order[start : start + config.batch_size]
            batch = build_batch(chunk, [np.ones(len(t.steps)) for t in chunk], pad_id)
            normalizer = normalizer_for(batch.loss_mask)
            optimizer.zero_grad()
            total = 0.0
            for micro in batch.split(config.micro_batch_size):
                logprobs, _ = token_logprobs(model, micro)
                loss = aggregate(-logprobs, micro.loss_mask, "token-mean", normalizer)
                loss.backward()
                total += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            epoch.append(total)
        losses.append(float(np.mean(epoch)))
    model.eval()
    return losses


def demonstration_nll(model: Any, trajectories: Sequence[Any], pad_id: int) -> float:
    """Mean negative log-likelihood per demonstrated token (lower: the model imitates better)."""
    batch = build_batch(trajectories, [np.ones(len(t.steps)) for t in trajectories], pad_id)
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, batch)
    return float(-(logprobs * batch.loss_mask).sum() / batch.loss_mask.sum())
