"""ToolSource: tools that are found at run time rather than declared in code (the tools an
MCP server lists), loaded by a ToolEnv before its first episode."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Protocol, runtime_checkable

from toolgym.tools.tool import Tool

Shared = Callable[[Hashable, Callable[[], Any]], Awaitable[Any]]
"""`env.shared`: the resource under a key, made once by the given function and closed by its
owner (the runtime at shutdown, or the env when used alone)."""


@runtime_checkable
class ToolSource(Protocol):
    async def load(self, shared: Shared) -> list[Tool]:
        """The tools, ready to call; what they need that is costly to make (a server
        process, a connection) is asked for through `shared`, so env instances share it.
        Raises InfraError when the tools cannot be reached now (the episode is masked, and
        the next reset tries again)."""
        ...
