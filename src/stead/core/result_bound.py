"""How much of a tool's result a run keeps: a bound per result, so one call cannot grow the
log (and every later model request, which carries it) without limit.

A result longer than its bound is cut, not refused: the model reads the start of it and a
note saying how long it was and that the rest was dropped, so it can ask for less (a page,
a filter) instead of reading a failure it cannot act on. The cut happens where the outcome
is made, before anything is recorded or sent: the whole text is never stored. The same
bound applies to a failure's text and an unknown outcome's reason.

The bound counts characters (code points) of the text: ``len``, O(1) on the hot path.
"""

from __future__ import annotations

from stead.core.effects import Outcome, ToolFailed, ToolSucceeded, ToolUnknown
from stead.errors import UserError

DEFAULT_MAX_RESULT = 1_000_000
"""Characters of a tool's result a run keeps unless the tool or the agent says otherwise
(``@tool(max_result=...)``, ``Limits(max_tool_result=...)``): about 1 MB of text."""

_MOST = 1 << 31
"""The largest bound taken (a bound beyond it is no bound a store or model can honour)."""


def check_max_result(value: object, what: str) -> None:
    """A bound as a caller gives it: an ``int`` from 1 to 2**31 (None where the option allows
    it is checked by the caller)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= _MOST:
        raise UserError(
            f"{what} must be an int of characters from 1 to {_MOST}, not {type(value).__name__} "
            f"{value!r:.40}"
        )


def cut(text: str, limit: int) -> str:
    """``text`` itself when it fits, else its first ``limit`` characters and a note."""
    if len(text) <= limit:
        return text
    return (
        f"{text[:limit]}\n\n[stead: this result was {len(text):,} characters; only the first "
        f"{limit:,} are kept, the rest was dropped (the tool's result limit). Ask for less: a "
        "page, a filter, a summary.]"
    )


def bound_outcome(outcome: Outcome, limit: int) -> Outcome:
    """A tool outcome with its text cut to ``limit`` characters (the same object when it
    fits, which is nearly always)."""
    if isinstance(outcome, ToolSucceeded):
        if len(outcome.content) > limit:
            return ToolSucceeded(content=cut(outcome.content, limit))
    elif isinstance(outcome, ToolFailed):
        if len(outcome.failure) > limit:
            return ToolFailed(failure=cut(outcome.failure, limit), retry=outcome.retry)
    elif isinstance(outcome, ToolUnknown) and len(outcome.reason) > limit:
        return ToolUnknown(reason=cut(outcome.reason, limit))
    return outcome
