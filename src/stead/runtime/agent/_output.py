"""Structured output: ``Agent(output_type=...)`` asked for as a final-result tool, validated,
sent back when invalid, recorded on ``run_completed``.

How the model is asked, on every provider: one more tool, ``final_result``, whose arguments
are the output's JSON schema (a type that is not an object, ``list[City]`` or ``int``, is
wrapped as ``{"response": ...}``, as the APIs want an object). A tool and not a response
format, because on Anthropic a tool is the documented way to get JSON that follows a schema
(every Claude model, alongside the run's other tools), and on OpenAI Chat Completions
``response_format: json_schema`` in strict mode refuses the optional fields and defaults most
pydantic models have; one mechanism also means the answer is a recorded tool call whose
validation errors reach the model as an ``is_error`` tool result, as it reads every refusal.

Each reply is settled in the commit that records it (``settle``), so a crash can never find
an answer half-judged: an accepted final result completes the run (its other calls are not
run: the answer ends the run); an invalid one (a final result that fails the schema, or a text
reply that is not the output's JSON) is sent back with the errors, and the
``Limits.output_retries``-th + 1 invalid answer, or one in the last turn, fails the run
``output_invalid``. A text reply that *is* valid JSON of the output type is accepted too.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from stead.core.builders import (
    CallAdmission,
    EndAccepted,
    EndRetry,
    checked_end_events,
    output_events,
)
from stead.core.canonical import canonical_json
from stead.core.events import Event
from stead.core.fold import RunState
from stead.core.limits import Limits
from stead.core.messages import (
    AssistantMessage,
    ToolCall,
    ToolSchema,
    Usage,
)
from stead.core.output import OUTPUT_TOOL
from stead.core.settings import ModelSettings
from stead.errors import UserError

T = TypeVar("T")

SETTINGS_KEY = "model_settings"
"""Where ``run_created``'s config holds the run's own ``ModelSettings``."""
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass(frozen=True, slots=True, eq=False)
class OutputSpec(Generic[T]):
    """An agent's ``output_type``: its validator, its tool, and how a reply is judged."""

    output_type: Any
    adapter: TypeAdapter[T]
    schema: ToolSchema
    wrapped: bool
    """The value travels as ``{"response": value}`` (its schema is not an object's)."""

    @classmethod
    def of(cls, agent: str, output_type: Any) -> OutputSpec[Any] | None:
        """None for text (``None`` or ``str``); a ``UserError`` saying what to pass for a type
        pydantic cannot make a JSON schema of."""
        if output_type is None or output_type is str:
            return None
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = adapter.json_schema()
        except Exception as exc:
            raise UserError(
                f"Agent {agent!r}: output_type {output_type!r} cannot be turned into a JSON "
                f"schema ({type(exc).__name__}: {str(exc).splitlines()[0]}); pass a pydantic "
                "model, a dataclass, a TypedDict, or a list[...] / dict[str, ...] of them"
            ) from exc
        wrapped = schema.get("type") != "object"
        if wrapped:
            defs = schema.pop("$defs", None)
            schema = {
                "type": "object",
                "properties": {"response": schema},
                "required": ["response"],
                **({"$defs": defs} if defs else {}),
            }
        description = (
            "Give your final answer by calling this tool, once, with arguments that match "
            "its schema. It ends the run."
        )
        tool = ToolSchema(name=OUTPUT_TOOL, description=description, parameters=schema)
        return cls(output_type=output_type, adapter=adapter, schema=tool, wrapped=wrapped)

    # -- judging a reply ------------------------------------------------------------------

    def _validate(self, value: Any) -> tuple[Any, str | None]:
        """(the value as JSON, None), or (None, the errors as the model should read them)."""
        try:
            valid = self.adapter.validate_python(value)
        except ValidationError as exc:
            lines = []
            for err in exc.errors(include_url=False):
                loc = [str(p) for p in err["loc"]]
                if self.wrapped and loc[:1] == ["response"]:
                    loc = loc[1:]
                lines.append(f"- {'.'.join(loc) or '(the value)'}: {err['msg']}")
            return None, "\n".join(lines)
        return self.adapter.dump_python(valid, mode="json"), None

    def admit(
        self, message: AssistantMessage, admissions: Mapping[str, CallAdmission]
    ) -> tuple[dict[str, CallAdmission], dict[str, Any]]:
        """Admissions with the first final-result call judged by the schema (and exempt from
        the turn limits: they bound tools, not the answer), and the accepted value by call id.
        When it is valid, the reply's other calls are refused: the answer ends the run."""
        out: dict[str, CallAdmission] = dict(admissions)
        accepted: dict[str, Any] = {}
        first = next((c for c in message.tool_calls if c.name == OUTPUT_TOOL), None)
        if first is None:
            return out, accepted
        admission, data = self._admit_call(first)
        out[first.id] = admission
        if admission.rejection is None:
            accepted[first.id] = data
            for call in message.tool_calls:
                if call.id != first.id:
                    out[call.id] = _refused(
                        out[call.id], "not run: the final result in this reply ends the run"
                    )
        return out, accepted

    def _admit_call(self, call: ToolCall) -> tuple[CallAdmission, Any]:
        try:
            args = json.loads(call.arguments or "{}")
            arguments = canonical_json(args)
        except ValueError as exc:
            return _rejected(call, call.arguments, f"- the arguments are not JSON ({exc})"), None
        if not isinstance(args, dict):
            return _rejected(call, arguments, "- the arguments must be a JSON object"), None
        if self.wrapped and "response" not in args:
            missing = '- response: Field required (give {"response": ...})'
            return _rejected(call, arguments, missing), None
        data, errors = self._validate(args["response"] if self.wrapped else args)
        if errors is not None:
            return _rejected(call, arguments, errors), None
        admission = CallAdmission(
            tool_call_id=call.id,
            arguments=arguments,
            effect_class="read_only",
            rejection=None,
            output=True,
        )
        return admission, data

    def _from_text(self, text: str) -> tuple[Any, str | None]:
        """A text reply read as the output's JSON (a fenced block too)."""
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced:
            body = fenced.group(1)
        try:
            value = json.loads(body)
        except ValueError:
            return None, "- (the reply): it is text, not a call of the tool"
        return self._validate(value)

    # -- reading ----------------------------------------------------------------------------

    def load(self, data: Any) -> T:
        """The recorded JSON as the output type (a ``UserError`` if it no longer fits, e.g.
        after the type changed)."""
        try:
            return self.adapter.validate_python(data)
        except ValidationError as exc:
            raise UserError(
                f"the recorded output does not fit output_type {self.output_type!r} any more "
                f"({exc.error_count()} errors); read RunView.data_json for the JSON"
            ) from exc


