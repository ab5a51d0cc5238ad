"""The update phase: the trained weights, their optimizer and the frozen reference, and what
is done with them (a PPO update on a batch, their full state for the engine or the saved
policy, their checkpoint).

One process holds a `Learner`. In a distributed run (distributed.py) every rank holds one
over its shard, and rank 0 drives the others through `Leader`: each call is announced first,
then made on every rank at once, so the weights' collectives line up. The other ranks do
nothing but `follow`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import torch.distributed as dist

from toolgym.agents.models.device import Precision
from toolgym.errors import ConfigError
from toolgym.training.config import TrainConfig
from toolgym.training.distributed import Ranks, all_sum, micro_batches
from toolgym.training.losses.aggregate import normalizer_for
from toolgym.training.losses.ppo_clip import approx_kl, ppo_clip_loss
from toolgym.training.run import checkpoint
from toolgym.training.schedule import lr_factor
from toolgym.training.update.batch import TokenBatch, token_logprobs
from toolgym.training.update.fidelity import FidelityMeter
from toolgym.training.update.optim_step import optimizer_step
from toolgym.training.update.weight_sync import TrainedWeights


class Learns(TrainedWeights, Protocol):
    """What the trainer asks of its learner, in one process or as a distributed run's leader
    (a weight sync reads its weights as `TrainedWeights`)."""

    def update(self, batch: TokenBatch, step: int) -> dict[str, float]: ...

    def weights_state(self, run_dir: Path, step: int) -> dict[str, Any]: ...

    def restore(self, run_dir: Path, state: dict[str, Any]) -> None: ...

    def stop(self) -> None: ...


class Learner:
    def __init__(
        self,
        model: Any,
        reference: Any,
        optimizer: torch.optim.Optimizer,
        precision: Precision,
        config: TrainConfig,
        ranks: Ranks | None = None,
    ) -> None:
        """`reference`: the frozen start policy for the KL term (None without one, or under
        LoRA, where the base is the reference). `ranks`: this rank's place in a distributed
        run (None in one process)."""
        self.model, self.reference, self.optimizer = model, reference, optimizer
        self.precision, self.config, self.ranks = precision, config, ranks
        self.ppo = config.loss

    def update(self, batch: TokenBatch, step: int) -> dict[str, float]:
        """ppo_epochs passes over `batch`, one optimizer step per mini-batch. With
        optim.on_nonfinite=stop it stops at the first step whose loss or gradient norm is not
        finite (`stopped` is 1 then; the weights are as that step found them). With
        optim.target_kl, a mini-batch after the first whose approx KL, measured before its
        step, is above it takes no step and ends the update (`held` is 1 then).
        `approx_kl_after` is the updated weights' KL from the policy that played, on the last
        mini-batch stepped: what the last step did, which no later mini-batch measures."""
        batch = batch.to(self.precision.device)
        optim = self.config.optim
        lr = optim.lr * lr_factor(
            step, self.config.steps, optim.schedule, optim.warmup_steps, optim.min_lr_ratio
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        minibatch_size = -(-len(batch) // optim.minibatches)
        fidelity = FidelityMeter()
        if self.ppo.needs_proximal:
            batch = self.with_proximal(batch)
            assert batch.proximal_logprobs is not None
            fidelity.add(batch.proximal_logprobs, batch.old_logprobs, batch.loss_mask)
        self.model.train()
        stop = optim.on_nonfinite == "stop"
        steps: list[dict[str, float]] = []
        passes = (batch.split(minibatch_size) for _ in range(optim.ppo_epochs))
        held = last = None
        for minibatch in itertools.chain.from_iterable(passes):
            # without the proximal pass, the first mini-batch's forward passes are the
            # learner's own log-probabilities before any update
            meter = None if self.ppo.needs_proximal or steps else fidelity
            done = self.optimizer_step(minibatch, meter, optim.target_kl if steps else None)
            if done.pop("held"):  # its KL is what held it; its loss and norm were not stepped
                held = done
                break
            steps.append(done)
            last = minibatch
            if stop and steps[-1]["skipped"]:
                break
        self.model.eval()
        out = {k: float(np.mean([s[k] for s in steps])) for k in steps[0]}
        kls = [s["approx_kl"] for s in [*steps, *([held] if held else [])] if "approx_kl" in s]
        out |= {"approx_kl_max": max(kls, default=0.0), "held": float(held is not None)}
        if last is not None:
            out["approx_kl_after"] = self.kl_after(last)
        # with the proximal pass every rank holds every row's (nothing to reduce)
        out |= fidelity.metrics(None if self.ppo.needs_proximal else self.ranks)
        out["stopped"] = float(stop and bool(steps[-1]["skipped"]))
        out["tokens"] = float(batch.loss_mask.sum())
        out["lr"] = lr
        return out

    @torch.no_grad()
    def kl_after(self, minibatch: TokenBatch) -> float:
        """The weights' approx KL (a mean over loss tokens) from the policy
        that played `minibatch`, every rank's tokens counted."""
        total = count = 0.0
        size = self.config.optim.micro_batch_size
        for _, micro, counts in micro_batches(minibatch, self.ranks, size):
            with self.precision.autocast():
                logprobs = token_logprobs(self.model, micro)[0]
            if counts:
                on = micro.loss_mask.bool()
                log_ratio = (logprobs.float() - micro.old_logprobs.float())[on]
                total += float(approx_kl(log_ratio).sum())
                count += float(log_ratio.numel())
        total, count = all_sum([total, count], self.ranks)
        return total / max(count, 1.0)

    @torch.no_grad()
    def with_proximal(self, batch: TokenBatch) -> TokenBatch:
        """The batch with the weights' log-probabilities of its targets before the update
        (each rank scores its own rows; the ranks share them)."""
        scored = torch.zeros_like(batch.old_logprobs)
        for rows, micro, counts in micro_batches(
            batch, self.ranks, self.config.optim.micro_batch_size
        ):
            with self.precision.autocast():
                logprobs = token_logprobs(self.model, micro)[0]
            if counts:
                scored[rows, : logprobs.shape[1]] = logprobs.float()
        if self.ranks is not None and self.ranks.world > 1:
            dist.all_reduce(scored)
        return replace(batch, proximal_logprobs=scored)

    def optimizer_step(
        self,
        minibatch: TokenBatch,
        fidelity: FidelityMeter | None = None,
        target_kl: float | None = None,
    ) -> dict[str, float]:
        """One optimizer step on `minibatch`, its gradient accumulated over micro-batches.
        Returns its loss, gradient norm and the micro-batches' mean loss metrics. `fidelity`
        is shown each micro-batch's log-probabilities (taken before the step). Its approx KL
        (every rank's, summed) above `target_kl` holds the step (`held`: 1)."""
        normalizer = normalizer_for(minibatch.loss_mask, max_tokens=self.config.rollout.max_tokens)
        world = self.ranks.world if self.ranks else 1
        sums: dict[str, float] = {}
        count = 0.0

        def accumulate() -> float:
            nonlocal count
            total = 0.0
            size = self.config.optim.micro_batch_size
            for _, micro, counts in micro_batches(minibatch, self.ranks, size):
                with self.precision.autocast():
                    logprobs, entropy = token_logprobs(self.model, micro, with_entropy=True)
                    reference = self.reference_logprobs(micro)
                if fidelity is not None and counts:
                    fidelity.add(logprobs, micro.old_logprobs, micro.loss_mask)
                loss, metrics = ppo_clip_loss(
                    logprobs,
                    micro.old_logprobs,
                    micro.advantages,
                    micro.loss_mask,
                    normalizer,
                    self.ppo,
                    ref_logprobs=reference,
                    entropy=entropy,
                    proximal_logprobs=micro.proximal_logprobs,
                )
                # the ranks' gradients are averaged: each rank's share counts `world` times
                (loss * (world if counts else 0.0)).backward()
                total += loss.item() if counts else 0.0
                for k, v in metrics.items():
                    sums[k] = sums.get(k, 0.0) + (v if counts else 0.0)
                count += float(counts)
            keys = sorted(sums)
            reduced = all_sum([total, count, *(sums[k] for k in keys)], self.ranks)
            total, count = reduced[0], reduced[1]
            sums.update(zip(keys, reduced[2:], strict=True))
            return total

        def too_far() -> bool:
            return (
                target_kl is not None and sums.get("approx_kl", 0.0) / max(count, 1.0) > target_kl
            )

        done = optimizer_step(
            self.optimizer, self.model.parameters(), accumulate, self.config.optim.grad_clip,
            hold=too_far,
        )  # fmt: skip
        out = {k: v / max(count, 1.0) for k, v in sums.items()}
        skipped = not done.stepped and not done.held
        return out | {"loss": done.loss, "grad_norm": done.grad_norm, "skipped": float(skipped),
                      "held": float(done.held)}  # fmt: skip

    @torch.no_grad()
    def reference_logprobs(self, micro: TokenBatch) -> torch.Tensor | None:
        if self.config.loss.kl_coef == 0:
            return None
        if self.reference is not None:
            return token_logprobs(self.reference, micro)[0]
        with self.model.disable_adapter():
            return token_logprobs(self.model, micro)[0]

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """Every weight, whole (gathered from the ranks' shards in a distributed run), on
        the CPU there; the engine takes them, and the saved policy is written from them."""
        if self.ranks is None:
            return self.model.state_dict()
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state: dict[str, torch.Tensor] = get_model_state_dict(self.model, options=options)  # type: ignore[assignment]
        return state

    def save_adapter(self, path: Path) -> None:
        """The LoRA adapter, as peft saves it (a LoRA sync hands it to the engine)."""
        self.model.save_pretrained(path)

    def weights_state(self, run_dir: Path, step: int) -> dict[str, Any]:
        """What a checkpoint holds of the weights and the optimizer: their states in one
        process; in a distributed run, the name of the shards every rank has just written."""
        if self.ranks is None:
            return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        return {"shards": checkpoint.save_shards(run_dir, step, self.model, self.optimizer)}

    def restore(self, run_dir: Path, state: dict[str, Any]) -> None:
        """Load the weights and optimizer states a checkpoint holds (from its shards, written
        by any number of ranks, or from the file itself)."""
        checkpoint.restore_weights(run_dir, state, self.model, self.optimizer)

    def stop(self) -> None:
        """Nothing to stop in one process (the leader tells the other ranks)."""


