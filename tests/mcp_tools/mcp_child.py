"""A worker process for the crash tests: drive (or start and drive) a run whose tools come
from mcp_server.py over stdio; print its status as JSON. Optionally traced to a file.

python mcp_child.py STORE start|run [SPANS_FILE]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import stead
from stead.mcp import MCPTools
from stead.testing import Reply, ScriptedModel

SERVER = Path(__file__).parent / "mcp_server.py"
RUN_ID = "run_mcp_crash"
SCRIPT = [
    Reply(tool_calls=[("lookup_order", {"order_id": 42})]),
    Reply(tool_calls=[("upsert_ticket", {"order_id": 42, "note": "shipped"})]),
    "Ticket updated.",
]


def observers(spans_file: str | None) -> list[object]:
    if spans_file is None:
        return []
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    from stead.otel import Tracing

    out = open(spans_file, "a")  # noqa: SIM115 - open for the process's life; SIGKILL ends it
    exporter = ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return [Tracing(tracer_provider=provider)]


async def main(store: str, mode: str, spans_file: str | None) -> None:
    tools = MCPTools.stdio(sys.executable, [str(SERVER)], name="orders", env=dict(os.environ))
    async with tools:
        agent = stead.Agent("mcp-crash", ScriptedModel(SCRIPT), tools.tools())
        async with stead.Runtime(store, agents=[agent], observers=observers(spans_file)) as rt:
            if mode == "start":
                await rt.start(agent, "Update the ticket of order 42", run_id=RUN_ID)
            view = await rt.run(RUN_ID)
    print(json.dumps({"status": view.status.value, "output": view.output}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
