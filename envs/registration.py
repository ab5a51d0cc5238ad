"""The environment registry: versioned ids mapped to string entry points.

Entry points are strings ("pkg.module:Class") so Ray or subprocess workers can re-import an
env from its id alone. Every id registered here is also registered with Gymnasium, so
`gymnasium.make("toolgym/Maze-v0")` works once `toolgym.envs` is imported. Third-party
packages announce their envs through the importlib entry-point group `toolgym.envs` (an entry
point names a module to import or a function to call that registers them); Gymnasium 1.x no
longer loads plugins itself, so toolgym does.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import gymnasium
from gymnasium.envs.registration import EnvSpec as GymEnvSpec

from toolgym.envs.core import Env
from toolgym.errors import (
    ConfigError,
    EnvBuildError,
    EnvContractError,
    RegistrationError,
    ToolgymError,
    UnknownEnvError,
    did_you_mean,
    one_line,
)
from toolgym.log import get_logger

ENTRY_POINT_GROUP = "toolgym.envs"
_ID = re.compile(r"^(?:(?P<namespace>[\w.-]+)/)?(?P<name>[\w.-]+?)-v(?P<version>\d+)$")
_ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

log = get_logger(__name__)


@dataclass(frozen=True)
class EnvSpec:
    """What `make` needs to build an env: its id, where its class lives, default arguments."""

    id: str
    entry_point: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    nondeterministic: bool = False

    @property
    def name_without_version(self) -> str:
        return _stem(self.id)

    def load(self) -> Any:
        """Import the entry point (`pkg.module:Class`) and return the class or factory."""
        module_name, _, attr = self.entry_point.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise RegistrationError(
                f"env '{self.id}': cannot import module '{module_name}' of its entry point ({exc})"
            ) from exc
        for part in attr.split("."):
            if not hasattr(target, part):
                raise RegistrationError(
                    f"env '{self.id}': module '{module_name}' has no attribute '{attr}'"
                )
            target = getattr(target, part)
        return target


_registry: dict[str, EnvSpec] = {}
_plugins_loaded = False
plugin_errors: dict[str, str] = {}
"""Entry points that failed to load, by name, with the reason (shown by `toolgym list`)."""


def register(
    id: str,
    entry_point: str,
    kwargs: dict[str, Any] | None = None,
    *,
    description: str = "",
    nondeterministic: bool = False,
    override: bool = False,
) -> EnvSpec:
    """Register an env under a versioned id such as `mypkg/Cards-v0`."""
    if not _ID.match(id):
        raise RegistrationError(
            f"env id {id!r} must look like 'namespace/Name-v0' (a name and a version)"
        )
    if not isinstance(entry_point, str) or not _ENTRY.match(entry_point):
        raise RegistrationError(
            f"env '{id}': entry_point must be a string 'package.module:Class' so that workers can "
            f"re-import it, got {entry_point!r}"
        )
    spec = EnvSpec(id, entry_point, dict(kwargs or {}), description, nondeterministic)
    existing = _registry.get(id)
    if existing is not None and existing != spec and not override:
        raise RegistrationError(
            f"env '{id}' is already registered (entry point {existing.entry_point}); pass override=True to replace it"
        )
    _registry[id] = spec
    if id not in gymnasium.registry or override:
        gymnasium.register(
            id, entry_point=entry_point, kwargs=dict(spec.kwargs), nondeterministic=nondeterministic
        )
    return spec


def spec(id: str) -> EnvSpec:
    """The registered spec of `id` (either id form, see `make`), or an UnknownEnvError
    naming the closest ids."""
    id = _import_prefix(id)
    load_plugins()
    found = _registry.get(id)
    if found is not None:
        return found
    match = _ID.match(id)
    if match:
        versions = sorted(s.id for s in _registry.values() if s.name_without_version == _stem(id))
        if versions:
            raise UnknownEnvError(
                f"env '{id}' is not registered; registered versions: {', '.join(versions)}"
            )
    hint = did_you_mean(id, _registry) or " Run `toolgym list` to see the registered envs."
    raise UnknownEnvError(f"env '{id}' is not registered.{hint}")


def registered_ids() -> list[str]:
    """Every registered env id, sorted."""
    load_plugins()
    return sorted(_registry)


def make(id: str, **kwargs: Any) -> Env:
    """Build the env registered as `id` ("ns/Name-v0"), or "pkg.module:ns/Name-v0", which
    imports `pkg.module` first (for envs that register themselves on import)."""
    id = _import_prefix(id)
    env_spec = spec(id)
    factory = env_spec.load()
    arguments = {**env_spec.kwargs, **kwargs}
    _check_arguments(env_spec, factory, arguments)
    try:
        env = factory(**arguments)
    except ToolgymError:
        raise
    except Exception as exc:
        given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        raise EnvBuildError(
            f"env '{id}' could not be built{f' with {given}' if given else ''}: "
            f"{type(exc).__name__}: {one_line(exc)}"
        ) from exc
    if not isinstance(env, gymnasium.Env):
        raise EnvContractError(
            f"env '{id}': {env_spec.entry_point} built a {type(env).__name__}, not a gymnasium.Env"
        )
    if not isinstance(env, Env):
        raise EnvContractError(
            f"env '{id}': {env_spec.entry_point} built a {type(env).__name__}, a gymnasium.Env "
            "but not a toolgym Env: subclass toolgym.Env (or toolgym.ToolEnv), whose episodes "
            "await areset and astep"
        )
    env.unwrapped.spec = GymEnvSpec(
        id=id,
        entry_point=env_spec.entry_point,
        kwargs=arguments,
        nondeterministic=env_spec.nondeterministic,
    )
    return env


def _import_prefix(id: str) -> str:
    """'pkg.module:ns/Name-v0' imports pkg.module (which registers its envs) and gives the id."""
    if ":" not in id:
        return id
    module_name, _, id = id.partition(":")
    try:
        importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownEnvError(
            f"cannot import module '{module_name}' to find env '{id}': {exc}"
        ) from exc
    return id


def _check_arguments(env_spec: EnvSpec, factory: Any, arguments: dict[str, Any]) -> None:
    accepted = _accepted_arguments(factory)
    if accepted is None:
        return
    for name in arguments:
        if name not in accepted:
            raise ConfigError(
                f"env '{env_spec.id}' has no argument '{name}'.{did_you_mean(name, accepted)} "
                f"Its arguments: {', '.join(accepted) or 'none'}."
            )


def _accepted_arguments(factory: Any) -> list[str] | None:
    """Keyword arguments `factory` accepts, following `**kwargs` up a class's `__init__`s;
    None when they cannot be known (a `**kwargs` that goes nowhere we can see)."""
    functions = (
        [c.__dict__["__init__"] for c in factory.__mro__ if "__init__" in c.__dict__]
        if isinstance(factory, type)
        else [factory]
    )
    accepted: list[str] = []
    for fn in functions:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return None
        accepted += [
            n
            for n, p in params.items()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
            and n != "self"
            and n not in accepted
        ]
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return accepted
    return None


def _stem(env_id: str) -> str:
    """The id without its version: 'ns/Name-v3' -> 'ns/Name'."""
    return env_id.rsplit("-v", 1)[0]


def load_plugins(force: bool = False) -> None:
    """Run every `toolgym.envs` entry point once (import a module or call a function)."""
    global _plugins_loaded
    if _plugins_loaded and not force:
        return
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            target = ep.load()
            if callable(target):
                target()
        except Exception as exc:
            plugin_errors[ep.name] = f"{ep.value}: {type(exc).__name__}: {exc}"
            log.warning("toolgym plugin %r failed to load: %s", ep.name, exc)
