"""The crash-test scenario: one tool of each effect class, real side effects in a ledger.

Imported by the test process and by the child processes it kills. Side effects go to an
``SideEffects`` (its own SQLite file), so what really happened survives the SIGKILL.
The "message service" is a table in that ledger that assigns message ids and can be asked,
by idempotency key, whether a message was delivered: the reconcile function of send_message.
"""

from __future__ import annotations

import os
import sqlite3

import stead
from stead.core.durability import MODES, Durability
from stead.core.messages import ToolCall
from stead.testing import Reply, ScriptedModel, SideEffects

RUN_ID = "run_crash_scenario"


def side_effects() -> SideEffects:
    return SideEffects(os.environ["STEAD_TEST_EFFECTS"])


def _messages() -> sqlite3.Connection:
    db = sqlite3.connect(os.environ["STEAD_TEST_EFFECTS"], timeout=30, isolation_level=None)
    db.execute(
        "CREATE TABLE IF NOT EXISTS messages (message_id INTEGER PRIMARY KEY, "
        "idempotency_key TEXT NOT NULL, recipient TEXT NOT NULL, body TEXT NOT NULL)"
    )
    return db


def delivered(key: str | None = None) -> list[tuple[int, str]]:
    db = _messages()
    try:
        q = "SELECT message_id, idempotency_key FROM messages"
        if key is None:
            return db.execute(q + " ORDER BY message_id").fetchall()
        return db.execute(q + " WHERE idempotency_key = ?", (key,)).fetchall()
    finally:
        db.close()


@stead.tool(effect="read_only")
def lookup_order(order_id: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Look up an order's status."""
    side_effects().record("lookup_order", ctx.idempotency_key, attempt=ctx.attempt)
    return {"order_id": order_id, "status": "shipped"}


@stead.tool(effect="idempotent_write")
def upsert_ticket(order_id: int, note: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Create or update the support ticket for an order (deduplicated by idempotency key)."""
    side_effects().record("upsert_ticket", ctx.idempotency_key, attempt=ctx.attempt)
    return {"ticket": f"T-{order_id}", "note": note}


def find_message(recipient: str, body: str, ctx: stead.ToolContext) -> stead.Done | stead.NotDone:
    """Reconcile: ask the message service whether this call's message was delivered."""
    rows = delivered(ctx.idempotency_key)
    if rows:
        return stead.Done({"message_id": rows[0][0]})
    return stead.NotDone()


@stead.tool(effect="non_idempotent", reconcile=find_message)
def send_message(recipient: str, body: str, ctx: stead.ToolContext) -> dict[str, object]:
    """Send a message; the service assigns a new message id on every call."""
    db = _messages()
    try:
        cur = db.execute(
            "INSERT INTO messages (idempotency_key, recipient, body) VALUES (?, ?, ?)",
            (ctx.idempotency_key, recipient, body),
        )
        message_id = cur.lastrowid
    finally:
        db.close()
    side_effects().record("send_message", ctx.idempotency_key, attempt=ctx.attempt)
    return {"message_id": message_id}


@stead.tool(effect="non_idempotent")
def charge_card(cents: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Charge a card. No way to ask afterwards whether it happened."""
    side_effects().record("charge_card", ctx.idempotency_key, attempt=ctx.attempt)
    return {"charged": cents}


@stead.tool(effect="read_only")
def slow_lookup(order_id: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Look up an order slowly (the contention tests pause a worker inside it): for
    ``$STEAD_TEST_SLOW`` seconds, or until the file ``$STEAD_TEST_SLOW_GATE`` exists (at most
    that long), so a test can hold the run's owner in here until the rival has had its try."""
    import time

    side_effects().record("slow_lookup", ctx.idempotency_key, attempt=ctx.attempt, pid=os.getpid())
    seconds = float(os.environ.get("STEAD_TEST_SLOW", "1.0"))
    gate = os.environ.get("STEAD_TEST_SLOW_GATE")
    if gate is None:
        time.sleep(seconds)
    else:
        deadline = time.monotonic() + seconds
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
    return {"order_id": order_id, "status": "shipped"}


def durability() -> Durability:
    """The agents' durability mode: ``$STEAD_TEST_DURABILITY``, which a crash test sets for
    the child processes it starts (strict by default)."""
    mode = os.environ.get("STEAD_TEST_DURABILITY", "strict")
    assert mode in MODES, mode
    return mode  # type: ignore[return-value]


def agent(kind: str = "reconcilable") -> stead.Agent:
    if kind == "slow":
        model = ScriptedModel(
            [Reply(tool_calls=[("slow_lookup", {"order_id": 7})]), "Order 7 shipped."]
        )
        return stead.Agent("crash-slow", model, [slow_lookup], durability=durability())
    if kind == "reconcilable":
        model = ScriptedModel(
            [
                Reply(tool_calls=[("lookup_order", {"order_id": 42})]),
                Reply(
                    tool_calls=[
                        ("upsert_ticket", {"order_id": 42, "note": "shipped"}),
                        ("send_message", {"recipient": "oncall", "body": "order 42 shipped"}),
                    ]
                ),
                "Told on-call that order 42 shipped.",
            ]
        )
        return stead.Agent(
            "crash-scenario",
            model,
            [lookup_order, upsert_ticket, send_message],
            durability=durability(),
        )
    if kind == "reused_ids":
        # An OpenAI-compatible server that numbers calls per reply: call_0 in every turn.
        model = ScriptedModel(
            [
                Reply(tool_calls=[ToolCall(id="call_0", name="upsert_ticket", arguments=arg)])
                for arg in ('{"order_id": 1, "note": "a"}', '{"order_id": 2, "note": "b"}')
            ]
            + ["Two tickets."]
        )
        return stead.Agent("crash-reused-ids", model, [upsert_ticket], durability=durability())
    model = ScriptedModel([Reply(tool_calls=[("charge_card", {"cents": 500})]), "Charged 5.00."])
    return stead.Agent("crash-unreconcilable", model, [charge_card], durability=durability())


def _over_100(args: dict[str, object]) -> bool:
    cents = args.get("cents")
    return isinstance(cents, int) and cents > 10_000


@stead.tool(effect="non_idempotent", requires_approval=_over_100)
def refund(order_id: int, cents: int, ctx: stead.ToolContext) -> dict[str, object]:
    """Refund an order. Refunds over $100 need a person's approval."""
    side_effects().record("refund", ctx.idempotency_key, order_id=order_id, cents=cents)
    return {"refunded": cents}


@stead.tool(effect="idempotent_write")
async def long_job(ctx: stead.ToolContext) -> str:
    """A job that runs a long subprocess (its process group is killed on cancel)."""
    pidfile = os.environ["STEAD_TEST_PIDFILE"]
    side_effects().record("long_job", ctx.idempotency_key, attempt=ctx.attempt)
    done = await ctx.run_subprocess(["sh", "-c", f"echo $$ > {pidfile}; sleep 60 & sleep 60; wait"])
    return f"exit {done.returncode}"


def steer_agent(kind: str) -> stead.Agent:
    if kind == "approval":
        model = ScriptedModel(
            [Reply(tool_calls=[("refund", {"order_id": 42, "cents": 25_000})]), "Handled."]
        )
        limits = stead.Limits(approval_timeout=None)
        return stead.Agent(
            "steer-approval", model, [refund], limits=limits, durability=durability()
        )
    model = ScriptedModel([Reply(tool_calls=[("long_job", {})]), "Finished after resume."])
    return stead.Agent(
        "steer-cancel",
        model,
        [long_job],
        limits=stead.Limits(cancel_grace=2.0),
        durability=durability(),
    )
