"""`toolgym sft`: supervised warm start on an env's scripted demonstrations."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import yaml

from toolgym.cli.show import console


def env_kwargs(items: list[str]) -> dict[str, Any]:
    """`--env-arg size=3 --env-arg hints=false` -> {"size": 3, "hints": False}."""
    from toolgym.errors import ConfigError

    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--env-arg {item!r} must look like name=value")
        out[key] = yaml.safe_load(raw)
    return out


def sft_command(
    env_id: str,
    model: Path,
    out: Path,
    episodes: int,
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    env_args: list[str],
    tool_schemas: bool | None = True,
    mistake_rate: float = 0.0,
    with_envs: list[str] | None = None,
) -> int:
    from toolgym.cli.progress import Ticker
    from toolgym.training.sft import SFTConfig
    from toolgym.training.warm_start import Demonstrated, WarmStart, warm_start

    plan = WarmStart(
        env_id, env_kwargs(env_args), episodes,
        SFTConfig(epochs=epochs, lr=lr, batch_size=batch_size, seed=seed),
        tool_schemas=True if tool_schemas is None else tool_schemas,
        mistake_rate=mistake_rate, with_envs=tuple(with_envs or ()),
    )  # fmt: skip

    ticker: Ticker | None = None  # started with the fine-tune, after the demonstrations

    def demonstrated(d: Demonstrated) -> None:
        nonlocal ticker
        names = ", ".join([env_id, *plan.with_envs])
        console.print(
            f"{d.episodes} demonstrations of {names} ({d.solved} solved): "
            f"{d.imitated_turns} turns to imitate"
            + (f", {d.mistakes} injected mistakes to recover from" if mistake_rate else "")
        )
        ticker = steps.enter_context(Ticker("fine-tuning", None))

    def epoch(number: int, loss: float, nll: float) -> None:
        console.print(f"epoch {number}: training loss {loss:.3f}, held-out NLL per token {nll:.3f}")

    def step(done: int, total: int, loss: float) -> None:
        if ticker is None:
            return
        ticker.total = total
        ticker.advance(done, f"loss {loss:.3f}")

    with ExitStack() as steps:
        result = warm_start(model, out, plan, demonstrated, epoch, step)
    console.print(f"loss per epoch: {', '.join(f'{x:.3f}' for x in result.losses)}")
    console.print(
        f"held-out demonstration NLL per token: {result.nll_before:.3f} -> {result.nll_after:.3f}"
    )
    console.print(f"saved to [bold]{out}[/] (with its env settings, which later commands reuse)")
    return 0


def train_distributed(
    config: Any, resume: bool, overwrite: bool, on_step: Callable[[dict[str, Any]], None] | None
) -> list[dict[str, Any]] | None:
    """This process's part of a run a launcher started as several (torchrun): rank 0 trains
    and returns the metrics, the others follow it and return None."""
    from toolgym.training.builders import build_follower, check_distributed
    from toolgym.training.distributed import join, leave
    from toolgym.training.learner import follow
    from toolgym.training.trainer import Trainer

    check_distributed(config)
    ranks = join(config.device, config.distributed.timeout_s)
    try:
        if not ranks.leader:
            follow(build_follower(config, ranks), ranks)
            return None
        return Trainer(config, ranks=ranks).run(resume, overwrite, on_step)
    finally:
        leave()


def train_command(
    config_path: Path | None,
    overrides: list[str],
    resume: Path | None,
    overwrite: bool = False,
    ray_address: str | None = None,
) -> int:
    """`ray_address`: also for a resumed run, whose other settings are its saved ones."""
    import contextlib
    import os

    from toolgym.cli.progress import TrainSteps
    from toolgym.config import load_config
    from toolgym.training.config import TrainConfig
    from toolgym.training.distributed import launched
    from toolgym.training.run_directory import check_run_dir
    from toolgym.training.run_setup import saved_run_config, with_model_env_settings
    from toolgym.training.trainer import Trainer

    if resume is not None:
        config = saved_run_config(resume, ray_address)
    else:
        config, merged = with_model_env_settings(load_config(TrainConfig, config_path, overrides))
        for line in merged.notes(config.model) if merged else []:
            console.print(line, markup=False)
    # a launcher's ranks all run this; the leader (rank 0) alone checks, reports and prints
    leader = not launched() or os.environ["RANK"] == "0"
    if resume is None and leader:
        check_run_dir(config.run_dir, overwrite)  # before any env or model is built
    if leader:
        console.print(
            f"run [bold]{config.run_dir}[/]: {'resuming' if resume else 'training'} {config.model} "
            f"on {', '.join(e.id for e in config.mixture)} for {config.steps} steps "
            f"(metrics.jsonl, rollouts/ and the policy go there)"
        )
    with TrainSteps(config.steps) if leader else contextlib.nullcontext() as steps:
        if launched():
            metrics = train_distributed(config, resume is not None, overwrite, steps)
            if metrics is None:  # a follower rank: the leader reports
                return 0
        else:
            trainer = Trainer(config)
            metrics = trainer.run(  # closes the trainer's runtime
                resume=resume is not None,
                overwrite=overwrite,
                on_step=steps,
                on_episode=steps.episode if steps is not None else None,
            )
    for line in finished(Path(config.run_dir)):
        console.print(line, markup=False)
    return 0


def finished(run_dir: Path) -> list[str]:
    """A finished run's summary in words (its summary.json), and where its files are."""
    from toolgym.training.run_log import RUN_LOG, summary_lines
    from toolgym.training.run_summary import SUMMARY, read_summary

    summary = read_summary(run_dir)
    lines = summary_lines(summary) if summary else [f"finished {run_dir}"]
    return [*lines, f"policy: {run_dir / 'policy'}, log: {run_dir / RUN_LOG}, summary: "
                    f"{run_dir / SUMMARY}, curves: toolgym plot {run_dir}"]  # fmt: skip
