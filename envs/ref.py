"""EnvRef: an env named by what builds it, not by a live instance.

A request to collect episodes names its env with a reference (its name in the run, its
registered id and keyword arguments), and whoever runs the episodes turns the reference into a
pool of its own: the runtime of this process, or another process or machine the request was
sent to. A reference is plain data: it survives JSON, so a request can cross a process boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EnvRef:
    name: str
    """What trajectories and metrics call this env (a mixture entry's label)."""
    env_id: str
    """The registered id `toolgym.make` builds."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of `make(env_id, **kwargs)`: JSON values."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "env_id": self.env_id, "kwargs": dict(self.kwargs)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvRef:
        return cls(str(data["name"]), str(data["env_id"]), dict(data.get("kwargs") or {}))
