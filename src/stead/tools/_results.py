"""What tools hand back: the text of a result, and the answers of a reconcile function.

A reconcile (status-check) function is asked, after a crash, whether a ``non_idempotent``
call that was in flight actually happened. It answers with exactly one of ``Done``,
``NotDone`` or ``Unknown``. Anything else it does (raising, returning ``True``) is read as
``Unknown``: guessing "not done" would run a side effect twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeAlias

import pydantic_core


@dataclass(frozen=True, slots=True)
class Done:
    """The call happened; ``result`` is what the model reads as its result."""

    result: Any
    """The result, like a handler's return value. ``Tool.reconcile_call`` hands it back
    already serialized with ``serialize_result``, so the runtime can record it as is."""


@dataclass(frozen=True, slots=True)
class NotDone:
    """The call certainly did not happen: it is safe to run it now."""


@dataclass(frozen=True, slots=True)
class Unknown:
    """It cannot be told whether the call happened: a person decides."""

    reason: str = ""
    """Why not (shown to the person who decides)."""


ReconcileAnswer: TypeAlias = Done | NotDone | Unknown
"""What a reconcile function returns."""


def serialize_result(value: object) -> str:
    """The text the model reads for a handler's return value (or a ``Done`` result).

    * ``str`` is passed through: most tools return prose or already-formatted text.
    * ``None`` becomes ``"null"``: an empty tool result reads to a model like a broken tool,
      and ``null`` is what ``None`` is in the JSON every other value is rendered as.
    * Anything else is JSON through ``pydantic_core.to_json`` (dicts, lists, pydantic
      models, dataclasses, datetimes...). An unknown type is rendered by its ``str()``.

    It never raises: by the time a result exists the handler has run, and reporting a
    rendering problem as a tool failure would invite the model to do it again. Text UTF-8
    cannot hold (``os.listdir()`` of a folder whose name is not UTF-8 gives lone surrogates)
    is rendered as it is; the recorded result repairs it, with a note the model reads.
    """
    if isinstance(value, str):
        return str.__str__(value)  # a plain str, even from a str subclass or a StrEnum
    if value is None:
        return "null"
    try:
        return pydantic_core.to_json(value, serialize_unknown=True).decode("utf-8")
    except Exception as exc:  # e.g. a circular reference, or a lone surrogate
        if "surrogates not allowed" in str(exc):
            # pydantic_core encodes to UTF-8 and so refuses a lone surrogate; json does not
            try:
                return json.dumps(
                    value, ensure_ascii=False, separators=(",", ":"), default=_jsonable
                )
            except Exception:  # the first failure is the one worth reporting
                pass
        return f"<{type(value).__qualname__} result that cannot be rendered as JSON: {exc}>"


def _jsonable(value: object) -> object:
    """``json.dumps``'s fallback for what it cannot encode itself (models, dataclasses...)."""
    return pydantic_core.to_jsonable_python(value, serialize_unknown=True)
