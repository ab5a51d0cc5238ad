"""`train`: a run started the way `toolgym train` starts it, for any caller. The config is
completed from the env settings saved with its model (or read back from the run being
resumed), the run directory is checked before anything is built, and a run a launcher
started as several processes (torchrun) takes its part: rank 0 trains, the others follow."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolgym.agents.trajectory import Trajectory
from toolgym.training.config import TrainConfig
from toolgym.training.distributed import launched
from toolgym.training.run.directory import check_run_dir
from toolgym.training.run.setup import saved_run_config, with_model_env_settings


def train(
    config: TrainConfig | None = None,
    *,
    resume: str | Path | None = None,
    overwrite: bool = False,
    ray_address: str | None = None,
    on_start: Callable[[TrainConfig, list[str]], None] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
) -> list[dict[str, Any]] | None:
    """Train `config`, or go on with the run in `resume` (its saved config; `ray_address`: a
    cluster to resume on instead of the saved one's). Returns the run's metrics, one record
    a step; None on a launcher's follower ranks, whose leader reports.

    `on_start(config, notes)` sees the completed config and what was merged into it from
    the model's saved env settings, on the leader rank, before anything is built; `on_step`
    and `on_episode` as `Trainer.run` takes them."""
    if (config is None) == (resume is None):
        raise ValueError("train: give a config, or the run directory to resume")
    if resume is not None:
        config, notes = saved_run_config(Path(resume), ray_address), []
    else:
        assert config is not None
        config, merged = with_model_env_settings(config)
        notes = merged.notes(config.model) if merged else []
    leader = not launched() or os.environ.get("RANK") == "0"
    if leader:
        if resume is None:
            check_run_dir(config.run_dir, overwrite)  # before any env or model is built
        if on_start is not None:
            on_start(config, notes)
    if launched():
        return _distributed(config, resume is not None, overwrite, on_step)
    from toolgym.training.trainer import Trainer

    trainer = Trainer(config)
    return trainer.run(resume is not None, overwrite, on_step, on_episode)  # closes its runtime


def _distributed(
    config: TrainConfig, resume: bool, overwrite: bool,
    on_step: Callable[[dict[str, Any]], None] | None,
) -> list[dict[str, Any]] | None:  # fmt: skip
    """This process's part of a run a launcher started as several: rank 0 trains and returns
    the metrics, the others follow it and return None."""
    from toolgym.training.builders import build_follower, check_distributed
    from toolgym.training.distributed import join, leave
    from toolgym.training.trainer import Trainer
    from toolgym.training.update.learner import follow

    check_distributed(config)
    ranks = join(config.device, config.distributed.timeout_s)
    try:
        if not ranks.leader:
            follow(build_follower(config, ranks), ranks)
            return None
        return Trainer(config, ranks=ranks).run(resume, overwrite, on_step)
    finally:
        leave()
