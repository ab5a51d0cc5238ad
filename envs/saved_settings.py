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


def read_env_settings(model_dir: str | Path, env_id: str) -> dict[str, Any] | None:
    """The settings saved with `model_dir` for `env_id`; None when there are none for it."""
    path = Path(model_dir) / FILE
    if not path.is_file():
        return None
    try:
        settings = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(settings, dict) or settings.get("env_id") != env_id:
        return None
    return settings


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
