"""Logging: the run, turn and call ids on every record, and secrets kept out of them.

stead logs with the standard library (loggers ``stead.*``). A drive binds its run's id, and
each model or tool call its turn and call id, to the task (a ``ContextVar``: a tool's own
records, even from a worker thread, carry them too). ``RunLogFilter`` puts them on every
record a handler emits (``%(run_id)s %(turn)s %(call_id)s``) and redacts what must never
reach a log: API keys, bearer tokens, approval tokens, ``Authorization`` and ``*-api-key``
headers. ``configure_logging`` installs a handler with both.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Final, TextIO

_IDS: ContextVar[tuple[str, str, str]] = ContextVar("stead_log_ids", default=("-", "-", "-"))

FORMAT = (
    "%(asctime)s %(levelname)s %(name)s run=%(run_id)s turn=%(turn)s call=%(call_id)s %(message)s"
)

_SECRETS = re.compile(
    r"(?P<bearer>\b[Bb]earer\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|\bsk-[A-Za-z0-9_-]{8,}"
    r"|(?P<header>(?:authorization|x-api-key|api[_-]?key|token|secret|password)"
    r"[\"']?\s*[:=]\s*[\"']?(?:bearer\s+|basic\s+)?)[^\s\"',;}]{6,}",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """``text`` with API keys, bearer tokens and credential-looking assignments replaced."""

    def hide(m: re.Match[str]) -> str:
        return (m.group("bearer") or m.group("header") or "") + "[redacted]"

    return _SECRETS.sub(hide, text)


def bind_run(run_id: str) -> Token[tuple[str, str, str]]:
    """Bind a run's id to this task until ``unbind``."""
    return _IDS.set((run_id, "-", "-"))


def bind_call(turn: int, call_id: str) -> Token[tuple[str, str, str]]:
    """Bind a turn and a call (``model`` for a model call) within the bound run."""
    return _IDS.set((_IDS.get()[0], str(turn), call_id))


unbind: Final[Callable[[Token[tuple[str, str, str]]], None]] = _IDS.reset
"""Undo a ``bind_run`` or ``bind_call`` (the ContextVar's own reset: no Python frame, and it
is called for every model and tool call)."""


class RunLogFilter(logging.Filter):
    """Adds ``run_id``, ``turn`` and ``call_id`` to every record (``-`` outside a run) and
    redacts secrets from its message. Attach it to a handler, so it sees every library's
    records, not only stead's."""

    def filter(self, record: logging.LogRecord) -> bool:
        run, turn, call = _IDS.get()
        for name, value in (("run_id", run), ("turn", turn), ("call_id", call)):
            if not hasattr(record, name):
                setattr(record, name, value)
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = redact(text), None
        return True


def configure_logging(
    level: int | str = logging.INFO, *, stream: TextIO | None = None, fmt: str = FORMAT
) -> logging.Handler:
    """Log to ``stream`` (stderr) at ``level`` through a handler with ``RunLogFilter``,
    installed on the root logger; returns the handler (remove it to undo)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(RunLogFilter())
    handler.setFormatter(logging.Formatter(fmt))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return handler
