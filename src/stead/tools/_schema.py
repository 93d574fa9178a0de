"""A tool described by a JSON schema and called through a function of its own: what an
integration makes of another framework's tool (``stead.pydantic_ai``) so that the run loop
records, recovers and replays its calls as it does a ``@tool``'s.

The framework validates the arguments itself (it knows the tool's real types); stead checks
only that they are a JSON object it can store, and keeps them canonical.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from stead.core.canonical import canonical_json, digest
from stead.core.effects import ToolFailed, ToolOutcome
from stead.core.events import EffectClass
from stead.core.result_bound import check_max_result
from stead.errors import UserError
from stead.tools._bounded import ToolTimedOut, run_bounded
from stead.tools._context import ToolContext
from stead.tools._signature import HandlerShape, Param, describe_reconcile
from stead.tools._tool import NO_QUESTION, TOOL_NAME, ApprovalPolicy, Reconciler, Tool, _check_spec

Call = Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutcome]]
"""Performs one attempt: the validated arguments and the call's context in, its outcome out."""


class SchemaTool(Tool[..., Any]):
    """A tool given by name, description and JSON schema, performed by ``call``.

    The options are ``@tool``'s and are checked the same way (``effect``, ``reconcile``,
    ``requires_approval``, ``queue``, ``timeout``, ``retries``, ``max_result``);
    ``reconcile`` is called as a ``@tool``'s is: with the arguments it names and a
    ``ToolContext``.
    """

    def __init__(
        self,
        name: str,
        parameters: dict[str, Any],
        call: Call,
        *,
        description: str = "",
        effect: EffectClass = "non_idempotent",
        reconcile: Reconciler | None = None,
        requires_approval: bool | ApprovalPolicy = False,
        queue: str | None = None,
        timeout: float | None = None,
        retries: int = 0,
        max_result: int | None = None,
        what: str = "",
    ) -> None:
        what = what or f"tool {name!r}"
        effect = _check_spec(
            effect, reconcile, requires_approval, queue, timeout, retries, NO_QUESTION, what
        )
        if max_result is not None:
            check_max_result(max_result, f"{what}: max_result")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise UserError(
                f"{what}: its name is not one model providers accept (1-64 letters, digits, "
                "'_' or '-')"
            )
        schema = dict(parameters or {"type": "object"})
        properties = schema.get("properties") or {}
        params = tuple(
            Param(name=p, field=f"p{i}", positional_only=False, is_context=False)
            for i, p in enumerate(properties)
        )
        self._shape = HandlerShape(params=params, model=BaseModel, parameters=schema)
        self._fn = call
        self._perform = call
        self._name = name
        self._description = description
        self._effect = effect
        self._reconcile = reconcile
        self._reconcile_shape = (
            None if reconcile is None else describe_reconcile(reconcile, self._shape, what)
        )
        self._requires_approval = requires_approval
        self._queue = queue
        self._timeout = timeout
        self._max_result = max_result
        self._retries = retries
        self._asks = None
        self._digest = digest(
            {
                "name": name,
                "description": description,
                "parameters": schema,
                "effect_class": effect,
            }
        )

    def __repr__(self) -> str:
        return f"<SchemaTool {self._name!r} {self._effect}>"

    def validate(self, raw_arguments: str) -> tuple[str, str | None]:
        try:
            value = json.loads(raw_arguments or "{}")
        except ValueError as exc:
            return raw_arguments, f"the arguments are not JSON ({exc}); send a JSON object"
        if not isinstance(value, dict):
            return raw_arguments, "the arguments must be a JSON object"
        try:
            return canonical_json(value), None
        except (TypeError, ValueError) as exc:
            return raw_arguments, f"the arguments cannot be stored: {exc}"

    def _values(self, arguments_json: str) -> dict[str, Any]:
        value = json.loads(arguments_json or "{}")
        return value if isinstance(value, dict) else {}

    async def invoke(self, arguments_json: str, ctx: ToolContext) -> ToolOutcome:
        values = self._values(arguments_json)
        if self._timeout is None:
            return await self._perform(values, ctx)
        try:
            outcome: ToolOutcome = await run_bounded(
                lambda c: self._perform(values, c), ctx, self._timeout
            )
        except ToolTimedOut as exc:
            return ToolFailed(failure=str(exc))
        return outcome
