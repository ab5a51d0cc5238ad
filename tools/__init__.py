"""Tools: typed async functions the model calls, the parsers that read calls out of the
model's text, and the sets that route a call to its tool."""

from toolgym.tools.parsers import (
    ActionParser,
    FencedCodeParser,
    HermesParser,
    ParsedAction,
    XmlTagParser,
    make_parser,
)
from toolgym.tools.records import ToolCall, ToolErrorKind, ToolResult
from toolgym.tools.tool import InfraError, Injected, Tool, ToolCallError, tool
from toolgym.tools.toolset import ToolSet

__all__ = [
    "ActionParser",
    "FencedCodeParser",
    "HermesParser",
    "InfraError",
    "Injected",
    "ParsedAction",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolErrorKind",
    "ToolResult",
    "ToolSet",
    "XmlTagParser",
    "make_parser",
    "tool",
]
