"""The parser contract: text in, tool calls and precise complaints out."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from toolgym.tools.records import ToolCall
from toolgym.tools.text import clean_text, clean_value, clip_list, echo, nesting

MAX_ERRORS = 8
"""Problems listed back to the model for one turn; the rest are counted."""
MAX_DEPTH = 32
"""Deepest nesting of a call's arguments."""
MAX_NAME_CHARS = 128


@dataclass
class ParsedAction:
    """What a parser found in one model turn.

    `calls` are well-formed calls in order; `errors` say, in words meant for the model, what
    could not be read (a turn may have both); `text` is the prose outside any call.
    """

    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    text: str = ""


class ActionParser(abc.ABC):
    """Reads tool calls from raw model text, and writes calls back in the same format
    (for scripted solvers, demonstrations and a person playing in the terminal)."""

    @abc.abstractmethod
    def parse(self, text: str) -> ParsedAction:
        """Find the calls in `text`; never raise on malformed input."""

    @abc.abstractmethod
    def render(self, calls: Sequence[ToolCall]) -> str:
        """Write `calls` as the model would, so that `parse(render(c))` gives `c` back."""

    @abc.abstractmethod
    def format_hint(self) -> str:
        """One line telling the model how to write a call in this format."""


def parse_safely(parser: ActionParser, text: str) -> ParsedAction:
    """`parser.parse(text)` made safe for any text a model can write: a parser that fails
    (deep nesting, a bug) reports a malformed turn instead of raising; names, arguments and
    prose come back as valid Unicode; errors are few and short."""
    try:
        parsed = parser.parse(clean_text(text))
    except RecursionError:
        return ParsedAction(errors=["the turn is nested too deeply to read; write flat JSON."])
    except Exception as exc:  # a parser's bug is still the turn's problem, never a crash
        return ParsedAction(errors=[f"the turn could not be read ({type(exc).__name__})."])
    calls, errors = [], list(parsed.errors)
    for index, call in enumerate(parsed.calls, start=1):
        if len(call.name) > MAX_NAME_CHARS:
            errors.append(
                f"tool call {index}: a tool name of {len(call.name)} characters is not a tool name."
            )
        elif nesting(call.arguments) > MAX_DEPTH:
            errors.append(f"tool call {index}: arguments nested more than {MAX_DEPTH} deep.")
        else:
            calls.append(ToolCall(clean_text(call.name), clean_value(call.arguments), call.id))
    return ParsedAction(
        calls, clip_list([echo(e, 400) for e in errors], MAX_ERRORS), clean_text(parsed.text)
    )


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of character offset `pos` in `text`."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def render_single_argument(
    calls: Sequence[ToolCall],
    markers: Mapping[str, tuple[str, str]],
    write: Callable[[str, str], str],
    kind: str,
) -> str:
    """Write calls for formats where a marker (a tag, a code language) names the tool and its
    body fills the tool's one argument: `markers` maps marker -> (tool, argument)."""
    by_tool = {tool_name: (marker, arg) for marker, (tool_name, arg) in markers.items()}
    parts = []
    for c in calls:
        if c.name not in by_tool:
            raise ValueError(f"no {kind} is mapped to tool '{c.name}'")
        marker, arg = by_tool[c.name]
        parts.append(write(marker, str(c.arguments.get(arg, ""))))
    return "\n".join(parts)
