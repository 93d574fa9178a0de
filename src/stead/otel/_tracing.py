"""``Tracing``: the runtime observer that turns drives into OpenTelemetry spans and metrics.

Spans follow the GenAI semantic conventions: ``invoke_agent <agent>`` for each drive of a
run, ``chat <model>`` for each model call and ``execute_tool <tool>`` for each tool call, its
children. What a run does besides (a recovery, a reconcile verdict, an approval asked for or
decided, a cancel) is a span event on the drive's span. Only the OpenTelemetry API is used:
the application picks the SDK and exporter, and with none installed every call is a no-op.

A run outlives a process: the drive's span context is written to the run's log
(``trace_linked``), and the next drive, in whatever process, starts its span as a child of
the last one recorded and links to it, so a run resumed after a crash stays one trace.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from stead._signal import AbortSignal
from stead.core import effects as fx
from stead.core.events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunFailed,
    RunRecovered,
    ToolOutcomeUnknown,
    ToolReconciled,
    TraceLinked,
)
from stead.core.fold import RunState
from stead.core.ledger import Attachment
from stead.core.messages import message_to_json
from stead.runtime.executors import Executor
from stead.runtime.loop import DriveStart

SCOPE = "stead"
_FROM_OUTSIDE = (ApprovalDecided, RunCancelRequested, RunRecovered)
"""Events written outside a drive's own commits (by a person, a caller, the drive's start)."""
_PROPAGATOR = TraceContextTextMapPropagator()


class Tracing:
    """Give it to ``Runtime(observers=[Tracing()])``.

    ``capture_content``: record prompts, replies, tool arguments and results on the spans
    (``gen_ai.input.messages``, ``gen_ai.tool.call.arguments``...). Off by default: they
    may hold what your users typed and what your tools returned."""

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        capture_content: bool = False,
    ) -> None:
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.capture_content = capture_content
        self.steps = meter.create_counter(
            "stead.run.steps", unit="{commit}", description="Commits of run events"
        )
        self.effects = meter.create_counter(
            "stead.run.effects", unit="{effect}", description="Model and tool calls made"
        )
        self.recoveries = meter.create_counter(
            "stead.run.recoveries",
            unit="{recovery}",
            description="Runs taken over from a dead or lapsed worker, and reconcile verdicts",
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration"
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per call"
        )

    def begin(self, start: DriveStart) -> DriveTrace:
        return DriveTrace(self, start)


class DriveTrace:
    """One drive's span, and the executor wrapper that makes its children."""

    def __init__(self, tracing: Tracing, start: DriveStart) -> None:
        self.tracing = tracing
        state = start.owned.state
        self.run_id = state.run_id
        self.agent = start.agent
        linked = [s.event for s in start.log if isinstance(s.event, TraceLinked)]
        links: list[Link] = []
        parent = None
        if linked:  # a later drive: continue the run's trace, in whatever process it began
            parent = _PROPAGATOR.extract({"traceparent": linked[-1].traceparent})
            earlier = trace.get_current_span(parent).get_span_context()
            links.append(Link(earlier, {"stead.link": "previous_drive"}))
        self.attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": start.agent.name,
            "gen_ai.conversation.id": state.session_id or state.run_id,
            "stead.run.id": state.run_id,
        }
        provider = _provider(start.agent.model)
        if provider:
            self.attributes["gen_ai.provider.name"] = provider
        self.span = tracing.tracer.start_span(
            f"invoke_agent {start.agent.name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=self.attributes,
            links=links,
        )
        self.context = trace.set_span_in_context(self.span)
        self.started = time.monotonic()
        # What happened since the last drive's span: a person's decision, a cancel request,
        # this drive's own run_recovered (written before the drive is observed).
        last = max((s.seq for s in start.log if isinstance(s.event, TraceLinked)), default=0)
        for s in start.log:
            if s.seq > last and isinstance(s.event, _FROM_OUTSIDE):
                _note(self, s.event)

    def notes(self) -> list[Event]:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=self.context)
        return [TraceLinked(traceparent=carrier["traceparent"])]

    def executor(self, inner: Executor) -> Executor:
        return TracedExecutor(inner, self)

    def committed(self, state: RunState, events: Sequence[Event]) -> None:
        self.tracing.steps.add(1, {"gen_ai.agent.name": self.agent.name})
        for e in events:
            _note(self, e)

    def ended(self, state: RunState, error: BaseException | None) -> None:
        status = state.status.value if state.status is not None else ""
        self.span.set_attribute("stead.run.status", status)
        u = state.usage
        self.span.set_attribute("gen_ai.usage.input_tokens", u.input_tokens)
        self.span.set_attribute("gen_ai.usage.output_tokens", u.output_tokens)
        if error is not None:
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            self.span.set_attribute("error.type", type(error).__name__)
        elif status == "failed":
            self.span.set_status(Status(StatusCode.ERROR, str((state.error or {}).get("code"))))
        self.tracing.duration.record(
            time.monotonic() - self.started,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent.name},
        )
        self.span.end()


