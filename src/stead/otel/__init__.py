"""OpenTelemetry traces and metrics of runs (the optional extra ``stead[otel]``: the API only).

    rt = stead.Runtime(store, agents=[agent], observers=[Tracing()])

Spans per the GenAI semantic conventions (``invoke_agent``, ``chat``, ``execute_tool``), span
events for recoveries, reconciles, approvals and cancels, and one trace per run across
crashes and processes (the trace context is kept in the run's log). See ``_tracing``.
"""

from stead.otel._tracing import DriveTrace, TracedExecutor, Tracing

__all__ = ["DriveTrace", "TracedExecutor", "Tracing"]
