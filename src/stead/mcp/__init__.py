"""MCP servers as tool sources (the optional extra ``stead[mcp]``, the official ``mcp`` SDK).

    async with MCPTools.stdio(sys.executable, ["files_server.py"], name="files") as files:
        agent = stead.Agent("helper", model, tools=files.tools())

A server's tools are listed when it starts; each becomes a ``Tool`` whose effect class comes
from its annotations (``readOnlyHint`` -> read_only, ``idempotentHint`` -> idempotent_write,
otherwise non_idempotent; see ``stead.mcp._tool`` for why), overridable per tool. Every call
carries its idempotency key in the request's ``_meta`` (``stead/idempotency_key``); a
cancelled run sends MCP cancellation; a server that dies mid-call is restarted (stdio) or
reconnected (HTTP) and the call is recovered by its effect class. Every request has a
bounded time (``timeout``/``timeouts`` per call, ``connect_timeout``, ``list_timeout``), a
listing a bounded length (``max_pages``, no cursor twice), each result a bounded size
(``max_result``); a server that breaks one is an ``MCPServerError`` naming it.
"""

from stead.mcp._connection import MCPServerError, ServerLost, ServerTimedOut
from stead.mcp._source import MCPTools, python_server
from stead.mcp._tool import IDEMPOTENCY_META, MCPTool, effect_from_annotations

__all__ = [
    "IDEMPOTENCY_META",
    "MCPServerError",
    "MCPTool",
    "MCPTools",
    "ServerLost",
    "ServerTimedOut",
    "effect_from_annotations",
    "python_server",
]
