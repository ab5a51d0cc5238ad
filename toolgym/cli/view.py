"""`toolgym view`: the run directories in a local web app."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated

import typer

from toolgym.cli.show import console


def view_command(paths: list[Path], host: str, port: int, open_browser: bool) -> int:
    from toolgym.http import serve
    from toolgym.viewer.runs import LOOPBACK_HOSTS, open_runs
    from toolgym.viewer.server import build_app

    runs = open_runs(paths)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}/"
    if host not in LOOPBACK_HOSTS:
        console.print(
            f"[yellow]serving on {host}: anyone who can reach this machine can read these runs[/]"
        )

    def announce(*_: object) -> None:
        console.print(
            f"viewing {len(runs)} run{'s' if len(runs) > 1 else ''} at {url} (Ctrl-C stops)"
        )
        if open_browser:
            webbrowser.open(url)

    serve(build_app(runs, host), host, port, announce)
    return 0


def view(
    runs: Annotated[
        list[Path], typer.Argument(help="Training run directories to view, or folders of them.")
    ],
    host: Annotated[
        str, typer.Option(help="Address to serve on; anything but loopback exposes the runs.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8765,
    open_browser: Annotated[
        bool, typer.Option("--open/--no-open", help="Open the page in a browser.")
    ] = True,
) -> None:
    """See runs in a local web app: curves, each step's episodes, each turn's credit."""

    raise typer.Exit(view_command(paths=runs, host=host, port=port, open_browser=open_browser))
