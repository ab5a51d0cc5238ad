"""The implicit PRM as a reward source (`source: implicit_prm`, with `scores: process`).

A language model of its own, loaded from the policy's starting weights (or `model`), that
learns online from outcomes alone: at every training step it first scores the step's
trajectories, then takes one DPO step on their success/failure pairs (training/process/
implicit_prm.py has the formulas). Scoring before updating is PRIME's order: the scores come
from a PRM that has not yet seen these trajectories' outcomes, so they cannot leak them.

The DPO loss couples the trajectories of a group, but its gradient reaches each trajectory
only through that trajectory's summed log-probability. So the loss is taken on the summed
values of the scoring pass, and each micro-batch then back-propagates its sums times their
loss gradients: the exact gradient, with memory bounded by one micro-batch, not by a group.

Its model, optimizer and step count go into the run's checkpoint (`state_dict`), so a
resumed run continues the PRM where it stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from toolgym.agents.models.device import Precision
from toolgym.agents.models.loading import load_model
from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.agents.vision import ImageEncoder
from toolgym.config import validate
from toolgym.errors import ConfigError, one_line
from toolgym.training.lora import LoraSection, with_lora
from toolgym.training.process.implicit_prm import dpo_loss, preference_pairs
from toolgym.training.rewards.base import RunContext
from toolgym.training.rewards.prepared import PreparedScores
from toolgym.training.rewards.prm_settings import PRMSettings
from toolgym.training.rewards.stage import RewardError
from toolgym.training.schedule import lr_factor
from toolgym.training.update.batch import build_batch, token_logprobs
from toolgym.training.update.optim_step import adamw, optimizer_step


class ImplicitPRMReward(PreparedScores):
    source_name = "implicit_prm"
    Settings = PRMSettings

    def __init__(self, context: RunContext, **settings: Any) -> None:
        super().__init__()
        self.settings = s = validate(self.Settings, settings)
        self.context = context
        path = s.model or context.model
        self.model = _load_model(path, context.precision, s.lora)
        self.images = ImageEncoder.for_model(path, self.model.config)
        self.optimizer = adamw(self.model, s.lr)
        self.updates = 0
        """Training steps the PRM has seen (scored and, where there were pairs, learned from)."""

    # ----- the reward-source contract ------------------------------------------------------
    async def prepare(
        self, groups: Sequence[TrajectoryGroup], returns: Sequence[Sequence[float]] | None
    ) -> None:
        """Score every unmasked trajectory of the step, then learn from the step's pairs:
        within a group, a trajectory is preferred to another by its outcome return (the
        run's outcome rewards summed). The passes run in a thread, off the run's loop."""
        await asyncio.to_thread(self.prepare_now, groups, returns)

    def prepare_now(
        self, groups: Sequence[TrajectoryGroup], returns: Sequence[Sequence[float]] | None
    ) -> None:
        if returns is None:
            raise RewardError("implicit_prm scores steps: give it `scores: process`")
        t0 = time.perf_counter()
        kept = [
            [(t, r) for t, r in zip(g.trajectories, row, strict=True) if not t.masked and t.steps]
            for g, row in zip(groups, returns, strict=True)
        ]
        flat = [t for group in kept for t, _ in group]
        self.scores = {}
        if not flat:
            self.updates += 1
            self.last_metrics = {}
            return
        if any(t.segment_starts for t in flat):
            raise RewardError(
                "implicit_prm scores each episode as one sequence, and an episode played "
                "through the gateway whose harness rewrote its history has several"
            )
        batch = build_batch(flat, [np.zeros(len(t.steps)) for t in flat], 0, self.images)
        prm_totals, old_totals = self.score(batch, flat)
        pairs, owner = [], 0
        for group in kept:
            outcomes = [self._outcome(r) for _, r in group]
            pairs += [
                (owner + i, owner + j) for i, j in preference_pairs(outcomes, [True] * len(group))
            ]
            owner += len(group)
        metrics = self._learn(batch, prm_totals, old_totals, pairs)
        self.updates += 1
        self.last_metrics = {
            **metrics,
            **self._separation(flat, pairs),
            "pairs": float(len(pairs)),
            "seconds": time.perf_counter() - t0,
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])

    # ----- the work ------------------------------------------------------------------------
    @torch.no_grad()
    def score(self, batch: Any, flat: list[Trajectory]) -> tuple[torch.Tensor, torch.Tensor]:
        """Each step's reward beta * sum(log pi_prm - log pi_old) over its action tokens, into
        self.scores; each trajectory's summed PRM and behaviour log-probabilities."""
        self.model.eval()
        device = self.context.precision.device
        prm_totals, old_totals, row = [], [], 0
        for micro in batch.split(self.settings.micro_batch_size):
            micro = micro.to(device)
            with self.context.precision.autocast():
                prm = token_logprobs(self.model, micro)[0].float()
            ratio = (prm - micro.old_logprobs) * micro.loss_mask
            prm_totals.append((prm * micro.loss_mask).sum(-1).cpu())
            old_totals.append((micro.old_logprobs * micro.loss_mask).sum(-1).cpu())
            for r in ratio.cpu().numpy():
                t = flat[row]
                self.scores[t.id] = [
                    self.settings.beta * float(r[s.response_start - 1 : s.response_end - 1].sum())
                    for s in t.steps
                ]
                row += 1
        return torch.cat(prm_totals), torch.cat(old_totals)

    def _learn(
        self,
        batch: Any,
        prm_totals: torch.Tensor,
        old_totals: torch.Tensor,
        pairs: list[tuple[int, int]],
    ) -> dict[str, float]:
        """One optimizer step on the pairs' mean DPO loss; nothing without pairs."""
        if not pairs:
            return {}
        s = self.settings
        factor = lr_factor(self.updates, self.context.steps, s.schedule, s.warmup_steps, 0.0)
        done = optimizer_step(
            self.optimizer,
            self.model.parameters(),
            lambda: self.backward(batch, prm_totals, old_totals, pairs),
            s.grad_clip,
            lr=s.lr * factor,
        )
        if not done.stepped:
            raise RewardError("implicit_prm: its gradient norm is not finite")
        loss, grad_norm = done.loss, done.grad_norm
        margins = s.beta * (prm_totals - old_totals)
        return {
            "loss": loss,
            "pair_accuracy": float(np.mean([float(margins[p] > margins[r]) for p, r in pairs])),
            "grad_norm": grad_norm,
            "lr": s.lr * factor,
        }

    def backward(
        self,
        batch: Any,
        prm_totals: torch.Tensor,
        old_totals: torch.Tensor,
        pairs: list[tuple[int, int]],
    ) -> float:
        """Accumulate the gradient of the pairs' mean DPO loss in the PRM's parameters, one
        micro-batch at a time (each sequence's summed log-probability times the loss's
        gradient with respect to it); returns the loss."""
        leaf = prm_totals.clone().requires_grad_(True)
        loss = dpo_loss(leaf, old_totals, pairs, self.settings.beta)
        if not torch.isfinite(loss):
            raise RewardError(f"implicit_prm: the DPO loss is not finite ({loss.item()})")
        loss.backward()
        weights = leaf.grad
        assert weights is not None
        device, start = self.context.precision.device, 0
        self.model.train()
        for micro in batch.split(self.settings.micro_batch_size):
            micro = micro.to(device)
            rows = weights[start : start + len(micro)].to(device)
            start += len(micro)
            with self.context.precision.autocast():
                prm = token_logprobs(self.model, micro)[0].float()
            ((prm * micro.loss_mask).sum(-1) * rows).sum().backward()
        self.model.eval()
        return loss.item()

    def _outcome(self, total: float) -> float:
        return float(total > 0) if self.settings.prefer == "success" else total

    def _separation(self, flat: list[Trajectory], pairs: list[tuple[int, int]]) -> dict[str, float]:
        """How the PRM's scores (given before this step's update, so on trajectories it had
        not learned from) tell preferred from rejected trajectories: the mean step reward of
        the preferred minus the rejected, and the share of pairs it orders right."""
        if not pairs:
            return {}
        mean_step = [float(np.mean(self.scores[t.id])) for t in flat]
        preferred = sorted({p for p, _ in pairs})
        rejected = sorted({r for _, r in pairs})
        return {
            "separation": float(
                np.mean([mean_step[i] for i in preferred])
                - np.mean([mean_step[i] for i in rejected])
            ),
            "score_accuracy": float(np.mean([mean_step[p] > mean_step[r] for p, r in pairs])),
        }


def _load_model(path: str, precision: Precision, lora: LoraSection | None) -> Any:
    """float32 weights on the run's device; with `lora`, only an adapter on them trains."""
    if not Path(path).is_dir():
        raise ConfigError(f"no model directory at {path}")
    try:
        model: Any = load_model(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load its model from {path}: {one_line(exc)}") from None
    model = model.to(precision.device)
    if lora is not None:
        model = with_lora(model, lora, "implicit_prm's lora")
    return model.eval()
