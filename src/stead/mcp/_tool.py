"""An MCP server's tool as a stead ``Tool``: its schema as listed, its effect class from its
annotations, and a call that survives the server dying under it.

Effect class from the MCP tool annotations (overridable per tool, ``MCPTools(effects=...)``):

* ``readOnlyHint: true``  -> ``read_only``: the tool says it changes nothing, so a call in
  flight when the server or the worker died is simply made again.
* ``idempotentHint: true`` -> ``idempotent_write``: the tool says a repeat with the same
  arguments has no further effect; it is made again, with the same idempotency key in the
  request's ``_meta`` (``stead/idempotency_key``) for a server that deduplicates by it.
* anything else -> ``non_idempotent``. The MCP spec's defaults are ``readOnlyHint: false``
  and ``destructiveHint: true``, and annotations are hints a server may get wrong; the one
  class that is safe when wrong is the one that never runs a call twice blindly: an
  in-flight call is reconciled (a reconcile function, ``MCPTools(reconcile=...)``) or a person
  is asked. ``destructiveHint: false`` alone does not make a tool idempotent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

from stead._signal import AbortSignal
from stead.core.canonical import JSON, canonical_json, digest
from stead.core.effects import ToolFailed, ToolSucceeded, ToolUnknown
from stead.core.events import EffectClass
from stead.errors import Aborted, UserError
from stead.mcp._connection import MCPServerError, ServerLost
from stead.tools import (
    TOOL_NAME,
    ApprovalPolicy,
    HandlerShape,
    Param,
    Reconciler,
    Tool,
    ToolContext,
    check_options,
    describe_reconcile,
    serialize_result,
)

IDEMPOTENCY_META = "stead/idempotency_key"
"""The ``_meta`` key of every ``tools/call`` that carries the call's idempotency key."""

MAX_RESENDS = 2
"""How many times a read_only or idempotent_write call is sent again after its server went
away mid-call (each time on a restarted or reconnected server) before it fails."""

DEFAULT_TIMEOUT = 300.0
"""Seconds a ``tools/call`` may take unless ``MCPTools(timeout=..., timeouts=...)`` says
otherwise: a server that never answers must not hold a run forever."""

Recover = Callable[[int], Awaitable[None]]
"""Makes the connection again unless someone did since the given generation."""


def effect_from_annotations(annotations: Any) -> EffectClass:
    """``read_only`` for ``readOnlyHint``, ``idempotent_write`` for ``idempotentHint``, else
    ``non_idempotent`` (see the module's docstring for why)."""
    if annotations is None:
        return "non_idempotent"
    if getattr(annotations, "read_only_hint", None) is True:
        return "read_only"
    if getattr(annotations, "idempotent_hint", None) is True:
        return "idempotent_write"
    return "non_idempotent"


def definition_of(listed: Any) -> dict[str, Any]:
    """The listed tool as plain JSON (what the run records in ``tools_listed``)."""
    data = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {k: data[k] for k in ("description", "inputSchema", "annotations", "title") if k in data}


