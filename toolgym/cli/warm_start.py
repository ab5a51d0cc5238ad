"""`toolgym warm-start`: your agent's episodes with a teacher behind the gateway, imitated (what
it prints around training/supervised/agent_warm_start.py)."""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from toolgym.cli.show import console

if TYPE_CHECKING:
    from toolgym.training.supervised.agent_warm_start import AgentWarmStart
    from toolgym.training.supervised.warm_start import Demonstrated

TEACHER_KEY = "TOOLGYM_TEACHER_API_KEY"
"""The variable an endpoint teacher's API key is read from (never a command-line argument)."""


def warm_start(
    overrides: Annotated[
        list[str] | None,
        typer.Argument(help="section.field=value overrides of the config, e.g. model=runs/base"),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="The harness run's YAML config: its agent, env, budgets.")
    ] = None,
    teacher: Annotated[
        str,
        typer.Option(
            help="Who answers the agent's calls: an OpenAI-compatible endpoint "
            "(http://host:port/v1; its key from $TOOLGYM_TEACHER_API_KEY) or a function "
            "reply(messages, tools) (path/to/file.py:function)."
        ),
    ] = "",
    teacher_model: Annotated[str, typer.Option(help="The model name sent to an endpoint.")] = (
        "teacher"
    ),
    out: Annotated[Path, typer.Option(help="Where to save the fine-tuned model.")] = Path(
        "runs/harness-sft/policy"
    ),
    episodes: Annotated[int, typer.Option(min=1, help="Train tasks the agent plays.")] = 500,
    keep: Annotated[
        Literal["solved", "all"],
        typer.Option(help="Imitate the solved episodes only, or every one the agent finished."),
    ] = "solved",
    epochs: Annotated[int, typer.Option(min=1, help="Passes over the demonstrations.")] = 3,
    lr: Annotated[float, typer.Option(help="AdamW learning rate.")] = 3e-3,
    batch_size: Annotated[int, typer.Option(min=1, help="Sequences per optimizer step.")] = 8,
    seed: Annotated[
        int, typer.Option(help="First training task played; also seeds the fine-tune.")
    ] = 0,
) -> None:
    """Warm-start the config's model from your own agent: it plays the env's train tasks with a
    teacher behind the gateway, and the model is fine-tuned on those episodes, token for token."""
    from toolgym.training.supervised.agent_warm_start import AgentWarmStart
    from toolgym.training.supervised.sft import SFTConfig

    fine_tune = SFTConfig(epochs=epochs, lr=lr, batch_size=batch_size, seed=seed)
    warm_start_command(config, overrides or [], teacher, teacher_model, out,
                       AgentWarmStart(episodes, keep, fine_tune))  # fmt: skip


def warm_start_command(
    config: Path | None, overrides: list[str], teacher: str, teacher_model: str, out: Path,
    plan: AgentWarmStart,
) -> None:  # fmt: skip
    from toolgym.agents.gateway.teacher import teacher_replies
    from toolgym.cli.progress import Ticker
    from toolgym.config import load_config
    from toolgym.errors import ConfigError
    from toolgym.training.config import TrainConfig
    from toolgym.training.supervised.agent_warm_start import agent_warm_start

    if not teacher:
        raise ConfigError("--teacher: give an endpoint (http://host:port/v1) or a function")
    run = load_config(TrainConfig, config, overrides)
    replies = teacher_replies(teacher, teacher_model, os.environ.get(TEACHER_KEY, "unused"))
    console.print(f"playing {plan.episodes} tasks of {run.mixture[0].id} with {teacher} teaching")
    ticker: Ticker | None = None

    def demonstrated(d: Demonstrated) -> None:
        nonlocal ticker
        console.print(f"{d.episodes} episodes ({d.solved} solved): {d.imitated_turns} turns "
                      f"to imitate ({plan.keep} kept)")  # fmt: skip
        ticker = steps.enter_context(Ticker("fine-tuning", None))

    def epoch(number: int, loss: float, nll: float) -> None:
        console.print(f"epoch {number}: training loss {loss:.3f}, held-out NLL per token {nll:.3f}")

    def step(done: int, total: int, loss: float) -> None:
        if ticker is not None:
            ticker.total = total
            ticker.advance(done, f"loss {loss:.3f}")

    with ExitStack() as steps:
        result = agent_warm_start(run, replies, out, plan, demonstrated, epoch, step)
    console.print(
        f"held-out episodes' NLL per token: {result.nll_before:.3f} -> {result.nll_after:.3f}"
    )
    console.print(f"saved to [bold]{out}[/]: train it with `toolgym train ... model={out}`")
