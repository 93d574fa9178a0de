"""``SteadDurability``: the Pydantic AI capability that makes an agent's runs stead runs.

Built on Pydantic AI's public engine surface (``pydantic_ai.durable_exec``): the base wraps
the agent's model requests and leaf toolsets in durable operations; this engine's backend
(``_StepBackend``) hands each operation to the drive's journal (``stead.foreign``), which
answers from the log or lets stead's run loop perform it. Outside a stead drive the agent runs
as if the capability were not there.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterable, Awaitable, Callable, Sequence
from typing import Any, Literal

from pydantic_ai import RunContext
from pydantic_ai.capabilities import WrapRunHandler
from pydantic_ai.durable_exec import (
    IDENTITY_CODEC,
    BaseDurabilityCapability,
    BoundDurableOperation,
    DurabilityEngineSpec,
    DurableOperation,
    DurableOperationBackend,
    JournalOperationNamer,
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetCallToolParams,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
    durable_unit_scope,
)
from pydantic_ai.messages import (
    AgentStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    RetryPromptPart,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from stead.core.durability import Durability
from stead.core.events import ToolResultRecorded
from stead.core.limits import Budget, Limits
from stead.core.pricing import PriceTable
from stead.errors import UserError
from stead.foreign import Journal, current_journal, current_progress
from stead.pydantic_ai._convert import outcome_of, reply_of, response_of, tool_result_of
from stead.pydantic_ai._delegate import delegated_run
from stead.pydantic_ai._toolsets import ENGINE, Listing

__all__ = ["ENGINE", "SteadDurability"]


class _Bound(BoundDurableOperation[Any, Any, Any]):
    def __init__(
        self,
        operation: DurableOperation[Any, Any, Any],
        dispatch: Callable[[Any], Awaitable[Any]],
    ) -> None:
        self._operation = operation
        self._dispatch = dispatch

    @property
    def operation(self) -> DurableOperation[Any, Any, Any]:
        return self._operation

    async def __call__(self, params: Any, *, config: object | None = None) -> Any:
        return await self._dispatch(params)


async def _inline(operation: DurableOperation[Any, Any, Any], params: Any) -> Any:
    with durable_unit_scope():
        return await operation.handler(params)


class _StepBackend(DurableOperationBackend[Any]):
    """Every model request and tool call through the journal; everything else (discovery,
    event handling, capability operations) runs in place: it has no effect outside the
    process, and the run loop records what the model saw and what the tools did."""

    def __init__(self, agent_name: str, durability: SteadDurability) -> None:
        self._namer = JournalOperationNamer(agent_name)
        self._durability = durability

    def bind(
        self, operation: DurableOperation[Any, Any, Any]
    ) -> BoundDurableOperation[Any, Any, Any]:
        op = operation.operation_id

        async def dispatch(params: Any) -> Any:
            journal = current_journal()
            if journal is None:
                return await _inline(operation, params)
            if isinstance(op, ModelRequestId):
                return await self._model(operation, params, journal)
            if isinstance(op, ToolsetCallToolId) and isinstance(params, ToolsetCallToolParams):
                return await self._call(operation, params, journal)
            if isinstance(op, ToolsetGetToolsId) and op.toolset_kind == "mcp":
                listing = self._durability.listings.get(op.toolset_id)
                if listing is not None:
                    # The tools stead listed and the run recorded: the model is offered exactly
                    # what the run loop admits, and a replay the same tools as the live run.
                    return dict(listing.tool_defs)
            if isinstance(op, ToolsetValidateToolArgumentsId):
                result = await _inline(operation, params)
                outcome = outcome_of(result)
                call_id = getattr(params.ctx, "tool_call_id", None)
                if call_id and outcome.kind == "tool_failed":
                    journal.rejected(call_id, getattr(outcome, "failure", ""))
                return result
            return await _inline(operation, params)

        return _Bound(operation, dispatch)

    async def _model(
        self, operation: DurableOperation[Any, Any, Any], params: Any, journal: Journal
    ) -> Any:
        model_name = getattr(operation.operation_id, "model_name", "") or ""
        _check_offered(journal, getattr(params, "model_request_parameters", None))

        async def body() -> Any:
            return reply_of(await _inline(operation, params), model_name)

        recorded = await journal.model(body, retry=_retry_of(params))
        return response_of(recorded)

    async def _call(
        self,
        operation: DurableOperation[Any, Any, Any],
        params: ToolsetCallToolParams,
        journal: Journal,
    ) -> Any:
        call_id = params.ctx.tool_call_id or ""

        def same(recorded: str) -> bool:
            tool = params.tool
            try:
                if tool is not None:
                    return bool(
                        tool.args_validator.validate_json(recorded or "{}") == params.tool_args
                    )
                return bool(json.loads(recorded or "{}") == params.tool_args)
            except Exception:
                return False

        decided = journal.decided.get(call_id)
        if decided is not None and decided.decision == "approve":
            # A person approved it in stead (a policy Pydantic AI does not know of): the tool
            # sees it as Pydantic AI shows an approved call, so its own guard
            # (``if not ctx.tool_call_approved: raise ApprovalRequired()``) lets it run.
            approved = dataclasses.replace(params.ctx, tool_call_approved=True)
            params = dataclasses.replace(params, ctx=approved)

        async def body() -> Any:
            return outcome_of(await _inline(operation, params))

        recorded: ToolResultRecorded = await journal.tool(call_id, params.name, same, body)
        return tool_result_of(recorded)

    def config_for_tool(
        self, operation: DurableOperation[Any, Any, Any], *, tool: object | None, tool_name: str
    ) -> Any | Literal[False]:
        return None

    def registrations(self) -> Sequence[Callable[..., object]]:
        return ()


def _retry_of(params: Any) -> str:
    """What the model reads in the agent's request, after its last answer: when the agent
    asks again after an answer its output validator refused, the validator's feedback
    (Pydantic AI sends it as a retried tool return of the output tool, or as user text)."""
    messages = getattr(params, "messages", None) or ()
    last = messages[-1] if messages else None
    said = []
    for part in getattr(last, "parts", ()):
        if isinstance(part, RetryPromptPart):
            said.append(part.model_response())
        elif isinstance(part, UserPromptPart) and isinstance(part.content, str):
            said.append(part.content)
        elif isinstance(part, ToolReturnPart) and part.outcome == "retried":
            said.append(part.model_response_str())
    return "\n".join(said)


def _check_offered(journal: Journal, parameters: Any) -> None:
    """Refuse a request offering the model a tool whose settings, as Pydantic AI resolved
    them for this run (a ``SetToolMetadata`` selector that depends on the run, say), give an
    effect class other than the one stead records its calls under."""
    for td in getattr(parameters, "function_tools", None) or ():
        settings = (td.metadata or {}).get(ENGINE)
        tool = journal.agent.registry.get(td.name)
        if not isinstance(settings, dict) or "effect" not in settings or tool is None:
            continue
        if settings["effect"] != tool.spec.effect_class:
            raise UserError(
                f"run {journal.run_id}: the tool {td.name!r} is {settings['effect']!r} in this "
                f"run's metadata but was {tool.spec.effect_class!r} when the agent was given "
                "to stead, which records its calls under that class; give it one effect class "
                "(a SetToolMetadata selector must not depend on the run)"
            )


async def _forward_progress(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
    """The live deltas of a streamed model request, to the run's progress (text as it comes;
    a tool call's arguments as they come, after a line naming the call)."""
    async for event in events:
        sink = current_progress()
        if sink is None:
            continue
        if isinstance(event, PartStartEvent):  # a part opens with its first piece
            part = event.part
            if isinstance(part, TextPart) and part.content:
                sink(part.content)
            elif isinstance(part, ToolCallPart):
                sink(f"\n{part.tool_name}({part.args_as_json_str() if part.args else ''}")
        elif isinstance(event, PartDeltaEvent):
            delta = event.delta
            if isinstance(delta, TextPartDelta) and delta.content_delta:
                sink(delta.content_delta)
            elif isinstance(delta, ToolCallPartDelta) and isinstance(delta.args_delta, str):
                sink(delta.args_delta)


