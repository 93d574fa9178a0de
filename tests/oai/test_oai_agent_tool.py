"""An Agents SDK agent used as a tool (``agent.as_tool(...)``) under stead: each call is a
child run of that agent (linked to the call, its usage in the tree's, reached by a cancel of
the parent), and a SIGKILL of the process driving the parent while the child works leaves
one child, which finishes; the parent takes its result once."""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

import asyncio
from pathlib import Path
from typing import Any

from _oai_scripts import deliveries, env, stead_cli
from agents import Agent, OpenAIChatCompletionsModel, function_tool
from openai import AsyncOpenAI
from wire_server import WireServer
from wire_shapes import openai_stream

import stead
import stead.openai_agents as sa
from stead.core.children import link_of
from stead.core.states import RunStatus
from stead.errors import UserError
from stead.testing import assert_valid_history

TASK = '{"input": "Tell Ada her refund is on its way."}'
SEND = '{"to": "ada@example.com", "text": "Your refund is on its way."}'


def _replies() -> list[Any]:
    """The manager asks the courier; the courier sends, then says so; the manager answers."""
    return [
        openai_stream(tools=[("call_d", "deliver", [TASK])]),
        openai_stream(tools=[("call_s", "send_message", [SEND])]),
        openai_stream("Sent."),
        openai_stream("Ada has been told."),
    ]


async def _runs(rt: stead.Runtime, agent: str) -> list[str]:
    return [r.run_id for r in await rt.store.list_runs(limit=100) if r.agent == agent]


def test_the_parent_killed_while_its_child_sends_takes_the_result_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    ledger = tmp_path / "deliveries.jsonl"
    with WireServer() as server:
        server.push(*_replies())
        e = env(server.url, ledger)
        # `stead run` drives the manager to its wait, then the courier's child run, in one
        # process: killed inside the courier's send, after the delivery, before its record.
        died = stead_cli(
            "--store",
            store,
            "run",
            "oai_team_support:agent",
            "Tell Ada her refund is on its way.",
            env={**e, "STEAD_CRASH_AT": "after_tool_effect:send_message"},
        )
        assert died.returncode == -9, died.stdout + died.stderr
        assert len(deliveries(ledger)) == 1 and len(server.requests) == 2
        monkeypatch.setenv("STEAD_TEST_LEDGER", str(ledger))
        import oai_team_support

        async def resume() -> tuple[stead.RunView, str, list[str], Any]:
            client = AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0)
            try:
                agent = oai_team_support.build(client)
                async with stead.Runtime(store, agents=[agent]) as rt:
                    (parent,) = await _runs(rt, "manager")
                    (child,) = await _runs(rt, "courier")
                    assert (await rt.get(child)).status is RunStatus.AWAITING_TOOL
                    # The manager rests on its child: resuming it finishes the child here
                    # (its owner is dead), then the manager goes on.
                    await rt.resume(parent)
                    for run in (parent, child):
                        assert_valid_history(await rt.state(run))
                    kinds = [e.event.kind for e in await rt.events(child)]
                    return await rt.get(parent), child, await _runs(rt, "courier"), kinds
            finally:
                await client.close()

        view, child, couriers, child_kinds = asyncio.run(resume())
    assert view.status is RunStatus.COMPLETED, view.error
    assert view.output == "Ada has been told."
    assert couriers == [child]  # no second child
    assert len(deliveries(ledger)) == 1  # the send in flight was reconciled, not run again
    assert "tool_reconciled" in child_kinds
    assert len(server.requests) == 4  # no model turn asked twice
    taken = {m.get("tool_call_id"): m.get("content") for m in server.requests[3].body["messages"]}
    assert taken["call_d"] == "Sent."  # the child's output, the manager's call's result
    assert view.tree_usage is not None and view.tree_usage.output_tokens == 4 * 12


@pytest.fixture
def server() -> Any:
    with WireServer() as srv:
        yield srv


@pytest.fixture
async def llm(server: WireServer) -> Any:
    client = AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=0)
    yield OpenAIChatCompletionsModel("gpt-4.1", openai_client=client)
    await client.close()


