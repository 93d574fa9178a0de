"""The agents the worker processes of the scale-out tests serve (``--agents _fleet:agents``).

Imported by the test process and by ``stead worker`` children (run with this folder as their
working directory). Side effects go to the crash tests' ``SideEffects`` and message service
(``_scenario``), which live outside the run store and survive SIGKILL.

* ``soak``: three tool turns covering every effect class, then an answer.
* ``pooled_soak``: the same, its tools (``pooled_*``) and its model calls routed to queues
  ``soak`` and ``soak-model``, which ``stead executor`` processes serve.
* ``zombie``: one call of ``notify_slowly`` (non_idempotent, reconcilable) or
  ``lookup_slowly`` (read_only), which sleeps ``$STEAD_TEST_SLOW`` seconds *after* its effect,
  so a test can freeze the worker between the effect and its result.
* ``careful``: one call of ``notify_when_clear`` (non_idempotent, reconcilable), which works
  until the file ``$STEAD_TEST_GATE`` exists and looks at ``ctx.aborted`` right before its
  effect, so a test can pause or cut off the worker while it works.
* ``fenced``: one call of ``notify_fenced``, which sends through the fenced message service
  of docs/recovery.md with its ``ctx.fencing_token``, and with ``$STEAD_TEST_PAUSE_AFTER_CHECK``
  set freezes its own process (SIGSTOP) between its look at ``ctx.aborted`` and the send.
* ``charge``: one unreconcilable call: after a crash in flight, a person must decide.
* ``gated``: one call a person must approve within half a second.
* ``sleepy``: one model call that takes ``$STEAD_TEST_SLOW`` seconds.
* ``dupes``: a reply with one call id twice; ``broken``: a provider adapter whose answer
  makes the step raise (each model call is written in the ledger, to count what was paid).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections.abc import Callable
from typing import Any

from _scenario import _messages, find_message, side_effects

import stead
from stead.core.events import EffectClass
from stead.core.messages import ToolCall
from stead.providers import ModelCall, ModelRequest, ModelResponse
from stead.testing import Reply, ScriptedModel


def _slow() -> float:
    return float(os.environ.get("STEAD_TEST_SLOW", "0"))


async def _jitter() -> None:
    """Tool latency of 50-250 ms, so kills land while calls are in flight."""
    await asyncio.sleep(random.uniform(0.05, 0.25))


def _send(recipient: str, body: str, key: str) -> int:
    db = _messages()
    try:
        cur = db.execute(
            "INSERT INTO messages (idempotency_key, recipient, body) VALUES (?, ?, ?)",
            (key, recipient, body),
        )
        return int(cur.lastrowid or 0)
    finally:
        db.close()


POOL_QUEUE = "soak"
POOL_MODEL_QUEUE = "soak-model"
POOLED: list[stead.Tool] = []  # type: ignore[type-arg]
"""The soak's tools again, named ``pooled_<name>``, each routed to queue ``soak``."""


def _pooled(effect: EffectClass, reconcile: Any = None) -> Any:
    """``@stead.tool(effect, reconcile)``, and the same function once more into ``POOLED``."""

    def both(fn: Any) -> Any:
        name = f"pooled_{fn.__name__}"
        POOLED.append(
            stead.tool(fn, effect=effect, reconcile=reconcile, queue=POOL_QUEUE, name=name)
        )
        return stead.tool(fn, effect=effect, reconcile=reconcile)

    return both


