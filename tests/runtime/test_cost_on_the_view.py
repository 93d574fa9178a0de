"""Cost on the view on the ScriptedModel: ``RunView.cost_usd`` and
``turn_usage`` (a turn's attempts together, each turn priced by its model), and what a token
budget means with the default max output tokens (the README's Budgets paragraph)."""

from __future__ import annotations

from pathlib import Path

import pytest

import stead
from stead.core.messages import Usage
from stead.core.pricing import Price, PriceTable
from stead.core.states import RunStatus
from stead.providers import ModelCall, ModelResponse
from stead.runtime import Backoff
from stead.runtime.loop._budgeted import DEFAULT_MAX_OUTPUT_TOKENS
from stead.testing import Reply, ScriptedModel

PRICE = Price(input=2.0, output=10.0, cache_write=2.5, cache_read=0.2)


@stead.tool(effect="read_only")
def lookup(order_id: int) -> str:
    """Look an order up."""
    return "shipped"


async def test_cost_and_usage_per_turn_on_the_view(tmp_path: Path) -> None:
    u0, u1 = Usage(input_tokens=1000, output_tokens=50), Usage(input_tokens=1200, output_tokens=80)
    model = ScriptedModel(
        [
            Reply(tool_calls=[("lookup", {"order_id": 42})], usage=u0),
            Reply(text="It shipped.", usage=u1),
        ]
    )
    prices = PriceTable({"scripted": PRICE})
    agent = stead.Agent("priced", model, [lookup], prices=prices)
    async with stead.Runtime(tmp_path / "c.db", agents=[agent]) as rt:
        view = await rt.run(await rt.start(agent, "Where is order 42?"))
        assert [t.turn_index for t in view.turn_usage] == [0, 1]
        assert [t.usage for t in view.turn_usage] == [u0, u1]
        assert [t.model for t in view.turn_usage] == ["scripted", "scripted"]
        assert view.cost_usd == pytest.approx(PRICE.cost(u0) + PRICE.cost(u1))
        assert (await rt.get(view.run_id)).cost_usd == pytest.approx(view.cost_usd)
        # default prices know the scripted model as free; an unknown one is None, not zero
        assert stead.RunView.of(await rt.state(view.run_id)).cost_usd == 0.0
        unknown = PriceTable({}, defaults=False)
        assert stead.RunView.of(await rt.state(view.run_id), prices=unknown).cost_usd is None


async def test_a_retried_turn_is_one_turn_priced_by_its_reply(tmp_path: Path) -> None:
    class Flaky(ScriptedModel):
        async def complete(self, call: ModelCall) -> ModelResponse:
            if self.calls == 0:
                self.calls += 1
                raise stead.ProviderError("overloaded", code="provider_unavailable")
            return await super().complete(call)

    agent = stead.Agent(
        "flaky",
        Flaky([Reply(text="ok", usage=Usage(input_tokens=10, output_tokens=2))]),
        prices=PriceTable({"scripted": PRICE}),
    )
    async with stead.Runtime(
        tmp_path / "f.db", agents=[agent], backoff=Backoff(base=0.001, cap=0.001)
    ) as rt:
        view = await rt.run(await rt.start(agent, "hi"))
        (turn,) = view.turn_usage
        assert turn.usage == Usage(input_tokens=10, output_tokens=2)
        assert view.cost_usd == pytest.approx(PRICE.cost(turn.usage))


async def test_a_token_budget_with_the_default_max_output_tokens(tmp_path: Path) -> None:
    """A turn is estimated at its prompt plus the agent's max output tokens, 4096 when it
    sets none: a budget below that refuses the first turn (and says so with the figures);
    the README's 200,000 leaves room, and a small cap makes a tight budget work."""
    assert DEFAULT_MAX_OUTPUT_TOKENS == 4096
    tight = stead.Budget(max_total_tokens=3000)
    async with stead.Runtime(tmp_path / "b.db") as rt:
        refused = stead.Agent("tight", ScriptedModel(["hi"]), budget=tight)
        view = await rt.run(await rt.start(refused, "hello"))
        assert view.status is RunStatus.FAILED and view.error is not None
        assert view.error["code"] == "budget_exceeded"
        assert "total tokens" in view.error["message"]
        capped = stead.Agent("capped", ScriptedModel(["hi"]), budget=tight, max_output_tokens=256)
        assert (await rt.run(await rt.start(capped, "hello"))).output == "hi"
        readme = stead.Agent(
            "readme", ScriptedModel(["hi"]), budget=stead.Budget(max_total_tokens=200_000)
        )
        assert (await rt.run(await rt.start(readme, "hello"))).output == "hi"
