"""Token-level PPO-clip (Schulman et al., 2017) with asymmetric clipping (DAPO's clip-higher),
dual clipping of negative advantages (Ye et al., 2020), an optional KL penalty to a frozen
reference (Schulman's k3 estimator) and an entropy bonus.

Per loss token, with ratio r = exp(logp - logp_behaviour) and advantage A:

    pg   = -min(r * A, clip(r, 1 - clip_low, 1 + clip_high) * A)
    pg   = min(pg, -clip_dual * A)                               where A < 0
    kl   = exp(logp_ref - logp) - (logp_ref - logp) - 1          (k3, >= 0)
    loss = pg + kl_coef * kl - entropy_coef * entropy

aggregated by losses/aggregate.py. Under `mode` decoupled or truncated-is the ratio is taken
against the proximal log-probabilities instead of the behaviour ones, and pg is weighted per
token by behaviour.py's correction.
"""

from __future__ import annotations

import functools

import torch

from toolgym.errors import lookup
from toolgym.imports import load_callable
from toolgym.training.config import LossSection
from toolgym.training.losses import CORRECTIONS
from toolgym.training.losses.aggregate import Normalizer, aggregate
from toolgym.training.losses.behaviour import Correction


def ppo_clip_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    normalizer: Normalizer,
    config: LossSection | None = None,
    ref_logprobs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    proximal_logprobs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """All tensors (batch, tokens); `mask` is 1 on the model's own tokens; `old_logprobs` are
    the behaviour policy's. Returns the loss and metrics (clip fraction, approximate KL to the
    policy the ratio is taken against, ...) over masked tokens. `config`: the run's loss
    section (default: its defaults)."""
    config = config or LossSection()
    correction = _correction(config.mode)
    anchor = old_logprobs
    weight = None
    if config.needs_proximal:
        if proximal_logprobs is None:
            raise ValueError(f"loss mode '{config.mode}' needs the proximal log-probabilities")
        anchor = proximal_logprobs
        weight = correction(proximal_logprobs, old_logprobs, config.behaviour_cap)
    log_ratio = logprobs - anchor
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1 - config.clip_low, 1 + config.clip_high)
    per_token = -torch.minimum(ratio * advantages, clipped * advantages)
    # PPO's min leaves r * A unbounded for A < 0 once r grows: one token whose probability
    # already rose far (a later minibatch) can then dominate the update. Cap it at clip_dual.
    capped = torch.minimum(per_token, -config.clip_dual * advantages)
    per_token = torch.where(advantages < 0, capped, per_token)
    metrics: dict[str, float] = {}
    if weight is not None and proximal_logprobs is not None:
        per_token = per_token * weight
        metrics |= _behaviour_metrics(proximal_logprobs, old_logprobs, mask, config.behaviour_cap)
    if config.kl_coef and ref_logprobs is not None:
        delta = ref_logprobs - logprobs
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + config.kl_coef * kl
        metrics["kl_ref"] = _masked_mean(kl, mask)
    if config.entropy_coef and entropy is not None:
        per_token = per_token - config.entropy_coef * entropy
    loss = aggregate(per_token, mask, config.aggregation, normalizer)
    with torch.no_grad():
        was_clipped = ((ratio * advantages) > (clipped * advantages)).float()
        metrics["clip_fraction"] = _masked_mean(was_clipped, mask)
        dual_clipped = ((advantages < 0) & (ratio > config.clip_dual)).float()
        metrics["dual_clip_fraction"] = _masked_mean(dual_clipped, mask)
        metrics["approx_kl"] = _masked_mean(approx_kl(log_ratio), mask)
        metrics["ratio_mean"] = _masked_mean(ratio, mask)
        if entropy is not None:
            metrics["entropy"] = _masked_mean(entropy, mask)
    return loss, metrics


def approx_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """Each token's approximate KL between two policies from their log-ratio (0.5 * r^2)."""
    return 0.5 * log_ratio**2


def _behaviour_metrics(
    proximal: torch.Tensor, behaviour: torch.Tensor, mask: torch.Tensor, cap: float
) -> dict[str, float]:
    """The proximal / behaviour probability ratio over loss tokens, before any cap."""
    with torch.no_grad():
        ratio = torch.exp(proximal - behaviour)
        on = mask.bool()
        return {
            "behaviour_weight_mean": _masked_mean(ratio, mask),
            "behaviour_weight_max": float(ratio[on].max()) if on.any() else 1.0,
            "behaviour_capped": _masked_mean((ratio > cap).float(), mask),
        }


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    m = mask.to(values.dtype)
    return float((values.detach() * m).sum() / m.sum().clamp(min=1))


@functools.cache
def _correction(mode: str) -> Correction:
    """The weight function `loss.mode` names, imported once (the loss runs every micro-batch)."""
    found: Correction = load_callable(lookup(CORRECTIONS, mode, "loss mode"), "loss mode")
    return found
