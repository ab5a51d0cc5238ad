"""Ray, optional (`pip install 'toolgym[dist]'`): importing it with a clear error when it is
missing, and joining the cluster a run names."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from toolgym.errors import ConfigError, one_line

INSTALL = "pip install 'toolgym[dist]'"


def import_ray() -> Any:
    """Ray, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"Ray is not installed; install it with: {INSTALL}") from None
    return ray


def connect(address: str) -> Any:
    """Ray, joined to the cluster at `address` (auto: the one `ray start` runs on this
    machine; host:port of its head; local: one started in this process), unless this
    process has joined one already."""
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(
                address=None if address == "local" else address,
                include_dashboard=False,
                log_to_driver=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"cannot join the Ray cluster at {address}: {one_line(exc)}"
            ) from None
    return ray


def restartable(cls: type, cpus: float, gpus: float = 0.0) -> Any:
    """`cls` as a Ray actor class that Ray restarts whenever its process dies (calls in
    flight then fail, never re-run), serving many calls at once."""
    ray = import_ray()
    return ray.remote(cls).options(
        num_cpus=cpus, num_gpus=gpus, max_restarts=-1, max_task_retries=0, max_concurrency=1000
    )


async def close_actors(actors: Sequence[Any], timeout_s: float) -> None:
    """Ask each actor to close what it holds, then end it for good (one already dead has
    nothing left to close)."""
    ray = import_ray()
    for actor in actors:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(actor.close.remote(), timeout_s)
        ray.kill(actor, no_restart=True)
