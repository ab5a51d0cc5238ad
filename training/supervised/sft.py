"""Supervised warm start on demonstration trajectories: next-token cross-entropy on the
demonstrator's own tokens only (the same loss mask as RL, less the steps marked not to be
imitated), token-mean over each step."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from toolgym.agents.demonstrations import Demonstration
from toolgym.agents.vision import ImageEncoder
from toolgym.envs.tasks import TaskDraw, TaskSource
from toolgym.errors import RunFailedError
from toolgym.training.losses.aggregate import Normalizer, aggregate, normalizer_for
from toolgym.training.update.batch import TokenBatch, build_batch, token_logprobs
from toolgym.training.update.optim_step import adamw, optimizer_step


@dataclass
class SFTConfig:
    epochs: int = 3
    lr: float = 1e-3
    batch_size: int = 16
    """Sequences per optimizer step."""
    micro_batch_size: int = 8
    grad_clip: float = 1.0
    weight_decay: float = 0.01
    """AdamW's decoupled weight decay (torch's default, which the warm starts were measured with)."""
    seed: int = 0


def sft_draws(
    source: TaskSource, first: int, episodes: int, held_out: int = 16
) -> tuple[list[TaskDraw], list[TaskDraw]]:
    """Which tasks to demonstrate (train split, from task `first` on) and which to measure
    the held-out NLL on (the eval split's first `held_out`): never the same task."""
    return [source.draw("train", first + i) for i in range(episodes)], source.head("eval", held_out)


def sft(
    model: Any,
    demos: Sequence[Demonstration],
    pad_id: int,
    config: SFTConfig | None = None,
    on_epoch: Callable[[int, float], None] | None = None,
    images: ImageEncoder | None = None,
    on_step: Callable[[int, int, float], None] | None = None,
) -> list[float]:
    """Train `model` in place; returns the mean loss of each epoch. `on_epoch(epoch, loss)` runs
    after each epoch with the model in eval mode (to measure it on held-out data). `images`:
    a vision-language model's image encoder, for demonstrations with screenshots.
    `on_step(done, total, loss)` after each optimizer step (progress)."""
    config = config or SFTConfig()
    kept = [d for d in demos if not d.trajectory.masked and any(d.imitate)]
    if not kept:
        raise ValueError("no demonstration to learn from")
    optimizer = adamw(model, config.lr, config.weight_decay)
    rng = random.Random(config.seed)
    losses: list[float] = []
    total = config.epochs * -(-len(kept) // config.batch_size)
    steps = 0
    model.train()
    for _ in range(config.epochs):
        order = list(kept)
        rng.shuffle(order)
        epoch = []
        for start in range(0, len(order), config.batch_size):
            batch = imitation_batch(order[start : start + config.batch_size], pad_id, images)
            normalizer = normalizer_for(batch.loss_mask)

            def accumulate(batch: TokenBatch = batch, normalizer: Normalizer = normalizer) -> float:
                total = 0.0
                for micro in batch.split(config.micro_batch_size):
                    logprobs, _ = token_logprobs(model, micro)
                    loss = aggregate(-logprobs, micro.loss_mask, "token-mean", normalizer)
                    loss.backward()
                    total += loss.item()
                return total

            done = optimizer_step(optimizer, model.parameters(), accumulate, config.grad_clip)
            if not done.stepped:
                raise RunFailedError(
                    f"SFT: the loss ({done.loss}) or gradient norm ({done.grad_norm}) is not "
                    f"finite after {len(losses)} epochs (a lower lr, {config.lr} now, may help)"
                )
            epoch.append(done.loss)
            steps += 1
            if on_step is not None:
                on_step(steps, total, done.loss)
        losses.append(float(np.mean(epoch)))
        if on_epoch is not None:
            model.eval()
            on_epoch(len(losses), losses[-1])
            model.train()
    model.eval()
    return losses


def imitation_batch(
    demos: Sequence[Demonstration], pad_id: int, images: ImageEncoder | None = None
) -> TokenBatch:
    """The demonstrations' tokens, with the loss mask on the imitated steps' responses only."""
    weights = [np.asarray(d.imitate, dtype=float) for d in demos]
    batch = build_batch([d.trajectory for d in demos], weights, pad_id, images)
    batch.loss_mask = batch.loss_mask * (batch.advantages > 0)
    return batch


def demonstration_nll(
    model: Any, demos: Sequence[Demonstration], pad_id: int, images: ImageEncoder | None = None
) -> float:
    """Mean negative log-likelihood per demonstrated token (lower: the model imitates better)."""
    batch = imitation_batch(demos, pad_id, images)
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, batch)
    return float(-(logprobs * batch.loss_mask).sum() / batch.loss_mask.sum())
