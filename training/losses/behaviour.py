"""How the loss treats samples drawn by an older policy than the one it updates: one weight
per loss token, picked by name from the losses' CORRECTIONS (the `loss.mode` setting).

Three policies take part: the behaviour policy that sampled a token (its log-probability
came back from the engine), the proximal policy (the trained weights as they stood before
this update, recomputed by the trainer) and the policy being updated.

- on-policy:    PPO's ratio is taken against the behaviour log-probabilities; no weight.
                Right when the engine samples exactly the weights being trained.
- decoupled:    decoupled PPO (Hilton et al., 2022; AReaL): the ratio is taken against the
                proximal policy, so the trust region is around weights the trainer holds,
                and each token is weighted by proximal / behaviour probability. A token
                whose weight exceeds `behaviour_cap` is left out of the loss.
- truncated-is: truncated importance sampling (Yao et al., 2025): the same ratio against
                the proximal policy, and the weight cut at `behaviour_cap` (the token stays
                in, its weight no larger than the cap).

Weights carry no gradient: they re-weight samples, they are not part of what is optimized.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Correction = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor | None]
"""(proximal log-probs, behaviour log-probs, cap) -> per-token weight, or None (no weight)."""


def on_policy(proximal: torch.Tensor, behaviour: torch.Tensor, cap: float) -> None:
    return None


def decoupled(proximal: torch.Tensor, behaviour: torch.Tensor, cap: float) -> torch.Tensor:
    weight = torch.exp(proximal - behaviour).detach()
    return torch.where(weight <= cap, weight, torch.zeros_like(weight))


def truncated_is(proximal: torch.Tensor, behaviour: torch.Tensor, cap: float) -> torch.Tensor:
    return torch.exp(proximal - behaviour).detach().clamp(max=cap)