class SteadDurability(BaseDurabilityCapability[Any]):
    """Makes a Pydantic AI agent's runs durable stead runs.

    ``Agent(..., name="support", capabilities=[SteadDurability()])``, then give the agent to
    ``stead.Runtime(agents=[agent])`` (or the CLI's ``module:agent``) as a ``stead.Agent``.
    Per tool, ``metadata={"stead": {"effect": ..., "reconcile": ..., "timeout": ...,
    "retries": ..., "requires_approval": ...}}``. ``limits``, ``budget``, ``prices`` and
    ``durability`` are a ``stead.Agent``'s.
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="stead",
        durable_unit_noun="step",
        durable_container_noun="run",
        codec=IDENTITY_CODEC,  # units run in the run's own process; the log keeps its own JSON
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        journal_discovery=True,
        sequential_tools_in_durable_context=False,
        tool_config_key=ENGINE,
    )

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        budget: Budget | None = None,
        prices: PriceTable | None = None,
        durability: Durability = "strict",
        name: str | None = None,
    ) -> None:
        super().__init__(event_stream_handler=_forward_progress, name=name)
        self.limits = limits
        self.budget = budget
        self.prices = prices
        self.durability: Durability = durability
        self.listings: dict[str, Listing] = {}
        """What each MCP toolset listed when the agent was given to stead, by toolset id."""

    @property
    def in_durable_context(self) -> bool:
        return current_journal() is not None

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """A run started inside a stead tool call (agent delegation) is a child run."""
        delegated = await delegated_run(self._agent, ctx)
        if delegated is not None:
            return delegated
        return await super().wrap_run(ctx, handler=handler)

    def get_durable_operation_backend(self) -> DurableOperationBackend[Any]:
        return _StepBackend(self.name, self)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """A call that needs approval waits for the run's decision (``rt.approve``/``deny``,
        ``stead approve``): the run rests in ``awaiting_approval`` meanwhile, and this same
        run goes on once it is decided."""
        journal = current_journal()
        if journal is None or not requests.approvals:
            return None
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for call in requests.approvals:
            got = await journal.decision(call.tool_call_id)
            if isinstance(got, ToolResultRecorded):
                approvals[call.tool_call_id] = ToolDenied(got.content)
            else:
                approvals[call.tool_call_id] = True
        return DeferredToolResults(approvals=approvals)