def _note(drive: DriveTrace, e: Event) -> None:
    """A span event (and a metric) for what happens to a run beside its calls."""
    span = drive.span
    match e:
        case RunRecovered():
            drive.tracing.recoveries.add(1, {"stead.recovery": "run_recovered"})
            span.add_event("stead.run.recovered", {"stead.previous_owner": e.previous_owner})
        case ToolReconciled():
            drive.tracing.recoveries.add(1, {"stead.recovery": f"reconciled_{e.verdict}"})
            span.add_event(
                "stead.tool.reconciled",
                {"gen_ai.tool.call.id": e.tool_call_id, "stead.verdict": e.verdict},
            )
        case ToolOutcomeUnknown():
            span.add_event("stead.tool.outcome_unknown", {"gen_ai.tool.call.id": e.tool_call_id})
        case ApprovalRequested():
            attributes = {"gen_ai.tool.call.id": e.tool_call_id, "stead.reason": e.reason}
            span.add_event("stead.approval.requested", attributes)
        case ApprovalDecided():
            attributes = {"gen_ai.tool.call.id": e.tool_call_id, "stead.decision": e.decision}
            span.add_event("stead.approval.decided", attributes)
        case RunCancelRequested():
            span.add_event("stead.run.cancel_requested", {"stead.reason": e.reason})
        case RunCancelled():
            span.add_event("stead.run.cancelled", {"stead.reason": e.reason})
        case RunCompleted():
            span.set_attribute("stead.stop_reason", e.stop_reason)
        case RunFailed():
            span.set_attribute("error.type", e.code)
        case _:
            pass


