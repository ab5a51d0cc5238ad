"""XML-tag format: `<search>query</search>`, `<answer>42</answer>` (Search-R1 style).

Each tag maps to a tool and the one argument its body fills: `{"search": ("search", "query")}`.
Tags not in the map (`<think>`, ...) are prose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from toolgym.tools.parsers.base import ActionParser, ParsedAction, render_single_argument
from toolgym.tools.records import ToolCall


class XmlTagParser(ActionParser):
    def __init__(self, tags: Mapping[str, tuple[str, str] | list[str]] | None = None) -> None:
        mapping = tags or {"search": ("search", "query"), "answer": ("answer", "answer")}
        self.tags: dict[str, tuple[str, str]] = {
            tag: (str(v[0]), str(v[1])) for tag, v in mapping.items()
        }
        names = "|".join(re.escape(t) for t in sorted(self.tags, key=len, reverse=True))
        self._open = re.compile(rf"<({names})>", re.S)

    def parse(self, text: str) -> ParsedAction:
        out = ParsedAction()
        prose: list[str] = []
        cursor = 0
        while (match := self._open.search(text, cursor)) is not None:
            tag = match.group(1)
            close = f"</{tag}>"
            end = text.find(close, match.end())
            prose.append(text[cursor : match.start()])
            if end < 0:
                out.errors.append(f"<{tag}> is not closed: write <{tag}>...{close}.")
                cursor = len(text)
                break
            tool_name, arg = self.tags[tag]
            out.calls.append(ToolCall(tool_name, {arg: text[match.end() : end].strip()}))
            cursor = end + len(close)
        prose.append(text[cursor:])
        out.text = "".join(prose).strip()
        return out

    def render(self, calls: Sequence[ToolCall]) -> str:
        return render_single_argument(
            calls, self.tags, lambda tag, body: f"<{tag}>{body}</{tag}>", "XML tag"
        )

    def format_hint(self) -> str:
        return "Use tags: " + ", ".join(f"<{t}>...</{t}>" for t in self.tags) + "."
