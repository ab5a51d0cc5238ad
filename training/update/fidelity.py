"""Token fidelity: how far the log-probabilities the engine returned for its sampled tokens
(the behaviour policy's) are from the learner's own for the same tokens, before the update.

With an engine that shares the trained model the gap is rounding; with one that holds its
own copy (vLLM, an async run's snapshot, a server) it is the sampler/learner mismatch (other
kernels, another dtype, a weight sync that did not land) plus, in an asynchronous run, the
staleness of older turns. PPO's ratio is taken against the behaviour log-probabilities
(loss.mode=on-policy), so a large gap biases the update; loss.mode=truncated-is (or
decoupled) takes the ratio against the learner's own log-probabilities and weights each
token by the learner's probability over the engine's, cut at loss.behaviour_cap.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from toolgym.log import get_logger
from toolgym.training.config import TrainConfig
from toolgym.training.distributed import Ranks, all_max, all_sum

log = get_logger(__name__)

GAP_THRESHOLD = 0.1
"""A token past this gap (in nats: a probability ratio outside about 0.9-1.1) counts in
`fidelity_over`."""
WARN_MEAN_GAP = 0.05
"""A step whose mean gap is above this is warned about (measured here: under 1e-6 in
float32 on either engine; the gap of a bfloat16 engine on a GPU was not measured here)."""


@dataclass
class FidelityMeter:
    """Sums the gap over the loss tokens it is shown (one rank's), reduced over the ranks
    when read."""

    total: float = 0.0
    over: float = 0.0
    count: float = 0.0
    largest: float = 0.0

    def add(self, learner: torch.Tensor, behaviour: torch.Tensor, mask: torch.Tensor) -> None:
        """`learner` and `behaviour`: log-probabilities of the same tokens; `mask` is 1 on
        the tokens the loss trains on."""
        on = mask.bool()
        gap = (learner.detach().float() - behaviour.float()).abs()[on]
        if gap.numel():
            self.total += float(gap.sum())
            self.over += float((gap > GAP_THRESHOLD).sum())
            self.count += float(gap.numel())
            self.largest = max(self.largest, float(gap.max()))

    def metrics(self, ranks: Ranks | None) -> dict[str, float]:
        total, over, count = all_sum([self.total, self.over, self.count], ranks)
        if count == 0:
            return {}
        return {
            "fidelity_gap_mean": total / count,
            "fidelity_gap_max": all_max(self.largest, ranks),
            "fidelity_over": over / count,
        }


def warn_on_fidelity(step: int, train_metrics: dict[str, float], config: TrainConfig) -> None:
    """Warn when the engine's log-probabilities have drifted from the learner's."""
    gap = train_metrics.get("fidelity_gap_mean", 0.0)
    if gap > WARN_MEAN_GAP:
        correcting = config.loss.needs_proximal
        log.warning(
            "step %d: the engine's log-probabilities are %.3f nats from the learner's on "
            "average (%.0f%% of tokens past %.2f)%s",
            step, gap, 100 * train_metrics.get("fidelity_over", 0.0), GAP_THRESHOLD,
            f"; loss.mode={config.loss.mode} corrects for it" if correcting
            else "; loss.mode=truncated-is corrects for it",
        )  # fmt: skip
