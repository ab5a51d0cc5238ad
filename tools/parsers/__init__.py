"""Action parsers read tool calls out of the model's raw text; one format per file.

Pick one by name with `make_parser("hermes" | "xml" | "fenced" | "whole_turn", **options)`.
"""

from __future__ import annotations

from typing import Any

from toolgym.errors import lookup
from toolgym.tools.parsers.base import ActionParser, ParsedAction
from toolgym.tools.parsers.fenced_code import FencedCodeParser
from toolgym.tools.parsers.hermes import HermesParser
from toolgym.tools.parsers.whole_turn import WholeTurnParser
from toolgym.tools.parsers.xml_tags import XmlTagParser

PARSERS: dict[str, type[ActionParser]] = {
    "hermes": HermesParser,
    "xml": XmlTagParser,
    "fenced": FencedCodeParser,
    "whole_turn": WholeTurnParser,
}


def make_parser(name: str, **options: Any) -> ActionParser:
    """Build the parser registered under `name`."""
    return lookup(PARSERS, name, "action parser")(**options)


__all__ = [
    "PARSERS",
    "ActionParser",
    "FencedCodeParser",
    "HermesParser",
    "ParsedAction",
    "WholeTurnParser",
    "XmlTagParser",
    "make_parser",
]
