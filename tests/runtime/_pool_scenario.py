"""The executor-pool scenario: tools routed to queue ``pool``, real side effects in a ledger.

Imported by the test process (the run's owner) and by the ``stead executor`` children it
kills (pool_child.py). Each tool writes its side effect to an ``SideEffects`` (its own SQLite
file) with the pid that performed it, so what really happened survives a SIGKILL.
``POOL_TOOL_DELAY`` makes every tool sleep that long first (the zombie test freezes an
executor inside it), ``POOL_TOOL_GATE`` names a file it records ``working`` and then waits
for (a test cuts the executor off meanwhile), and ``POOL_CHECK_ABORTED`` has it look at
``ctx.aborted`` after that, right before its side effect; ``POOL_DIE_IN`` names a tool that
SIGKILLs its own process right after its side effect (mid-effect, before the executor can
settle). ``HOLDS`` (a pool in the test's own process only) stops a tool of that name right
after its side effect until the test releases it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import stead
from stead.testing import Reply, ScriptedModel, SideEffects

QUEUE = "pool"


class Hold:
    """A tool stopped after its side effect: ``entered`` is set there, ``released`` lets it
    return (an in-process pool's tool, held while the test kills the run's owner)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.released = asyncio.Event()


HOLDS: dict[str, Hold] = {}


def side_effects() -> SideEffects:
    return SideEffects(os.environ["STEAD_TEST_EFFECTS"])


def _wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.02)


async def _effect(name: str, ctx: stead.ToolContext) -> dict[str, object]:
    delay = float(os.environ.get("POOL_TOOL_DELAY", "0"))
    if delay:
        await asyncio.sleep(delay)
    gate = os.environ.get("POOL_TOOL_GATE")
    if gate:
        side_effects().record("working", ctx.idempotency_key, token=ctx.fencing_token)
        await asyncio.to_thread(_wait_for, gate)
    if os.environ.get("POOL_CHECK_ABORTED") and ctx.aborted:  # a careful tool's last look
        side_effects().record("stood_down", ctx.idempotency_key, token=ctx.fencing_token)
        raise stead.Aborted("the key is no longer ours")
    side_effects().record(name, ctx.idempotency_key, attempt=ctx.attempt, token=ctx.fencing_token)
    if os.environ.get("POOL_DIE_IN") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    hold = HOLDS.get(name)
    if hold is not None:
        hold.entered.set()
        await hold.released.wait()
    return {"done": name, "pid": os.getpid()}


@stead.tool(effect="non_idempotent", queue=QUEUE)
async def charge(amount: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Charge a card (must never happen twice)."""
    return await _effect("charge", ctx)


@stead.tool(effect="idempotent_write", queue=QUEUE)
async def index_doc(doc: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Index a document (safe to repeat with the same key)."""
    return await _effect("index_doc", ctx)


def _notified(to: str, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
    """Reconcile ``notify``: the effect ledger knows whether this call's message left."""
    if side_effects().count("notify", ctx.idempotency_key):
        return stead.Done({"done": "notify", "reconciled": True})
    return stead.NotDone()


@stead.tool(effect="non_idempotent", queue=QUEUE, reconcile=_notified)
async def notify(to: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Send a message (never twice; whether it left can be asked afterwards)."""
    return await _effect("notify", ctx)


@stead.tool(effect="read_only")
def local_lookup(q: str) -> str:
    """Runs in the owner's process (no queue)."""
    return f"pid {os.getpid()}"


def agent(tool: str = "index_doc", model_queue: str | None = None) -> stead.Agent:
    args = {"charge": {"amount": 5}, "index_doc": {"doc": "d1"}, "notify": {"to": "ops"}}[tool]
    model = ScriptedModel([Reply(tool_calls=[(tool, args)]), "done"])
    tools = [charge, index_doc, notify, local_lookup]
    return stead.Agent("pooled", model, tools=tools, model_queue=model_queue)


MODEL_QUEUE = "model-m1"


def model_agent(url: str) -> stead.Agent:
    """An agent whose model calls go to queue ``model-m1`` (a local OpenAI-compatible server
    at ``url``); its runs make one model call each."""
    return stead.Agent("modeled", f"openai-compatible:{url}/v1:m1", model_queue=MODEL_QUEUE)


def agents() -> list[stead.Agent]:
    url = os.environ.get("POOL_MODEL_URL")
    return [agent()] + ([model_agent(url)] if url else [])
