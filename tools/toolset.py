"""ToolSet: the tools one environment offers, by name, with routing and schemas."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from toolgym.errors import ToolDefinitionError, did_you_mean
from toolgym.tools.records import ToolCall, ToolErrorKind, ToolResult
from toolgym.tools.text import echo
from toolgym.tools.tool import Tool


class ToolSet:
    """An ordered, name-keyed group of tools. Unknown names become observations with hints."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, t: Tool) -> None:
        if not isinstance(t, Tool):
            raise ToolDefinitionError(f"{t!r} is not a Tool; decorate the function with @tool")
        if t.name in self._tools:
            raise ToolDefinitionError(f"two tools are named '{t.name}'")
        self._tools[t.name] = t

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas, in registration order (what chat templates render)."""
        return [t.schema() for t in self]

    async def call(self, call: ToolCall, injected: Mapping[str, Any] | None = None) -> ToolResult:
        """Route `call` to its tool. Never raises for the model's mistakes."""
        found = self._tools.get(call.name)
        if found is None:
            close = did_you_mean(call.name, self._tools) if len(call.name) <= 64 else ""
            hint = close or f" Available tools: {', '.join(self._tools) or 'none'}."
            return ToolResult(
                call, f"Error: unknown tool '{echo(call.name, 64)}'.{hint}",
                ToolErrorKind.UNKNOWN_TOOL,
            )  # fmt: skip
        return await found.call(call, injected)
