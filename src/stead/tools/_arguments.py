"""Parsing the argument text a model produced, and telling the model what was wrong.

The rules, chosen so the recorded arguments are exact and the model can correct itself:

* The text must be one JSON object. Empty text counts as ``{}``: several OpenAI-compatible
  servers send it for a tool without parameters.
* Duplicate keys, ``NaN``/``Infinity`` and numbers beyond +-2^53 are refused: they have no
  single canonical form (RFC 8785), and the canonical text is what gets recorded and hashed.
* Unknown arguments are refused (``extra="forbid"``), so a misspelt name is reported to the
  model instead of silently dropped.
* Validation is pydantic's lax mode: ``"3"`` is accepted for an ``int``. Models often quote
  numbers, and refusing them costs a turn while adding no safety; the recorded canonical
  text keeps what the model sent, and validating it again gives the same value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from stead.core.canonical import canonical_json

_MAX_ERRORS = 10
_MAX_SCHEMA_CHARS = 1500
_MAX_INPUT_CHARS = 80
_KEPT = 1024
"""Validated arguments kept for the call's run (``ArgumentParser.parse(keep=True)``), at
most: one for each call admitted and not run yet in this process, for every run in flight
(a call run by a pool in another process leaves its entry here until it is the oldest)."""
_KEPT_CHARS = 8192
"""Arguments longer than this are not kept: what lingers stays small."""
_JSON_KINDS = {
    list: "array", str: "string", int: "number", float: "number", bool: "boolean",
    type(None): "null",
}  # fmt: skip


class InvalidArguments(Exception):
    """The arguments cannot be used; ``str(exc)`` is the message for the model."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears more than once")
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
"""Built once: ``json.loads`` with options builds a new decoder on every call."""
_SCAN: Callable[[str, int], tuple[Any, int]] = getattr(_DECODER, "scan_once")  # noqa: B009 - untyped
"""The decoder's scanner itself (C): what ``decode`` runs between its two whitespace matches
and its three Python frames. Arguments that do not scan whole take ``decode``, for its
message."""
_JSON_SPACE = " \t\n\r"
"""The whitespace JSON allows around a value (``decode`` skips exactly these)."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(arguments)"


def _json_of(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


class ArgumentParser:
    """Parses and validates one tool's arguments against its argument model."""

    def __init__(self, tool_name: str, model: type[BaseModel], parameters: dict[str, Any]):
        self._tool = tool_name
        self._model = model
        self._names = sorted(parameters.get("properties", {}))
        schema = json.dumps(parameters, separators=(",", ":"), ensure_ascii=False)
        self._expected = f"Expected one JSON object matching: {_clip(schema, _MAX_SCHEMA_CHARS)}"
        self._kept: dict[str, list[BaseModel]] = {}
        """Arguments validated when a call was admitted, by their canonical text (one each
        for the runs in flight that made the same call), until the call runs
        (``parse_recorded`` takes each out once), the oldest texts dropped past ``_KEPT``
        in all: a call admitted here and run at once is validated once, not twice."""
        self._count = 0
        """How many are kept, in all the lists."""

    def parse(self, raw: str, *, keep: bool = False) -> tuple[BaseModel, str]:
        """The validated arguments and their canonical JSON; ``InvalidArguments`` if not.
        ``keep``: hold the validated arguments for the ``parse_recorded`` of the call's run
        (the caller says when that comes soon: no person is asked first)."""
        text = raw if raw.strip() else "{}"
        bare = text.strip(_JSON_SPACE)
        try:
            parsed, end = _SCAN(bare, 0)
        except (StopIteration, ValueError, RecursionError):
            end = -1
        if end != len(bare):  # not one whole JSON value: decode says what is wrong
            try:
                parsed = _DECODER.decode(text)
            except (ValueError, RecursionError) as exc:
                raise self._error(f"the arguments are not valid JSON ({exc})") from None
        if not isinstance(parsed, dict):
            kind = _JSON_KINDS.get(type(parsed), "value")
            raise self._error(f"the arguments must be a JSON object, not a JSON {kind}")
        try:
            canonical = canonical_json(parsed)
        except (ValueError, RecursionError) as exc:
            raise self._error(f"the arguments cannot be recorded exactly ({exc})") from None
        try:
            values = self._model.model_validate_json(canonical)
        except ValidationError as exc:
            raise self._error(self._explain(exc)) from None
        except Exception as exc:  # a user validator with a bug: still the model's turn to read
            raise self._error(f"validating them raised {type(exc).__name__}: {exc}") from None
        if keep and len(canonical) <= _KEPT_CHARS:
            kept = self._kept
            while self._count >= _KEPT and kept:
                self._count -= len(kept.pop(next(iter(kept))))
            kept.setdefault(canonical, []).append(values)
            self._count += 1
        return values, canonical

    def parse_recorded(self, canonical: str) -> BaseModel:
        """Validate arguments the log recorded, which were canonicalised when the intent was
        written: one pydantic pass, no second JSON parse and canonicalisation, or none when
        ``parse(keep=True)`` validated this text in this process. Each kept value is handed
        out once (a handler may change what it is given). Anything that fails takes the full
        path, for its message."""
        same = self._kept.get(canonical) if self._kept else None
        if same:
            self._count -= 1
            values = same.pop()
            if not same:
                del self._kept[canonical]
            return values
        try:
            return self._model.model_validate_json(canonical)
        except Exception:
            return self.parse(canonical)[0]

    def _error(self, what: str) -> InvalidArguments:
        return InvalidArguments(
            f"Invalid arguments for tool {self._tool!r}: {what}\n{self._expected}"
        )

    def _explain(self, exc: ValidationError) -> str:
        errors = exc.errors(include_url=False)
        lines = [f"{len(errors)} problem{'s' if len(errors) != 1 else ''}:"]
        for err in errors[:_MAX_ERRORS]:
            where = _where(tuple(err["loc"]))
            kind = err["type"]
            if kind == "extra_forbidden" and len(err["loc"]) == 1:
                known = ", ".join(self._names) or "none"
                lines.append(f"- {where}: not an argument of this tool (arguments: {known})")
            elif kind == "missing":
                lines.append(f"- {where}: required but missing")
            else:
                got = _clip(_json_of(err["input"]), _MAX_INPUT_CHARS)
                lines.append(f"- {where}: {err['msg']} (got {got})")
        if len(errors) > _MAX_ERRORS:
            lines.append(f"- ...and {len(errors) - _MAX_ERRORS} more")
        return "\n".join(lines)
