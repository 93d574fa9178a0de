"""The agents of the child-run tests in other processes (``stead worker --agents
_family:agents``, ``stead run _family:support``), run with this folder as their working
directory. Side effects go to the crash tests' ``SideEffects`` and message service
(``_scenario``), which survive SIGKILL.

Each agent is built once (an agent used as a child of two parents is one object).

* ``support`` hands the message to ``courier`` (``stead.agent_tool``), then reports.
* ``courier`` sends one message (``send_message``: non_idempotent, reconcilable).
* ``patient`` hands a long job to ``plodder``; ``quizzer`` a question to ``asker``.
* ``foreman``'s tool ``delegate`` starts a ``plodder`` run from its handler
  (``ctx.run_child``) and reports what it said.
* ``watcher`` hands a long job to ``plodder`` (whose ``slow_lookup`` blocks for
  ``$STEAD_TEST_SLOW`` seconds, or until ``$STEAD_TEST_SLOW_GATE`` exists) and a question to
  ``middle``, whose child ``asker`` asks its user which shipping speed: one child running,
  one grandchild waiting on a person.
"""

from __future__ import annotations

import functools
from typing import Literal

import pydantic
from _scenario import send_message, side_effects, slow_lookup

import stead
from stead.core.messages import ToolResultMessage
from stead.providers import ModelRequest
from stead.testing import Reply, ScriptedModel


def _report(request: ModelRequest) -> str:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    return " | ".join(("error: " if r.is_error else "") + r.content for r in results)


@functools.cache
def courier() -> stead.Agent:
    model = ScriptedModel(
        [Reply(tool_calls=[("send_message", {"recipient": "ada", "body": "refund sent"})]), "Sent."]
    )
    return stead.Agent("courier", model, [send_message])


@functools.cache
def support() -> stead.Agent:
    model = ScriptedModel(
        [Reply(tool_calls=[("courier", {"task": "Tell Ada her refund is on its way."})]), _report]
    )
    return stead.Agent("support", model, [stead.agent_tool(courier())])


class Shipping(pydantic.BaseModel):
    speed: Literal["standard", "express"]


@functools.cache
def asker() -> stead.Agent:
    model = ScriptedModel(
        [Reply(tool_calls=[("ask_user", {"question": "Express or standard?"})]), _report]
    )
    return stead.Agent("asker", model, [stead.question_tool(Shipping)])


@functools.cache
def middle() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("asker", {"task": "ask about shipping"})]), _report])
    return stead.Agent("middle", model, [stead.agent_tool(asker())])


@functools.cache
def plodder() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("slow_lookup", {"order_id": 7})]), "Looked."])
    return stead.Agent("plodder", model, [slow_lookup])


@functools.cache
def patient() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("plodder", {"task": "look order 7 up"})]), _report])
    return stead.Agent("patient", model, [stead.agent_tool(plodder())])


@functools.cache
def quizzer() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("asker", {"task": "ask about shipping"})]), _report])
    return stead.Agent("quizzer", model, [stead.agent_tool(asker())])


@functools.cache
def watcher() -> stead.Agent:
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    ("plodder", {"task": "look order 7 up"}),
                    ("middle", {"task": "find out the shipping speed"}),
                ]
            ),
            _report,
        ]
    )
    return stead.Agent("watcher", model, [stead.agent_tool(plodder()), stead.agent_tool(middle())])


@stead.tool(effect="idempotent_write")
async def delegate(order_id: int, ctx: stead.ToolContext) -> str:
    """Have the order looked up by another agent."""
    side_effects().record("delegate", ctx.idempotency_key, attempt=ctx.attempt)
    said = await ctx.run_child(plodder(), f"look order {order_id} up")
    return f"plodder said: {said}"


@functools.cache
def foreman() -> stead.Agent:
    model = ScriptedModel([Reply(tool_calls=[("delegate", {"order_id": 7})]), _report])
    return stead.Agent("foreman", model, [delegate])


def agents() -> list[stead.Agent]:
    return [support(), patient(), quizzer(), watcher(), foreman(), plodder()]
