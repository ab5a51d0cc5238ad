"""MCPTools: an MCP server's tools as toolgym tools, for any ToolEnv's `tool_sources`.

Each server tool keeps its name (optionally prefixed), description and JSON schema, so the
model sees what the server publishes. Arguments are checked against that schema before
they reach the server (a mistake comes back at once, as the policy's); a result becomes
text (its text blocks, embedded text resources, and structured content when there is no
text) plus up to `max_images` images as data URLs, each bounded in bytes. A result the
server flags `isError`, or a call it refuses as malformed, is the model's mistake, shown to
it; a server that is gone is an infrastructure error (masked from training).

    env = MyEnv(tool_sources=[MCPTools(["mcp-server-time"])])
    env = MyEnv(tool_sources=[MCPTools("http://127.0.0.1:8000/mcp", prefix="web_")])

The server is a shared resource: started on the first episode that needs it, used by every
env instance made with the same server settings, closed with the runtime.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import mcp_types

from toolgym.errors import ConfigError
from toolgym.log import get_logger
from toolgym.tools.mcp.connection import MCPConnection
from toolgym.tools.mcp.server_spec import MCPServerSpec
from toolgym.tools.records import ToolReply
from toolgym.tools.schema_tool import schema_check
from toolgym.tools.tool import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT_S,
    AnyArguments,
    Tool,
    ToolCallError,
)
from toolgym.tools.tool_source import Shared

log = get_logger(__name__)

MAX_IMAGE_BYTES = 8 << 20
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ERROR_PREFIX = re.compile(r"^Error: (tool '[^']*': )?")
"""A toolgym server's (or any server's) own "Error: tool 'x': ", which the client's message
would otherwise repeat."""


class MCPTools:
    """The tools of one MCP server.

    Args:
        server: a command list (stdio), a URL (streamable HTTP), or a mapping of
            `MCPServerSpec` settings (command or url, env, cwd, start_timeout_s,
            max_frame_bytes, tools: the names to keep).
        prefix: put before every tool name (two servers with a tool of the same name).
        timeout_s: the limit of one call.
        max_output_chars: the most characters of one result's text.
        max_images: the most images one result shows.
    """

    def __init__(
        self,
        server: Any,
        *,
        prefix: str = "",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        max_images: int = 4,
    ) -> None:
        self.spec = MCPServerSpec.parse(server)
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        self.max_images = max_images

    async def load(self, shared: Shared) -> list[Tool]:
        connection: MCPConnection = await shared(
            ("mcp-server", self.spec), lambda: MCPConnection(self.spec)
        )
        listed = await connection.list_tools()
        wanted = self.spec.tools
        if wanted is not None:
            missing = sorted(set(wanted) - {t.name for t in listed})
            if missing:
                raise ConfigError(
                    f"MCP server {self.spec.describe()} has no tool(s) {missing}; it offers "
                    f"{', '.join(t.name for t in listed) or 'none'}"
                )
        return [self._tool(connection, t) for t in listed if wanted is None or t.name in wanted]

    def _tool(self, connection: MCPConnection, listed: mcp_types.Tool) -> Tool:
        schema = dict(listed.input_schema or {}) or {"type": "object", "properties": {}}
        check = schema_check(schema, listed.name)
        server_name = listed.name
        max_images = self.max_images

        async def run(**arguments: Any) -> ToolReply:
            check(arguments)
            result = await connection.call_tool(server_name, arguments)
            reply = _reply(result, max_images)
            if result.is_error:
                raise ToolCallError(_ERROR_PREFIX.sub("", reply.text) or "the server said no")
            return reply

        description = listed.description or listed.title or listed.name
        return Tool(
            run, self.prefix + listed.name, description, AnyArguments, schema,
            timeout_s=self.timeout_s, max_output_chars=self.max_output_chars,
        )  # fmt: skip


def _reply(result: mcp_types.CallToolResult, max_images: int) -> ToolReply:
    """Text and bounded images from a result's content blocks."""
    texts: list[str] = []
    images: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            texts.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            image, why = _image(block, len(images) < max_images)
            if image:
                images.append(image)
            texts.append(why)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                texts.append(resource.text)
            else:
                texts.append(f"[binary resource {resource.uri} left out]")
        elif isinstance(block, mcp_types.ResourceLink):
            texts.append(f"[resource {block.uri}: {block.name}]")
        else:
            texts.append(
                f"[{getattr(block, 'type', 'unknown')} content left out: not readable here]"
            )
    if not any(t.strip() for t in texts) and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return ToolReply("\n".join(texts), tuple(images))


def _image(block: mcp_types.ImageContent, room: bool) -> tuple[str | None, str]:
    """The block as a data URL (or None) and the line the text says about it."""
    kind = block.mime_type
    if kind not in IMAGE_TYPES:
        return None, f"[image of type {kind[:40]!r} left out: not a picture format read here]"
    if not room:
        return None, "[image left out: too many images in one result]"
    if len(block.data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        return None, f"[image left out: larger than {MAX_IMAGE_BYTES >> 20} MiB]"
    try:
        base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        return None, "[image left out: its data is not base64]"
    return f"data:{kind};base64,{block.data}", "[image: shown below]"
