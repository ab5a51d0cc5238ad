"""Atomic, verified checkpoints: everything needed to continue a run exactly where it stopped.

A checkpoint is written to a temporary file and renamed into place, so a run killed while
saving leaves the previous checkpoint intact. It holds the model and optimizer states, the
next step (which also fixes the data position: task seeds derive from the step), and the
random-number states of Python, NumPy and torch.

The file is torch.save's bytes followed by a trailer: a marker and the SHA-256 of those bytes
(both hashed in chunks, so nothing is held twice in memory). Loading checks the digest before
unpickling anything, so a file that was truncated, emptied
or overwritten in place (a bad disk, a copy gone wrong) stops the resume with one line naming
the file, instead of training on whatever it now holds.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from toolgym.errors import ToolgymError, one_line

FILE = "checkpoint.pt"
MARKER = b"toolgym-sha256:"
TRAILER = len(MARKER) + 32


class CheckpointError(ToolgymError, ValueError):
    """A checkpoint cannot be trusted (damaged, incomplete, or from another run)."""


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
    digest = _sha256(tmp, os.path.getsize(tmp))
    with open(tmp, "ab") as f:
        f.write(MARKER + digest)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load(
    run_dir: Path, model: Any, optimizer: torch.optim.Optimizer, max_step: int | None = None
) -> dict[str, Any]:
    """Restore model, optimizer and RNG states; return the checkpoint (its `step` is next).
    Raises CheckpointError, naming the file, for anything that does not verify."""
    path = run_dir / FILE
    state = read(path)
    step = state["step"]
    if max_step is not None and not 0 <= step <= max_step:
        raise CheckpointError(f"{path}: its step {step} is outside this run's 0..{max_step}")
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(
            f"{path}: its states do not fit this model: {one_line(exc)}"
        ) from None
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    torch.set_rng_state(state["rng"]["torch"])
    return state


def read(path: Path) -> dict[str, Any]:
    """The verified contents of the checkpoint at `path`."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            f.seek(max(size - TRAILER, 0))
            trailer = f.read()
        digest = _sha256(path, size - TRAILER) if size >= TRAILER else b""
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc.strerror})") from None
    if size < TRAILER or not trailer.startswith(MARKER):
        raise CheckpointError(f"{path}: not a complete toolgym checkpoint (no checksum at its end)")
    if digest != trailer[len(MARKER) :]:
        raise CheckpointError(f"{path}: its checksum does not match; the file is damaged")
    try:  # torch's zip reader finds its directory from the end and ignores the trailer
        state = torch.load(path, weights_only=False)
    except Exception as exc:  # verified bytes that still do not load: another format
        raise CheckpointError(f"{path}: cannot be loaded ({type(exc).__name__})") from None
    missing = {"step", "model", "optimizer", "rng"} - set(state if isinstance(state, dict) else ())
    if missing or not isinstance(state["step"], int):
        raise CheckpointError(f"{path}: incomplete (missing {sorted(missing) or ['step']})")
    return state


def _sha256(path: Path, length: int) -> bytes:
    """The digest of the first `length` bytes of `path`, read in chunks (a checkpoint can be
    larger than the memory left beside the model it holds)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while length > 0:
            chunk = f.read(min(length, 1 << 24))
            if not chunk:
                break
            digest.update(chunk)
            length -= len(chunk)
    return digest.digest()


def exists(run_dir: Path) -> bool:
    return (run_dir / FILE).is_file()
