"""OpenEnv: environment servers driven by openenv-core's own client (`toolgym/OpenEnv-v0`),
and toolgym envs served to OpenEnv's clients (`toolgym serve env --protocol openenv`).
Needs the `openenv` extra; without it, importing this says so."""

from toolgym.errors import ConfigError

INSTALL = "pip install 'toolgym[openenv]'"

try:
    import openenv.core  # noqa: F401
except ImportError as exc:
    raise ConfigError(
        f"OpenEnv envs need openenv-core ({exc.name} is missing): {INSTALL}"
    ) from None

from toolgym.envs.openenv.client_env import OpenEnvEnv  # noqa: E402

__all__ = ["INSTALL", "OpenEnvEnv"]
