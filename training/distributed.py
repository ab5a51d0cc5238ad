"""Several trainer processes (ranks) sharing one model with FSDP2 (`fully_shard`).

A run is distributed when a launcher started it as one of several processes: `torchrun`
sets WORLD_SIZE, RANK and LOCAL_RANK (and where rank 0 listens), and so does a Ray worker
group that follows the same convention. Rank 0 is the leader: it plays the episodes, scores
them and drives the others (learner.py); every rank holds a shard of the weights, the
gradients and AdamW's states, and trains on its share of each batch.

GPUs talk NCCL; CPUs (and the tests) talk gloo. The leader's commands travel on a gloo group
of their own, so they never queue behind the weights' collectives.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from toolgym.errors import ConfigError
from toolgym.training.update.batch import TokenBatch

LAUNCH_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class Ranks:
    """This process's place among the run's processes."""

    rank: int
    world: int
    control: Any
    """The gloo group the leader's commands travel on."""

    @property
    def leader(self) -> bool:
        return self.rank == 0


def launched() -> bool:
    """Whether a launcher started this process as one rank of a distributed run."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def join(device: str, timeout_s: float) -> Ranks:
    """Join the run's process group: NCCL when this rank trains on a GPU, else gloo. On a GPU,
    each rank takes the device numbered by its LOCAL_RANK (device `cuda` or `auto`)."""
    missing = [v for v in LAUNCH_VARIABLES if v not in os.environ]
    if missing:
        raise ConfigError(
            f"a distributed run needs {', '.join(missing)} set: start it with "
            "`torchrun --nproc-per-node N -m toolgym train CONFIG`"
        )
    cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    timeout = datetime.timedelta(seconds=timeout_s)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", timeout=timeout)
    control = dist.new_group(backend="gloo", timeout=timeout)
    return Ranks(dist.get_rank(), dist.get_world_size(), control)


def rank_device(device: str) -> str:
    """The device setting this rank trains on: `cuda` becomes this rank's own GPU."""
    if device in ("cuda", "auto") and torch.cuda.is_available():
        return f"cuda:{torch.cuda.current_device()}"
    return device


def leave() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def shard(model: Any) -> Any:
    """`model` sharded in place: each transformer block is a unit of its own (gathered for its
    forward and backward only), the rest belongs to the root unit. Weights stay float32; the
    compute dtype comes from autocast, as in one process."""
    from torch.distributed.fsdp import fully_shard

    blocks = set(getattr(model, "_no_split_modules", None) or ())
    for module in model.modules():
        if type(module).__name__ in blocks:
            fully_shard(module)
    fully_shard(model)
    return model


def micro_batches(
    minibatch: TokenBatch, ranks: Ranks | None, size: int
) -> Iterator[tuple[list[int], TokenBatch, bool]]:
    """This rank's micro-batches of `minibatch` (at most `size` rows each): their rows, the
    micro-batch, and whether it counts. Every rank must run as many forward and backward
    passes as the others (the weights are gathered for each), so a rank short of rows runs
    a copy of a row whose loss is multiplied by zero (counts: False). Rows are dealt
    round-robin, so their lengths balance."""
    world, rank = (ranks.world, ranks.rank) if ranks else (1, 0)
    chunk = size * world
    for start in range(0, len(minibatch), chunk):
        rows = list(range(start, min(start + chunk, len(minibatch))))[rank::world]
        yield (
            (rows, minibatch.take(rows), True)
            if rows
            else ([start], minibatch.take([start]), False)
        )


def all_max(value: float, ranks: Ranks | None) -> float:
    """The largest of each rank's `value` (on the control group)."""
    if ranks is None or ranks.world == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=ranks.control)
    return float(tensor.item())


def all_sum(values: list[float], ranks: Ranks | None) -> list[float]:
    """Each value summed over the ranks (on the control group)."""
    if ranks is None or ranks.world == 1:
        return values
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor, group=ranks.control)
    return tensor.tolist()
