"""Terminal rendering shared by the CLI commands: messages with coloured roles, tool tables."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from toolgym.cli.tables import print_table

console = Console(highlight=False, soft_wrap=True, emoji=False)
"""Plain lines are never cut or wrapped (a log file or a pipe keeps them whole), and
`:name:` in an id is text, not an emoji."""

ROLE_STYLES = {"system": "magenta", "user": "green", "assistant": "cyan", "tool": "yellow"}
SHOWN_CHARS = 20_000
"""The most of one message a terminal is shown (the file keeps it whole): folding a
10 MB word to the terminal's width took over a minute."""
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}
"""Control characters shown as text (\\x1b), never written to the terminal: a stored model
output could otherwise clear the screen or set the clipboard (OSC 52)."""


def shown(text: str, limit: int) -> str:
    """Stored text for a line of rich markup: printable, and its brackets escaped."""
    return escape(printable(text, limit))


def printable(text: str, limit: int | None = None) -> str:
    """`text` as a terminal may be given it: controls shown as escapes, lone surrogates as
    U+FFFD, and at most `limit` characters (the rest counted)."""
    more = ""
    if limit is not None and len(text) > limit:
        more, text = f"\n[... {len(text) - limit:,} more characters]", text[:limit]
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.translate(_CONTROLS) + more


def show_message(message: dict[str, Any]) -> None:
    """A message in a panel of its role, its text wrapped to the terminal's width (the
    console's soft wrap, which keeps plain lines whole, would cut a panel to one line)."""
    role = message.get("role", "?")
    title = role if role != "tool" else f"tool · {message.get('name', '')}"
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, indent=1)
    panel = Panel(
        Text(printable(text, SHOWN_CHARS), overflow="fold"),  # a long word folds, never cut
        title=escape(printable(str(title), 200)),
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
    print_table(table, console)


def _type(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "|".join(map(str, prop["enum"]))
    return str(prop.get("type", "any"))
