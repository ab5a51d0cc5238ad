"""verifiers: environments built with the verifiers package, played and scored in toolgym
(`toolgym/Verifiers-v0`). Needs the `verifiers` extra; without it, importing this says so."""

from toolgym.errors import ConfigError

INSTALL = "pip install 'toolgym[verifiers]'"

try:
    import verifiers.v1  # noqa: F401
except ImportError as exc:
    raise ConfigError(
        f"verifiers envs need the verifiers package ({exc.name} is missing): {INSTALL}"
    ) from None

from toolgym.envs.verifiers.env import VerifiersEnv  # noqa: E402

__all__ = ["INSTALL", "VerifiersEnv"]
