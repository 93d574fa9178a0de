"""Reconcile functions: asking whether an in-flight non_idempotent call happened."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from stead.core.decide import ToolSpec
from stead.errors import UserError
from stead.tools import Done, NotDone, ToolContext, Unknown, tool

ORDERS: dict[str, dict[str, Any]] = {"o-1": {"id": "o-1", "state": "placed"}}


def order_status(order_id: str) -> Done | NotDone:
    """Looks the order up the way a real status check would."""
    found = ORDERS.get(order_id)
    return Done(found) if found else NotDone()


@tool(reconcile=order_status)
def place_order(order_id: str, quantity: int = 1) -> str:
    """Place an order."""
    raise AssertionError("reconcile tests never run the handler")


async def test_answers_pass_through_and_done_is_serialized(ctx: ToolContext) -> None:
    assert place_order.spec == ToolSpec(effect_class="non_idempotent", has_reconcile=True)
    assert place_order.reconcile is order_status
    assert await place_order.reconcile_call('{"order_id": "o-1"}', ctx) == Done(
        '{"id":"o-1","state":"placed"}'
    )
    assert await place_order.reconcile_call('{"order_id": "o-2"}', ctx) == NotDone()


async def test_async_reconcile_with_context_and_kwargs(ctx: ToolContext) -> None:
    seen: dict[str, Any] = {}

    async def check(c: ToolContext, **kwargs: Any) -> Unknown:
        await asyncio.sleep(0)
        seen.update(kwargs, key=c.idempotency_key)
        return Unknown("the payment provider is down")

    @tool(reconcile=check)
    def pay(account: str, cents: int, memo: str = "") -> str:
        return "paid"

    answer = await pay.reconcile_call('{"account": "a", "cents": "5"}', ctx)
    assert answer == Unknown(reason="the payment provider is down")
    assert seen == {"account": "a", "cents": 5, "memo": "", "key": ctx.idempotency_key}


@pytest.mark.parametrize(
    ("returned", "reason"),
    [
        (True, "reconcile returned bool; it must return Done(result), NotDone() or Unknown"),
        (None, "reconcile returned NoneType"),
    ],
)
async def test_a_wrong_return_value_is_unknown(
    ctx: ToolContext, returned: object, reason: str
) -> None:
    def check(x: int) -> Any:
        return returned

    @tool(reconcile=check)
    def act(x: int) -> str:
        return ""

    answer = await act.reconcile_call('{"x": 1}', ctx)
    assert isinstance(answer, Unknown) and reason in answer.reason


async def test_an_exception_is_unknown_never_not_done(ctx: ToolContext) -> None:
    def check(x: int) -> NotDone:
        raise ConnectionError("status API unreachable")

    @tool(reconcile=check)
    def act(x: int) -> str:
        return ""

    answer = await act.reconcile_call('{"x": 1}', ctx)
    assert answer == Unknown(reason="reconcile raised ConnectionError: status API unreachable")


async def test_no_reconcile_or_bad_arguments_is_unknown(ctx: ToolContext) -> None:
    @tool
    def act(x: int) -> str:
        return ""

    answer = await act.reconcile_call('{"x": 1}', ctx)
    assert answer == Unknown(reason="tool 'act' has no reconcile function")
    bad = await place_order.reconcile_call('{"order_id": 5, "extra": 1}', ctx)
    assert isinstance(bad, Unknown) and "do not validate" in bad.reason


async def test_cancellation_inside_reconcile_propagates(ctx: ToolContext) -> None:
    async def check(x: int) -> NotDone:
        raise asyncio.CancelledError

    @tool(reconcile=check)
    def act(x: int) -> str:
        return ""

    with pytest.raises(asyncio.CancelledError):
        await act.reconcile_call('{"x": 1}', ctx)


def test_reconcile_only_for_non_idempotent() -> None:
    for effect in ("read_only", "idempotent_write"):
        with pytest.raises(UserError, match="reconcile is only for effect='non_idempotent'"):
            tool(effect=effect, reconcile=order_status)


def test_reconcile_must_be_callable_with_the_tool_arguments() -> None:
    def needs_other(order_id: str, region: str) -> NotDone:
        return NotDone()

    def positional_other(order_id: str, region: str = "eu", /) -> NotDone:
        return NotDone()

    def star_args(*args: Any) -> NotDone:
        return NotDone()

    def place(order_id: str) -> str:
        return ""

    with pytest.raises(UserError, match="reconcile parameter 'region' is not an argument"):
        tool(reconcile=needs_other)(place)
    with pytest.raises(UserError, match="reconcile parameter 'region' is not an argument"):
        tool(reconcile=positional_other)(place)
    with pytest.raises(UserError, match=r"\*args and \*\*kwargs"):
        tool(reconcile=star_args)(place)
    with pytest.raises(UserError, match="reconcile must be a function"):
        tool(reconcile=print)(place)  # type: ignore[arg-type]


async def test_optional_reconcile_parameter_the_tool_lacks_keeps_its_default(
    ctx: ToolContext,
) -> None:
    def check(order_id: str, region: str = "eu") -> Done:
        return Done(f"{order_id}@{region}")

    @tool(reconcile=check)
    def place(order_id: str) -> str:
        return ""

    assert await place.reconcile_call('{"order_id": "o"}', ctx) == Done("o@eu")
