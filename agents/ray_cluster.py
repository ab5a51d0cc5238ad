"""Ray, optional (`pip install 'toolgym[dist]'`): importing it with a clear error when it is
missing, and joining the cluster a run names."""

from __future__ import annotations

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
