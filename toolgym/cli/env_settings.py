"""The env settings a model was fine-tuned with, kept next to it (`toolgym sft` writes
them), so later commands on that model need not repeat `--env-arg` and `--no-tool-schemas`.

A later command uses them only for the same env id and only where it was given nothing of
its own: explicit arguments always win.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE = "toolgym_env.json"


def write_env_settings(
    model_dir: Path, env_id: str, kwargs: dict[str, Any], tool_schemas: bool
) -> Path:
    path = Path(model_dir) / FILE
    settings = {"env_id": env_id, "env_kwargs": kwargs, "tool_schemas": tool_schemas}
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


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


def merge_env_kwargs(
    saved: dict[str, Any], given: dict[str, Any], source: str | Path
) -> dict[str, Any]:
    """The saved settings with the given ones on top, saying which of the saved ones the
    given override (so a policy is never played in another format than it learned without
    the user seeing it)."""
    from toolgym.cli.show import console

    merged = {**saved, **given}
    if saved:
        console.print(
            f"env settings saved with {source}: "
            + ", ".join(f"{k}={v!r}" for k, v in saved.items()),
            markup=False,
        )
    changed = [k for k in given if k in saved and given[k] != saved[k]]
    if changed:
        console.print(
            "given --env-arg overrides "
            + ", ".join(f"{k} ({saved[k]!r} -> {given[k]!r})" for k in changed),
            markup=False,
        )
    return merged
