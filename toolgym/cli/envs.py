"""`toolgym list` and `toolgym check`."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from toolgym.cli.show import console

MARKS = {"pass": "[green]✓[/]", "fail": "[red]✗[/]", "warn": "[yellow]![/]", "skip": "[dim]-[/]"}


def list_command() -> None:
    from toolgym.envs import registration

    table = Table(title="Registered environments")
    table.add_column("id", style="bold")
    table.add_column("entry point")
    table.add_column("description")
    for env_id in registration.registered_ids():
        s = registration.spec(env_id)
        table.add_row(env_id, s.entry_point, escape(s.description))
    console.print(table)
    for name, error in registration.plugin_errors.items():
        console.print(f"[red]plugin {escape(name)} failed to load:[/] {escape(error)}")


def check_command(env_id: str, seed: int) -> int:
    """Print one line per check; return the exit code (1 when any check failed)."""
    from toolgym.envs.checker import check_env

    report = check_env(env_id, seed=seed)
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
