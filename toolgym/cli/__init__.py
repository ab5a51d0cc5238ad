"""The `toolgym` command: the app and its groups, and one line registering each command.

Each command is declared in its own module (its options, its docstring, what it prints) and
imports the layers it needs only when it runs, so `toolgym --version` stays quick."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from toolgym.cli import (
    compare,
    doctor,
    envs,
    evaluate,
    init_env,
    mcp,
    models,
    openenv,
    play,
    plot,
    quickstart,
    rollouts,
    sandbox,
    search,
    simulator,
    sql,
    textworld,
    train,
    view,
    warm_start,
)
from toolgym.version import __version__

app = typer.Typer(
    name="toolgym",
    help="Tool environments and step-level RL for tool-using LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help texts are plain: an extra such as 'toolgym[dist]' is text, not a markup tag
    rich_markup_mode=None,
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
    log_level: Annotated[
        str,
        typer.Option(
            envvar="TOOLGYM_LOG",
            help="Which of toolgym's log records to show: DEBUG, INFO, WARNING or ERROR.",
        ),
    ] = "INFO",
) -> None:
    """Tool environments and step-level RL for tool-using LLM agents."""
    from toolgym.log import setup_logging

    setup_logging(log_level)


model_app = typer.Typer(help="Make models.", no_args_is_help=True)
serve_app = typer.Typer(help="Serve models and tools over HTTP.", no_args_is_help=True)
rollouts_app = typer.Typer(help="Inspect recorded trajectories.", no_args_is_help=True)
index_app = typer.Typer(help="Build search indexes.", no_args_is_help=True)
search_app = typer.Typer(
    help="A corpus to try search on, and simulated search engines.", no_args_is_help=True
)
sandbox_app = typer.Typer(help="Code sandboxes: build the image, run code.", no_args_is_help=True)
sql_app = typer.Typer(
    help="SQL databases: generate them, serve them from a throwaway PostgreSQL.",
    no_args_is_help=True,
)
textworld_app = typer.Typer(
    help="Text adventure games: generate them from specs or settings.", no_args_is_help=True
)
for group, name in [
    (model_app, "model"), (serve_app, "serve"), (rollouts_app, "rollouts"), (index_app, "index"),
    (search_app, "search"), (sandbox_app, "sandbox"), (sql_app, "sql"), (textworld_app, "textworld"),
]:  # fmt: skip
    app.add_typer(group, name=name)

app.command("list")(envs.list_envs)
app.command("check")(envs.check)
app.command("doctor")(doctor.doctor)
app.command("init-env")(init_env.init_env)
app.command("play")(play.play)
app.command("quickstart")(quickstart.quickstart)
model_app.command("init")(models.model_init)
model_app.command("pretrain")(models.model_pretrain)
model_app.command("probe")(models.model_probe)
serve_app.command("model")(models.serve_model)
app.command("eval")(evaluate.evaluate)
app.command("compare")(compare.compare)
app.command("sft")(train.supervised)
app.command("warm-start")(warm_start.warm_start)
app.command("train")(train.train)
rollouts_app.command("show")(rollouts.rollouts_show)
app.command("plot")(plot.plot)
app.command("view")(view.view)
rollouts_app.command("rescore")(rollouts.rollouts_rescore)
rollouts_app.command("export")(rollouts.rollouts_export)
rollouts_app.command("schema")(rollouts.rollouts_schema)
index_app.command("build")(search.index_build)
serve_app.command("mcp")(mcp.serve_mcp)
serve_app.command("env")(openenv.serve_env)
serve_app.command("search")(search.serve_search)
serve_app.command("sandbox")(sandbox.serve_sandbox)
sandbox_app.command("build-image")(sandbox.sandbox_build_image)
sandbox_app.command("run")(sandbox.sandbox_run)
sql_app.command("serve-postgres")(sql.sql_serve_postgres)
sql_app.command("stop-postgres")(sql.sql_stop_postgres)
sql_app.command("generate")(sql.sql_generate)
textworld_app.command("generate")(textworld.textworld_generate)
search_app.command("world")(search.search_world)
search_app.command("simulator-data")(simulator.search_simulator_data)
search_app.command("simulator-sft")(simulator.search_simulator_sft)
search_app.command("simulator-report")(simulator.search_simulator_report)


def main() -> None:
    """Entry point: toolgym's own errors are one plain line on stderr, never a traceback."""
    from toolgym.cores import share_compute_threads
    from toolgym.errors import ToolgymError

    # Let `toolgym check my_envs:my/Env-v0` import my_envs.py from here, after every
    # installed package: a file of the user's named click.py or openai.py shadows nothing.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    share_compute_threads()
    try:
        app()
    except ToolgymError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
