"""Argument schemas generated from type hints."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from stead.core.canonical import digest
from stead.core.decide import ToolSpec
from stead.core.messages import ToolSchema
from stead.tools import ToolContext, tool


class Address(BaseModel):
    street: str
    number: int = 1


def schema_of(fn: Any) -> dict[str, Any]:
    return tool(fn).parameters


def test_required_default_and_optional() -> None:
    def f(city: str, days: int = 3, unit: str | None = None) -> str:
        return city

    s = schema_of(f)
    assert s == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "default": 3},
            "unit": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_annotated_field_and_field_default_descriptions() -> None:
    def f(
        city: Annotated[str, Field(description="City name")],
        days: int = Field(5, description="How many days", ge=1),
    ) -> str:
        return city

    props = schema_of(f)["properties"]
    assert props["city"] == {"type": "string", "description": "City name"}
    assert props["days"] == {
        "type": "integer", "default": 5, "description": "How many days", "minimum": 1,
    }  # fmt: skip


def test_nested_model_list_and_literal() -> None:
    def f(addr: Address, tags: list[str], mode: Literal["fast", "slow"] = "fast") -> str:
        return ""

    s = schema_of(f)
    assert s["properties"]["addr"] == {"$ref": "#/$defs/Address"}
    assert s["$defs"]["Address"]["required"] == ["street"]
    assert s["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert s["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert s["required"] == ["addr", "tags"]


def test_no_titles_leak_into_the_schema() -> None:
    def f(city_name: str, addr: Address) -> str:
        return ""

    s = schema_of(f)
    assert "title" not in s
    assert all("title" not in p for p in s["properties"].values())


def test_tool_context_is_not_an_argument_wherever_it_is() -> None:
    def first(ctx: ToolContext, q: str) -> str:
        return q

    def annotated(q: str, c: Annotated[ToolContext, "injected"]) -> str:
        return q

    for fn in (first, annotated):
        s = schema_of(fn)
        assert list(s["properties"]) == ["q"]
        assert s["required"] == ["q"]


def test_parameter_names_that_shadow_pydantic_attributes() -> None:
    # Models send these names; they must not collide with BaseModel (warnings are errors here).
    def f(json: str, model_name: str, schema: int = 0, _private: bool = False) -> str:
        return json

    assert list(schema_of(f)["properties"]) == ["json", "model_name", "schema", "_private"]


def test_no_arguments() -> None:
    def ping() -> str:
        return "pong"

    assert schema_of(ping) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_description_is_the_first_docstring_paragraph() -> None:
    def f(q: str) -> str:
        """Search the catalogue
        for products.

        Args:
            q: the query.
        """
        return q

    assert tool(f).description == "Search the catalogue for products."
    assert tool(description="Given.")(f).description == "Given."

    def bare(q: str) -> str:
        return q

    assert tool(bare).description == ""


def test_schema_spec_and_parameters_copy() -> None:
    def lookup(q: str) -> str:
        """Look up."""
        return q

    t = tool(effect="read_only")(lookup)
    assert t.schema() == ToolSchema(name="lookup", description="Look up.", parameters=t.parameters)
    assert t.spec == ToolSpec(effect_class="read_only", has_reconcile=False)
    t.parameters["properties"].clear()  # a copy: the tool's definition cannot be edited
    assert "q" in t.parameters["properties"]


def test_definition_digest_covers_the_definition() -> None:
    def lookup(q: str) -> str:
        return q

    t = tool(effect="read_only")(lookup)
    assert t.definition_digest == digest(
        {
            "name": "lookup",
            "description": "",
            "parameters": t.parameters,
            "effect_class": "read_only",
        }
    )
    assert tool(effect="read_only")(lookup).definition_digest == t.definition_digest
    others = {
        tool(lookup).definition_digest,
        tool(effect="read_only", name="other")(lookup).definition_digest,
        tool(effect="read_only", description="d")(lookup).definition_digest,
    }
    assert t.definition_digest not in others and len(others) == 3


def test_schema_is_plain_json() -> None:
    def f(addr: Address, when: Literal["now"] = "now") -> str:
        return ""

    t = tool(f)
    assert json.loads(json.dumps(t.parameters)) == t.parameters
