"""Agents the server tests drive, loaded by ``stead serve`` and ``stead worker`` children.

* ``refunds``: asks to refund $250, which needs a person's approval (policy gate).
* ``lookup``: one read-only lookup, then an answer.
* ``streamer``: a model that streams its reply word by word (provisional text), over three
  turns with a lookup between them, so a run takes a while and appends as it goes.
* ``charger``: charges a card (``non_idempotent``, no reconcile): a worker that dies while
  the charge is in flight leaves a question for a person.
* ``typed``: answers with a structured output (``output_type``), shown as the run's ``data``.
* ``long``: 50 turns of lookups, then an answer: 51 turns, for the long run's page.
* ``chatty``: a chat agent that answers each message of a conversation by echoing it
  (``You said: ...``); a message ``ask: QUESTION`` makes it ask a person QUESTION first.
* ``delegator``: hands a lookup to ``helper`` (``stead.agent_tool``): a parent and its
  child run, for the run tree.
* ``sleeper``: a tool that runs ``sleep 60`` through ``ctx.run_subprocess`` and writes its
  process group id to ``$STEAD_TEST_PIDDIR/<run id>``, for the cancel tests.
* ``spender``: a budget of one token, spent on its first turn: it fails ``budget_exceeded``,
  and resuming it cannot succeed.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import stead
from stead.core.messages import AssistantMessage, ToolCall, Usage, UserMessage
from stead.errors import Aborted
from stead.providers import ModelCall, ModelRequest, ModelResponse
from stead.testing import Reply, ScriptedModel

STREAM_TEXT = "The refund policy allows returns within thirty days of delivery for every order."
STREAM_REPLIES = (STREAM_TEXT, "Checking a second order now.", "Both orders have shipped.")
"""The streamer's three replies, one a model call."""


@dataclass
class Place:
    """The ``typed`` agent's answer."""

    city: str
    zip: str


def _over_100(args: dict[str, object]) -> bool:
    cents = args.get("cents")
    return isinstance(cents, int) and cents > 10_000


@stead.tool(effect="non_idempotent", requires_approval=_over_100)
def refund(order_id: int, cents: int) -> dict[str, object]:
    """Refund an order. Refunds over $100 need a person's approval."""
    return {"refunded": cents, "order_id": order_id}


@stead.tool(effect="read_only")
def lookup_order(order_id: int) -> dict[str, object]:
    """Look up an order's status."""
    return {"order_id": order_id, "status": "shipped"}


@stead.tool(effect="idempotent_write")
async def nap(ctx: stead.ToolContext) -> str:
    """Sleep for a minute in a child process (a cancel kills its whole process group)."""
    folder = Path(os.environ["STEAD_TEST_PIDDIR"])
    pidfile = folder / ctx.run_id
    done = await ctx.run_subprocess(["sh", "-c", f"echo $$ > {pidfile}; sleep 60"])
    return f"exit {done.returncode}"


@stead.tool(effect="non_idempotent")
def charge_card(cents: int) -> dict[str, object]:
    """Charge a card. Nothing can tell afterwards whether a charge went through."""
    return {"charged": cents}


class StreamingModel:
    """Streams each turn's text a word at a time, ``delay`` seconds apart."""

    def __init__(self, turns: list[tuple[str, list[tuple[str, dict[str, Any]]]]], delay: float):
        self.turns = turns
        self.delay = delay

    @property
    def model_name(self) -> str:
        return "claude-sonnet-4-6"

    async def complete(self, call: ModelCall) -> ModelResponse:
        request, signal, on_progress = call.request, call.signal, call.on_progress
        turn = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        text, calls = self.turns[turn]
        for i, word in enumerate(text.split(" ")):
            if signal.aborted:
                raise Aborted(signal.reason)
            await asyncio.sleep(self.delay)
            if on_progress is not None:
                on_progress(word if i == 0 else " " + word)
        tool_calls = tuple(
            ToolCall(id=f"call_{turn}_{i}", name=n, arguments=json.dumps(a))
            for i, (n, a) in enumerate(calls)
        )
        message = AssistantMessage(
            text=text, tool_calls=tool_calls, stop_reason="tool_use" if tool_calls else "end_turn"
        )
        return ModelResponse(
            message=message, usage=Usage(input_tokens=1200, output_tokens=80), model=self.model_name
        )


