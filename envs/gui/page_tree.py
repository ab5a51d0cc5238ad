"""The page as text: an accessibility-tree outline with ids an action can name.

One `page.evaluate` of page_tree.js walks the DOM and returns every rendered element that has
a role (its ARIA role, or the one its tag implies) or a click handler, and every text, with
its id, name, value and flags. Chromium's own accessibility tree (over CDP) has no notion of
"clickable", costs a round trip per element to act on, and its ids change between snapshots;
one pass of our own gives stable ids, the flags an agent needs, and the element to act on by
id. The ids live in the page (a WeakMap), so an element keeps its id for the page's life.

    [3] button "Submit" clickable
    [4] textbox "Username" value="ann" focused clickable
    [5] text "Lorem ipsum" offscreen
    [6] canvas at (10, 400) size 120x60

"offscreen": not where a click would reach it now (outside the window, scrolled out of its
box, or under another element); clicking it scrolls it into view first.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

TREE_JS = files("toolgym.envs.gui").joinpath("page_tree.js").read_text()


@dataclass(frozen=True)
class PageTree:
    """A snapshot: the nodes as page_tree.js returned them, and where the page was."""

    nodes: list[dict[str, Any]]
    truncated: bool
    url: str
    title: str
    scroll: tuple[int, int]

    def node(self, element_id: int) -> dict[str, Any] | None:
        return next((n for n in self.nodes if n["id"] == element_id), None)

    def text(self, max_chars: int) -> str:
        """The outline, cut to `max_chars` with a notice (a page can be any size)."""
        lines = [_line(n) for n in self.nodes]
        if self.truncated:
            lines.append("[more elements not shown]")
        out, used = [], 0
        for index, line in enumerate(lines):
            if used + len(line) + 1 > max_chars:
                out.append(f"[{len(lines) - index} more lines not shown]")
                break
            out.append(line)
            used += len(line) + 1
        return "\n".join(out) if out else "(the page shows nothing)"

    def digest(self) -> str:
        """A hash of what the agent can see and do (ids, roles, names, values, flags; not
        pixel positions), so equal pages share a GiGPO state key."""
        seen = [{k: v for k, v in n.items() if k != "box"} for n in self.nodes]
        text = json.dumps([self.url, self.scroll, seen], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


async def read_tree(
    page: Any, ignore: tuple[str, ...] = (), max_nodes: int = 500, max_name: int = 80
) -> PageTree:
    raw = await page.evaluate(
        TREE_JS, {"ignore": list(ignore), "maxNodes": max_nodes, "maxName": max_name}
    )
    return PageTree(
        nodes=raw["nodes"],
        truncated=bool(raw["truncated"]),
        url=raw["url"],
        title=raw["title"],
        scroll=(int(raw["scroll"][0]), int(raw["scroll"][1])),
    )


def _line(node: dict[str, Any]) -> str:
    parts = [f"{'  ' * node['depth']}[{node['id']}] {node['role']}"]
    if node["name"]:
        parts.append(json.dumps(node["name"], ensure_ascii=False))
    if "value" in node:
        parts.append(f"value={json.dumps(node['value'], ensure_ascii=False)}")
    for flag in (
        "multiline",
        "multiselectable",
        "checked",
        "selected",
        "disabled",
        "focused",
        "clickable",
        "scrollable",
    ):
        if node.get(flag):
            parts.append(flag)
    if node["role"] == "canvas":  # a canvas is acted on by coordinates (click_at)
        x, y, width, height = node["box"]
        parts.append(f"at ({x}, {y}) size {width}x{height}")
    if not node["visible"]:
        parts.append("offscreen")
    return " ".join(parts)