@_pooled("read_only")
async def lookup_order(order_id: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Look up an order."""
    await _jitter()
    side_effects().record("lookup_order", ctx.idempotency_key, attempt=ctx.attempt)
    return {"order_id": order_id, "status": "shipped"}


@_pooled("idempotent_write")
async def upsert_ticket(order_id: int, note: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Create or update the ticket for an order (deduplicated by idempotency key)."""
    await _jitter()
    side_effects().record("upsert_ticket", ctx.idempotency_key, attempt=ctx.attempt)
    return {"ticket": f"T-{order_id}", "note": note}


@_pooled("non_idempotent", find_message)
async def send_message(recipient: str, body: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Send a message; the service gives every call a new message id."""
    await _jitter()
    message_id = _send(recipient, body, ctx.idempotency_key)
    await _jitter()
    return {"message_id": message_id}


@_pooled("non_idempotent")
async def charge_card(cents: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Charge a card; nobody can be asked afterwards whether it happened."""
    await _jitter()
    side_effects().record("charge_card", ctx.idempotency_key, attempt=ctx.attempt)
    await _jitter()
    return {"charged": cents}


@stead.tool(effect="non_idempotent", reconcile=find_message)
def notify_slowly(recipient: str, body: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Send a message, then dawdle before reporting it."""
    message_id = _send(recipient, body, ctx.idempotency_key)
    side_effects().record(
        "notify_slowly", ctx.idempotency_key, attempt=ctx.attempt, pid=os.getpid()
    )
    time.sleep(_slow())
    return {"message_id": message_id}


@stead.tool(effect="read_only")
def lookup_slowly(order_id: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Look an order up, then dawdle before reporting it."""
    side_effects().record(
        "lookup_slowly", ctx.idempotency_key, attempt=ctx.attempt, pid=os.getpid()
    )
    time.sleep(_slow())
    return {"order_id": order_id, "status": "shipped"}


@stead.tool(effect="non_idempotent", reconcile=find_message)
def notify_when_clear(recipient: str, body: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Work (until the file ``$STEAD_TEST_GATE`` exists, when it is set), then send a message
    unless the run was aborted meanwhile: the check a careful tool makes before its effect."""
    key = ctx.idempotency_key
    side_effects().record("working", key, pid=os.getpid(), token=ctx.fencing_token)
    gate = os.environ.get("STEAD_TEST_GATE")
    while gate and not os.path.exists(gate):
        time.sleep(0.02)
    if ctx.aborted:
        side_effects().record("stood_down", key, pid=os.getpid(), token=ctx.fencing_token)
        raise stead.Aborted("the lease is no longer ours")
    message_id = _send(recipient, body, key)
    side_effects().record("notify_when_clear", key, pid=os.getpid(), token=ctx.fencing_token)
    return {"message_id": message_id}


def _found_fenced(recipient: str, body: str, ctx: stead.ToolContext) -> Any:
    """Reconcile ``notify_fenced``: the service's own answer."""
    from _fenced import service

    return service().find(recipient, body, ctx)


@stead.tool(effect="non_idempotent", reconcile=_found_fenced)
def notify_fenced(recipient: str, body: str, ctx: stead.ToolContext) -> dict[str, object]:
    """The page's ``notify``, with a pause between its check and its effect on demand."""
    from _fenced import service

    key, token = ctx.idempotency_key, ctx.fencing_token
    if ctx.aborted:
        side_effects().record("stood_down", key, pid=os.getpid(), token=token)
        raise stead.Aborted("this worker's lease is gone")
    side_effects().record("checked", key, pid=os.getpid(), token=token)
    if os.environ.get("STEAD_TEST_PAUSE_AFTER_CHECK"):
        os.kill(os.getpid(), signal.SIGSTOP)  # the window no process can see from inside
        # The stop takes hold of this thread at its next system call, not at once: without
        # one here it could begin the send (and hold the service's lock) first.
        time.sleep(0.5)
    message_id = service().INBOX.send(key, body, token)
    if message_id is None:
        side_effects().record("refused", key, pid=os.getpid(), token=token)
        raise stead.Aborted(f"refused: fencing token {token} is stale")
    side_effects().record("sent", key, pid=os.getpid(), token=token)
    return {"message_id": message_id}


def fenced() -> stead.Agent:
    args = {"recipient": "oncall", "body": "order 7 shipped"}
    model = ScriptedModel([Reply(tool_calls=[("notify_fenced", args)]), "Done."])
    return stead.Agent("fenced", model, [notify_fenced])


def careful() -> stead.Agent:
    args = {"recipient": "oncall", "body": "order 7 shipped"}
    model = ScriptedModel([Reply(tool_calls=[("notify_when_clear", args)]), "Done."])
    return stead.Agent("careful", model, [notify_when_clear])


def _soak_script(prefix: str = "") -> list[Reply | str]:
    return [
        Reply(
            tool_calls=[
                (f"{prefix}lookup_order", {"order_id": 42}),
                (f"{prefix}upsert_ticket", {"order_id": 42, "note": "shipped"}),
            ]
        ),
        Reply(
            tool_calls=[(f"{prefix}send_message", {"recipient": "oncall", "body": "42 shipped"})]
        ),
        Reply(tool_calls=[(f"{prefix}charge_card", {"cents": 500})]),
        "Order 42 shipped; on-call told; card charged.",
    ]


def soak() -> stead.Agent:
    model = ScriptedModel(_soak_script(), delay=0.1)
    return stead.Agent("soak", model, [lookup_order, upsert_ticket, send_message, charge_card])


def pooled_soak() -> stead.Agent:
    """The soak with its tools and model calls in executors (the model is named apart from
    every other agent's, so an executor finds this script for its calls)."""
    model = ScriptedModel(_soak_script("pooled_"), delay=0.1, name="pooled-soak")
    return stead.Agent("pooled-soak", model, POOLED, model_queue=POOL_MODEL_QUEUE)


def zombie(tool: str = "notify_slowly") -> stead.Agent:
    args: dict[str, object] = (
        {"recipient": "oncall", "body": "order 7 shipped"}
        if tool == "notify_slowly"
        else {"order_id": 7}
    )
    model = ScriptedModel([Reply(tool_calls=[(tool, args)]), "Done."])
    return stead.Agent(f"zombie-{tool}", model, [notify_slowly, lookup_slowly])


def charge() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("charge_card", {"cents": 900})]), "Charged."])
    return stead.Agent("charge", model, [charge_card])


