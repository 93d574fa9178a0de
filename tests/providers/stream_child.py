"""Worker process for the mid-stream crash test: drive one run on a real provider adapter.

python stream_child.py STORE RUN_ID KIND BASE_URL start|run

Prints each progress frame as a JSON line as it arrives, then the run's final status.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import stead
from stead.core.progress import ProgressFrame
from stead.providers import ModelProvider, model_from_string


@stead.tool(effect="read_only")
def lookup_order(order_id: int) -> dict[str, Any]:
    """Look up an order by id."""
    return {"order_id": order_id, "status": "shipped"}


def model(kind: str, base_url: str) -> ModelProvider:
    # model_from_string imports only the SDK it needs (importing one costs a second or two)
    if kind == "anthropic":
        return model_from_string("anthropic:claude-sonnet-4-6", api_key="k", base_url=base_url)
    if kind == "openai":
        return model_from_string("openai:gpt-4.1", api_key="k", base_url=base_url + "/v1")
    return model_from_string(f"openai-compatible:{base_url}/v1:qwen3")


def show(frame: ProgressFrame) -> None:
    print(json.dumps({"generation": frame.generation, "text": frame.text}), flush=True)


async def main(store: str, run_id: str, kind: str, base_url: str, mode: str) -> None:
    agent = stead.Agent("streamer", model(kind, base_url), [lookup_order], system="Be brief.")
    async with stead.Runtime(store, agents=[agent], on_progress=show) as rt:
        if mode == "start":
            await rt.start(agent, "Where is order 42?", run_id=run_id)
        view = await rt.run(run_id)
        print(json.dumps({"status": view.status.value, "output": view.output}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
