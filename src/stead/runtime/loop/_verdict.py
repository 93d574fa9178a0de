"""What a tool's reconcile function answered, as the log records it."""

from __future__ import annotations

from typing import Literal

from stead.tools import Done, NotDone, Unknown, serialize_result

Verdict = Literal["done", "not_done", "unknown"]


def verdict(answer: Done | NotDone | Unknown) -> tuple[Verdict, str]:
    """``done`` with the result's text, ``not_done``, or ``unknown`` (a person decides)."""
    if isinstance(answer, Done):
        return "done", serialize_result(answer.result)
    if isinstance(answer, NotDone):
        return "not_done", ""
    return "unknown", ""