COMMANDS: dict[str, Callable[..., Any]] = {
    "update": Learner.update,
    "full_state_dict": Learner.full_state_dict,
    "weights_state": Learner.weights_state,
    "restore": Learner.restore,
}
"""What the leader can ask of the other ranks (`stop` ends their `follow`)."""


class Leader:
    """Rank 0's learner in a distributed run: each call is announced to the other ranks,
    which make it on their shards while this rank makes it on its own."""

    def __init__(self, learner: Learner, ranks: Ranks) -> None:
        self.learner, self.ranks = learner, ranks

    def _announce(self, command: str, *args: Any) -> None:
        dist.broadcast_object_list([command, args], src=0, group=self.ranks.control)

    def update(self, batch: TokenBatch, step: int) -> dict[str, float]:
        self._announce("update", batch, step)
        return self.learner.update(batch, step)

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        self._announce("full_state_dict")
        return self.learner.full_state_dict()

    def save_adapter(self, path: Path) -> None:
        raise ConfigError("a distributed run trains full weights; it has no adapter to save")

    def weights_state(self, run_dir: Path, step: int) -> dict[str, Any]:
        self._announce("weights_state", run_dir, step)
        return self.learner.weights_state(run_dir, step)

    def restore(self, run_dir: Path, state: dict[str, Any]) -> None:
        if "shards" not in state:
            raise checkpoint.CheckpointError(
                f"{run_dir / checkpoint.FILE} was written by one process; resume it in one "
                "process (a distributed run resumes from the shards its ranks write)"
            )
        shards = {"shards": state["shards"]}
        self._announce("restore", run_dir, shards)
        self.learner.restore(run_dir, shards)

    def stop(self) -> None:
        self._announce("stop")


def follow(learner: Learner, ranks: Ranks) -> None:
    """A follower rank's whole run: make each call the leader announces, until it stops."""
    while True:
        message: list[Any] = [None, None]
        dist.broadcast_object_list(message, src=0, group=ranks.control)
        command, args = message
        if command == "stop":
            return
        COMMANDS[command](learner, *args)
