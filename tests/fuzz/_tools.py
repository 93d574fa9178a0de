"""Tools of every effect class for the fuzzers, each counting its handler's invocations.

``LEDGER`` counts invocations per (run, tool, idempotency key): a ``non_idempotent`` handler
must never reach 2 for one call. ``refund`` has an honest reconcile function (done only if a
handler finished for that call); ``charge`` has none, so an uncertain call goes to a person.
``transfer`` asks a person above 100. ``listing`` returns what ``os.listdir`` gives for a
folder with a non-UTF-8 name (a lone surrogate); ``explode`` raises.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import stead
from stead import Done, NotDone, ToolContext

LEDGER: Counter[tuple[str, str, str]] = Counter()
"""(run_id, tool, idempotency_key) -> handler invocations."""
CONTEXTS: list[ToolContext] = []
"""Every context a handler was given, in order."""
FINISHED: dict[tuple[str, str], str] = {}
"""(run_id, idempotency_key) -> result, once a refund handler returned."""
HANDLER_DELAY = [0.0]
"""Seconds a non_idempotent handler takes (the caller fuzzer raises it to overlap drivers)."""


def reset() -> None:
    LEDGER.clear()
    CONTEXTS.clear()
    FINISHED.clear()
    HANDLER_DELAY[0] = 0.0


def _count(ctx: ToolContext) -> None:
    LEDGER[(ctx.run_id, ctx.tool_name, ctx.idempotency_key)] += 1
    CONTEXTS.append(ctx)


@stead.tool(effect="read_only")
async def lookup(query: str, ctx: ToolContext) -> str:
    """Look something up (echoes the query: a surrogate in it comes back in the result)."""
    _count(ctx)
    return f"found: {query}"


@stead.tool(effect="idempotent_write")
async def save(key: str, value: int, ctx: ToolContext) -> dict[str, Any]:
    """Save a value under a key."""
    _count(ctx)
    return {"saved": key, "value": value, "idempotency_key": ctx.idempotency_key}


@stead.tool(effect="non_idempotent")
async def charge(amount: int, ctx: ToolContext, note: str = "") -> str:
    """Charge a card (no reconcile: an uncertain charge goes to a person)."""
    _count(ctx)
    if HANDLER_DELAY[0]:
        await asyncio.sleep(HANDLER_DELAY[0])
    return f"charged {amount} {note}"


def refund_status(ctx: ToolContext) -> Done | NotDone:
    result = FINISHED.get((ctx.run_id, ctx.idempotency_key))
    return Done(result) if result is not None else NotDone()


@stead.tool(effect="non_idempotent", reconcile=refund_status)
async def refund(amount: int, ctx: ToolContext, note: str = "") -> str:
    """Refund an amount (reconciled after a crash)."""
    _count(ctx)
    if HANDLER_DELAY[0]:
        await asyncio.sleep(HANDLER_DELAY[0])
    result = f"refunded {amount} {note}"
    FINISHED[(ctx.run_id, ctx.idempotency_key)] = result
    return result


@stead.tool(effect="non_idempotent", requires_approval=lambda a: a["amount"] > 100)
async def transfer(amount: int, ctx: ToolContext) -> str:
    """Transfer money; a person approves more than 100."""
    _count(ctx)
    return f"transferred {amount}"


@stead.tool(effect="read_only")
async def listing(ctx: ToolContext) -> str:
    """List a folder (one name is not UTF-8, as os.listdir gives it)."""
    _count(ctx)
    return "\n".join(["notes.txt", "caf\udce9.txt"])


@stead.tool(effect="read_only")
async def explode(x: int, ctx: ToolContext) -> str:
    """Always fails."""
    _count(ctx)
    raise RuntimeError(f"boom {x}")


TOOLS = [lookup, save, charge, refund, transfer, listing, explode]
NON_IDEMPOTENT = {"charge", "refund", "transfer"}
