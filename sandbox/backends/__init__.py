"""Sandbox backends by name, one file each: bubblewrap (the default on Linux), docker, and
local (no isolation: only when asked for by name)."""

from __future__ import annotations

import importlib
from typing import Any

from toolgym.errors import ConfigError, did_you_mean
from toolgym.sandbox.backends.base import Backend

BACKENDS = {
    "bubblewrap": "toolgym.sandbox.backends.bubblewrap:BubblewrapBackend",
    "docker": "toolgym.sandbox.backends.docker:DockerBackend",
    "local": "toolgym.sandbox.backends.local:LocalBackend",
}
DEFAULT_BACKEND = "bubblewrap"


def make_backend(name: str, **options: Any) -> Backend:
    """The backend `name`, checked: a missing or broken one raises SandboxError here."""
    if name not in BACKENDS:
        raise ConfigError(
            f"unknown sandbox backend {name!r}.{did_you_mean(name, BACKENDS)} "
            f"Known: {', '.join(BACKENDS)}"
        )
    module, _, attr = BACKENDS[name].partition(":")
    backend: Backend = getattr(importlib.import_module(module), attr)(**options)
    backend.check()
    return backend


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "Backend", "make_backend"]