@stead.tool(effect="read_only", requires_approval=True)
def refund(order_id: int) -> dict[str, object]:
    """Refund an order (a person approves each one, within half a second)."""
    return {"refunded": order_id}


def gated() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 9})]), "Refunded."])
    limits = stead.Limits(approval_timeout=0.5)
    return stead.Agent("gated", model, [refund], limits=limits)


def sleepy() -> stead.Agent:
    return stead.Agent("sleepy", ScriptedModel(["Slept."], delay=_slow()))


def _paid(turn: int, reply: Reply | str) -> Callable[[ModelRequest], Reply | str]:
    """A script entry that writes each (paid) model call down in the ledger."""

    def answer(request: ModelRequest) -> Reply | str:
        side_effects().record("model_call", f"turn {turn}", pid=os.getpid())
        return reply

    return answer


def dupes() -> stead.Agent:
    """One reply with two calls of one id (``None``, as a tool_use block without an id was
    read), which poisoned the log: every claim paid for the model call again."""
    twice = Reply(
        tool_calls=[
            ToolCall(id="None", name="lookup_order", arguments='{"order_id": 1}'),
            ToolCall(id="None", name="lookup_order", arguments='{"order_id": 2}'),
        ]
    )
    model = ScriptedModel([_paid(0, twice), _paid(1, "Both shipped.")])
    return stead.Agent("dupes", model, [lookup_order])


class BrokenAdapter:
    """A provider adapter with a bug: the call is made (and paid for), then what it hands
    back is not a ModelResponse, so the step raises AttributeError every time."""

    model_name = "broken"

    async def complete(self, call: ModelCall) -> ModelResponse:
        side_effects().record("model_call", "broken", pid=os.getpid())
        return {"text": "hello"}  # type: ignore[return-value]


def broken() -> stead.Agent:
    return stead.Agent("broken", BrokenAdapter(), [lookup_order])


def agents() -> list[stead.Agent]:
    return [
        soak(),
        pooled_soak(),
        zombie("notify_slowly"),
        zombie("lookup_slowly"),
        careful(),
        fenced(),
        charge(),
        gated(),
        sleepy(),
        dupes(),
        broken(),
    ]
