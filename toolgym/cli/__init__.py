"""The `toolgym` command. Each sub-command lives in its own module and imports the layers it
needs only when it runs, so `toolgym --version` stays instant."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from toolgym.version import __version__

app = typer.Typer(
    name="toolgym",
    help="Tool environments and step-level RL for tool-using LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"toolgym {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Tool environments and step-level RL for tool-using LLM agents."""


@app.command("list")
def list_envs() -> None:
    """List the registered environments."""
    from toolgym.cli.envs import list_command

    list_command()


@app.command("check")
def check(
    env_id: Annotated[
        str, typer.Argument(help="Env id, e.g. toolgym/Maze-v0 or mypkg.envs:my/Env-v0")
    ],
    seed: Annotated[int, typer.Option(help="Seed of the first checked episode.")] = 0,
) -> None:
    """Check that an environment honours the toolgym Env contract."""
    from toolgym.cli.envs import check_command

    raise typer.Exit(check_command(env_id, seed))


@app.command("play")
def play(
    env_id: Annotated[str, typer.Argument(help="Env id, e.g. toolgym/Maze-v0")],
    seed: Annotated[
        int, typer.Option(help="Episode seed (the same seed gives the same task).")
    ] = 0,
) -> None:
    """Play an episode in the terminal by typing tool calls."""
    from toolgym.cli.play import play_command

    raise typer.Exit(play_command(env_id, seed))


@app.command("quickstart")
def quickstart(
    episodes: Annotated[int, typer.Option(help="Episodes to play through the EnvPool.")] = 32,
    seed: Annotated[int, typer.Option(help="First episode seed.")] = 0,
) -> None:
    """The main job: a scripted solver plays Maze episodes through the tool API and reports."""
    from toolgym.cli.quickstart import quickstart_command

    raise typer.Exit(quickstart_command(episodes, seed))


def main() -> None:
    """Entry point: toolgym's own errors are one plain line on stderr, never a traceback."""
    from toolgym.errors import ToolgymError

    # Like `python -m`, let `toolgym check my_envs:my/Env-v0` import my_envs.py from here.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        app()
    except ToolgymError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
