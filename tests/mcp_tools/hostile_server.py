"""A small MCP server over stdio that misbehaves on purpose, speaking JSON-RPC by hand (no
SDK), so it can send what no SDK would: it hangs, loops its cursor, sends garbage, returns
huge results.

    python hostile_server.py '{"hang": ["initialize"], "cursor": "loop", ...}'

The one argument is a JSON object of misbehaviours (all optional):

* ``hang``: methods never answered (``initialize``, ``tools/list``, ``tools/call``).
* ``cursor``: ``"loop"`` (every page gives the same next cursor), ``"endless"`` (a new one
  every page), or a number of pages to list the tools over honestly.
* ``listing``: a JSON value sent as the ``tools/list`` result instead of a real one.
* ``tools``: extra tool definitions (as JSON) listed after the real ones.
* ``result``: a JSON value sent as every ``tools/call`` result instead of a real one.
* ``huge``: characters of text every call of ``echo`` returns (in several content blocks).
* ``noise``: a line that is not JSON-RPC written before every answer.

Its tools when it behaves: ``echo`` (read-only: says its text back), ``slow_read``
(read-only) and ``slow_write`` (no annotations: non_idempotent), which hang when ``hang``
holds ``tools/call`` and answer at once otherwise.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

CONFIG: dict[str, Any] = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "description": "Say the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "slow_read",
        "description": "Read something slowly.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "slow_write",
        "description": "Write something slowly.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    *CONFIG.get("tools", []),
]

_out = threading.Lock()


def send(message: dict[str, Any]) -> None:
    with _out:
        if CONFIG.get("noise"):
            sys.stdout.write(str(CONFIG["noise"]) + "\n")
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def answer(request: dict[str, Any], result: Any) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def listing(request: dict[str, Any]) -> Any:
    if "listing" in CONFIG:
        return CONFIG["listing"]
    cursor = (request.get("params") or {}).get("cursor")
    mode = CONFIG.get("cursor")
    if mode == "loop":
        return {"tools": TOOLS, "nextCursor": "again"}
    if mode == "endless":
        return {"tools": [], "nextCursor": f"page-{int(cursor.split('-')[1]) + 1 if cursor else 1}"}
    if isinstance(mode, int) and mode > 1:
        page = int(cursor) if cursor else 0
        per = -(-len(TOOLS) // mode)
        more = page + 1 < mode
        body: dict[str, Any] = {"tools": TOOLS[page * per : (page + 1) * per]}
        if more:
            body["nextCursor"] = str(page + 1)
        return body
    return {"tools": TOOLS}


def call(request: dict[str, Any]) -> Any:
    if "result" in CONFIG:
        return CONFIG["result"]
    params = request.get("params") or {}
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name == "echo" and CONFIG.get("huge"):
        size = int(CONFIG["huge"])
        block = "x" * min(size, 1 << 20)
        blocks = [{"type": "text", "text": block} for _ in range(max(1, size // len(block)))]
        return {"content": blocks, "isError": False}
    return {"content": [{"type": "text", "text": f"{name}: {arguments.get('text', 'done')}"}]}


def main() -> None:
    hang = set(CONFIG.get("hang", []))
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        method = request.get("method")
        if "id" not in request or method in hang:
            continue  # a notification, or a request this server never answers
        if method == "initialize":
            version = (request.get("params") or {}).get("protocolVersion", "2025-06-18")
            answer(
                request,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "hostile", "version": "0"},
                },
            )
        elif method == "tools/list":
            answer(request, listing(request))
        elif method == "tools/call":
            answer(request, call(request))
        elif method == "ping":
            answer(request, {})
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": -32601, "message": f"no method {method}"},
                }
            )


if __name__ == "__main__":
    main()
