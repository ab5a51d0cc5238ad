"""What an env needs from the machine beyond Python packages (a sandbox, a browser, a
database server), declared by the env class, so `toolgym doctor --config` can say whether a
run can start here before it loads anything."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

from toolgym.envs.registration import spec

Need = Literal["bubblewrap", "docker", "chromium", "postgres"]


@runtime_checkable
class NeedsSystem(Protocol):
    """An env class whose episodes need a part of the machine: which, for these arguments."""

    @classmethod
    def system_needs(cls, kwargs: Mapping[str, Any]) -> set[Need]: ...


def env_needs(env_id: str, kwargs: Mapping[str, Any]) -> set[Need]:
    """The system parts `env_id` made with `kwargs` (over its registered ones) needs; an env
    that declares nothing needs nothing."""
    env_spec = spec(env_id)
    factory = env_spec.load()
    if not isinstance(factory, NeedsSystem):
        return set()
    return set(factory.system_needs({**env_spec.kwargs, **kwargs}))
