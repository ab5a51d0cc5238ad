"""Whole-turn format: the model's entire turn is one call to one tool, as that tool's one
text argument. For environments whose action is free text (a text game's command, a chat
reply, another env's raw turn) rather than a choice among tools."""

from __future__ import annotations

from collections.abc import Sequence

from toolgym.tools.parsers.base import ActionParser, ParsedAction
from toolgym.tools.records import ToolCall


class WholeTurnParser(ActionParser):
    """Args:
    tool: the tool every turn calls.
    argument: the argument the turn's text fills.
    """

    def __init__(self, tool: str = "act", argument: str = "message") -> None:
        self.tool = tool
        self.argument = argument

    def parse(self, text: str) -> ParsedAction:
        if not text.strip():
            return ParsedAction(errors=["the turn is empty: write your message as plain text."])
        return ParsedAction(calls=[ToolCall(self.tool, {self.argument: text})])

    def render(self, calls: Sequence[ToolCall]) -> str:
        if len(calls) != 1 or calls[0].name != self.tool:
            raise ValueError(f"a whole turn is exactly one call to '{self.tool}'")
        return str(calls[0].arguments.get(self.argument, ""))

    def format_hint(self) -> str:
        return "Your whole reply is sent as it is, as your move: write only the move."
