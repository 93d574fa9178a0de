"""``ModelSettings``: how a model is asked (temperature, top_p, stop sequences, tool choice...).

Provider-neutral and plain data: an agent has defaults, a run may override some of them
(``Runtime.start(..., settings=...)``, recorded in ``run_created``'s config), and the settings
a turn was really sent with are recorded on its ``assistant_message`` (``settings``), so a
replayed or forked turn is explained by its log (``stead runs show`` prints them). Each
adapter maps them to its API (``stead.providers._wire_anthropic`` / ``_wire_openai``).

Every field is checked where the object is built: a wrong type is a ``UserError`` that says
what to pass, at the line that wrote it, not a 400 from the provider halfway through a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from stead.core.canonical import json_problem
from stead.errors import UserError

TOOL_CHOICES: Final = ("auto", "none", "required")
"""``tool_choice`` takes one of these, or the name of one tool (the model must call it)."""


def _show(value: object) -> str:
    return f"{type(value).__name__} {value!r:.40}"


def _number(name: str, value: object, lo: float, hi: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UserError(f"ModelSettings.{name} takes a number (or None), not {_show(value)}")
    if not lo <= value <= hi:
        raise UserError(f"ModelSettings.{name} must be between {lo:g} and {hi:g}, not {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Sampling and tool-use settings for model calls. ``None`` leaves the provider's default.

    ``extra`` holds provider-specific parameters sent as they are in the request body
    (``{"top_k": 5}`` for Anthropic, ``{"seed": 7}`` for OpenAI): plain JSON only.
    """

    temperature: float | None = None
    """0 to 2 (Anthropic accepts up to 1)."""
    top_p: float | None = None
    """Nucleus sampling, 0 to 1."""
    max_output_tokens: int | None = None
    """Tokens one reply may generate; wins over ``Agent(max_output_tokens=...)``."""
    stop_sequences: tuple[str, ...] | None = None
    """Text that ends a reply when generated."""
    tool_choice: str | None = None
    """``auto``, ``none``, ``required`` (some tool must be called), or a tool's name."""
    parallel_tool_calls: bool | None = None
    """False asks for at most one tool call per reply."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific body parameters, sent as given."""
    _json: dict[str, Any] = field(init=False, repr=False, compare=False, default_factory=dict)
    """``to_json``, computed once: a run's requests are encoded every turn."""

    def __post_init__(self) -> None:
        _number("temperature", self.temperature, 0.0, 2.0)
        _number("top_p", self.top_p, 0.0, 1.0)
        n = self.max_output_tokens
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
            raise UserError(
                f"ModelSettings.max_output_tokens takes an int of at least 1 (or None), "
                f"not {_show(n)}"
            )
        stops = self.stop_sequences
        if stops is not None:
            if isinstance(stops, str) or not isinstance(stops, list | tuple):
                raise UserError(
                    f"ModelSettings.stop_sequences takes a list of strings (or None), "
                    f"not {_show(stops)}"
                )
            if not all(isinstance(s, str) and s for s in stops):
                raise UserError("ModelSettings.stop_sequences must all be non-empty strings")
            object.__setattr__(self, "stop_sequences", tuple(stops))
        choice = self.tool_choice
        if choice is not None and (not isinstance(choice, str) or not choice):
            raise UserError(
                f"ModelSettings.tool_choice takes 'auto', 'none', 'required' or a tool's name "
                f"(or None), not {_show(choice)}"
            )
        if self.parallel_tool_calls is not None and not isinstance(self.parallel_tool_calls, bool):
            raise UserError(
                f"ModelSettings.parallel_tool_calls takes True, False or None, "
                f"not {_show(self.parallel_tool_calls)}"
            )
        if not isinstance(self.extra, dict):
            raise UserError(f"ModelSettings.extra takes a dict, not {_show(self.extra)}")
        problem = json_problem(self.extra)
        if problem is not None or not all(isinstance(k, str) for k in self.extra):
            raise UserError(f"ModelSettings.extra must be plain JSON: {problem or 'keys'}")
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "_json" or value is None or (f.name == "extra" and not value):
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        object.__setattr__(self, "_json", out)

    def merged(self, over: ModelSettings | None) -> ModelSettings:
        """These settings with every field ``over`` sets taken from it (``extra`` merged)."""
        if over is None:
            return self
        changes: dict[str, Any] = {
            f.name: getattr(over, f.name)
            for f in fields(over)
            if f.name not in ("extra", "_json") and getattr(over, f.name) is not None
        }
        return replace(self, **changes, extra={**self.extra, **over.extra})

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as plain JSON (empty for the defaults)."""
        return dict(self._json)

    def sampling(self, *, stop: str) -> dict[str, Any]:
        """What every API names alike: temperature, top_p; and the stop sequences under the
        API's ``stop`` name. The adapters add what differs (``stead.providers._wire_*``)."""
        params: dict[str, Any] = {
            k: v for k in ("temperature", "top_p") if (v := getattr(self, k)) is not None
        }
        if self.stop_sequences:
            params[stop] = list(self.stop_sequences)
        return params

    def with_extra(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with ``extra`` as the SDK's ``extra_body`` (merged into the JSON body)."""
        return {**params, "extra_body": dict(self.extra)} if self.extra else params

    @classmethod
    def from_json(cls, data: object) -> ModelSettings:
        """The inverse of ``to_json`` (a ``UserError`` for what it could not have written)."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise UserError(f"model settings are a JSON object, not {_show(data)}")
        known = {f.name for f in fields(cls) if f.init}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"unknown model settings {unknown}; known: {sorted(known)}")
        return cls(**data)


NO_SETTINGS: Final = ModelSettings()
"""The provider's defaults for everything."""
