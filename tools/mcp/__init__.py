"""MCP: the tools of any Model Context Protocol server, as toolgym tools (`MCPTools`).
Needs the `mcp` extra; without it, importing this says so."""

from toolgym.errors import ConfigError

INSTALL = "pip install 'toolgym[mcp]'"

try:
    import mcp  # noqa: F401
except ImportError as exc:
    raise ConfigError(f"MCP tools need the MCP SDK ({exc.name} is missing): {INSTALL}") from None

from toolgym.tools.mcp.server_spec import MCPServerSpec  # noqa: E402
from toolgym.tools.mcp.tools import MCPTools  # noqa: E402

__all__ = ["INSTALL", "MCPServerSpec", "MCPTools"]