async def test_each_call_is_a_linked_child_run_a_cancel_of_the_parent_reaches(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    started = asyncio.Event()
    stopped: list[bool] = []

    @sa.effect("read_only")
    @function_tool
    async def wait_for_parcel() -> str:
        """Wait for a parcel."""
        started.set()
        await sa.tool_context().signal.wait()
        stopped.append(True)
        return "stopped"

    courier = Agent(name="waiting_courier", model=llm, tools=[wait_for_parcel])
    manager = sa.durable(
        Agent(name="waiting_manager", model=llm, tools=[courier.as_tool("deliver", "Deliver.")])
    )
    server.push(
        openai_stream(tools=[("call_d", "deliver", ['{"input": "Wait for the parcel."}'])]),
        openai_stream(tools=[("call_w", "wait_for_parcel", ["{}"])]),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[manager]) as rt:
        parent = await rt.start(manager, "Get the parcel")
        drive = asyncio.ensure_future(rt.run(parent))
        await asyncio.wait_for(started.wait(), 30)
        (child,) = await _runs(rt, "waiting_courier")
        link = link_of((await rt.state(child)).config)
        assert link is not None and (link.run_id, link.tool_call_id) == (parent, "call_d")
        assert (await rt.state(child)).input == "Wait for the parcel."
        requested = [e.event for e in await rt.events(parent)]
        (call,) = [e for e in requested if e.kind == "tool_call_requested"]
        assert call.effect_class == "read_only"  # type: ignore[attr-defined]  # the child's
        await rt.cancel(parent, "user left")
        await asyncio.wait_for(drive, 30)
        assert (await rt.get(parent)).status is RunStatus.CANCELLED
        assert (await rt.get(child)).status is RunStatus.CANCELLED
        assert stopped == [True]  # the child's tool was stopped through its signal
        for run in (parent, child):
            assert_valid_history(await rt.state(run))


def test_what_a_child_run_cannot_honour_is_refused(llm: Any) -> None:
    courier = Agent(name="courier", model=llm)
    asking = courier.as_tool("deliver", "Deliver.", needs_approval=True)
    with pytest.raises(UserError, match="cannot ask for approval under stead"):
        sa.durable(Agent(name="manager", model=llm, tools=[asking]))
    plain = courier.as_tool("deliver", "Deliver.")
    with pytest.raises(UserError, match="takes only an effect class"):
        sa.durable(
            Agent(name="manager", model=llm, tools=[plain]),
            tools={"deliver": {"effect": "read_only", "retries": 2}},
        )


async def test_the_childs_usage_counts_against_the_parents_budget(
    server: WireServer, llm: Any, tmp_path: Path
) -> None:
    notes: list[str] = []

    @sa.effect("idempotent_write")
    @function_tool
    def save_note(text: str) -> str:
        """Save a note."""
        notes.append(text)
        return "saved"

    courier = Agent(name="noting_courier", model=llm, tools=[save_note])
    # A turn starts only if the tree's spend plus its worst case (its input, about 42 tokens,
    # and up to 4,096 out) fits. Each reply costs 40 + 12: the manager's first turn and the
    # courier's first fit in 4,200; the courier's second would not (104 spent), though the
    # courier has no budget of its own.
    manager = sa.durable(
        Agent(name="noting_manager", model=llm, tools=[courier.as_tool("deliver", "Deliver.")]),
        budget=stead.Budget(max_total_tokens=4200),
    )
    server.push(
        openai_stream(tools=[("call_d", "deliver", ['{"input": "Note it."}'])]),
        openai_stream(tools=[("call_n", "save_note", ['{"text": "it"}'])]),
        openai_stream("Noted."),
        openai_stream("Done."),
    )
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[manager]) as rt:
        parent = await rt.start(manager, "Note it")
        view = await rt.run(parent)
        (child,) = await _runs(rt, "noting_courier")
        child_view = await rt.get(child)
    assert notes == ["it"]
    assert child_view.status is RunStatus.FAILED and "budget" in str(child_view.error)
    assert len(server.requests) == 2  # no turn past the tree's budget, in either run
    assert view.status is RunStatus.FAILED and "budget" in str(view.error)