@dataclass(frozen=True, slots=True)
class Ended:
    """An agent's own check (``Agent.end_check``) accepted the final answer; ``value`` is the
    run's output (the agent's ``output_type``, or text)."""

    value: Any


@dataclass(frozen=True, slots=True)
class Judged:
    """A reply's admissions as an agent's output judges them, and how to settle it."""

    output: OutputSpec[Any] | None
    turn_index: int
    message: AssistantMessage
    admissions: dict[str, CallAdmission]
    accepted: dict[str, Any]
    verdict: EndAccepted | EndRetry | None = None
    """The agent's own check of this final answer, when it has one (``Agent.end_check``)."""

    @property
    def ends(self) -> bool:
        """This reply ends the run if nothing else refuses it: a text reply of a text agent,
        or an accepted final result."""
        if self.output is None:
            return not self.message.tool_calls
        return bool(self.accepted)

    def checked(self, verdict: Ended | EndRetry) -> Judged:
        """This reply with the agent's own verdict on its answer (``Agent.end_check``)."""
        if isinstance(verdict, EndRetry):
            return dataclasses.replace(self, verdict=verdict)
        return dataclasses.replace(self, verdict=self._accepting(verdict.value))

    def _accepting(self, value: Any) -> EndAccepted:
        if self.output is None:
            return EndAccepted(output=value if isinstance(value, str) else str(value))
        data = self.output.adapter.dump_python(value, mode="json")
        return EndAccepted(output=canonical_json(data), data=data)

    def settle(self, state: RunState, usage: Usage, limits: Limits) -> list[Event]:
        """The events that settle this reply's answer (``core.builders.output_events``),
        a text reply read as the output's JSON first; nothing for a text agent. With the
        agent's own verdict on it, that verdict's (``checked_end_events``)."""
        if self.verdict is not None:
            settled = self._settled(state, usage, limits)
            return checked_end_events(
                state, self.turn_index, self.message, settled, self.verdict, usage, limits
            )
        return self._settled(state, usage, limits)

    def _settled(self, state: RunState, usage: Usage, limits: Limits) -> list[Event]:
        if self.output is None:
            return []
        text = None if self.message.tool_calls else self.output._from_text(self.message.text)
        return output_events(
            state,
            self.turn_index,
            self.message,
            self.admissions,
            self.accepted,
            text,
            usage,
            limits,
        )


def judge(
    output: OutputSpec[Any] | None,
    turn_index: int,
    message: AssistantMessage,
    admissions: dict[str, CallAdmission],
) -> Judged:
    """The run loop's one call per reply (``OutputSpec.admit``; as given for text)."""
    accepted: dict[str, Any] = {}
    if output is not None:
        admissions, accepted = output.admit(message, admissions)
    return Judged(output, turn_index, message, admissions, accepted)


def output_schemas(output: OutputSpec[Any] | None) -> tuple[ToolSchema, ...]:
    """The final-result tool an agent's requests carry, if it has an ``output_type``."""
    return () if output is None else (output.schema,)


def run_settings(agent: ModelSettings, config: Mapping[str, Any]) -> ModelSettings:
    """The settings a run's calls are sent with: the agent's, overridden by the run's own
    (``Runtime.start(settings=...)``, recorded in ``run_created``'s config)."""
    own = config.get(SETTINGS_KEY)
    return agent.merged(ModelSettings.from_json(own)) if own else agent


def with_settings(
    config: dict[str, Any] | None, settings: ModelSettings | None
) -> dict[str, Any] | None:
    """A run's config with its own model settings in it (``Runtime.start(settings=...)``)."""
    if settings is None:
        return config
    if not isinstance(settings, ModelSettings):
        raise UserError(
            f"start() takes settings=stead.ModelSettings(...), not {type(settings).__name__}"
        )
    return {**(config or {}), SETTINGS_KEY: settings.to_json()}


def _rejected(call: ToolCall, arguments: str, errors: str) -> CallAdmission:
    text = (
        f"{OUTPUT_TOOL} was not accepted, so the run is not over:\n{errors}\n"
        f"Call {OUTPUT_TOOL} again with corrected arguments."
    )
    return CallAdmission(
        tool_call_id=call.id,
        arguments=arguments,
        effect_class="read_only",
        rejection=text,
        output=True,
    )


def _refused(admission: CallAdmission, why: str) -> CallAdmission:
    return CallAdmission(
        tool_call_id=admission.tool_call_id,
        arguments=admission.arguments,
        effect_class=admission.effect_class,
        rejection=admission.rejection or why,
    )
