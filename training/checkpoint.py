"""Atomic checkpoints: everything needed to continue a run exactly where it stopped.

A checkpoint is written to a temporary file and renamed into place, so a run killed while
saving leaves the previous checkpoint intact. It holds the model and optimizer states, the
next step (which also fixes the data position: task seeds derive from the step), and the
random-number states of Python, NumPy and torch.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

FILE = "checkpoint.pt"


def save(
    run_dir: Path,
    *,
    step: int,
    model: Any,
    optimizer: torch.optim.Optimizer,
    extra: dict[str, Any] | None = None,
) -> Path:
    path = run_dir / FILE
    tmp = run_dir / f".{FILE}.tmp"
    state = {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "torch": torch.get_rng_state(),
        },
        "extra": extra or {},
    }
    torch.save(state, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load(run_dir: Path, model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Restore model, optimizer and RNG states; return the checkpoint (its `step` is next)."""
    state = torch.load(run_dir / FILE, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    torch.set_rng_state(state["rng"]["torch"])
    return state


def exists(run_dir: Path) -> bool:
    return (run_dir / FILE).is_file()
