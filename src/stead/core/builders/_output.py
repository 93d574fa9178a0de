"""The events that settle a structured answer (``Agent(output_type=...)``), in the commit that
records its reply: the run completed with the value, the validation errors sent back, or the
run failed past ``Limits.output_retries``. The value is validated at the edge
(``stead.runtime.agent._output``, with the agent's type); what that found is all this needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from stead.core.builders._admission import CallAdmission
from stead.core.builders._run import run_failed_event
from stead.core.canonical import JSON, canonical_json
from stead.core.decide import CallModel, automatic_events
from stead.core.events import Event, NoticeInjected, RunCompleted, ToolResultRecorded
from stead.core.fold import RunState
from stead.core.limits import Limits
from stead.core.messages import AssistantMessage, NoticeMessage, ToolResultMessage, Usage
from stead.core.output import OUTPUT_INVALID, OUTPUT_TOOL

NOTICE_MARK: Final = "Your answer is not a valid final result."
"""Opens the notice a text reply that is no valid output gets (and counts it as a retry)."""
ACCEPTED: Final = "Final result recorded; the run is complete."
"""The final-result call's own result, so the history stays well formed."""


def output_events(
    state: RunState,
    turn_index: int,
    message: AssistantMessage,
    admissions: Mapping[str, CallAdmission],
    accepted: Mapping[str, Any],
    text: tuple[Any, str | None] | None,
    usage: Usage,
    limits: Limits,
) -> list[Event]:
    """The events that settle this reply's answer (after ``reply_events``'s), or none (tools
    to run first). ``accepted``: the valid final result's JSON by call id; ``text``: for a
    reply without calls, its text read as the output's JSON, ``(value, None)`` or
    ``(None, the errors)``."""
    total = state.usage + usage
    outputs = [c for c in message.tool_calls if c.name == OUTPUT_TOOL]
    answer = next((c for c in outputs if c.id in accepted), None)
    if answer is not None:
        data = accepted[answer.id]
        result = ToolResultRecorded(
            turn_index=turn_index, tool_call_id=answer.id, name=OUTPUT_TOOL, content=ACCEPTED
        )
        done = RunCompleted(
            output=canonical_json(data), stop_reason=OUTPUT_TOOL, usage=total, data=data
        )
        return [result, done]
    last = turn_index >= limits.max_turns - 1
    if outputs:
        problem: str | None = admissions[outputs[0].id].rejection
    elif not message.tool_calls:
        data, problem = text if text is not None else (None, "- (the reply): no text")
        if problem is None:
            return [
                RunCompleted(
                    output=message.text, stop_reason=message.stop_reason, usage=total, data=data
                )
            ]
    elif not last:
        return []  # only the run's own tools: they run, the answer comes later
    else:
        problem = None
    retries = _retries(state)
    if last or retries >= limits.output_retries:
        why = (
            f"the last turn (max_turns {limits.max_turns}) gave no valid final result"
            if last
            else f"{retries + 1} invalid answers (Limits.output_retries is {limits.output_retries})"
        )
        detail = f": {problem}" if problem else ""
        return [
            run_failed_event(
                state,
                OUTPUT_INVALID,
                "model",
                f"no valid structured output: {why}{detail}",
                {"invalid_answers": retries + 1, "output_retries": limits.output_retries},
            )
        ]
    if message.tool_calls:
        return []  # the rejection is the call's error result; the next turn follows
    nxt = turn_index + 1
    opening = automatic_events(
        state,
        CallModel(
            turn_index=nxt, turn_recorded=False, attempt=1, final=nxt >= limits.max_turns - 1
        ),
    )
    notice = (
        f"{NOTICE_MARK} Give it by calling the {OUTPUT_TOOL} tool with arguments that "
        f"match its schema.\n{problem}"
    )
    return [
        *opening,
        NoticeInjected(turn_index=nxt, content=notice, reason=OUTPUT_INVALID),
    ]


def _retries(state: RunState) -> int:
    """Invalid answers sent back so far: refused final results and text-reply notices."""
    n = 0
    for m in state.messages:
        if (isinstance(m, ToolResultMessage) and m.name == OUTPUT_TOOL and m.is_error) or (
            isinstance(m, NoticeMessage) and m.content.startswith(NOTICE_MARK)
        ):
            n += 1
    return n


@dataclass(frozen=True, slots=True)
class EndAccepted:
    """The agent's own check of its final answer (a Pydantic AI output validator) accepted
    it, and gave the run's output: ``output`` as text, ``data`` as the structured value."""

    output: str
    data: JSON = None


@dataclass(frozen=True, slots=True)
class EndRetry:
    """The agent's own check refused the final answer: ``message`` is what the model reads
    before it answers again (Pydantic AI's ``ModelRetry`` in an output validator)."""

    message: str
    last: bool = False
    """The agent gave up (its own retries are spent): the run fails with ``message``."""


def checked_end_events(
    state: RunState,
    turn_index: int,
    message: AssistantMessage,
    settled: list[Event],
    verdict: EndAccepted | EndRetry,
    usage: Usage,
    limits: Limits,
) -> list[Event]:
    """The events that settle a final answer an agent checked itself before the run ended,
    in place of ``settled`` (``output_events``'s for the same reply). Accepted: the run
    completes with the agent's output. Refused: the answer is sent back as an invalid one
    (the final result's ``is_error`` result, or a notice opening the next turn), counted
    against ``Limits.output_retries`` like any invalid answer."""
    kept = [e for e in settled if not isinstance(e, RunCompleted)]
    if isinstance(verdict, EndAccepted):
        total = state.usage + usage
        typed = any(isinstance(e, RunCompleted) for e in settled)
        stop = OUTPUT_TOOL if typed else message.stop_reason
        done = RunCompleted(output=verdict.output, stop_reason=stop, usage=total, data=verdict.data)
        return [*kept, done]
    retries = _retries(state)
    last = turn_index >= limits.max_turns - 1
    if verdict.last or last or retries >= limits.output_retries:
        why = (
            "its last try"
            if verdict.last
            else f"the last turn (max_turns {limits.max_turns})"
            if last
            else f"{retries + 1} refused answers (Limits.output_retries is {limits.output_retries})"
        )
        return [
            run_failed_event(
                state,
                OUTPUT_INVALID,
                "model",
                f"no valid output: the agent's output check refused the answer in {why}: "
                f"{verdict.message}",
                {"invalid_answers": retries + 1, "output_retries": limits.output_retries},
            )
        ]
    accepted = next(
        (e for e in kept if isinstance(e, ToolResultRecorded) and e.name == OUTPUT_TOOL), None
    )
    if accepted is not None:
        refused = ToolResultRecorded(
            turn_index=turn_index,
            tool_call_id=accepted.tool_call_id,
            name=OUTPUT_TOOL,
            content=verdict.message,
            is_error=True,
            source="rejected",
        )
        return [refused if e is accepted else e for e in kept]
    nxt = turn_index + 1
    opening = automatic_events(
        state,
        CallModel(
            turn_index=nxt, turn_recorded=False, attempt=1, final=nxt >= limits.max_turns - 1
        ),
    )
    notice = NoticeInjected(
        turn_index=nxt, content=f"{NOTICE_MARK} {verdict.message}", reason=OUTPUT_INVALID
    )
    return [*kept, *opening, notice]
