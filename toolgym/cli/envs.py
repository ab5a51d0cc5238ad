"""`toolgym list` and `toolgym check`."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolgym.cli.options import EnvArgs
from toolgym.cli.show import console
from toolgym.cli.tables import print_table

MARKS = {"pass": "[green]✓[/]", "fail": "[red]✗[/]", "warn": "[yellow]![/]", "skip": "[dim]-[/]"}


def list_command(text: str | None = None) -> int:
    """Ids in full either way: a table on a terminal, tab-separated lines off one (for grep
    and cut). 1 when a filter matched nothing."""
    from toolgym.envs import registration

    specs = [registration.spec(i) for i in registration.registered_ids()]
    if text:
        needle = text.lower()
        specs = [s for s in specs if needle in s.id.lower() or needle in s.description.lower()]
    if console.is_terminal:
        table = Table(title=f"Registered environments ({len(specs)})")
        table.add_column("id", style="bold", no_wrap=True)
        table.add_column("description")
        for s in specs:
            table.add_row(s.id, escape(s.description))
        print_table(table, console)
    else:
        for s in specs:
            print(f"{s.id}\t{s.description}")  # rich would expand the tab
    for name, error in registration.plugin_errors.items():
        console.print(f"[red]plugin {escape(name)} failed to load:[/] {escape(error)}")
    if text and not specs:
        console.print(f"no registered env's id or description holds {text!r}", markup=False)
        return 1
    return 0


def check_command(env_id: str, seed: int, kwargs: dict[str, Any] | None = None) -> int:
    """Print one line per check; return the exit code (1 when any check failed)."""
    from toolgym.envs.checker import check_env

    report = check_env(env_id, seed=seed, kwargs=kwargs)
    console.print(f"[bold]Checking {escape(env_id)}[/]")
    for f in report.findings:
        detail = f": {escape(f.message)}" if f.message else ""
        console.print(f"  {MARKS[f.status]} {f.check}{detail}")
    failed = len(report.failures())
    if failed:
        console.print(f"[red]{failed} check(s) failed.[/]")
        return 1
    console.print("[green]All checks passed.[/]")
    return 0


def list_envs(
    filter: Annotated[
        str | None,
        typer.Option(
            "--filter", "-f", help="Only ids or descriptions holding this text (any case)."
        ),
    ] = None,
) -> None:
    """List the registered environments (a table on a terminal, one per line off one)."""

    raise typer.Exit(list_command(text=filter))


def check(
    env_id: Annotated[
        str, typer.Argument(help="Env id, e.g. toolgym/Maze-v0 or mypkg.envs:my/Env-v0")
    ],
    seed: Annotated[int, typer.Option(help="Seed of the first checked episode.")] = 0,
    env_arg: EnvArgs = None,
) -> None:
    """Check that an environment honours the toolgym Env contract."""
    from toolgym.cli.train import env_kwargs

    raise typer.Exit(check_command(env_id=env_id, seed=seed, kwargs=env_kwargs(env_arg or [])))
