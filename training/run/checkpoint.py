"""Atomic, verified checkpoints: everything needed to continue a run exactly where it stopped.

A checkpoint is written to a temporary file and renamed into place, so a run killed while
saving leaves the previous checkpoint intact. It holds the model and optimizer states, the
next step (which also fixes the data position: task seeds derive from the step), and the
random-number states of Python, NumPy and torch. A distributed run's ranks write the model
and optimizer states as shards beside it (torch.distributed.checkpoint), and the file names
their folder.

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
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from toolgym.errors import ToolgymError, one_line

FILE = "checkpoint.pt"
SHARDS = "checkpoint_shards"
"""The folder of a distributed run's shards, one folder per step (the latest is kept)."""
MARKER = b"toolgym-sha256:"
TRAILER = len(MARKER) + 32


class CheckpointError(ToolgymError, ValueError):
    """A checkpoint cannot be trusted (damaged, incomplete, or from another run)."""


def save(
    run_dir: Path,
    *,
    step: int,
    model: Any = None,
    optimizer: torch.optim.Optimizer | None = None,
    weights: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """`model` and `optimizer` (one process), or `weights`: what `Learner.weights_state` says
    the checkpoint holds of them (their states, or the name of the shards the ranks wrote)."""
    path = run_dir / FILE
    tmp = run_dir / f".{FILE}.tmp"
    if weights is None:
        if model is None or optimizer is None:
            raise ValueError("give the model and the optimizer, or their weights' state")
        weights = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    state = {
        "step": step,
        **weights,
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
    for old in (run_dir / SHARDS).glob("step-*"):  # no longer any checkpoint's
        if old != run_dir / weights.get("shards", ""):
            shutil.rmtree(old, ignore_errors=True)
    return path


def load(run_dir: Path, max_step: int | None = None) -> dict[str, Any]:
    """The run's verified checkpoint (its `step` is the next one); `restore_weights` and
    `restore_rng` put its states back. Raises CheckpointError, naming the file, for anything
    that does not verify."""
    path = run_dir / FILE
    state = read(path)
    step = state["step"]
    if max_step is not None and not 0 <= step <= max_step:
        raise CheckpointError(f"{path}: its step {step} is outside this run's 0..{max_step}")
    return state


def restore_weights(
    run_dir: Path, state: dict[str, Any], model: Any, optimizer: torch.optim.Optimizer
) -> None:
    """Load the checkpoint's weights and optimizer states into `model` and `optimizer`: from
    the file, or from the shards it names (written by any number of ranks, read by any)."""
    path = run_dir / FILE
    try:
        if "shards" in state:  # a CheckpointError from here names the shards' folder
            load_shards(run_dir / state["shards"], model, optimizer)
        else:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
    except CheckpointError:
        raise
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise CheckpointError(
            f"{path}: its states do not fit this model: {one_line(exc)}"
        ) from None


def restore_rng(state: dict[str, Any]) -> None:
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    torch.set_rng_state(state["rng"]["torch"])


def save_shards(run_dir: Path, step: int, model: Any, optimizer: torch.optim.Optimizer) -> str:
    """Every rank writes its shards of the weights and of AdamW's states into a folder of
    the step's own (torch.distributed.checkpoint, which can reshard them for any number of
    ranks); returns its name, for the checkpoint file. A run killed while writing leaves the
    checkpoint file naming the previous step's folder, which is intact."""
    from torch.distributed.checkpoint import save as save_distributed
    from torch.distributed.checkpoint.state_dict import get_state_dict

    name = f"{SHARDS}/step-{step}"
    model_state, optimizer_state = get_state_dict(model, optimizer)
    save_distributed(
        {"model": model_state, "optimizer": optimizer_state}, checkpoint_id=run_dir / name
    )
    return name


def load_shards(folder: Path, model: Any, optimizer: torch.optim.Optimizer) -> None:
    """Load shards written by `save_shards`, on as many ranks as this run has (one process,
    not distributed, reads them whole)."""
    from torch.distributed.checkpoint import load as load_distributed
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    if not (folder / ".metadata").is_file():
        raise CheckpointError(f"{folder}: no complete shards there (no .metadata)")
    from torch.distributed.checkpoint.api import CheckpointException

    model_state, optimizer_state = get_state_dict(model, optimizer)
    try:
        load_distributed({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=folder)
    except CheckpointException as exc:  # a BaseException: the ranks' reading failures
        errors = [f[0] if isinstance(f, tuple) else f for f in exc.failures.values()]
        causes = [one_line(f"{type(e).__name__}: {e}", 200) for e in errors]
        raise CheckpointError(
            f"{folder}: its shards cannot be read ({'; '.join(causes)})"
        ) from None
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state)


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
    held = set(state if isinstance(state, dict) else ())
    missing = {"step", "rng"} - held
    if not {"model", "optimizer"} <= held and "shards" not in held:
        missing |= {"model", "optimizer"}
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
