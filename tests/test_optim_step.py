"""The one optimizer step every training loop takes: a finite gradient steps, a non-finite
one leaves the weights as they were."""

from __future__ import annotations

import torch

from toolgym.training.update.optim_step import optimizer_step


def test_a_finite_step_moves_the_weights_and_sets_the_lr():
    weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    optimizer = torch.optim.SGD([weight], lr=1.0)

    def accumulate():
        loss = (weight**2).sum()
        loss.backward()
        return loss.item()

    done = optimizer_step(optimizer, [weight], accumulate, grad_clip=100.0, lr=0.5)
    assert done.stepped and done.loss == 5.0 and abs(done.grad_norm - 20**0.5) < 1e-6
    assert optimizer.param_groups[0]["lr"] == 0.5
    assert torch.allclose(weight.detach(), torch.tensor([0.0, 0.0]))  # w - 0.5 * 2w


def test_a_non_finite_loss_or_gradient_changes_nothing():
    weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    optimizer = torch.optim.AdamW([weight], lr=1.0)

    def nan_gradient():
        (weight * torch.tensor([float("nan"), 1.0])).sum().backward()
        return 1.0

    done = optimizer_step(optimizer, [weight], nan_gradient, grad_clip=1.0)
    assert not done.stepped and done.loss == 1.0
    assert torch.equal(weight.detach(), torch.tensor([1.0, 2.0])) and not optimizer.state
    assert weight.grad is None or not weight.grad.any()