def _echo(request: ModelRequest) -> Reply:
    last = request.messages[-1]
    if isinstance(last, UserMessage) and last.content.startswith("ask: "):
        return Reply(tool_calls=[("ask_user", {"question": last.content[5:]})])
    return Reply(text=f"You said: {last.content}")


def _helper() -> stead.Agent:
    model = ScriptedModel(
        [Reply(tool_calls=[("lookup_order", {"order_id": 9})]), "Order 9 has shipped."]
    )
    return stead.Agent("helper", model, [lookup_order])


def build() -> list[stead.Agent]:
    delay = float(os.environ.get("STEAD_TEST_STREAM_DELAY", "0.05"))
    no_deadline = stead.Limits(approval_timeout=None)
    return [
        stead.Agent(  # a parent and its child run: the run tree
            "delegator",
            ScriptedModel(
                [
                    Reply(tool_calls=[("helper", {"task": "Look order 9 up."})]),
                    lambda request: f"The helper says: {request.messages[-1].content}",
                ]
            ),
            [stead.agent_tool(_helper())],
        ),
        stead.Agent(
            "refunds",
            ScriptedModel(
                [
                    Reply(
                        text="Refunding order 42.",
                        tool_calls=[("refund", {"order_id": 42, "cents": 25_000})],
                    ),
                    "Refunded order 42.",
                ]
            ),
            [refund],
            limits=no_deadline,
        ),
        stead.Agent(
            "lookup",
            ScriptedModel(
                [Reply(tool_calls=[("lookup_order", {"order_id": 7})]), "Order 7 has shipped."]
            ),
            [lookup_order],
        ),
        stead.Agent(
            "streamer",
            StreamingModel(
                [
                    (STREAM_REPLIES[0], [("lookup_order", {"order_id": 1})]),
                    (STREAM_REPLIES[1], [("lookup_order", {"order_id": 2})]),
                    (STREAM_REPLIES[2], []),
                ],
                delay,
            ),
            [lookup_order],
        ),
        stead.Agent(
            "charger",
            ScriptedModel([Reply(tool_calls=[("charge_card", {"cents": 500})]), "Charged."]),
            [charge_card],
            limits=no_deadline,
        ),
        stead.Agent(  # a question for a person, answered in the inbox
            "asker",
            ScriptedModel(
                [
                    Reply(tool_calls=[("ask_user", {"question": "Standard or express?"})]),
                    lambda request: f"Shipping {request.messages[-1].content}.",
                ]
            ),
            [stead.question_tool(Literal["standard", "express"])],
            limits=no_deadline,
        ),
        stead.Agent(  # a structured output, the run detail's ``data``
            "typed",
            ScriptedModel(
                [Reply(tool_calls=[("final_result", {"city": "Paris", "zip": "75007"})])]
            ),
            output_type=Place,
        ),
        stead.Agent(  # 51 turns: a long run's page
            "long",
            ScriptedModel(
                [
                    *(
                        Reply(
                            text=f"Looking at order {n}.",
                            tool_calls=[("lookup_order", {"order_id": n})],
                        )
                        for n in range(1, 51)
                    ),
                    "All fifty orders have shipped.",
                ]
            ),
            [lookup_order],
            limits=stead.Limits(max_turns=60),
        ),
        stead.Agent(  # one reply a turn: a conversation of up to 200 turns
            "chatty",
            ScriptedModel([_echo] * 200),
            [stead.question_tool()],
            limits=no_deadline,
        ),
        stead.Agent(
            "sleeper",
            ScriptedModel([Reply(tool_calls=[("nap", {})]), "Woke up."]),
            [nap],
            limits=stead.Limits(cancel_grace=1.0),
        ),
        stead.Agent(  # spends its whole budget on its first turn: it fails, and resuming
            "spender",  # it would fail again at once
            ScriptedModel([Reply(tool_calls=[("lookup_order", {"order_id": 3})]), "Done."]),
            [lookup_order],
            budget=stead.Budget(max_total_tokens=1),
        ),
    ]


agents = build
