"""One optimizer step, the same for every loop that trains weights (the RL trainer, SFT,
pretraining, the implicit PRM): set the learning rate, accumulate the gradient, clip it,
and step only if the loss and the gradient norm are finite (else the gradient is dropped and
the weights stay as they were; the caller says what that means for its run). Every such
loop builds its optimizer with `adamw`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch.distributed.tensor import DTensor


@dataclass(frozen=True)
class StepResult:
    loss: float
    """What `accumulate` returned: the step's loss."""
    grad_norm: float
    """The gradient's global norm before clipping."""
    stepped: bool
    """False when the loss or the gradient norm was not finite, or the step was held:
    nothing changed."""
    held: bool = False
    """`hold` said the step should not be taken (the gradient was dropped)."""


def adamw(
    model: torch.nn.Module,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
) -> torch.optim.Optimizer:
    """AdamW over `model`'s trainable parameters (float32 weights keep float32 states): the
    one optimizer every loop that trains weights builds."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(trainable, lr=lr, weight_decay=weight_decay, betas=betas)


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    parameters: Iterable[torch.nn.Parameter],
    accumulate: Callable[[], float],
    grad_clip: float,
    lr: float | None = None,
    hold: Callable[[], bool] | None = None,
) -> StepResult:
    """`accumulate()` runs the backward passes (one per micro-batch) and returns the loss;
    `lr`, when given, is set on every parameter group first; `hold()`, asked once the
    gradient is in, True drops it and leaves the weights (and the optimizer's moments) as
    they were."""
    if lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr
    optimizer.zero_grad()
    loss = accumulate()
    if hold is not None and hold():
        optimizer.zero_grad()
        return StepResult(loss, 0.0, stepped=False, held=True)
    norm = torch.nn.utils.clip_grad_norm_(list(parameters), grad_clip)
    if isinstance(norm, DTensor):  # the norm over sharded weights: the ranks' whole
        norm = norm.full_tensor()
    grad_norm = float(norm)
    if not (math.isfinite(loss) and math.isfinite(grad_norm)):
        optimizer.zero_grad()
        return StepResult(loss, grad_norm, False)
    optimizer.step()
    return StepResult(loss, grad_norm, True)
