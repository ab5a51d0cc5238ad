"""`toolgym init-env NAME [--mcp]`: a new environment package that installs and passes as
written: an env with its tools and generated tasks (split by content), the entry point that
registers it, a training config and a test that runs toolgym's contract checks on it. With
`--mcp`, one tool is served by an MCP server in the package (the installed MCP SDK's
MCPServer), which the env reaches through MCPTools. Edit from there."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from toolgym.cli.env_templates import package_files
from toolgym.cli.show import console


def init_env_command(name: str, out: Path | None, mcp: bool = False) -> int:
    from toolgym.errors import ConfigError

    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ConfigError(
            f"package name {name!r}: use lower-case letters, digits and underscores, starting "
            "with a letter (e.g. word_games)"
        )
    if mcp:
        import toolgym.tools.mcp  # noqa: F401  (without the MCP SDK: says what to install)
    folder = out or Path(name)
    if folder.exists() and any(folder.iterdir()):
        raise ConfigError(f"{folder} exists and is not empty; choose another --out")
    for relative, text in package_files(name, mcp).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    title = "".join(part.capitalize() for part in name.split("_"))
    console.print(f"wrote {folder}/ with {name}/{title}-v0. Next:", markup=False)
    console.print(
        f"  cd {folder} && pip install -e . && toolgym check {name}/{title}-v0 && pytest tests",
        markup=False,
    )
    return 0


def init_env(
    name: Annotated[str, typer.Argument(help="The package name, e.g. word_games.")],
    out: Annotated[
        Path | None, typer.Option(help="Folder to write (default: ./NAME); must be new or empty.")
    ] = None,
    mcp: Annotated[
        bool,
        typer.Option(
            "--mcp",
            help="Serve the env's peek tool from an MCP server in the package "
            "(the installed MCP SDK's MCPServer), reached through MCPTools.",
        ),
    ] = False,
) -> None:
    """Write a new environment package (env, tasks, config, entry point, test) that installs
    as is."""

    raise typer.Exit(init_env_command(name=name, out=out, mcp=mcp))
