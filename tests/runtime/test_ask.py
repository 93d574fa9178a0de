"""Asking a person a question: a question tool pauses the run in
``awaiting_approval``; ``Runtime.answer`` from any process, any time later, validates the
answer against the tool's answer type, records it, and it is the call's result."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pydantic
import pytest

import stead
from stead.core.events import ApprovalDecided, ApprovalRequested, ToolResultRecorded
from stead.core.states import RunStatus
from stead.providers import ModelRequest
from stead.testing import Reply, ScriptedModel, assert_valid_history

CHILD = Path(__file__).parent / "limits_child.py"


class Shipping(pydantic.BaseModel):
    speed: Literal["standard", "express"]
    gift_wrap: bool = False


def _echo_result(request: ModelRequest) -> str:
    from stead.core.messages import ToolResultMessage

    (last, *_) = [m for m in reversed(request.messages) if isinstance(m, ToolResultMessage)]
    return f"noted: {last.content}"


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


def _ask_agent(answer: object = Shipping) -> stead.Agent:
    model = ScriptedModel(
        [Reply(tool_calls=[("ask_user", {"question": "Which shipping?"})]), _echo_result]
    )
    return stead.Agent("asker", model, [stead.question_tool(answer)])


async def test_a_question_waits_and_its_validated_answer_is_the_calls_result(store: str) -> None:
    agent = _ask_agent()
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "ship it")
        view = await rt.run(rid)
        assert view.status is RunStatus.AWAITING_APPROVAL
        (pending,) = view.approvals
        assert pending.reason == "question" and pending.tool == "ask_user"
        assert pending.payload["question"] == "Which shipping?"
        assert pending.payload["answer_schema"]["properties"]["speed"]["enum"] == [
            "standard",
            "express",
        ]
        before = len(await rt.events(rid))
        with pytest.raises(stead.ApprovalError, match=r"does not fit .*speed.*keeps waiting"):
            await rt.answer(rid, pending.tool_call_id, {"speed": "teleport"})
        with pytest.raises(stead.ApprovalError, match="token"):
            await rt.answer(rid, pending.tool_call_id, {"speed": "express"}, token="forged")
        with pytest.raises(stead.ApprovalError, match="a question, not a decision"):
            await rt.approve(rid, pending.tool_call_id)
        with pytest.raises(stead.UserError, match="decision must be one of"):
            await rt.decide(rid, pending.tool_call_id, "answer")  # type: ignore[arg-type]
        assert len(await rt.events(rid)) == before
        assert (await rt.get(rid)).status is RunStatus.AWAITING_APPROVAL
        # a JSON string fits a model-typed answer too (a command line, a form)
        view = await rt.answer(
            rid, pending.tool_call_id, '{"speed": "express"}', token=pending.token, by="ann"
        )
        assert view.status is RunStatus.AWAITING_TOOL and not view.approvals
        done = await rt.run(rid)
        assert done.status is RunStatus.COMPLETED
        assert done.output == 'noted: {"speed":"express","gift_wrap":false}'
        events = [e.event for e in await rt.events(rid)]
        (decided,) = [e for e in events if isinstance(e, ApprovalDecided)]
        assert (decided.decision, decided.by) == ("answer", "ann")
        (result,) = [e for e in events if isinstance(e, ToolResultRecorded)]
        assert result.source == "approval" and not result.is_error
        assert json.loads(result.content) == {"speed": "express", "gift_wrap": False}
        assert_valid_history(await rt.state(rid))
        with pytest.raises(stead.ApprovalError, match="is completed: it waits on no answer"):
            await rt.answer(rid, pending.tool_call_id, {"speed": "express"})


@stead.tool(asks=Literal["yes", "no"])
def confirm_refund(order_id: int, cents: int) -> str:
    """Ask the customer to confirm a refund."""
    return f"Refund {cents / 100:.2f} on order {order_id}?"


@stead.tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order."""
    return "refunded"


