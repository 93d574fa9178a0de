"""The tools one agent offers, by name, and the first check of every call the model makes.

``admit`` runs before any intent is written (docs/design.md, guarantee 1): a call naming no
tool, or with arguments that do not validate, is refused there and the model reads why.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from stead.core.builders import CallAdmission
from stead.core.decide import ToolSpec
from stead.core.messages import ToolCall, ToolSchema
from stead.errors import UserError
from stead.tools._tool import Tool


class ToolRegistry:
    """An immutable set of tools, in the order they were given (the order the model sees)."""

    def __init__(self, tools: Iterable[Tool[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool[..., Any]] = {}
        if isinstance(tools, Tool):
            raise UserError(f"tools takes a list of tools, not one tool; pass tools=[{tools.name}]")
        if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
            raise UserError(f"tools takes a list of @tool functions, not {type(tools).__name__}")
        for t in tools:
            if not isinstance(t, Tool):
                raise UserError(f"{t!r} is not a tool; decorate the function with @tool")
            if t.name in self._tools:
                raise UserError(
                    f"two tools are named {t.name!r}; give one another name with @tool(name=...)"
                )
            self._tools[t.name] = t

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool[..., Any]]:
        return iter(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)})"

    def get(self, name: str) -> Tool[..., Any] | None:
        """The tool called ``name``, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Tool names, in registration order."""
        return list(self._tools)

    def sources(self) -> list[Any]:
        """The distinct sources (``Tool.source``) of tools that have one, in order."""
        found: dict[int, Any] = {}
        for t in self._tools.values():
            if t.source is not None:
                found.setdefault(id(t.source), t.source)
        return list(found.values())

    def specs(self) -> dict[str, ToolSpec]:
        """What ``stead.core.decide.next_step`` needs to know of each tool."""
        return {name: t.spec for name, t in self._tools.items()}

    def schemas(self) -> list[ToolSchema]:
        """The tools as the model sees them, in registration order."""
        return [t.schema() for t in self._tools.values()]

    def admit(self, call: ToolCall) -> CallAdmission:
        """May this call run? Canonical arguments if so, the model-facing reason if not."""
        t = self._tools.get(call.name)
        if t is None:
            available = ", ".join(self._tools) or "none"
            return CallAdmission(
                tool_call_id=call.id,
                arguments=call.arguments,
                effect_class=None,
                rejection=f"unknown tool {call.name!r}; available tools: {available}",
            )
        arguments, rejection = t.validate(call.arguments)
        return CallAdmission(
            tool_call_id=call.id,
            arguments=arguments,
            effect_class=t.effect_class,
            rejection=rejection,
        )
