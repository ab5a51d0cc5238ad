"""`toolgym sft` and `toolgym train`: what they print around the library's warm start and run."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from toolgym.cli.options import EnvArgs, ToolSchemas
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
    from toolgym.training.supervised.sft import SFTConfig
    from toolgym.training.supervised.warm_start import Demonstrated, WarmStart, warm_start

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


def train_command(
    config_path: Path | None,
    overrides: list[str],
    resume: Path | None,
    overwrite: bool = False,
    ray_address: str | None = None,
) -> int:
    """`ray_address`: also for a resumed run, whose other settings are its saved ones."""
    from toolgym.cli.progress import TrainSteps
    from toolgym.config import load_config
    from toolgym.training.config import TrainConfig
    from toolgym.training.launch import train

    config = None if resume else load_config(TrainConfig, config_path, overrides)
    steps: TrainSteps | None = None  # the leader's progress, once its config is complete

    def started(run: TrainConfig, notes: list[str]) -> None:
        nonlocal steps, config
        config = run
        for line in notes:
            console.print(line, markup=False)
        console.print(
            f"run [bold]{run.run_dir}[/]: {'resuming' if resume else 'training'} {run.model} "
            f"on {', '.join(e.id for e in run.mixture)} for {run.steps} steps "
            f"(metrics.jsonl, rollouts/ and the policy go there)"
        )
        steps = shown.enter_context(TrainSteps(run.steps))

    def step(record: dict[str, Any]) -> None:
        if steps is not None:
            steps(record)

    def episode(trajectory: Any) -> None:
        if steps is not None:
            steps.episode(trajectory)

    with ExitStack() as shown:
        metrics = train(
            config, resume=resume, overwrite=overwrite, ray_address=ray_address,
            on_start=started, on_step=step, on_episode=episode,
        )  # fmt: skip
    if metrics is None or config is None:  # a follower rank: the leader reports
        return 0
    for line in finished(Path(config.run_dir)):
        console.print(line, markup=False)
    return 0


def finished(run_dir: Path) -> list[str]:
    """A finished run's summary in words (its summary.json), and where its files are."""
    from toolgym.training.run.files import RUN_LOG, SUMMARY, read_summary
    from toolgym.training.run.log import summary_lines

    summary = read_summary(run_dir)
    lines = summary_lines(summary) if summary else [f"finished {run_dir}"]
    return [*lines, f"policy: {run_dir / 'policy'}, log: {run_dir / RUN_LOG}, summary: "
                    f"{run_dir / SUMMARY}, curves: toolgym plot {run_dir}"]  # fmt: skip


def supervised(
    env_id: Annotated[str, typer.Argument(help="Env id whose scripted solver demonstrates.")],
    model: Annotated[Path, typer.Option(help="Model directory to start from.")],
    out: Annotated[Path, typer.Option(help="Where to save the fine-tuned model.")],
    episodes: Annotated[int, typer.Option(min=1, help="Demonstration episodes.")] = 200,
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the demonstrations.")] = 3,
    lr: Annotated[float, typer.Option(help="AdamW learning rate.")] = 1e-3,
    batch_size: Annotated[int, typer.Option(min=1, help="Sequences per optimizer step.")] = 16,
    seed: Annotated[
        int, typer.Option(help="First training task demonstrated; also seeds the SFT.")
    ] = 0,
    env_arg: EnvArgs = None,
    tool_schemas: ToolSchemas = None,
    mistakes: Annotated[
        float,
        typer.Option(
            help="Share of turns that play the env's mistake_action instead of the solver's "
            "(kept in context, not imitated), so the model learns to recover from errors."
        ),
    ] = 0.0,
    with_env: Annotated[
        list[str] | None,
        typer.Option(
            help="Another env whose demonstrations are mixed in, as many episodes, with the "
            "same env args (repeatable): a self-play proposer beside its solver."
        ),
    ] = None,
) -> None:
    """Supervised warm start on an env's scripted demonstrations (learn the tool-call format)."""

    code = sft_command(env_id=env_id, model=model, out=out, episodes=episodes, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, env_args=env_arg or [], tool_schemas=tool_schemas, mistake_rate=mistakes, with_envs=with_env or [])  # fmt: skip
    raise typer.Exit(code)


def train(
    overrides: Annotated[
        list[str] | None, typer.Argument(help="section.field=value overrides, e.g. optim.lr=1e-5")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="YAML config file.")] = None,
    resume: Annotated[
        Path | None, typer.Option(help="Continue the run in this directory from its checkpoint.")
    ] = None,
    overwrite: Annotated[
        bool, typer.Option(help="Start over in a run directory that holds a run (deletes it).")
    ] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="Run the env pools (and ray.engine_actors) as Ray actors on this cluster: auto, "
            "HOST:PORT or local "
            "(sets ray.address; needs pip install 'toolgym[dist]')."
        ),
    ] = None,
) -> None:
    """Train a policy with GRPO / RLOO / GiGPO on an env (see training/config.py)."""

    given = [*(overrides or []), *([f"ray.address={ray_address}"] if ray_address else [])]
    raise typer.Exit(
        train_command(
            config_path=config,
            overrides=given,
            resume=resume,
            overwrite=overwrite,
            ray_address=ray_address,
        )
    )
