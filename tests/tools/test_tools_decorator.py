"""The @tool decorator: options, defaults, and the misuse it refuses."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from pydantic import Field

import stead.tools
from stead.errors import UserError
from stead.tools import Tool, ToolContext, tool


class NotAModel:
    """A type pydantic cannot build a schema for."""


def test_bare_and_with_options() -> None:
    def f(x: int) -> int:
        return x

    bare = tool(f)
    assert isinstance(bare, Tool)
    assert bare.name == "f"
    assert bare.effect_class == "non_idempotent"  # the safe default: never re-run blindly
    assert bare.reconcile is None and bare.requires_approval is False

    named = tool(effect="idempotent_write", name="set_x", requires_approval=True)(f)
    assert (named.name, named.effect_class, named.requires_approval) == (
        "set_x", "idempotent_write", True,
    )  # fmt: skip
    assert repr(named) == "<Tool 'set_x' idempotent_write>"


def test_a_tool_is_read_only_and_looks_like_its_function() -> None:
    def f(x: int, y: str = "") -> int:
        """Doc."""
        return x

    t = tool(f)
    with pytest.raises(AttributeError):
        t.name = "other"  # type: ignore[misc]
    assert inspect.signature(t) == inspect.signature(f)
    assert (t.__name__, t.__doc__, t.__wrapped__) == ("f", "Doc.", f)  # type: ignore[attr-defined]


def test_not_a_function() -> None:
    class Callable:
        def __call__(self, x: int) -> int:
            return x

    things: list[Any] = [NotAModel, 3, Callable(), "name", tool(lambda x: x, name="ident")]
    for thing in things:
        with pytest.raises(UserError):
            tool(thing)
    with pytest.raises(UserError, match="to pass options write @tool"):
        tool("search")  # type: ignore[call-overload]
    with pytest.raises(UserError, match="already a tool"):
        tool(tool(lambda x: x, name="ident"))


def test_var_args_and_generators_are_refused() -> None:
    def star(*items: int) -> int:
        return 0

    def kw(**opts: int) -> int:
        return 0

    def gen(n: int) -> Iterator[int]:
        yield n

    for fn in (star, kw):
        with pytest.raises(UserError, match=r"\*args and \*\*kwargs cannot be described"):
            tool(fn)
    with pytest.raises(UserError, match="a generator cannot be a tool"):
        tool(gen)


def test_bad_options() -> None:
    with pytest.raises(UserError, match="effect must be one of"):
        tool(effect="sometimes")  # type: ignore[call-overload]
    with pytest.raises(UserError, match="requires_approval must be a bool"):
        tool(requires_approval="yes")  # type: ignore[call-overload]
    with pytest.raises(UserError, match="tool name '<lambda>' must be 1-64"):
        tool(lambda x: x)
    with pytest.raises(UserError, match="tool name 'two words'"):
        tool(name="two words")(lambda x: x)
    # a misspelt option is named at @tool(...), with the ones there are
    with pytest.raises(UserError, match="takes no option 'retry'; its options: effect, "):
        tool(retry=2)  # type: ignore[call-overload]
    with pytest.raises(UserError, match="takes no option 'retry'"):
        tool(lambda x: x, name="f", retry=2)  # type: ignore[call-overload]
    with pytest.raises(UserError, match="timeout must be a positive"):
        tool(effect="read_only", timeout=0)


def test_bad_signatures() -> None:
    def two_contexts(a: ToolContext, b: ToolContext) -> str:
        return ""

    def unknown_type(x: NotAModel) -> str:
        return ""

    def aliased(x: Annotated[int, Field(alias="y")]) -> int:
        return x

    def aliased_default(x: int = Field(1, alias="y")) -> int:
        return x

    def unresolved(x: Undefined) -> int:  # type: ignore[name-defined]  # noqa: F821
        return 0

    with pytest.raises(UserError, match="only one parameter may be annotated ToolContext"):
        tool(two_contexts)
    with pytest.raises(UserError, match="cannot build a JSON schema"):
        tool(unknown_type)
    for fn in (aliased, aliased_default):
        with pytest.raises(UserError, match="parameter 'x' sets an alias"):
            tool(fn)
    with pytest.raises(UserError, match="cannot resolve its type hints"):
        tool(unresolved)


def test_a_bound_method_can_be_a_tool() -> None:
    class Shop:
        def __init__(self) -> None:
            self.stock = {"apple": 3}

        def count(self, item: str) -> int:
            """How many are in stock."""
            return self.stock.get(item, 0)

    t = tool(effect="read_only")(Shop().count)
    assert list(t.parameters["properties"]) == ["item"]
    assert t("apple") == 3


def test_approval_policy_asks_when_in_doubt() -> None:
    def big(args: dict[str, Any]) -> bool:
        return bool(args["cents"] > 10_000)

    def broken(args: dict[str, Any]) -> bool:
        raise KeyError("oops")

    def pay(cents: int) -> str:
        return "paid"

    assert tool(requires_approval=big)(pay).needs_approval('{"cents": "20000"}') is True
    assert tool(requires_approval=big)(pay).needs_approval('{"cents": 5}') is False
    assert tool(requires_approval=big)(pay).needs_approval('{"cents": "x"}') is True
    assert tool(requires_approval=broken)(pay).needs_approval('{"cents": 5}') is True
    assert tool(requires_approval=lambda a: None)(pay).needs_approval('{"cents": 5}') is True  # type: ignore[arg-type,return-value]
    assert tool(requires_approval=True)(pay).needs_approval("not json") is True
    assert tool(pay).needs_approval('{"cents": 5}') is False


def test_tool_context_is_frozen_and_documents_abort() -> None:
    from stead._signal import AbortSignal

    signal = AbortSignal()
    ctx = ToolContext(
        run_id="r", tool_call_id="c", turn_index=0, idempotency_key="k", attempt=1,
        tool_name="t", signal=signal,
    )  # fmt: skip
    assert not ctx.aborted
    signal.abort("stop")
    assert ctx.aborted
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.attempt = 2


def test_public_names() -> None:
    assert stead.tools.__all__ == [
        "AnswerSpec",
        "ApprovalPolicy",
        "Done",
        "NotDone",
        "ReconcileAnswer",
        "Reconciler",
        "SchemaTool",
        "Tool",
        "ToolContext",
        "ToolRegistry",
        "Unknown",
        "question_tool",
        "serialize_result",
        "tool",
    ]


def test_tools_imports_only_core_errors_signal_and_lease() -> None:
    import ast
    from pathlib import Path

    allowed = ("stead.core", "stead.errors", "stead._signal", "stead._lease", "stead.tools")
    for path in Path(stead.tools.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("stead"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"
