"""Terminal rendering shared by the CLI commands: messages with coloured roles, tool tables."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

console = Console(highlight=False, soft_wrap=True, emoji=False)
"""Plain lines are never cut or wrapped (a log file or a pipe keeps them whole), and
`:name:` in an id is text, not an emoji."""

ROLE_STYLES = {"system": "magenta", "user": "green", "assistant": "cyan", "tool": "yellow"}


def show_message(message: dict[str, Any]) -> None:
    """A message in a panel of its role, its text wrapped to the terminal's width (the
    console's soft wrap, which keeps plain lines whole, would cut a panel to one line)."""
    role = message.get("role", "?")
    title = role if role != "tool" else f"tool · {message.get('name', '')}"
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, indent=1)
    panel = Panel(
        Text(text, overflow="fold"),  # a long word (a JSON call, a hash) folds, never cut
        title=escape(title),
        title_align="left",
        border_style=ROLE_STYLES.get(role, "white"),
    )
    console.print(panel, soft_wrap=False)  # wrapped to the width, every line kept


def show_tools(schemas: list[dict[str, Any]]) -> None:
    table = Table(title="Tools", show_lines=False)
    table.add_column("name", style="bold")
    table.add_column("arguments")
    table.add_column("description")
    for schema in schemas:
        fn = schema["function"]
        props = fn["parameters"].get("properties", {})
        required = set(fn["parameters"].get("required", []))
        args = ", ".join(f"{k}{'' if k in required else '?'}: {_type(v)}" for k, v in props.items())
        table.add_row(fn["name"], escape(args) or "-", escape(fn["description"].splitlines()[0]))
    console.print(table)


def _type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "|".join(map(str, prop["enum"]))
    return str(prop.get("type", "any"))
