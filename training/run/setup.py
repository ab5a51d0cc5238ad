"""A run's config as `toolgym train` completes it, for any caller: from a run directory being
resumed (its saved config), or from the env settings saved with the model it starts from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolgym.envs.saved_settings import MergedSettings, merge_env_kwargs, read_env_settings
from toolgym.errors import ConfigError, one_line
from toolgym.training.config import TrainConfig


def saved_run_config(run_dir: Path, ray_address: str | None = None) -> TrainConfig:
    """The config a run directory was started with (`ray_address`: a cluster to resume on
    instead of the saved one's)."""
    saved = run_dir / "config.json"
    if not saved.is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no config.json)")
    try:
        config = TrainConfig.model_validate(
            {**json.loads(saved.read_text()), "run_dir": str(run_dir)}
        )
        if ray_address is not None:
            config = config.model_copy(
                update={"ray": config.ray.model_copy(update={"address": ray_address})}
            )
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValidationError) as exc:
        raise ConfigError(f"{saved}: not a valid run config ({one_line(exc, 200)})") from None
    return config


def with_model_env_settings(config: TrainConfig) -> tuple[TrainConfig, MergedSettings | None]:
    """The config completed from the env settings saved with its model (by `toolgym sft` or
    a run's policy): the env's kwargs (the config's own on top) and, unless set, whether
    prompts carry schemas; with the merge, for the caller to tell its user about (None when
    the model saved none for this env, or the run is a mixture)."""
    if config.envs:
        return config, None
    settings = read_env_settings(config.model, config.env.id)
    if settings is None:
        return config, None
    update: dict[str, Any] = {}
    merged = merge_env_kwargs(settings.env_kwargs, dict(config.env.kwargs))
    if merged.saved:
        update["env"] = config.env.model_copy(update={"kwargs": merged.kwargs})
    if "tool_schemas_in_prompt" not in config.rollout.model_fields_set:
        update["rollout"] = config.rollout.model_copy(
            update={"tool_schemas_in_prompt": settings.tool_schemas}
        )
    return config.model_copy(update=update), merged
