"""`toolgym plot`: learning curves of runs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolgym.cli.show import console


def plot_command(run_dirs: list[Path], out: Path, metrics: list[str] | None, x: str) -> int:
    from toolgym.training.run.plot import DEFAULT_METRICS, plot_runs

    path = plot_runs(run_dirs, out, metrics or DEFAULT_METRICS, x)
    console.print(f"wrote {path}")
    return 0


def plot(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories (each with metrics.jsonl).")
    ],
    out: Annotated[Path, typer.Option(help="PNG to write.")] = Path("curves.png"),
    metric: Annotated[list[str] | None, typer.Option(help="Metric to draw (repeatable).")] = None,
    x: Annotated[str, typer.Option(help="x axis: env_steps (cumulative) or step.")] = "env_steps",
) -> None:
    """Draw learning curves of runs side by side as a PNG."""

    raise typer.Exit(plot_command(run_dirs=run_dirs, out=out, metrics=metric, x=x))
