"""SQL backends, one per file, chosen by name: `make_backend("sqlite", root=...)` or
`make_backend("postgres", dsn=...)`."""

from __future__ import annotations

import importlib
from typing import Any

from toolgym.envs.sql.backends.base import SQLBackend, Table
from toolgym.errors import ConfigError, did_you_mean

BACKENDS = {
    "sqlite": "toolgym.envs.sql.backends.sqlite:SQLiteBackend",
    "postgres": "toolgym.envs.sql.backends.postgres:PostgresBackend",
}


def make_backend(name: str, **options: Any) -> SQLBackend:
    if name not in BACKENDS:
        raise ConfigError(
            f"unknown SQL backend {name!r}.{did_you_mean(name, BACKENDS)} Known: {', '.join(BACKENDS)}"
        )
    module, _, attr = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), attr)(**options)


__all__ = ["BACKENDS", "SQLBackend", "Table", "make_backend"]
