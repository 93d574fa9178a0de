"""ToolRegistry: lookup, specs and schemas, and the verdict on each requested call."""

from __future__ import annotations

import pytest

from stead.core.builders import CallAdmission
from stead.core.decide import ToolSpec
from stead.core.messages import ToolCall
from stead.errors import UserError
from stead.tools import Done, ToolRegistry, tool


def status(order_id: str) -> Done:
    return Done("placed")


@tool(effect="read_only")
def search(query: str, limit: int = 5) -> list[str]:
    """Search the catalogue."""
    return [query] * limit


@tool(reconcile=status)
def order(order_id: str) -> str:
    """Place an order."""
    return order_id


REGISTRY = ToolRegistry([search, order])


def test_lookup_and_listing() -> None:
    assert REGISTRY.get("search") is search
    assert REGISTRY.get("nope") is None
    assert REGISTRY.names() == ["search", "order"]
    assert list(REGISTRY) == [search, order]
    assert len(REGISTRY) == 2 and "order" in REGISTRY and "nope" not in REGISTRY
    assert REGISTRY.specs() == {
        "search": ToolSpec(effect_class="read_only", has_reconcile=False),
        "order": ToolSpec(effect_class="non_idempotent", has_reconcile=True),
    }
    assert [s.name for s in REGISTRY.schemas()] == ["search", "order"]
    assert REGISTRY.schemas()[0] == search.schema()


def test_duplicates_and_non_tools_are_refused() -> None:
    other = tool(name="search")(lambda q: q)
    with pytest.raises(UserError, match="two tools are named 'search'"):
        ToolRegistry([search, other])
    with pytest.raises(UserError, match="decorate the function with @tool"):
        ToolRegistry([search, print])  # type: ignore[list-item]


def test_verdict_for_an_unknown_tool() -> None:
    call = ToolCall(id="c1", name="delete_all", arguments="{not json")
    assert REGISTRY.admit(call) == CallAdmission(
        tool_call_id="c1",
        arguments="{not json",
        effect_class=None,
        rejection="unknown tool 'delete_all'; available tools: search, order",
    )
    empty = ToolRegistry([]).admit(call)
    assert empty.rejection == "unknown tool 'delete_all'; available tools: none"


def test_verdict_for_valid_and_invalid_arguments() -> None:
    ok = REGISTRY.admit(ToolCall(id="c2", name="search", arguments='{"limit":2, "query":"x"}'))
    assert ok == CallAdmission(
        tool_call_id="c2",
        arguments='{"limit":2,"query":"x"}',
        effect_class="read_only",
        rejection=None,
    )
    bad = REGISTRY.admit(ToolCall(id="c3", name="order", arguments='{"id": "o"}'))
    assert bad.arguments == '{"id": "o"}' and bad.effect_class == "non_idempotent"
    assert bad.rejection is not None
    assert "- order_id: required but missing" in bad.rejection
    assert "- id: not an argument of this tool (arguments: order_id)" in bad.rejection