async def test_a_question_worded_from_the_arguments_and_bad_answers(store: str) -> None:
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    ("confirm_refund", {"order_id": 7, "cents": 1250}),
                    ("refund", {"order_id": 7}),
                ]
            ),
            "ok",
        ]
    )
    agent = stead.Agent("refunds", model, [confirm_refund, refund])
    assert confirm_refund.effect_class == "read_only"  # it only words the question
    async with stead.Runtime(store, agents=[agent]) as rt:
        rid = await rt.start(agent, "refund order 7")
        view = await rt.run(rid)
        by_reason = {a.reason: a for a in view.approvals}
        question, consent = by_reason["question"], by_reason["policy"]
        assert question.payload["question"] == "Refund 12.50 on order 7?"
        with pytest.raises(stead.ApprovalError, match="asked no question, it waits for consent"):
            await rt.answer(rid, consent.tool_call_id, "yes")
        with pytest.raises(stead.ApprovalError, match=r"no question .*open questions: "):
            await rt.answer(rid, "call_nobody_made", "yes")
        with pytest.raises(stead.ApprovalError, match="does not fit"):
            await rt.answer(rid, question.tool_call_id, "maybe")
        await rt.answer(rid, question.tool_call_id, "no")
        assert (await rt.get(rid)).status is RunStatus.AWAITING_APPROVAL  # consent still waits
        await rt.deny(rid, consent.tool_call_id, "the customer said no")
        assert (await rt.run(rid)).output == "ok"
        contents = {
            e.event.tool_call_id: e.event.content
            for e in await rt.events(rid)
            if isinstance(e.event, ToolResultRecorded)
        }
        assert contents[question.tool_call_id] == "no"


def test_question_tool_options_are_checked() -> None:
    with pytest.raises(stead.UserError, match="already waits on a person"):

        @stead.tool(asks=str, requires_approval=True)
        def both(x: int) -> str:
            return "?"

    class NotAType:
        pass

    with pytest.raises(stead.UserError, match="answer's type"):
        stead.question_tool(NotAType())


def _child(store: str, mode: str, *args: str, **env: str) -> subprocess.Popen[str]:
    import os

    return subprocess.Popen(
        [sys.executable, str(CHILD), store, mode, "ask", *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_question_answered_from_a_second_process_after_the_first_was_killed(
    store: str,
) -> None:
    first = _child(store, "start")
    assert first.stdout is not None
    line = first.stdout.readline()
    assert json.loads(line)["status"] == "awaiting_approval", first.stderr
    first.kill()
    first.communicate(timeout=30)
    assert first.returncode == -9

    # days later, as far as the run can tell: the second process's clock is 3 days ahead
    later = {"STEAD_TEST_CLOCK_AHEAD": str(3 * 86400)}
    wrong = _child(store, "answer", '{"speed": "by pigeon"}', **later)
    out, err = wrong.communicate(timeout=60)
    assert wrong.returncode != 0 and "does not fit" in err and "keeps waiting" in err
    second = _child(store, "answer", '{"speed": "standard", "gift_wrap": true}', **later)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    done = json.loads(out.strip().splitlines()[-1])
    assert done["status"] == "completed"
    assert done["output"] == 'Shipping chosen: {"speed":"standard","gift_wrap":true}'

    async def check() -> None:
        async with stead.Runtime(store) as rt:
            events = [e.event for e in await rt.events("run_limits")]
            assert sum(isinstance(e, ApprovalRequested) for e in events) == 1
            assert sum(isinstance(e, ApprovalDecided) for e in events) == 1
            assert_valid_history(await rt.state("run_limits"))

    asyncio.run(check())


def test_a_question_tool_is_read_only_whatever_its_options() -> None:
    @stead.tool(asks=str, retries=1, timeout=5)
    def ask_twice(topic: str) -> str:
        """Ask about a topic."""
        return f"What about {topic}?"

    assert ask_twice.effect_class == "read_only" and ask_twice.asks is not None
