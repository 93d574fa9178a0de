"""A caller's mistakes with a Pydantic AI agent are typed ``SteadError``s that say what to
do; outside a stead drive the agent runs as plain Pydantic AI."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")

from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError as PaiUserError
from pydantic_ai.models.test import TestModel

import stead
from stead.errors import UserError
from stead.pydantic_ai import SteadDurability, tool_context


def test_an_agent_without_the_capability_is_refused(tmp_path: Path) -> None:
    plain = Agent(TestModel(), name="plain")
    with pytest.raises(UserError, match=r"SteadDurability"):
        stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[plain])


def test_an_agent_needs_a_name() -> None:
    # Refused by Pydantic AI's engine base as the agent is built: runs find it by name.
    with pytest.raises(PaiUserError, match=r"unique `name`.*stead"):
        Agent(TestModel(), capabilities=[SteadDurability()])


def test_an_unknown_setting_names_the_tool(tmp_path: Path) -> None:
    agent = Agent(TestModel(), name="typo", capabilities=[SteadDurability()])

    @agent.tool_plain(metadata={"stead": {"efect": "read_only"}})
    def look(q: str) -> str:
        return q

    with pytest.raises(UserError, match=r"'look'.*'efect'"):
        stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent])


def test_a_setting_stead_refuses_is_refused_as_for_a_native_tool(tmp_path: Path) -> None:
    agent = Agent(TestModel(), name="blind", capabilities=[SteadDurability()])

    @agent.tool_plain(metadata={"stead": {"effect": "non_idempotent", "retries": 2}})
    def charge(cents: int) -> str:
        return "charged"

    with pytest.raises(UserError, match=r"retries of a non_idempotent tool need a reconcile"):
        stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent])


async def test_outside_a_drive_the_agent_is_plain_pydantic_ai() -> None:
    agent = Agent(TestModel(), name="plain_run", capabilities=[SteadDurability()])
    seen: list[str] = []

    @agent.tool_plain(metadata={"stead": {"effect": "read_only"}})
    def look(q: str) -> str:
        with pytest.raises(UserError, match=r"tool_context"):
            tool_context()
        seen.append(q)
        return q

    result = await agent.run("look something up")
    assert seen and result.output


async def test_the_same_agent_is_the_same_stead_agent(tmp_path: Path) -> None:
    agent = Agent(TestModel(), name="twice", capabilities=[SteadDurability()])
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent]) as rt:
        run_id = await rt.start(agent, "hello")  # no "two different agents" refusal
        view = await rt.run(run_id)
    assert view.status is stead.RunStatus.COMPLETED
