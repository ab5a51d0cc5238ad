"""A verifiers Toolset's tools in a toolgym env: the toolset's own MCP server (started with
its own `run()`, as verifiers starts it in a subprocess runtime, or reached at its configured
`url`), its tools named as verifiers names them (`<server>_<tool>`), called through MCPTools.
One server per toolset class and config in the owner's shared resources (the run's runtime, a
check's, or a lone env's own): toolgym runs only toolsets without per-task setup or rollout
state, so one server serves every episode."""

from __future__ import annotations

import os
import sys
from typing import Any

from verifiers.v1.mcp.server import ServerBase

from toolgym.envs.server_process import ServerProcess, shared_server
from toolgym.errors import ConfigError
from toolgym.tools.mcp import MCPTools
from toolgym.tools.tool import Tool
from toolgym.tools.tool_source import Shared


class ToolsetTools:
    """The tools of one verifiers Toolset (a ToolSource)."""

    def __init__(self, toolset: ServerBase[Any, Any], timeout_s: float) -> None:
        cls = type(toolset)
        if cls.__module__ == "__main__":
            raise ConfigError(f"the toolset {cls.__name__} must live in an importable module")
        self.toolset = toolset
        self.timeout_s = timeout_s

    async def load(self, shared: Shared) -> list[Tool]:
        name = self.toolset.server_name
        url = await self.ensure_running(shared)
        tools = MCPTools(url, prefix=f"{name}_" if name else "", timeout_s=self.timeout_s)
        return await tools.load(shared)

    async def ensure_running(self, shared: Shared) -> str:
        """The server's MCP URL; a server of ours that died is started again, on its port."""
        url = getattr(self.toolset.config, "url", None)
        if url is not None:
            return str(url)
        cls = type(self.toolset)
        key = (
            "verifiers-toolset",
            cls.__module__,
            cls.__qualname__,
            self.toolset.config.model_dump_json(),
        )
        server = await shared_server(shared, key, self._server)
        return f"{server.url}/mcp"

    def _server(self) -> ServerProcess:
        cls = type(self.toolset)
        code = (
            f"import importlib; importlib.import_module({cls.__module__!r})"
            f".{cls.__qualname__}.run()"
        )
        path = os.pathsep.join(p for p in sys.path if p)  # the toolset's package, as here
        env = {"VF_CONFIG": self.toolset.config.model_dump_json(), "MCP_HOST": "127.0.0.1",
               "MCP_PORT": "{port}", "PYTHONPATH": path}  # fmt: skip
        return ServerProcess(  # an empty POST is refused at once when it is up
            f"the verifiers toolset {cls.__name__}", [sys.executable, "-c", code], "/mcp",
            env=env, probe_method="POST",
        )  # fmt: skip