class TracedExecutor:
    """An ``Executor`` that wraps each model call in a ``chat`` span and each tool call in an
    ``execute_tool`` span; everything else goes straight to the one it wraps."""

    def __init__(self, inner: Executor, drive: DriveTrace) -> None:
        self.inner = inner
        self.drive = drive

    def __getattr__(self, name: str) -> Any:
        # What the port leaves optional (a pool's ``recover``, ``acknowledge``, ``recorded``,
        # ``authoritative``; the Runtime's ``deps``) is the wrapped executor's.
        return getattr(self.inner, name)

    async def run(
        self, assignment: fx.Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> fx.Outcome:
        body = assignment.body
        tracing = self.drive.tracing
        if isinstance(body, fx.ModelBody):
            name, attributes = f"chat {body.model}", _chat_attributes(self.drive, body, local)
            kind = SpanKind.CLIENT
        else:
            name, attributes = f"execute_tool {body.tool_name}", _tool_attributes(body)
            kind = SpanKind.INTERNAL
            if tracing.capture_content:
                attributes["gen_ai.tool.call.arguments"] = body.arguments
        started = time.monotonic()
        span = tracing.tracer.start_span(
            name, context=self.drive.context, kind=kind, attributes=attributes
        )
        try:
            outcome = await self.inner.run(assignment, signal=signal, local=local)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.set_attribute("error.type", type(exc).__name__)
            span.end()
            raise
        _settled(tracing, span, outcome)
        metric = {"gen_ai.operation.name": attributes["gen_ai.operation.name"]}
        tracing.effects.add(1, {**metric, "stead.outcome": outcome.kind})
        tracing.duration.record(time.monotonic() - started, metric)
        span.end()
        return outcome

    async def dispatch(
        self, assignment: fx.Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> bool:
        return await self.inner.dispatch(assignment, signal=signal, local=local)

    async def outcome(self, key: fx.AssignmentKey) -> fx.Outcome:
        return await self.inner.outcome(key)

    def attach(self, key: fx.AssignmentKey) -> Attachment:
        return self.inner.attach(key)

    async def abort(self, key: fx.AssignmentKey) -> bool:
        return await self.inner.abort(key)

    async def cancel(self, key: fx.AssignmentKey, reason: str) -> None:
        await self.inner.cancel(key, reason)


def _chat_attributes(drive: DriveTrace, body: fx.ModelBody, local: object) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": body.model,
        "gen_ai.agent.name": drive.agent.name,
    }
    if "gen_ai.provider.name" in drive.attributes:
        attributes["gen_ai.provider.name"] = drive.attributes["gen_ai.provider.name"]
    cap = body.request.get("max_output_tokens")
    if isinstance(cap, int):
        attributes["gen_ai.request.max_tokens"] = cap
    if drive.tracing.capture_content:
        attributes["gen_ai.system_instructions"] = str(body.request.get("system", ""))
        attributes["gen_ai.input.messages"] = json.dumps(body.request.get("messages", []))
    return attributes


def _tool_attributes(body: fx.ToolBody) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": body.tool_name,
        "gen_ai.tool.call.id": body.tool_call_id,
        "gen_ai.tool.type": "function",
        "stead.tool.effect_class": body.effect_class,
        "stead.tool.idempotency_key": body.idempotency_key,
        "stead.tool.attempt": body.attempt,
    }


def _settled(tracing: Tracing, span: Span, outcome: fx.Outcome) -> None:
    match outcome:
        case fx.ModelSucceeded():
            response = outcome.response
            u = response.usage
            span.set_attribute("gen_ai.response.model", response.model)
            span.set_attribute("gen_ai.response.finish_reasons", [response.message.stop_reason])
            span.set_attribute("gen_ai.usage.input_tokens", u.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", u.output_tokens)
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", u.cache_read_input_tokens)
            span.set_attribute(
                "gen_ai.usage.cache_creation.input_tokens", u.cache_creation_input_tokens
            )
            for kind, n in (("input", u.input_tokens), ("output", u.output_tokens)):
                tracing.tokens.record(n, {"gen_ai.token.type": kind})
            if tracing.capture_content:
                reply = json.dumps([message_to_json(response.message)])
                span.set_attribute("gen_ai.output.messages", reply)
        case fx.ModelFailed():
            span.set_attribute("error.type", outcome.code)
            span.set_status(Status(StatusCode.ERROR, outcome.message[:200]))
        case fx.ToolSucceeded():
            if tracing.capture_content:
                span.set_attribute("gen_ai.tool.call.result", outcome.content)
        case fx.ToolFailed():
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, outcome.failure[:200]))
        case fx.ToolUnknown():
            span.add_event("stead.tool.outcome_unknown", {"stead.reason": outcome.reason})
            span.set_attribute("error.type", "outcome_unknown")
        case fx.ToolDeferred():
            span.add_event("stead.tool.deferred", {"stead.ask": outcome.ask})
        case fx.Cancelled():
            span.add_event("stead.cancelled", {"stead.reason": outcome.reason})
            span.set_attribute("error.type", "cancelled")


def _provider(model: object) -> str:
    """``anthropic`` or ``openai`` when the model says (a model string, an SDK adapter)."""
    spec = str(getattr(model, "spec", "") or type(model).__module__)
    for name in ("anthropic", "openai"):
        if name in spec:
            return name
    return ""
