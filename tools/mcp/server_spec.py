"""Which MCP server to connect to: a command run over stdio, or a streamable-HTTP URL, read
from plain config (a string URL, a command list, or a mapping with options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolgym.errors import ConfigError

DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_MAX_FRAME_BYTES = 16 << 20


@dataclass(frozen=True)
class MCPServerSpec:
    command: tuple[str, ...] = ()
    """The server's command line (stdio transport)."""
    url: str | None = None
    """A streamable-HTTP endpoint, e.g. http://127.0.0.1:8000/mcp."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables the server process gets on top of a minimal environment."""
    cwd: str | None = None
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    """How long starting and greeting the server may take."""
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    """The longest message a stdio server may send (a longer one ends the connection)."""
    tools: tuple[str, ...] | None = field(default=None)
    """Only these of the server's tools (all when None)."""

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ConfigError(
                "an MCP server is a command (a list: [program, args...]) or a url, one of them"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ConfigError(
                f"an MCP server url starts with http:// or https://, got {self.url!r}"
            )
        if self.start_timeout_s <= 0 or self.max_frame_bytes <= 0:
            raise ConfigError("start_timeout_s and max_frame_bytes must be positive")

    @classmethod
    def parse(cls, value: Any) -> MCPServerSpec:
        """From config: "http://..." (a URL), ["program", "arg", ...] (a command), or a mapping
        {command | url, env, cwd, start_timeout_s, max_frame_bytes, tools}."""
        if isinstance(value, MCPServerSpec):
            return value
        if isinstance(value, str):
            if value.startswith(("http://", "https://")):
                return cls(url=value)
            raise ConfigError(
                f"an MCP server given as text is a URL; give a command as a list, got {value!r}"
            )
        if isinstance(value, list | tuple):
            return cls(command=_strings(value, "command"))
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"an MCP server is a URL, a command list or a mapping, got {type(value).__name__}"
            )
        known = {"command", "url", "env", "cwd", "start_timeout_s", "max_frame_bytes", "tools"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(f"unknown MCP server setting(s) {unknown}; known: {sorted(known)}")
        env = value.get("env") or {}
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ConfigError("an MCP server's env is a mapping of names to strings")
        tools = value.get("tools")
        return cls(
            command=_strings(value.get("command") or (), "command"),
            url=value.get("url"),
            env=tuple(sorted(env.items())),
            cwd=value.get("cwd"),
            start_timeout_s=float(value.get("start_timeout_s", DEFAULT_START_TIMEOUT_S)),
            max_frame_bytes=int(value.get("max_frame_bytes", DEFAULT_MAX_FRAME_BYTES)),
            tools=None if tools is None else _strings(tools, "tools"),
        )

    def describe(self) -> str:
        return self.url or " ".join(self.command)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"an MCP server's {what} is a list of strings, got {value!r}")
    return tuple(value)
