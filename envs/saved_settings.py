"""The env settings a policy was trained with, kept next to it (`toolgym_env.json`: the env
id, its keyword arguments, whether prompts showed the tools' schemas), so that any later
command plays it as it was trained. The trainer writes them with the policy it saves, and
`toolgym sft` with the model it fine-tunes; `toolgym eval` and `toolgym train` on that model
read them back for the same env id, under whatever the user gives explicitly."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError

FILE = "toolgym_env.json"


def write_env_settings(
    model_dir: Path, env_id: str, kwargs: dict[str, Any], tool_schemas: bool
) -> Path:
    """Save them; an argument that names an existing file or folder relative to the
    directory the command runs from is saved absolute, so the model plays from anywhere."""
    path = Path(model_dir) / FILE
    settings = {"env_id": env_id, "env_kwargs": _absolute(kwargs), "tool_schemas": tool_schemas}
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def _absolute(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _absolute(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_absolute(v) for v in value]
    if isinstance(value, str) and value and not Path(value).is_absolute():
        try:
            if Path(value).exists():
                return str(Path(value).resolve())
        except (OSError, ValueError):  # not a path at all (too long, a NUL)
            pass
    return value


SETTINGS_BYTES = 1 << 20
"""The largest settings file read (they are a few hundred bytes; a bigger one is damaged)."""


@dataclass(frozen=True)
class SavedSettings:
    """What `write_env_settings` saved, checked."""

    env_kwargs: dict[str, Any]
    tool_schemas: bool


def read_env_settings(model_dir: str | Path, env_id: str) -> SavedSettings | None:
    """The settings saved with `model_dir` for `env_id`; None when it saved none, or saved
    them for another env. A file that is there but damaged (not JSON, or not in the shape
    written here) is a ConfigError naming it: played without them, the policy would meet a
    format it never learned, and nothing would say so."""
    path = Path(model_dir) / FILE
    if not path.is_file():
        return None

    def damaged(why: str) -> ConfigError:
        return ConfigError(
            f"{path}: the env settings saved with this model are damaged ({why}); write them "
            f"again with `toolgym sft`, or delete the file to play the model without them"
        )

    try:
        with path.open("rb") as file:
            raw = file.read(SETTINGS_BYTES + 1)
        if len(raw) > SETTINGS_BYTES:
            raise damaged(f"over {SETTINGS_BYTES} bytes")
        settings = json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the env settings saved with this model: {exc}"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise damaged(f"not JSON: {str(exc)[:80]}") from None
    if not isinstance(settings, dict) or not isinstance(settings.get("env_id"), str):
        raise damaged('not an object with an "env_id"')
    if settings["env_id"] != env_id:
        return None
    kwargs, tool_schemas = settings.get("env_kwargs", {}), settings.get("tool_schemas")
    if not isinstance(kwargs, dict):
        raise damaged(f'"env_kwargs" is a {type(kwargs).__name__}, not an object')
    if not isinstance(tool_schemas, bool):
        raise damaged(f'"tool_schemas" is {tool_schemas!r:.40}, not true or false')
    return SavedSettings(kwargs, tool_schemas)


@dataclass(frozen=True)
class MergedSettings:
    """The saved env arguments with the given ones on top: only where the user gave nothing
    of their own does a saved one apply, and `overridden` says where they differ, so a policy
    is never played in another format than it learned without its user being told."""

    kwargs: dict[str, Any]
    saved: dict[str, Any]
    overridden: dict[str, tuple[Any, Any]]
    """name -> (saved, given) where the given value replaced a different saved one."""

    def notes(self, source: str | Path) -> list[str]:
        """What a command tells its user: the saved settings it read, and what overrides them."""
        lines = []
        if self.saved:
            shown = ", ".join(f"{k}={v!r}" for k, v in self.saved.items())
            lines.append(f"env settings saved with {source}: {shown}")
        if self.overridden:
            changes = ", ".join(f"{k} ({a!r} -> {b!r})" for k, (a, b) in self.overridden.items())
            lines.append(f"given --env-arg overrides {changes}")
        return lines


def merge_env_kwargs(saved: dict[str, Any], given: dict[str, Any]) -> MergedSettings:
    overridden = {k: (saved[k], v) for k, v in given.items() if k in saved and saved[k] != v}
    return MergedSettings({**saved, **given}, dict(saved), overridden)
