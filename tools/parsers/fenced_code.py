"""Fenced-code format: a markdown block ```python ... ``` is a call to the tool mapped to its
language, with the block's body as that tool's code argument."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from toolgym.tools.parsers.base import ActionParser, ParsedAction, render_single_argument
from toolgym.tools.records import ToolCall

_FENCE = re.compile(r"^([ \t]*)(```+)[ \t]*([\w+-]*)[^\n]*\n", re.M)


class FencedCodeParser(ActionParser):
    def __init__(
        self,
        languages: Mapping[str, tuple[str, str] | list[str]] | None = None,
        default_language: str | None = "python",
    ) -> None:
        mapping = languages or {"python": ("python", "code")}
        self.languages: dict[str, tuple[str, str]] = {
            k: (str(v[0]), str(v[1])) for k, v in mapping.items()
        }
        self.default_language = default_language

    def parse(self, text: str) -> ParsedAction:
        out = ParsedAction()
        prose: list[str] = []
        cursor = 0
        while (match := _FENCE.search(text, cursor)) is not None:
            prose.append(text[cursor : match.start()])
            fence, language = (
                match.group(2),
                (match.group(3) or self.default_language or "").lower(),
            )
            closing = re.compile(rf"^[ \t]*{fence}[ \t]*$", re.M).search(text, match.end())
            if closing is None:
                out.errors.append(
                    f"code block opened with {fence}{language} is not closed: end it with a line {fence}."
                )
                cursor = len(text)
                break
            body = text[match.end() : closing.start()].rstrip("\n")
            cursor = closing.end()
            if language not in self.languages:
                known = ", ".join(f"{fence}{k}" for k in self.languages)
                out.errors.append(
                    f"code blocks in '{language or 'no language'}' cannot be run here; use {known}."
                )
                continue
            tool_name, arg = self.languages[language]
            out.calls.append(ToolCall(tool_name, {arg: body}))
        prose.append(text[cursor:])
        out.text = "".join(prose).strip()
        return out

    def render(self, calls: Sequence[ToolCall]) -> str:
        return render_single_argument(
            calls, self.languages, lambda lang, body: f"```{lang}\n{body}\n```", "code language"
        )

    def format_hint(self) -> str:
        return (
            "Run code by writing a block: "
            + ", ".join(f"```{k} ... ```" for k in self.languages)
            + "."
        )