class MCPTool(Tool[..., Any]):
    """One tool of an MCP server. Built by ``MCPTools``; called through its connection."""

    def __init__(
        self,
        listed: Any,
        source: Any,
        *,
        name: str,
        effect: EffectClass | None,
        reconcile: Reconciler | None,
        requires_approval: bool | ApprovalPolicy,
        timeout: float,
        max_result: int | None = None,
    ) -> None:
        what = f"MCP tool {listed.name!r} of {source.name!r}"
        effect = effect_from_annotations(listed.annotations) if effect is None else effect
        check_options(effect, reconcile, requires_approval, what)
        if not TOOL_NAME.match(name):
            raise UserError(
                f"{what}: its name is not one model providers accept (1-64 letters, digits, "
                "'_' or '-'); give it another with MCPTools(rename={...})"
            )
        schema = dict(listed.input_schema or {"type": "object"})
        properties = schema.get("properties") or {}
        params = tuple(
            Param(name=p, field=f"p{i}", positional_only=False, is_context=False)
            for i, p in enumerate(properties)
        )
        self._shape = HandlerShape(params=params, model=BaseModel, parameters=schema)
        self._fn = self._call_server
        self._name = name
        self._remote_name: str = listed.name
        self._description = listed.description or ""
        self._effect = effect
        self._reconcile = reconcile
        self._reconcile_shape = (
            None if reconcile is None else describe_reconcile(reconcile, self._shape, what)
        )
        self._requires_approval = requires_approval
        # Not set by an MCP listing (Tool's own options, defaulted as @tool defaults them):
        self._queue: str | None = None
        self._timeout: float | None = timeout
        self._max_result = max_result
        self._retries = 0
        self._asks = None
        self._source = source
        self.definition: dict[str, Any] = {**definition_of(listed), "effect_class": effect}
        """What was listed, and the effect class it got: recorded with the run."""
        self._digest = digest({"name": name, **self.definition})
        self._validator = _validator(schema, f"MCP server {source.name!r}: tool {listed.name!r}")

    def __repr__(self) -> str:
        return f"<MCPTool {self._name!r} {self._effect} of {self._source.name!r}>"

    @property
    def source(self) -> Any:
        """The ``MCPTools`` this tool came from."""
        return self._source

    def validate(self, raw_arguments: str) -> tuple[str, str | None]:
        try:
            value = json.loads(raw_arguments or "{}")
        except ValueError as exc:
            return raw_arguments, f"the arguments are not JSON ({exc}); send a JSON object"
        if not isinstance(value, dict):
            return raw_arguments, "the arguments must be a JSON object"
        try:
            problems = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        except Exception as exc:  # a schema the listing check let through: not the model's fault
            return raw_arguments, (
                f"the arguments cannot be checked: the tool's schema is broken "
                f"({type(exc).__name__}); do not call {self._name} again"
            )
        if problems:
            where = "/".join(str(p) for p in problems[0].path) or "(the arguments)"
            return (
                raw_arguments,
                f"invalid arguments for {self._name}: {where}: {problems[0].message}",
            )
        try:
            return canonical_json(value), None
        except (TypeError, ValueError) as exc:
            return raw_arguments, f"the arguments cannot be stored: {exc}"

    def _values(self, arguments_json: str) -> dict[str, Any]:
        value = json.loads(arguments_json or "{}")
        return value if isinstance(value, dict) else {}

    async def invoke(
        self, arguments_json: str, ctx: ToolContext
    ) -> ToolSucceeded | ToolFailed | ToolUnknown:
        """Call the server. When it goes away mid-call, it is restarted (stdio) or reconnected
        (HTTP) and the call is recovered by its effect class: sent again with the same
        idempotency key (read_only, idempotent_write), or left unknown (non_idempotent) for
        its reconcile function or a person, as after a crash."""
        outcome: ToolSucceeded | ToolFailed | ToolUnknown
        outcome = await self._call_server(self._values(arguments_json), ctx)
        return outcome

    async def _call_server(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        meta = {
            IDEMPOTENCY_META: ctx.idempotency_key,
            "stead/run_id": ctx.run_id,
            "stead/tool_call_id": ctx.tool_call_id,
            "stead/attempt": ctx.attempt,
        }
        conn = self._source.connection
        for _ in range(MAX_RESENDS + 1):
            generation = conn.generation
            attempt, timer = self._bounded(ctx.signal)
            try:
                if not conn.alive:
                    await self._source.recover(generation)  # not sent yet: safe for any class
                    generation = conn.generation
                result = await conn.call_tool(self._remote_name, arguments, meta, attempt)
            except ServerLost as exc:
                await self._recover_quietly(generation)
                if self._effect == "non_idempotent":
                    return ToolUnknown(reason=f"{exc}; it may or may not have happened")
                continue
            except Aborted:
                if ctx.signal.aborted or not attempt.aborted:
                    raise  # the run's cancel, not this call's time limit
                return self._timed_out()
            except Exception as exc:  # an error the server sent, or an answer that is none
                text = " ".join(str(exc).split())[:500]
                return ToolFailed(
                    failure=f"the MCP server {self._source.name!r} answered {self._remote_name} "
                    f"with an error: {type(exc).__name__}: {text}"
                )
            finally:
                timer.cancel()
                ctx.signal.remove_callback(attempt.abort)
            try:
                return _outcome(result)
            except Exception as exc:  # a result the SDK let through that is not one
                return ToolFailed(
                    failure=f"the MCP server {self._source.name!r} sent a result that cannot "
                    f"be read ({type(exc).__name__})"
                )
        return ToolFailed(failure=f"the MCP server {self._source.name!r} kept going away")

    def _bounded(self, run: AbortSignal) -> tuple[AbortSignal, asyncio.TimerHandle]:
        """A signal for one attempt: aborted by the run's (a cancel) or by the time limit."""
        attempt = AbortSignal()
        run.add_callback(attempt.abort)
        limit = self._timeout if self._timeout is not None else DEFAULT_TIMEOUT
        why = f"timed out: the MCP server did not answer within {limit:g}s"
        timer = asyncio.get_running_loop().call_later(limit, attempt.abort, why)
        return attempt, timer

    def _timed_out(self) -> ToolFailed | ToolUnknown:
        """A call past its time limit; the SDK has sent ``notifications/cancelled``. A
        ``non_idempotent`` call may have happened on the server all the same: it stays in
        flight for its reconcile function or a person, as after a crash."""
        limit = self._timeout if self._timeout is not None else DEFAULT_TIMEOUT
        why = (
            f"the MCP server {self._source.name!r} did not answer {self._remote_name} within "
            f"{limit:g}s (its timeout); the call was cancelled"
        )
        if self._effect == "non_idempotent":
            return ToolUnknown(reason=f"{why}; it may or may not have happened")
        return ToolFailed(failure=f"timed out: {why}")

    async def _recover_quietly(self, generation: int) -> None:
        try:
            await self._source.recover(generation)
        except ServerLost:
            pass  # the next attempt (or the next call) tries again, and says so
        except asyncio.CancelledError:
            raise


def _validator(schema: dict[str, Any], what: str) -> Any:
    """The validator of a listed input schema. Every ``$ref`` in it must resolve within the
    schema, now: one that does not would fail each call's check instead (and a remote one
    is never fetched). ``MCPServerError`` naming the tool otherwise."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        cls = jsonschema.Draft202012Validator
        return cls({"type": "object"})
    except Exception as exc:  # a schema too deep, a $schema that is not text, ...
        raise MCPServerError(f"{what}: its input schema cannot be used: {exc!s:.200}") from exc
    validator = cls(schema)
    for ref in _refs(schema):
        try:
            validator._resolver.lookup(ref)
        except Exception as exc:
            raise MCPServerError(
                f"{what}: its input schema refers to {ref!r}, which does not resolve within "
                "it; the server's tools are refused until it lists a schema that does"
            ) from exc
    return validator


def _refs(schema: Any, depth: int = 0) -> list[str]:
    """Every ``$ref`` (and ``$dynamicRef``) string in a schema."""
    if depth > 64:
        return []
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                found.append(value)
            else:
                found.extend(_refs(value, depth + 1))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_refs(value, depth + 1))
    return found


def _outcome(result: Any) -> ToolSucceeded | ToolFailed:
    """A ``CallToolResult`` as what the model reads: its text, else its structured content."""
    parts: list[str] = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        parts.append(
            text
            if isinstance(text, str)
            else canonical_json(block.model_dump(mode="json", by_alias=True, exclude_none=True))
        )
    content = "\n".join(parts)
    structured: JSON = result.structured_content
    if not content and structured is not None:
        content = serialize_result(structured)
    if result.is_error:
        return ToolFailed(failure=content or "the MCP tool reported an error")
    return ToolSucceeded(content=content)
