"""Where the model runs and in what precision, for the trainer and the in-process engine.

`device`: auto (cuda when a GPU is visible, else cpu), cpu, cuda or cuda:N.
`dtype`: auto (bfloat16 on a GPU that supports it, float32 otherwise), float32, bfloat16 or
float16. Weights and optimizer states stay in float32 (the master copy); a lower dtype is
the compute precision, through autocast, for the forward passes of both training and
generation, so the engine's log-probabilities and the trainer's are computed alike. Log-
softmax and the loss are always float32.
"""

from __future__ import annotations

import contextlib
import resource
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from toolgym.errors import ConfigError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""The compute dtypes `dtype` may name besides auto (bfloat16 on a GPU that has it, else
float32); the train config lists the same names, so that checking it loads no torch."""


@dataclass(frozen=True)
class Precision:
    device: torch.device
    dtype: torch.dtype
    """The compute dtype (float32: no autocast)."""

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        if self.dtype == torch.float32:
            yield
        else:
            with torch.autocast(self.device.type, dtype=self.dtype):
                yield

    def describe(self) -> str:
        return f"{self.device} {str(self.dtype).removeprefix('torch.')}"


def resolve_precision(device: str = "auto", dtype: str = "auto") -> Precision:
    """The device and compute dtype the settings name, checked against this machine."""
    cuda = torch.cuda.is_available()
    if device == "auto":
        chosen = torch.device("cuda" if cuda else "cpu")
    else:
        try:
            chosen = torch.device(device)
        except RuntimeError:
            raise ConfigError(f"device {device!r}: use auto, cpu, cuda or cuda:N") from None
        if chosen.type not in ("cpu", "cuda"):
            raise ConfigError(f"device {device!r}: use auto, cpu, cuda or cuda:N")
        if chosen.type == "cuda" and not cuda:
            raise ConfigError(f"device {device!r} was asked for, but torch sees no CUDA GPU here")
        if chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise ConfigError(f"device {device!r}: only {torch.cuda.device_count()} GPU(s) here")
    if dtype == "auto":
        bf16 = chosen.type == "cuda" and torch.cuda.is_bf16_supported()
        return Precision(chosen, torch.bfloat16 if bf16 else torch.float32)
    if dtype not in DTYPES:
        raise ConfigError(f"dtype {dtype!r}: use auto, {', '.join(DTYPES)}")
    if dtype == "float16" and chosen.type == "cpu":
        raise ConfigError("dtype float16 needs a GPU; on cpu use float32 or bfloat16")
    return Precision(chosen, DTYPES[dtype])


def peak_memory_gb(device: torch.device) -> float:
    """Peak memory so far: allocated GPU memory on cuda, the process's peak RSS on cpu."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**30 if sys.platform == "darwin" else peak / 2**20
