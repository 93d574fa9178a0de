"""Tool.invoke: calling handlers, injecting the context, turning results into outcomes."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import threading
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, field_serializer, field_validator

from stead._signal import AbortSignal
from stead.core.effects import ToolFailed, ToolSucceeded
from stead.errors import Aborted
from stead.tools import ToolContext, serialize_result, tool


class Address(BaseModel):
    street: str
    number: int = 1


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Colour(str, enum.Enum):  # noqa: UP042 - str() of this is "Colour.RED", not its value
    RED = "red"


async def test_sync_handler_runs_in_a_thread_with_validated_values(ctx: ToolContext) -> None:
    seen: dict[str, Any] = {}

    @tool
    def ship(addr: Address, days: int = 3, *, c: ToolContext) -> str:
        seen.update(addr=addr, days=days, c=c, thread=threading.get_ident())
        return f"{addr.street} in {days}"

    out = await ship.invoke('{"addr": {"street": "Main"}, "days": "2"}', ctx)
    assert out == ToolSucceeded(content="Main in 2")
    assert seen["addr"] == Address(street="Main") and seen["days"] == 2
    assert seen["c"] is ctx
    assert seen["thread"] != threading.get_ident()  # the loop was not blocked


async def test_async_handler_is_awaited_on_the_loop(ctx: ToolContext) -> None:
    @tool
    async def fetch(ctx: ToolContext, q: str, /) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"q": q, "key": ctx.idempotency_key, "thread": threading.get_ident()}

    out = await fetch.invoke('{"q": "x"}', ctx)
    assert isinstance(out, ToolSucceeded)
    assert out.content == (
        f'{{"q":"x","key":"{ctx.idempotency_key}","thread":{threading.get_ident()}}}'
    )


async def test_defaults_are_filled_for_omitted_arguments(ctx: ToolContext) -> None:
    @tool
    def f(a: int, b: list[int] = [7]) -> list[int]:  # noqa: B006
        return [a, *b]

    assert await f.invoke('{"a": 1}', ctx) == ToolSucceeded(content="[1,7]")


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("plain text", "plain text"),
        (Colour.RED, "red"),
        (None, "null"),
        (3, "3"),
        (True, "true"),
        ({"b": [1, 2], "a": None}, '{"b":[1,2],"a":null}'),
        (Address(street="Main"), '{"street":"Main","number":1}'),
        (Point(1, 2), '{"x":1,"y":2}'),
        ({1, 2} - {1, 2}, "[]"),
    ],
)
async def test_return_values_are_serialized(ctx: ToolContext, value: Any, content: str) -> None:
    @tool
    def f() -> Any:
        return value

    assert await f.invoke("{}", ctx) == ToolSucceeded(content=content)
    assert serialize_result(value) == content
    assert type(serialize_result(value)) is str


def test_serialize_result_never_raises() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque!"

    class Broken(BaseModel):
        x: int

        @field_serializer("x")
        def fail(self, v: int) -> int:
            raise RuntimeError("nope")

    assert serialize_result(Opaque()) == '"opaque!"'
    assert serialize_result(Broken(x=1)).startswith("<")
    assert "Broken result that cannot be rendered as JSON" in serialize_result(Broken(x=1))
    assert "cannot be rendered as JSON" in serialize_result(b"\xff")


async def test_a_result_that_cannot_be_rendered_is_still_a_success(ctx: ToolContext) -> None:
    # The handler ran: calling it a failure would invite the model to run it again.
    @tool
    def f() -> bytes:
        return b"\xff"

    out = await f.invoke("{}", ctx)
    assert isinstance(out, ToolSucceeded) and "bytes result" in out.content


async def test_an_exception_becomes_a_known_failure(ctx: ToolContext) -> None:
    @tool
    def boom(why: str) -> str:
        raise ValueError(why)

    @tool
    async def silent() -> str:
        raise TimeoutError

    assert await boom.invoke('{"why": "no stock"}', ctx) == ToolFailed(
        failure="ValueError: no stock"
    )
    assert await silent.invoke("{}", ctx) == ToolFailed(failure="TimeoutError")


async def test_invalid_arguments_fail_without_running(ctx: ToolContext) -> None:
    ran: list[int] = []

    @tool
    def f(n: int) -> int:
        ran.append(n)
        return n

    out = await f.invoke('{"n": "x"}', ctx)
    assert isinstance(out, ToolFailed)
    assert "Invalid arguments for tool 'f'" in out.failure and "- n:" in out.failure
    assert ran == []


async def test_cancellation_propagates(ctx: ToolContext) -> None:
    @tool
    async def raises_cancelled() -> str:
        raise asyncio.CancelledError

    @tool
    def raises_run_cancelled() -> str:  # from the worker thread
        raise Aborted("run cancelled")

    with pytest.raises(asyncio.CancelledError):
        await raises_cancelled.invoke("{}", ctx)
    with pytest.raises(Aborted):
        await raises_run_cancelled.invoke("{}", ctx)


async def test_cancelling_the_task_cancels_the_invoke(ctx: ToolContext) -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        started.set()
        await asyncio.sleep(3600)
        return "never"

    task = asyncio.create_task(slow.invoke("{}", ctx))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_sync_handler_sees_the_abort_signal(
    ctx_with: Callable[[AbortSignal], ToolContext],
) -> None:
    signal = AbortSignal()
    ctx = ctx_with(signal)

    @tool
    def wait_for_abort(ctx: ToolContext) -> str:
        assert ctx.signal.wait_sync(timeout=30)
        return f"stopped: {ctx.aborted} {ctx.signal.reason}"

    task = asyncio.create_task(wait_for_abort.invoke("{}", ctx))
    await asyncio.sleep(0)
    signal.abort("user cancelled")
    assert await task == ToolSucceeded(content="stopped: True user cancelled")


def test_a_tool_is_still_the_function() -> None:
    @tool
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    assert add(2) == 3
    assert add.fn(2, b=2) == 4
    assert add.__doc__ == "Add." and inspect.unwrap(add) is add.fn


class Counted(BaseModel):
    """Arguments whose validator counts how often they are validated."""

    items: list[int]

    @field_validator("items")
    @classmethod
    def count(cls, v: list[int]) -> list[int]:
        VALIDATIONS.append(len(v))
        return v


VALIDATIONS: list[int] = []


async def test_arguments_admitted_here_are_validated_once(ctx: ToolContext) -> None:
    """A call admitted (``validate``) and then run in the same process is validated once: the
    admission's validated arguments are handed to the run, once each (a handler may change
    what it is given, and the next run of the same text gets its own). A tool that asks a
    person first validates again when it runs (the wait may be long)."""
    seen: list[list[int]] = []

    @tool(effect="read_only")
    def grab(args: Counted) -> int:
        seen.append(args.items)
        args.items.append(99)  # a handler changing its arguments changes no later call's
        return len(args.items)

    VALIDATIONS.clear()
    canonical, problem = grab.validate('{"args": {"items": [1, 2]}}')
    assert problem is None and VALIDATIONS == [2]
    assert await grab.invoke(canonical, ctx) == ToolSucceeded(content="3")
    assert VALIDATIONS == [2]  # the admission's validation, used by the run
    assert await grab.invoke(canonical, ctx) == ToolSucceeded(content="3")  # validated anew
    assert VALIDATIONS == [2, 2] and seen == [[1, 2, 99], [1, 2, 99]]

    # Many runs in flight making the same call: each admission's arguments kept for a run.
    VALIDATIONS.clear()
    texts = [grab.validate('{"args": {"items": [3]}}')[0] for _ in range(3)]
    outs = [await grab.invoke(text, ctx) for text in texts]
    assert outs == [ToolSucceeded(content="2")] * 3 and VALIDATIONS == [1, 1, 1]

    @tool(effect="read_only", requires_approval=True)
    def asked(args: Counted) -> int:
        return len(args.items)

    VALIDATIONS.clear()
    canonical, _ = asked.validate('{"args": {"items": [5]}}')
    assert await asked.invoke(canonical, ctx) == ToolSucceeded(content="1")
    assert VALIDATIONS == [1, 1]
